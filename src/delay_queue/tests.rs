//! The queue's unit tests: sizes and what its state holds, which behaviour tests
//! cannot see.
// On the paused clock, which timers follow with `test-util` only.
#![cfg(feature = "test-util")]

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
    queue::set_hint(&queue.queue, shard);
    (timer, queue)
}

/// Values due in two shards come out in deadline order: the earliest of the shards'
/// first, not the first shard's first.
#[tokio::test(start_paused = true)]
async fn values_of_several_shards_come_out_in_deadline_order() {
    let (_timer, queue) = sharded(0);
    let late = queue.insert("late", Duration::from_millis(300));
    queue::set_hint(&queue.queue, 1);
    let early = queue.insert("early", Duration::from_millis(100));
    let middle = queue.insert("middle", Duration::from_millis(200));
    queue::set_hint(&queue.queue, 0);
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
    queue::set_hint(&queue.queue, 1);
    let key = queue.insert("value", Duration::from_millis(100));
    queue::set_hint(&queue.queue, 0);
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
    queue::set_hint(&queue.queue, 1);
    let one = queue.insert("one", Duration::from_millis(200));
    queue::set_hint(&queue.queue, 0);
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
    queue::set_hint(&queue.queue, 1);
    let one = queue.insert("one", Duration::from_secs(60));
    queue::set_hint(&queue.queue, 0);
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
    queue::set_hint(&queue.queue, 0);
}

/// A shard first used after a consumer's poll moved the others on lags behind them: a
/// value inserted there with a deadline already past still comes out before a later
/// one already taken out of another shard's wheel, and `peek` names it.
#[tokio::test(start_paused = true)]
async fn a_past_value_in_a_lagging_shard_comes_out_first() {
    let (_timer, queue) = sharded(0);
    let start = tokio::time::Instant::now();
    queue.insert_at("a", start + Duration::from_millis(100));
    queue.insert_at("b", start + Duration::from_millis(200));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(queue.next_expired().await.unwrap().into_inner(), "a");
    // "b" is in shard 0's due list now; "c" goes to shard 1, first used here.
    queue::set_hint(&queue.queue, 1);
    let c = queue.insert_at("c", start + Duration::from_millis(50));
    queue::set_hint(&queue.queue, 0);
    assert_eq!(c.shard(), 1);
    assert_eq!(queue.peek(), Some(c), "peek names the earliest");
    assert_eq!(queue.next_expired().await.unwrap().into_inner(), "c");
    assert_eq!(queue.next_expired().await.unwrap().into_inner(), "b");
}

/// Deadline order holds across shards when more values are due at once than a shard
/// moves out of its wheel in one go (`DUE_BATCH`): a shard stopped short is moved on
/// again before another shard's later value is taken.
#[tokio::test(start_paused = true)]
async fn deadline_order_holds_across_shards_past_a_due_batch() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .unwrap();
    let queue = DelayQueue::<u64>::with_timer(&timer);
    let start = tokio::time::Instant::now();
    let values = 1500u64;
    assert!(values > super::state::DUE_BATCH as u64);
    // 3 ms apart: each value in a step of its own (2.5 ms steps at a 10 ms tick).
    queue::set_hint(&queue.queue, 1);
    for i in 0..values {
        queue.insert_at(i, start + Duration::from_millis(3 * (i + 1)));
    }
    queue::set_hint(&queue.queue, 0);
    let between = 1200;
    queue.insert_at(u64::MAX, start + Duration::from_millis(3 * between + 1));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut out = Vec::new();
    while !queue.is_empty() {
        out.push(queue.next_expired().await.unwrap().into_inner());
    }
    let at = out.iter().position(|&v| v == u64::MAX).unwrap();
    assert_eq!(
        at, between as usize,
        "after the {between} values due before it"
    );
    assert!(out.iter().filter(|&&v| v != u64::MAX).is_sorted());
}

/// A consumer's count of the shards in use may be stale by the time it holds them: a
/// shard put in use since (its value inserted while the consumer held shard 0) is
/// looked at before a closed queue is said to have ended.
#[tokio::test(start_paused = true)]
async fn a_closed_queue_is_not_ended_by_a_stale_count_of_its_shards() {
    let (_timer, queue) = sharded(0);
    let zero = queue.insert("zero", Duration::from_secs(60));
    queue.close();
    let counted = shard::Locked::new(&queue.queue.shards, 1);
    // Shard 0 is held (by the consumer's count): this insert moves to shard 1.
    let one = queue.insert("one", Duration::from_secs(60));
    assert_eq!(one.shard(), 1);
    // What `remove(&zero)` does, under the lock the consumer holds.
    let mut counted = counted;
    let (key, step, _) = counted.iter_mut().next().unwrap().get(&zero).unwrap();
    let removed = counted
        .iter_mut()
        .next()
        .unwrap()
        .wheel
        .remove_any(key, step);
    assert_eq!(removed.map(|item| item.value), Some("zero"));
    let owner = queue.queue.waiting.owner();
    let waker = std::task::Waker::noop();
    let polled = queue
        .queue
        .poll_expired_from(counted, owner, &mut Context::from_waker(waker));
    assert!(polled.is_pending(), "not ended: \"one\" is still queued");
    queue.queue.waiting.forget(owner);
    assert_eq!(queue.len(), 1);
}

/// A thread moved to another shard in one queue starts at the first shard of every
/// other queue: a queue filled from one thread keeps one shard, and its consumers one
/// lock.
#[tokio::test(start_paused = true)]
async fn moving_shards_in_one_queue_spreads_to_no_other() {
    let (timer, a) = sharded(0);
    let held = lock(&a.queue.shards[0].state);
    assert_eq!(a.insert("moved", Duration::from_secs(1)).shard(), 1);
    drop(held);
    assert_eq!(a.insert("stays", Duration::from_secs(1)).shard(), 1);
    let b = DelayQueue::with_timer(&timer);
    assert_eq!(b.insert("alone", Duration::from_secs(1)).shard(), 0);
    assert_eq!(b.queue.in_use.load(Ordering::SeqCst), 1);
}

/// Of two consumers of a closed queue, the one that takes its last value (found due
/// by the clock, before the driver's turn) wakes the other, which sees the end: the
/// shard's sleep that would have woken it stood down.
#[tokio::test(start_paused = true)]
async fn taking_the_last_value_of_a_closed_queue_ends_the_other_consumers() {
    let timer = Timer::builder()
        .tick(Duration::from_secs(1))
        .build()
        .unwrap();
    let queue = DelayQueue::with_timer(&timer);
    queue.insert("last", Duration::from_millis(100));
    queue.close();
    let mut waiting = tokio_test::task::spawn(queue.next_expired());
    assert!(waiting.poll().is_pending());
    tokio::time::advance(Duration::from_millis(150)).await;
    let mut taker = tokio_test::task::spawn(queue.next_expired());
    assert!(matches!(taker.poll(), Poll::Ready(Some(_))));
    assert!(waiting.is_woken(), "told the queue ended");
    assert!(matches!(waiting.poll(), Poll::Ready(None)));
}

/// Two values in one step of the timer, in two shards: the one whose deadline has
/// passed comes out when polled, though the other, later in the same step, is still
/// pending (values within one step come out in either order; neither waits for the
/// other).
#[tokio::test(start_paused = true)]
async fn a_due_value_is_not_held_back_by_a_later_one_in_its_step_in_another_shard() {
    let (timer, queue) = sharded(0);
    let start = tokio::time::Instant::now();
    let step = timer.tick() / 4;
    // Deadlines a quarter and three quarters into the step after the next.
    let at = |quarters: u32| start + step * 2 + step * quarters / 4;
    queue.insert_at("later", at(3));
    queue::set_hint(&queue.queue, 1);
    queue.insert_at("due", at(1));
    queue::set_hint(&queue.queue, 0);
    tokio::time::advance(at(2) - start).await;
    let mut next = tokio_test::task::spawn(queue.next_expired());
    match next.poll() {
        Poll::Ready(Some(expired)) => assert_eq!(expired.into_inner(), "due"),
        other => panic!("the due value is held back: {other:?}"),
    }
}

/// A value found due while its step is under way (its deadline passed) counts with the
/// step before, yet after that step's own values: in another shard, an earlier step's
/// value still comes out first, and `peek` names it.
#[tokio::test(start_paused = true)]
async fn a_value_due_early_in_its_step_follows_the_step_before_across_shards() {
    let (timer, queue) = sharded(1);
    let origin = timer.shared().clock.instant_at(0);
    let step = timer.tick() / 4;
    // "early" in step 40, "late" a fifth into step 41; the clock two fifths into 41.
    let early = queue.insert_at("early", origin + step * 40 + step / 5);
    queue::set_hint(&queue.queue, 0);
    let late = queue.insert_at("late", origin + step * 41 + step / 5);
    assert_eq!((early.shard(), late.shard()), (1, 0));
    tokio::time::advance(origin + step * 41 + step * 2 / 5 - Instant::now()).await;
    let mut first = tokio_test::task::spawn(queue.next_expired());
    let Poll::Ready(Some(first)) = first.poll() else {
        panic!("both are due");
    };
    assert_eq!(first.into_inner(), "early");
    assert_eq!(queue.peek(), Some(late));
    assert_eq!(queue.next_expired().await.unwrap().into_inner(), "late");
}

/// A queue made where a dropped one lived starts every thread at its first shard: the
/// shard a thread moved to is kept by the queue's number, which no queue reuses.
/// (Queues are made and dropped until the allocator puts one where another lived.)
#[tokio::test(start_paused = true)]
async fn a_queue_made_where_a_dropped_one_lived_keeps_one_shard() {
    let timer = Timer::builder().build().unwrap();
    let mut places = std::collections::HashSet::new();
    let mut reused = false;
    for _ in 0..256 {
        let a = DelayQueue::with_timer(&timer);
        let held = lock(&a.queue.shards[0].state);
        assert_eq!(a.insert(1u64, Duration::from_secs(1)).shard(), 1);
        drop(held);
        places.insert(std::ptr::from_ref(&*a.queue) as usize);
        drop(a);
        let b = DelayQueue::with_timer(&timer);
        reused |= places.contains(&(std::ptr::from_ref(&*b.queue) as usize));
        assert_eq!(b.insert(2u64, Duration::from_secs(1)).shard(), 0);
        assert_eq!(b.queue.in_use.load(Ordering::SeqCst), 1);
    }
    assert!(
        reused,
        "no queue was made where a dropped one lived: nothing was tried"
    );
}

/// A consumer whose count of shards is stale finds the value due in a shard put in use
/// since, and takes it, leaving no registration behind (it waits for nothing).
#[tokio::test(start_paused = true)]
async fn a_consumer_that_finds_a_value_past_its_count_leaves_no_registration() {
    let (_timer, queue) = sharded(0);
    let counted = shard::Locked::new(&queue.queue.shards, 1);
    // Shard 0 is held (by the consumer's count): this insert moves to shard 1.
    let key = queue.insert("due", Duration::ZERO);
    assert_eq!(key.shard(), 1);
    let owner = queue.queue.waiting.owner();
    // A waker whose clones `will_wake` one another (`Waker::noop()`'s need not).
    struct Nothing;
    impl std::task::Wake for Nothing {
        fn wake(self: Arc<Self>) {}
    }
    let waker = std::task::Waker::from(Arc::new(Nothing));
    let polled = queue
        .queue
        .poll_expired_from(counted, owner, &mut Context::from_waker(&waker));
    assert!(matches!(polled, Poll::Ready(Some(_))));
    assert_eq!(queue.queue.waiting.count(), 0, "nothing left waiting");
}
