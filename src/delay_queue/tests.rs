//! The queue's unit tests: sizes and what its state holds, which behaviour tests
//! cannot see.

use super::*;

/// Under `cfg(test)` the wheel's generations wrap every three inserts, so values
/// removed here leave wheel keys whose index and generation a later value shares:
/// the queue's serials keep every stale key inert all the same.
#[tokio::test(start_paused = true)]
async fn stale_keys_stay_inert_after_the_wheels_generations_wrap() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .unwrap();
    let queue = DelayQueue::with_timer(&timer);
    let keep = queue.insert(u32::MAX, Duration::from_millis(30));
    let mut stale = Vec::new();
    for i in 0..5000u32 {
        let key = queue.insert(i, Duration::from_millis(30));
        for old in stale.iter().rev().take(4) {
            assert!(!queue.reset(old, Duration::from_millis(1)), "{i}");
            assert_eq!(queue.remove(old), None, "{i}");
        }
        assert_eq!(queue.remove(&key), Some(i));
        stale.push(key);
    }
    let expired = queue.next_expired().await.unwrap();
    assert_eq!((expired.key(), expired.into_inner()), (keep, u32::MAX));
    assert!(queue.is_empty());
    assert_eq!(timer.pending(), 0, "the queue's sleep stood down");
}

/// Off, a queue keeps no tags and registers nowhere: a value costs what it did.
/// On, it registers once, and its tags go with `shrink_to_fit` once it is empty.
#[tokio::test(start_paused = true)]
async fn a_queue_keeps_tags_only_on_a_tracking_timer() {
    let off = Timer::builder().build().unwrap();
    let queue = DelayQueue::with_timer(&off);
    queue.insert(1u64, Duration::from_secs(1));
    assert!(lock(&queue.queue.state).tags.is_none());
    assert_eq!(off.shared().site_sources(), 0);

    let on = Timer::builder().track_call_sites(true).build().unwrap();
    let queue = DelayQueue::with_timer(&on);
    let key = queue.insert(1u64, Duration::from_secs(1));
    assert_eq!(on.shared().site_sources(), 1);
    let heap = |queue: &DelayQueue<u64>| {
        let state = lock(&queue.queue.state);
        state.tags.as_ref().map(Tags::heap_bytes)
    };
    assert!(
        matches!(heap(&queue), Some(n) if n >= 16),
        "{:?}",
        heap(&queue)
    );
    assert_eq!(queue.remove(&key), Some(1));
    queue.shrink_to_fit();
    assert_eq!(heap(&queue), Some(0));
    // Queues made and dropped are pruned from the timer's list as it fills.
    for _ in 0..100 {
        drop(DelayQueue::<u64>::with_timer(&on));
    }
    assert!(
        on.shared().site_sources() <= 4,
        "{}",
        on.shared().site_sources()
    );
}

/// A `u64` value takes 40 bytes of the wheel's storage: the value, its serial and
/// deadline, the wheel's links and step (whose niche holds the slab's tag, as
/// `Option`'s here).
#[test]
fn a_u64_value_takes_40_bytes() {
    type Stored = crate::wheel::Entry<super::state::Item<u64>>;
    assert_eq!(std::mem::size_of::<Stored>(), 40);
    assert_eq!(std::mem::size_of::<Option<Stored>>(), 40);
}
