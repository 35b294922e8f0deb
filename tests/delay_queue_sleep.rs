//! A `DelayQueue`'s own sleep: the consumers it wakes and what it counts. The queue
//! times its earliest value with one `Sleep` of its timer, woken for every waiting
//! consumer, and re-aims it as values come and go.

use std::time::Duration;

use tokio::time::Instant;
use tokio_test::task::spawn;
use tokio_wheel::{DelayQueue, Timer};

mod common;
use common::TICK;

/// `Stats::cancelled` counts the timers a user took out: a queue re-aiming its own sleep
/// at an earlier insert, with a consumer waiting, cancels nothing of the user's.
#[tokio::test(start_paused = true)]
async fn inserts_into_a_delay_queue_cancel_nothing() {
    let t = Timer::builder().tick(TICK).build().unwrap();
    let queue = DelayQueue::with_timer(&t);
    // A consumer of its own handle: with the producer's alive, the empty queue waits.
    let consumer = queue.clone();
    let mut next = spawn(consumer.next_expired());
    assert!(next.poll().is_pending());
    for minutes in (1..=10u64).rev() {
        queue.insert(minutes, Duration::from_secs(60 * minutes));
    }
    assert_eq!(queue.len(), 10);
    assert_eq!(t.stats().cancelled, 0, "{:?}", t.stats());
}

/// A consumer waiting behind the queue's sleep is woken when another consumer's poll
/// finds the sleep due (before the driver fires it) and takes one of two values due at
/// that instant: the other value reaches the waiting consumer. Real clock, so that the
/// second consumer's poll crosses the deadline between its own clock reads (deadlines
/// on a step's end, where that window is widest); at most 200 rounds of about 10 ms, a
/// round skipped if the first consumer had not registered a millisecond before the
/// deadline (a busy machine).
#[test]
fn a_waiting_consumer_is_woken_when_another_consumers_poll_completes_the_sleep() {
    use std::task::Poll;
    let rt = common::multi_thread_runtime(2);
    rt.block_on(async {
        let timer = Timer::builder()
            .tick(Duration::from_millis(1))
            .build()
            .unwrap();
        for round in 0..200 {
            let queue = DelayQueue::with_timer(&timer);
            let deadline = step_end_after(&queue, Instant::now() + Duration::from_millis(10));
            queue.insert_at(1u32, deadline);
            queue.insert_at(2u32, deadline);
            let a = tokio::spawn({
                let queue = queue.clone();
                async move { queue.next_expired().await.map(|e| e.into_inner()) }
            });
            // A registered (the queue's Debug counts the consumers waiting).
            let mut registered = true;
            while !format!("{queue:?}").contains("waiting: 1") {
                if Instant::now() >= deadline - Duration::from_millis(1) {
                    registered = false; // a busy machine: not this round
                    break;
                }
                std::thread::yield_now();
            }
            if !registered {
                a.abort();
                continue;
            }
            // B spins across the deadline.
            let b = queue.clone();
            let mut next = spawn(b.next_expired());
            let took = loop {
                if let Poll::Ready(taken) = next.poll() {
                    break taken.unwrap().into_inner();
                }
            };
            drop(next);
            let other = tokio::time::timeout(Duration::from_millis(200), a).await;
            let other = other.unwrap_or_else(|_| {
                panic!(
                    "round {round}: B took {took}; A still waits 200 ms after the deadline \
                     with the other value due (queue: {queue:?}, len {})",
                    queue.len()
                )
            });
            assert_eq!(took + other.unwrap().unwrap(), 3);
        }
    });
}

/// The first end of a step of the queue's timer (tick 1 ms: steps of 250 us) at or
/// after `at`: a deadline saturated at the end of the clock's range is one, and the
/// queue reports it exactly.
fn step_end_after(queue: &DelayQueue<u32>, at: Instant) -> Instant {
    const STEP: u128 = 250_000;
    let far = queue.insert_at(0, at + Duration::from_secs(86_400 * 365 * 300));
    let end = queue.deadline(&far).unwrap();
    queue.remove(&far).unwrap();
    let steps = end.duration_since(at).as_nanos() / STEP;
    let back = Duration::from_nanos(u64::try_from(steps * STEP).unwrap());
    let aligned = end - back;
    assert!(aligned >= at && aligned < at + Duration::from_micros(250));
    aligned
}
