//! `DelayQueue`: deadline order, never early, less than a tick late; shared by several
//! producers and consumers, each value taken exactly once; stale keys inert; an empty
//! queue pending while another handle lives, ended once drained when none does, or
//! once closed; bad input. Paused clock, except one test that needs real threads.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_wheel::{DelayQueue, Expired, Timer};

mod common;
use common::{assert_at, timer, LATE, TICK};
/// Several deadlines, inserted out of order; consumers get them in order, never
/// early, less than a tick (and a millisecond) late.
#[tokio::test(start_paused = true)]
async fn values_come_out_in_deadline_order_never_early_less_than_a_tick_late() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    let delays = [730u64, 5, 0, 99, 100, 101, 12_000, 41, 40, 333, 1, 2500];
    for ms in delays {
        queue.insert(ms, Duration::from_millis(ms));
    }
    assert_eq!(queue.len(), delays.len());
    let mut out = Vec::new();
    let mut stream = queue.clone();
    while out.len() < delays.len() {
        let expired = stream.next().await.unwrap();
        let ms = *expired.get_ref();
        let deadline = start + Duration::from_millis(ms);
        assert_eq!(expired.deadline(), deadline);
        assert_at(Instant::now(), deadline, LATE);
        out.push(ms);
    }
    let mut sorted = delays.to_vec();
    sorted.sort();
    // Values whose deadlines share a tick may swap; none here are further apart.
    for (got, want) in out.iter().zip(&sorted) {
        assert!(got.abs_diff(*want) < TICK.as_millis() as u64, "{out:?}");
    }
    assert!(queue.is_empty());
    assert_eq!(timer.pending(), 0);
}

/// Values whose deadlines passed while no consumer was polling wait in deadline
/// order, whatever order their callbacks ran in.
#[tokio::test(start_paused = true)]
async fn expired_values_wait_in_deadline_order() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    for ms in [900u64, 300, 600, 100, 800, 200] {
        queue.insert(ms, Duration::from_millis(ms));
    }
    let late = queue.insert(50, Duration::from_secs(5));
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Moved to a deadline already past: it expires on the next tick, after the
    // others, yet comes out first.
    assert!(queue.reset_at(&late, start + Duration::from_millis(50)));
    tokio::time::sleep(TICK).await;
    let now = Instant::now();
    let mut out = Vec::new();
    for _ in 0..7 {
        out.push(queue.next_expired().await.unwrap().into_inner());
    }
    assert_eq!(Instant::now(), now, "all were waiting");
    assert_eq!(out, [50, 100, 200, 300, 600, 800, 900]);
}

/// An empty queue with another handle alive is pending, not finished: a consumer that
/// started on it gets a value another task inserts later, when it expires, and `None`
/// only after `close` (the test's handle stays alive throughout).
#[tokio::test(start_paused = true)]
async fn a_consumer_waiting_on_an_empty_queue_gets_a_later_insert() {
    let timer = timer();
    let queue: DelayQueue<&str> = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let first = queue
                .next_expired()
                .await
                .map(|e| (e.into_inner(), Instant::now()));
            let end = queue.next_expired().await.map(|e| e.into_inner());
            (first, end, Instant::now())
        })
    };
    tokio::task::yield_now().await;
    assert!(!consumer.is_finished(), "an empty queue ended its consumer");
    let producer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            queue.insert("late", Duration::from_millis(100));
        })
    };
    producer.await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !consumer.is_finished(),
        "drained but not closed: still pending"
    );
    queue.close();
    let (first, end, closed_at) = consumer.await.unwrap();
    let (value, at) = first.unwrap();
    assert_eq!(value, "late");
    let deadline = start + Duration::from_millis(1100);
    assert_at(at, deadline, LATE);
    assert_eq!(end, None);
    assert!(closed_at >= start + Duration::from_secs(6));
}

/// A queue with one handle ends like a channel once drained: the `while let` drain
/// loop of a one-owner queue takes every value as it expires, then ends, at the last
/// deadline (no `close`).
#[tokio::test(start_paused = true)]
async fn a_one_owner_queue_drains_and_ends() {
    let timer = timer();
    let mut queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    queue.insert(3, Duration::from_millis(300));
    queue.insert(1, Duration::from_millis(100));
    let drain = async {
        let mut out = Vec::new();
        while let Some(expired) = queue.next().await {
            out.push((expired.into_inner(), Instant::now()));
        }
        out
    };
    let out = tokio::time::timeout(Duration::from_secs(3600), drain)
        .await
        .expect("the drain of a one-owner queue never ended");
    let values: Vec<_> = out.iter().map(|&(value, _)| value).collect();
    assert_eq!(values, [1, 3]);
    assert_at(out[0].1, start + Duration::from_millis(100), LATE);
    assert_at(out[1].1, start + Duration::from_millis(300), LATE);
    assert_at(Instant::now(), start + Duration::from_millis(300), LATE);
}

/// A consumer waiting on an empty queue is woken with `None` when the last other handle
/// drops (nothing can insert any more); while that handle lives, it waits. With a value
/// left, the drop ends nothing: the value comes out at its deadline, then `None`.
#[tokio::test(start_paused = true)]
async fn dropping_the_last_other_handle_ends_a_consumer_of_an_empty_queue() {
    let timer = timer();
    for value_left in [false, true] {
        let queue: DelayQueue<u8> = DelayQueue::with_timer(&timer);
        let producer = queue.clone();
        let start = Instant::now();
        if value_left {
            producer.insert(9, Duration::from_secs(2));
        }
        let mut next = tokio_test::task::spawn(queue.next_expired());
        assert!(next.poll().is_pending());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!next.is_woken(), "woken with the producer alive");
        assert!(next.poll().is_pending());
        drop(producer);
        assert!(
            next.is_woken(),
            "the producer's drop left the consumer waiting"
        );
        if value_left {
            assert!(next.poll().is_pending(), "a value is left to wait for");
            drop(next);
            let taken = queue.next_expired().await.map(Expired::into_inner);
            assert_eq!(taken, Some(9));
            assert_at(Instant::now(), start + Duration::from_secs(2), LATE);
            assert!(queue.next_expired().await.is_none());
        } else {
            assert!(matches!(next.poll(), std::task::Poll::Ready(None)));
        }
    }
}

/// `close` with values pending: consumers still get each one as it expires, then
/// `None`.
#[tokio::test(start_paused = true)]
async fn close_ends_consumers_only_once_drained() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    queue.insert(1, Duration::from_millis(500));
    queue.insert(2, Duration::from_millis(20));
    queue.close();
    assert!(queue.is_closed());
    let all: Vec<i32> = queue.clone().map(|e| e.into_inner()).collect().await;
    assert_eq!(all, [2, 1]);
    assert!(queue.next_expired().await.is_none());
}

/// A closed queue whose last pending value is removed (or cleared) by another task
/// ends its waiting consumers: they wait for nothing any more (tokio#6751: a shared
/// tokio-util queue does not wake its consumer when a remove empties it).
#[tokio::test(start_paused = true)]
async fn removing_the_last_value_of_a_closed_queue_ends_its_consumers() {
    let timer = timer();
    let queue: DelayQueue<u8> = DelayQueue::with_timer(&timer);
    for clear in [false, true] {
        let key = queue.insert(1, Duration::from_secs(60));
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.next_expired().await.map(Expired::into_inner) })
            })
            .collect();
        queue.close();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(consumers.iter().all(|c| !c.is_finished()), "ended early");
        let start = Instant::now();
        if clear {
            queue.clear();
        } else {
            assert_eq!(queue.remove(&key), Some(1));
        }
        for consumer in consumers {
            let end = tokio::time::timeout(Duration::from_secs(3600), consumer).await;
            assert_eq!(end.expect("a consumer was not woken").unwrap(), None);
        }
        assert_eq!(Instant::now(), start, "woken at once");
    }
}

/// A value whose `Drop` panics, dropped by `clear`: the panic reaches the caller, and
/// the consumers `clear` had to wake are woken all the same, so a consumer that was
/// waiting takes the next value at its deadline.
#[tokio::test(start_paused = true)]
async fn a_panicking_drop_in_clear_loses_no_wakeup() {
    struct Value(u8);
    impl Drop for Value {
        fn drop(&mut self) {
            if self.0 == 0 && !std::thread::panicking() {
                panic!("the value's drop panics");
            }
        }
    }
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    queue.insert(Value(0), Duration::from_secs(60));
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next_expired().await.map(|e| e.into_inner().0) })
    };
    tokio::task::yield_now().await;
    let clear = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| queue.clear()));
    assert!(clear.is_err(), "the value's panic reaches the caller");
    assert!(queue.is_empty());
    let start = Instant::now();
    queue.insert(Value(1), Duration::from_millis(100));
    let taken = tokio::time::timeout(Duration::from_secs(3600), consumer)
        .await
        .expect("the consumer was not woken")
        .unwrap();
    assert_eq!(taken, Some(1));
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(100), "{waited:?}: early");
    assert!(
        waited < Duration::from_millis(100) + LATE,
        "{waited:?}: late"
    );
}

/// Four consumers, producers inserting, removing and resetting from other tasks:
/// every value that is not removed is taken exactly once.
#[tokio::test(start_paused = true)]
async fn several_consumers_each_value_exactly_once() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut taken = Vec::new();
                while let Some(expired) = queue.next_expired().await {
                    taken.push(expired.into_inner());
                    // Let the others in between.
                    tokio::task::yield_now().await;
                }
                taken
            })
        })
        .collect();
    let producers: Vec<_> = (0..3u32)
        .map(|p| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut removed = Vec::new();
                for i in 0..300u32 {
                    let value = p * 1000 + i;
                    let key = queue.insert(value, Duration::from_millis(u64::from(i * 7 % 200)));
                    match i % 5 {
                        0 if queue.remove(&key).is_some() => removed.push(value),
                        1 => {
                            assert!(queue.reset(&key, Duration::from_millis(50)));
                        }
                        _ => {}
                    }
                    if i % 16 == 0 {
                        tokio::time::sleep(Duration::from_millis(3)).await;
                    }
                }
                removed
            })
        })
        .collect();
    let mut removed = HashSet::new();
    for producer in producers {
        removed.extend(producer.await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    queue.close();
    let mut taken = Vec::new();
    let mut busy = 0;
    for consumer in consumers {
        let got = consumer.await.unwrap();
        busy += usize::from(!got.is_empty());
        taken.extend(got);
    }
    assert!(busy > 1, "one consumer took everything: {busy}");
    let distinct: HashSet<u32> = taken.iter().copied().collect();
    assert_eq!(distinct.len(), taken.len(), "a value was taken twice");
    assert!(distinct.is_disjoint(&removed), "a removed value was taken");
    assert_eq!(taken.len() + removed.len(), 900, "a value was lost");
    assert_eq!(removed.len(), 180);
    assert_eq!(timer.pending(), 0);
}

/// Real threads: a multi-thread runtime, producers and consumers on its workers.
/// Exactly once under real contention (timing is not asserted beyond an upper bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_consumers_on_threads_each_value_exactly_once() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let queue = DelayQueue::with_timer(&timer);
    let consumers: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut taken = Vec::new();
                while let Some(expired) = queue.next_expired().await {
                    taken.push(expired.into_inner());
                }
                taken
            })
        })
        .collect();
    let producers: Vec<_> = (0..4u32)
        .map(|p| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for i in 0..500u32 {
                    queue.insert(p * 1000 + i, Duration::from_millis(u64::from(i % 20)));
                    if i % 50 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }
    let start = std::time::Instant::now();
    while !queue.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "values stuck");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    queue.close();
    let mut taken = Vec::new();
    for consumer in consumers {
        taken.extend(consumer.await.unwrap());
    }
    let distinct: HashSet<u32> = taken.iter().copied().collect();
    assert_eq!(distinct.len(), 2000);
    assert_eq!(taken.len(), 2000);
}

/// Keys whose value was removed, taken or cleared are inert: `None`/`false`, no
/// panic, and no reach into the value that reuses their slot. A value whose deadline
/// passed is the queue's until a consumer takes it.
#[tokio::test(start_paused = true)]
async fn stale_keys_are_inert() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let removed = queue.insert("removed", Duration::from_secs(1));
    assert_eq!(queue.remove(&removed), Some("removed"));
    // Same slot, new value.
    let live = queue.insert("live", Duration::from_secs(1));
    assert_eq!(queue.remove(&removed), None);
    assert!(!queue.reset(&removed, Duration::from_secs(9)));
    assert_eq!(queue.deadline(&removed), None);
    assert_ne!(removed, live);
    assert_eq!(
        queue.deadline(&live),
        Some(Instant::now() + Duration::from_secs(1)),
        "the stale key moved the live value"
    );

    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Due, not yet taken: still the queue's.
    assert!(queue.deadline(&live).is_some());
    assert_eq!(queue.peek(), Some(live));
    let expired = queue.next_expired().await.unwrap();
    assert_eq!(expired.key(), live);
    assert_eq!(queue.remove(&live), None);
    assert!(!queue.reset(&live, Duration::from_secs(1)));
    assert_eq!(queue.deadline(&live), None);

    let cleared = queue.insert("cleared", Duration::from_secs(1));
    queue.clear();
    assert!(queue.is_empty());
    let after = queue.insert("after", Duration::from_secs(1));
    assert_eq!(queue.remove(&cleared), None);
    assert_eq!(queue.remove(&after), Some("after"));
    assert_eq!(timer.pending(), 0);
}

/// A key used on another queue, of the same `T` and in the same slot there, names
/// nothing in it: `None`/`false`, and that queue's own value is untouched.
#[tokio::test(start_paused = true)]
async fn keys_from_another_queue_are_inert() {
    let timer = timer();
    let (one, other) = (
        DelayQueue::with_timer(&timer),
        DelayQueue::with_timer(&timer),
    );
    let foreign = one.insert("one's", Duration::from_secs(1));
    let own = other.insert("other's", Duration::from_secs(1));
    assert_ne!(foreign, own);
    assert_eq!(other.remove(&foreign), None);
    assert!(!other.reset(&foreign, Duration::from_secs(9)));
    assert_eq!(other.deadline(&foreign), None);
    assert_eq!(
        other.deadline(&own),
        Some(Instant::now() + Duration::from_secs(1))
    );
    assert_eq!(other.remove(&own), Some("other's"));
    assert_eq!(one.remove(&foreign), Some("one's"));
}

/// 5 000 inserts and removes through the same few slots: every stale key stays inert
/// and the queue and its timer hold nothing at the end.
#[tokio::test(start_paused = true)]
async fn five_thousand_inserts_and_removes_through_the_same_slots() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let anchor = queue.insert(u32::MAX, Duration::from_secs(60));
    let mut stale = Vec::new();
    for i in 0..5000u32 {
        let key = queue.insert(i, Duration::from_millis(u64::from(i % 50)));
        if let Some(previous) = stale.last() {
            assert_eq!(queue.remove(previous), None);
            assert!(!queue.reset(previous, Duration::from_secs(1)));
        }
        if i % 10 == 9 {
            // Some expire instead, and are taken: their keys go stale that way.
            tokio::time::sleep(Duration::from_millis(60)).await;
            let taken = queue.next_expired().await.unwrap();
            assert_eq!(taken.key(), key);
        } else {
            assert_eq!(queue.remove(&key), Some(i));
        }
        stale.push(key);
    }
    for key in &stale {
        assert_eq!(queue.remove(key), None);
        assert_eq!(queue.deadline(key), None);
    }
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.remove(&anchor), Some(u32::MAX));
    assert_eq!(timer.pending(), 0);
}

/// Insert, remove and reset touch only the queue: nothing is registered on the timer
/// until a consumer waits, and then one sleep, for the earliest value; a reset moves
/// the value in place (its key stays).
#[tokio::test(start_paused = true)]
async fn insert_remove_and_reset_touch_only_the_queue() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    let gone = queue.insert("gone", Duration::from_millis(100));
    let moved = queue.insert("moved", Duration::from_millis(100));
    assert_eq!(queue.remove(&gone), Some("gone"));
    assert!(queue.reset(&moved, Duration::from_millis(700)));
    assert_eq!(timer.pending(), 0, "the timer holds nothing of the queue's");
    assert_eq!(
        queue.deadline(&moved),
        Some(start + Duration::from_millis(700))
    );
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            queue
                .next_expired()
                .await
                .map(|e| (e.key(), e.into_inner()))
        })
    };
    tokio::task::yield_now().await;
    assert_eq!(timer.pending(), 1, "one sleep for a waiting consumer");
    assert_eq!(consumer.await.unwrap(), Some((moved, "moved")));
    assert_at(Instant::now(), start + Duration::from_millis(700), LATE);
    assert_eq!(timer.pending(), 0);
}

/// The driver holds no value: dropping the last handle drops them and cancels their
/// timers.
#[tokio::test(start_paused = true)]
async fn values_are_dropped_with_the_last_handle() {
    let timer = timer();
    let value = Arc::new(());
    let queue = DelayQueue::with_timer(&timer);
    let other = queue.clone();
    for ms in [10, 1000, 100_000] {
        queue.insert(value.clone(), Duration::from_millis(ms));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(Arc::strong_count(&value), 4);
    drop(queue);
    assert_eq!(Arc::strong_count(&value), 4, "a handle is left");
    drop(other);
    assert_eq!(Arc::strong_count(&value), 1, "values leaked");
    assert_eq!(timer.pending(), 0, "timers left behind");
}

/// A handle is `Send + Sync` for `T: Send`, `Clone` and `Debug` whatever `T` is.
#[test]
fn handles_are_send_sync_clone_debug() {
    fn send_sync<T: Send + Sync + Clone + std::fmt::Debug>() {}
    send_sync::<DelayQueue<std::cell::Cell<u8>>>();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let queue = DelayQueue::with_timer(&timer());
        queue.insert(1, Duration::from_secs(1));
        let text = format!("{queue:?}");
        assert!(text.contains("len: 1"), "{text}");
    });
}

/// A key's `Debug` names its queue and how many values that queue took before it, not
/// the raw serial it is compared by.
#[tokio::test(start_paused = true)]
async fn a_keys_debug_names_its_queue_and_insert() {
    let timer = timer();
    let (one, other) = (
        DelayQueue::with_timer(&timer),
        DelayQueue::with_timer(&timer),
    );
    one.insert(0, Duration::from_secs(1));
    let second = one.insert(1, Duration::from_secs(1));
    let first_of_other = other.insert(2, Duration::from_secs(1));
    let queue_of = |text: &str| -> u64 {
        let rest = text
            .strip_prefix("Key { queue: ")
            .unwrap_or_else(|| panic!("{text}"));
        rest[..rest.find(',').unwrap()].parse().unwrap()
    };
    let (second, first_of_other) = (format!("{second:?}"), format!("{first_of_other:?}"));
    assert!(second.ends_with(", insert: 1 }"), "{second}");
    assert!(
        first_of_other.ends_with(", insert: 0 }"),
        "{first_of_other}"
    );
    assert_ne!(queue_of(&second), queue_of(&first_of_other));
}

/// Consumers that give up waiting (`timeout` around `next_expired`, 2000 of them, or a
/// stream's `next` on clones then dropped) leave nothing behind in the queue: its
/// `Debug` shows no consumer waiting, with values pending that never expire meanwhile.
#[tokio::test(start_paused = true)]
async fn consumers_that_give_up_leave_nothing_behind() {
    let timer = timer();
    let queue: DelayQueue<u32> = DelayQueue::with_timer(&timer);
    let key = queue.insert(1, Duration::from_secs(3600));
    let consumers: Vec<_> = (0..2000)
        .map(|i| {
            let mut queue = queue.clone();
            tokio::spawn(async move {
                let wait = Duration::from_millis(1);
                if i % 2 == 0 {
                    tokio::time::timeout(wait, queue.next_expired())
                        .await
                        .is_err()
                } else {
                    tokio::time::timeout(wait, queue.next()).await.is_err()
                }
            })
        })
        .collect();
    for consumer in consumers {
        assert!(consumer.await.unwrap(), "a consumer got a value");
    }
    let text = format!("{queue:?}");
    assert!(text.contains("waiting: 0"), "{text}");
    assert_eq!(queue.remove(&key), Some(1));
}
