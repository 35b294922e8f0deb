//! The queue's unit tests: sizes and what its state holds, which behaviour tests
//! cannot see.

use std::sync::atomic::Ordering;

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
    assert!(lock(&queue.queue.shards[queue.queue.home()].state)
        .tags
        .is_none());
    assert_eq!(off.shared().site_sources(), 0);

    let on = Timer::builder().track_call_sites(true).build().unwrap();
    let queue = DelayQueue::with_timer(&on);
    let key = queue.insert(1u64, Duration::from_secs(1));
    assert_eq!(on.shared().site_sources(), 1);
    let heap = |queue: &DelayQueue<u64>| {
        let state = lock(&queue.queue.shards[queue.queue.home()].state);
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

/// A timer with a 10 ms tick, and a queue on it whose inserts from this thread go to
/// shard `shard` until told otherwise.
fn sharded(shard: usize) -> (Timer, DelayQueue<&'static str>) {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .unwrap();
    let queue = DelayQueue::with_timer(&timer);
    assert!(
        queue.queue.shards.len() >= 2,
        "tests have two shards at least"
    );
    queue::set_hint(shard);
    (timer, queue)
}

/// Values due in two shards come out in deadline order: the earliest of the shards'
/// first, not the first shard's first.
#[tokio::test(start_paused = true)]
async fn values_of_several_shards_come_out_in_deadline_order() {
    let (_timer, queue) = sharded(0);
    let late = queue.insert("late", Duration::from_millis(300));
    queue::set_hint(1);
    let early = queue.insert("early", Duration::from_millis(100));
    let middle = queue.insert("middle", Duration::from_millis(200));
    queue::set_hint(0);
    assert_eq!((late.shard(), early.shard(), middle.shard()), (0, 1, 1));
    assert_eq!(queue.peek(), Some(early));
    // All three due before a consumer looks.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut out = Vec::new();
    for _ in 0..3 {
        out.push(queue.next_expired().await.unwrap().into_inner());
    }
    assert_eq!(out, ["early", "middle", "late"]);
}

/// A consumer that waits while one shard is in use is woken, at the deadline, by a
/// value inserted into another: a shard put in use times its values for the consumers
/// already waiting.
#[tokio::test(start_paused = true)]
async fn a_waiting_consumer_is_woken_by_a_value_in_a_shard_put_in_use_later() {
    let (_timer, queue) = sharded(0);
    let start = tokio::time::Instant::now();
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next_expired().await.map(Expired::into_inner) })
    };
    tokio::task::yield_now().await;
    assert_eq!(queue.queue.in_use.load(Ordering::SeqCst), 1);
    queue::set_hint(1);
    let key = queue.insert("value", Duration::from_millis(100));
    queue::set_hint(0);
    assert_eq!(key.shard(), 1);
    assert_eq!(queue.queue.in_use.load(Ordering::SeqCst), 2);
    let taken = tokio::time::timeout(Duration::from_secs(5), consumer)
        .await
        .expect("the consumer was never woken")
        .unwrap();
    assert_eq!(taken, Some("value"));
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(100), "early: {waited:?}");
    assert!(waited < Duration::from_millis(111), "late: {waited:?}");
}

/// Each shard hands out the same first slot and serial: a key reaches its own shard's
/// value only, for `remove`, `reset` and `deadline`.
#[tokio::test(start_paused = true)]
async fn a_key_names_its_shard() {
    let (_timer, queue) = sharded(0);
    let start = tokio::time::Instant::now();
    let zero = queue.insert("zero", Duration::from_millis(100));
    queue::set_hint(1);
    let one = queue.insert("one", Duration::from_millis(200));
    queue::set_hint(0);
    assert_eq!((zero.slot(), zero.serial), (one.slot(), one.serial));
    assert_ne!(zero, one);
    assert!(format!("{one:?}").contains("shard: 1"), "{one:?}");
    assert_eq!(
        queue.deadline(&one),
        Some(start + Duration::from_millis(200))
    );
    assert!(queue.reset(&one, Duration::from_millis(50)));
    assert_eq!(
        queue.deadline(&zero),
        Some(start + Duration::from_millis(100))
    );
    assert_eq!(queue.remove(&one), Some("one"));
    assert_eq!(queue.remove(&one), None);
    assert_eq!(queue.remove(&zero), Some("zero"));
}

/// A closed queue ends when its last value leaves, whichever shard held it: not while
/// another shard still holds one.
#[tokio::test(start_paused = true)]
async fn a_closed_queue_ends_when_every_shard_is_empty() {
    let (_timer, queue) = sharded(0);
    let zero = queue.insert("zero", Duration::from_secs(60));
    queue::set_hint(1);
    let one = queue.insert("one", Duration::from_secs(60));
    queue::set_hint(0);
    queue.close();
    let mut consumer = tokio_test::task::spawn(queue.next_expired());
    assert!(consumer.poll().is_pending());
    assert_eq!(queue.remove(&zero), Some("zero"));
    if consumer.is_woken() {
        assert!(consumer.poll().is_pending(), "ended with a value left");
    }
    assert_eq!(queue.remove(&one), Some("one"));
    assert!(consumer.is_woken(), "not woken at the end");
    assert!(matches!(consumer.poll(), Poll::Ready(None)));
}

/// An insert that finds its thread's shard locked by another goes to the next shard,
/// puts it in use, and the thread's later inserts follow it there.
#[tokio::test(start_paused = true)]
async fn an_insert_that_finds_its_shard_locked_moves_to_the_next() {
    let (_timer, queue) = sharded(0);
    let held = lock(&queue.queue.shards[0].state);
    let moved = queue.insert("moved", Duration::from_millis(100));
    drop(held);
    assert_eq!(moved.shard(), 1);
    assert_eq!(queue.queue.in_use.load(Ordering::SeqCst), 2);
    let next = queue.insert("next", Duration::from_millis(100));
    assert_eq!(next.shard(), 1, "the thread stays in its new shard");
    queue::set_hint(0);
}
