//! `DelayQueue` where the timer cannot time its values as usual: at `max_pending`,
//! after `shutdown()`, once the driver's runtime is gone, past the wheel's range, and
//! whatever executor the timer runs callbacks on; and consumers whose waker panics.
//! Never early, never lost.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{DelayQueue, Error, Expired, Timer};

mod common;
use common::{assert_at, timer, LATE, TICK};
/// Takes the next value, asserting it comes out no earlier than `deadline` and less
/// than a tick and a millisecond after it (paused clock).
async fn take_at<T>(queue: &DelayQueue<T>, deadline: Instant) -> T {
    let expired = tokio::time::timeout(Duration::from_secs(3600), queue.next_expired())
        .await
        .expect("never came out")
        .expect("the queue ended");
    assert_at(Instant::now(), deadline, LATE);
    assert_eq!(expired.deadline(), deadline);
    expired.into_inner()
}

/// A timer at its `max_pending` still takes a queue's values, which are not its
/// callbacks: `try_insert` and `insert` both keep them, and each comes out on time.
#[tokio::test(start_paused = true)]
async fn a_timer_at_max_pending_still_takes_queue_values() {
    let timer = Timer::builder().tick(TICK).max_pending(1).build().unwrap();
    let _full = timer.schedule(Duration::from_secs(60), || ()).unwrap();
    assert_eq!(
        timer.schedule(Duration::from_secs(1), || ()).unwrap_err(),
        Error::AtCapacity { max: 1 }
    );
    let queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    let secs = |s: u64| start + Duration::from_secs(s);
    queue.try_insert(2, Duration::from_secs(2)).unwrap();
    let one = queue.insert(1, Duration::from_secs(1));
    assert_eq!(queue.deadline(&one), Some(secs(1)));
    assert_eq!(take_at(&queue, secs(1)).await, 1);
    assert_eq!(take_at(&queue, secs(2)).await, 2);
    assert!(queue.is_empty());
}

/// After the timer's shutdown: `try_insert` gives the value back with
/// `Error::Shutdown`; `insert` keeps the value, timed by the fallback (Tokio's clock
/// here), never early, less than a tick late — also for a consumer that was waiting
/// already.
#[tokio::test(start_paused = true)]
async fn after_shutdown_try_insert_gives_the_value_back_and_insert_keeps_it_never_early() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let waiting = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next_expired().await.map(Expired::into_inner) })
    };
    tokio::task::yield_now().await;
    assert!(timer.shutdown().await.is_empty());
    let refused = queue
        .try_insert("refused", Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(refused.error(), &Error::Shutdown);
    assert_eq!(refused.into_inner(), "refused");
    let start = Instant::now();
    let late = queue.insert("late", Duration::from_secs(5));
    queue.insert("later", Duration::from_secs(7));
    assert_eq!(queue.deadline(&late), Some(start + Duration::from_secs(5)));
    assert!(queue.reset(&late, Duration::from_secs(2)));
    assert_eq!(waiting.await.unwrap(), Some("late"));
    assert_at(Instant::now(), start + Duration::from_secs(2), LATE);
    assert_eq!(
        take_at(&queue, start + Duration::from_secs(7)).await,
        "later"
    );
    assert!(queue.is_empty());
}

/// The driver's runtime dropped (no `shutdown()`) with values pending and a consumer
/// waiting on another runtime: the values still come out, never early (real clock,
/// tolerant upper bound), as does one inserted after the loss.
#[test]
fn values_pending_when_the_drivers_runtime_is_dropped_come_out_never_early() {
    let (driver, timer) = common::timer_on_its_own_runtime();
    let queue = DelayQueue::with_timer(&timer);
    let (sender, received) = std::sync::mpsc::channel();
    let consumer = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                while let Some(expired) = queue.next_expired().await {
                    let at = std::time::Instant::now();
                    sender.send((expired.into_inner(), at)).unwrap();
                }
            })
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let ms = Duration::from_millis;
    let deadline = |key| queue.deadline(&key).unwrap().into_std();
    let first = deadline(queue.insert(150, ms(150)));
    let last = deadline(queue.insert(250, ms(250)));
    std::thread::sleep(ms(30));
    drop(driver);
    assert!(timer.is_shutdown());
    let take = |deadline: std::time::Instant| {
        let (value, at) = received
            .recv_timeout(Duration::from_secs(5))
            .expect("a value never came out");
        assert!(at >= deadline, "{value}: {:?} early", deadline - at);
        assert!(at < deadline + ms(500), "{value}: {:?} late", at - deadline);
        value
    };
    // Nothing touches the queue between the loss and this value's deadline.
    let mut got = vec![take(first)];
    let after = deadline(queue.insert(200, ms(50)));
    got.push(take(after));
    got.push(take(last));
    assert_eq!(got, [150, 200, 250]);
    queue.close();
    consumer.join().unwrap();
}

/// A deadline past the wheel's range (200 years at a 1 ms tick, whose range is 139)
/// saturates where every timer's does: the queue reports that deadline, and the value
/// comes out no earlier than it, whether it was inserted on a running timer, on one at
/// its `max_pending`, or after `shutdown()`.
#[tokio::test(start_paused = true)]
async fn a_deadline_past_the_wheels_range_never_comes_out_before_the_one_reported() {
    const YEAR: Duration = Duration::from_secs(86_400 * 365);
    for path in ["running", "at max_pending", "shut down"] {
        let timer = Timer::builder()
            .tick(Duration::from_millis(1))
            .max_pending(1)
            .build()
            .unwrap();
        let _full = timer.schedule(YEAR, || ()).unwrap();
        let start = Instant::now();
        let queue = DelayQueue::with_timer(&timer);
        if path == "running" {
            drop(_full);
        } else if path == "shut down" {
            let _ = timer.shutdown().await;
        }
        let key = queue.insert_at(path, start + YEAR * 200);
        let reported = queue.deadline(&key).unwrap();
        assert!(reported > start + YEAR * 100, "{path}: {reported:?}");
        let expired = queue.next_expired().await.unwrap();
        let out = Instant::now();
        assert_eq!(expired.deadline(), reported, "{path}");
        assert!(
            out >= reported,
            "{path}: out {:?} before the deadline it reports",
            reported - out
        );
        assert!(
            out < reported + LATE,
            "{path}: late by {:?}",
            out - reported
        );
    }
}

/// A `Custom` executor that holds on to the jobs it is given: whatever the timer's
/// executor does, a value whose deadline passed and that no consumer took is seen the
/// same way by `deadline`, `reset` and `remove` — it is still the queue's.
#[tokio::test(start_paused = true)]
async fn a_due_value_is_the_queues_whatever_the_executor() {
    let held = Arc::new(std::sync::Mutex::new(Vec::new()));
    let holder = held.clone();
    let timer = Timer::builder()
        .tick(TICK)
        .executor(tokio_wheel::Executor::Custom(Arc::new(move |job| {
            holder.lock().unwrap().push(job);
        })))
        .build()
        .unwrap();
    let queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    let moved = queue.insert_at("moved", start + Duration::from_millis(10));
    let removed = queue.insert_at("removed", start + Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        queue.deadline(&moved),
        Some(start + Duration::from_millis(10))
    );
    assert!(queue.reset_at(&moved, start + Duration::from_millis(500)));
    assert!(queue.deadline(&removed).is_some());
    assert_eq!(queue.remove(&removed), Some("removed"));
    let expired = queue.next_expired().await.unwrap();
    assert_eq!(expired.into_inner(), "moved");
    assert_at(Instant::now(), start + Duration::from_millis(500), LATE);
    drop(held);
}

/// A `Custom` executor that hands every job back (drops it unrun), then `shutdown()`:
/// the queue's values are none of the `Unfired` callbacks shutdown returns, and each
/// still comes out at its deadline, never early, less than a tick late, to the
/// consumer waiting.
#[tokio::test(start_paused = true)]
async fn values_pending_at_shutdown_stay_the_queues_and_come_out_on_time() {
    let timer = Timer::builder()
        .tick(TICK)
        .executor(tokio_wheel::Executor::Custom(Arc::new(drop)))
        .build()
        .unwrap();
    let queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    queue.insert_at("due", start + Duration::from_millis(10));
    queue.insert_at("later", start + Duration::from_secs(2));
    let waiting = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some(expired) = queue.next_expired().await {
                out.push((expired.into_inner(), Instant::now()));
            }
            out
        })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut held = Vec::new();
    tokio::time::sleep_until(start + Duration::from_millis(10)).await;
    held.extend(timer.shutdown().await);
    assert!(
        held.is_empty(),
        "{} queue values came back as Unfired",
        held.len()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    queue.close();
    let out = tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .expect("the consumer was stranded")
        .unwrap();
    let names: Vec<_> = out.iter().map(|(v, _)| *v).collect();
    assert_eq!(names, ["due", "later"]);
    assert_at(out[0].1, start + Duration::from_millis(10), LATE);
    assert_at(out[1].1, start + Duration::from_secs(2), LATE);
}

/// A waker that counts its wakes, and panics at each if `panics`: a buggy executor's.
struct Counting {
    woken: AtomicUsize,
    panics: bool,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
        assert!(!self.panics, "the executor's waker panics");
    }
}

fn counting(panics: bool) -> (Arc<Counting>, Waker) {
    let counting = Arc::new(Counting {
        woken: AtomicUsize::new(0),
        panics,
    });
    (counting.clone(), Waker::from(counting))
}

/// Two consumers waiting on `queue`, each polling a clone of its own: the first's
/// waker (registered first, so woken first) panics; the second's, returned, counts.
fn two_waiting(queue: &DelayQueue<u32>) -> ([DelayQueue<u32>; 2], Arc<Counting>) {
    let ((_, panicking), (counted, waker)) = (counting(true), counting(false));
    let consumers = [queue.clone(), queue.clone()];
    for (consumer, waker) in consumers.iter().zip([&panicking, &waker]) {
        let polled = consumer.poll_expired(&mut Context::from_waker(waker));
        assert!(polled.is_pending(), "nothing is due yet");
    }
    (consumers, counted)
}

/// The consumer after the panicking one was woken, once, and the panic was counted
/// (by the driver, or by the queue for the caller that woke them).
#[track_caller]
fn assert_woken_past_the_panic(timer: &Timer, second: &Counting) {
    assert_eq!(
        second.woken.load(Ordering::SeqCst),
        1,
        "the consumer woken after the panicking one was stranded"
    );
    assert_eq!(timer.stats().callback_panics, 1, "{:?}", timer.stats());
}

/// The queue's sleep fires (the driver wakes its waker, which wakes every consumer
/// waiting): the first consumer's waker panics, the second is woken all the same.
#[tokio::test(start_paused = true)]
async fn a_panicking_waker_strands_no_consumer_when_the_sleep_fires() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    queue.insert(7, Duration::from_secs(1));
    let (_consumers, second) = two_waiting(&queue);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_woken_past_the_panic(&timer, &second);
    assert_eq!(queue.len(), 1, "the value waits for a consumer");
}

/// An insert of a value already due wakes the consumers: past the panicking waker,
/// and the insert itself neither fails nor loses its key.
#[tokio::test(start_paused = true)]
async fn a_panicking_waker_strands_no_consumer_woken_by_an_insert() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let (_consumers, second) = two_waiting(&queue);
    let key = queue.insert_at(7, Instant::now());
    assert_woken_past_the_panic(&timer, &second);
    assert_eq!(queue.remove(&key), Some(7));
}

/// A reset into the past wakes the consumers, past the panicking waker.
#[tokio::test(start_paused = true)]
async fn a_panicking_waker_strands_no_consumer_woken_by_a_reset() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let key = queue.insert(7, Duration::from_secs(60));
    let (_consumers, second) = two_waiting(&queue);
    assert!(queue.reset_at(&key, Instant::now()));
    assert_woken_past_the_panic(&timer, &second);
}

/// `close` wakes the consumers, past the panicking waker.
#[tokio::test(start_paused = true)]
async fn a_panicking_waker_strands_no_consumer_woken_by_close() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let (_consumers, second) = two_waiting(&queue);
    queue.close();
    assert_woken_past_the_panic(&timer, &second);
}

/// `clear` and `remove` that leave a closed queue empty wake the consumers (they see
/// the end), past the panicking waker.
#[tokio::test(start_paused = true)]
async fn a_panicking_waker_strands_no_consumer_woken_by_clear_or_remove() {
    for clears in [true, false] {
        let timer = timer();
        let queue = DelayQueue::with_timer(&timer);
        let key = queue.insert(7, Duration::from_secs(60));
        queue.close();
        let (_consumers, second) = two_waiting(&queue);
        if clears {
            queue.clear();
        } else {
            assert_eq!(queue.remove(&key), Some(7));
        }
        assert_woken_past_the_panic(&timer, &second);
    }
}

/// A consumer's poll that takes the last value of a closed queue (found due, before
/// the driver's turn) wakes the others: past the panicking waker, and the poll still
/// returns its value. A paused runtime that is not running: the driver never turns.
#[test]
fn a_panicking_waker_strands_no_consumer_woken_by_another_consumers_poll() {
    let rt = common::paused_runtime();
    let timer = common::timer_on(rt.handle());
    let _entered = rt.enter();
    let queue = DelayQueue::with_timer(&timer);
    queue.insert(7, Duration::from_secs(1));
    queue.close();
    let (_consumers, second) = two_waiting(&queue);
    let mut advance = Box::pin(tokio::time::advance(Duration::from_secs(1)));
    let _ = advance
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    let (_, waker) = counting(false);
    let taken = queue.poll_expired(&mut Context::from_waker(&waker));
    let taken = taken.map(|expired| expired.map(Expired::into_inner));
    assert_eq!(taken, std::task::Poll::Ready(Some(7)));
    assert_woken_past_the_panic(&timer, &second);
}
