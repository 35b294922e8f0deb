//! What a program moving from tokio-util's `DelayQueue` relies on, each behaviour its
//! tests check, in our API (`&self`, `Option` where tokio-util panics): an empty queue
//! with one handle is `Ready(None)`, in tokio-util's own assertion's shape (one that
//! another handle can still insert into waits); deadlines due now or earlier are ready at the next poll,
//! without waiting for the driver's turn; a waiting consumer is woken at once by an
//! insert or reset into the past, and otherwise by its value's deadline, never before;
//! `remove` gives back a value no consumer took; resets move deadlines either way;
//! `peek`, `with_capacity`, `capacity`, `reserve`, `shrink_to_fit`. Paused clock.
//!
//! Where a test must see a value ready *before* the driver turns, its timer's tick is an
//! hour: the driver then turns at the hour's end only, and a value due minutes in is
//! ready when polled, or not at all.

use std::task::Poll;
use std::time::Duration;

use tokio::time::{sleep, sleep_until, Instant};
use tokio_test::{assert_pending, assert_ready};
use tokio_wheel::{DelayQueue, Expired, Timer};

mod common;
use common::{assert_at, timer, LATE};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A timer whose driver turns once an hour: what is ready before then was found due by
/// the consumer's own poll.
fn hour_tick_timer() -> Timer {
    Timer::builder()
        .tick(Duration::from_secs(3600))
        .build()
        .unwrap()
}

/// A consumer polled by hand, which records whether it was woken.
struct Consumer<T> {
    queue: DelayQueue<T>,
    task: tokio_test::task::Spawn<()>,
}

impl<T: Send + 'static> Consumer<T> {
    fn of(queue: &DelayQueue<T>) -> Self {
        Consumer {
            queue: queue.clone(),
            task: tokio_test::task::spawn(()),
        }
    }

    fn poll(&mut self) -> Poll<Option<T>> {
        let queue = &self.queue;
        self.task
            .enter(|cx, _| queue.poll_expired(cx))
            .map(|taken| taken.map(Expired::into_inner))
    }

    #[track_caller]
    fn take(&mut self) -> T {
        match self.poll() {
            Poll::Ready(Some(value)) => value,
            Poll::Ready(None) => panic!("the queue ended"),
            Poll::Pending => panic!("nothing ready"),
        }
    }

    fn woken(&self) -> bool {
        self.task.is_woken()
    }
}

/// Takes values as they come, recording when each came out, until `n` did.
async fn take_timed<T: Send + 'static>(queue: &DelayQueue<T>, n: usize) -> Vec<(T, Instant)> {
    let mut out = Vec::new();
    while out.len() < n {
        let value = queue.next_expired().await.expect("open").into_inner();
        out.push((value, Instant::now()));
    }
    out
}

/// tokio-util's paths, with the crate's name: `delay_queue::{self, DelayQueue}`, then
/// `delay_queue::Key` and `delay_queue::Expired`, the same types as at the root.
#[tokio::test(start_paused = true)]
async fn tokio_utils_paths_name_the_same_types() {
    use tokio_wheel::delay_queue::{self, DelayQueue as Queue};
    let timer = hour_tick_timer();
    let queue: Queue<&str> = Queue::with_timer(&timer);
    let key: delay_queue::Key = queue.insert_at("now", Instant::now());
    let root: &tokio_wheel::Key = &key;
    assert_eq!(queue.deadline(root), Some(Instant::now()));
    let expired: delay_queue::Expired<&str> = queue.next_expired().await.unwrap();
    let _: Expired<&str> = expired;
    let _: DelayQueue<&str> = queue;
}

/// tokio-util's tests poll a queue they own, spawned as a tokio-test task, with this
/// macro (less a `mut`: `poll_expired` takes `&self`).
macro_rules! poll {
    ($queue:ident) => {
        $queue.enter(|cx, queue| queue.poll_expired(cx))
    };
}

/// An empty queue with one handle is `Ready(None)`, as tokio-util's: at the start, once
/// its values are taken, and again after a later insert is taken; tokio-util's
/// assertion `assert!(assert_ready!(poll!(queue)).is_none())` holds as written.
#[tokio::test(start_paused = true)]
async fn an_empty_one_owner_queue_is_ready_none_as_tokio_utils_is() {
    let timer = timer();
    let mut queue = tokio_test::task::spawn(DelayQueue::with_timer(&timer));
    assert!(assert_ready!(poll!(queue)).is_none());
    queue.insert_at("now", Instant::now());
    let entry = assert_ready!(poll!(queue)).expect("due now");
    assert_eq!(*entry.get_ref(), "now");
    assert!(assert_ready!(poll!(queue)).is_none());
    let start = Instant::now();
    queue.insert("later", ms(50));
    assert_pending!(poll!(queue));
    sleep_until(start + ms(49)).await;
    assert_pending!(poll!(queue));
    sleep_until(start + ms(50)).await;
    let entry = assert_ready!(poll!(queue)).expect("due at 50 ms");
    assert_eq!(entry.into_inner(), "later");
    assert!(assert_ready!(poll!(queue)).is_none());
}

/// Values due now, or already past, are ready at the next poll: one or several, by
/// `insert_at` or by `insert` with a zero timeout. The driver has not turned. (Their
/// deadlines fall in one step of the hour-long tick's wheel: in either order.)
#[tokio::test(start_paused = true)]
async fn deadlines_due_now_or_past_are_ready_at_the_next_poll() {
    let timer = hour_tick_timer();
    sleep(ms(1000)).await;
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let now = Instant::now();
    queue.insert_at("now", now);
    queue.insert_at("before", now - ms(10));
    queue.insert("zero", Duration::ZERO);
    queue.insert_at("later", now + ms(10));
    let mut all = [consumer.take(), consumer.take(), consumer.take()];
    all.sort_unstable();
    assert_eq!(all, ["before", "now", "zero"]);
    assert!(consumer.poll().is_pending());
    assert_eq!(queue.len(), 1);
}

/// A deadline reached exactly (the paused clock stopped on it) is ready when polled,
/// not a step or a tick later; a millisecond before, nothing is.
#[tokio::test(start_paused = true)]
async fn a_deadline_reached_exactly_is_ready_when_polled() {
    let timer = hour_tick_timer();
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let start = Instant::now();
    queue.insert_at("5 min", start + ms(300_000));
    queue.insert_at("7 ms", start + ms(7));
    assert!(consumer.poll().is_pending());
    sleep_until(start + ms(6)).await;
    assert!(consumer.poll().is_pending(), "early");
    sleep_until(start + ms(7)).await;
    assert_eq!(consumer.take(), "7 ms");
    sleep_until(start + ms(299_999)).await;
    assert!(consumer.poll().is_pending(), "early");
    sleep_until(start + ms(300_000)).await;
    assert_eq!(consumer.take(), "5 min");
}

/// A consumer waiting is woken at once by an insert, or a reset, to a deadline that
/// has passed, and takes that value on the poll it was woken for: whether the queue
/// was empty or held later values, and long before the driver's turn.
#[tokio::test(start_paused = true)]
async fn an_insert_or_reset_into_the_past_wakes_a_waiting_consumer_at_once() {
    let timer = hour_tick_timer();
    sleep(ms(1000)).await;
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);

    assert!(consumer.poll().is_pending());
    queue.insert_at("into an empty queue", Instant::now() - ms(100));
    assert!(consumer.woken(), "not woken by a past insert");
    assert_eq!(consumer.take(), "into an empty queue");

    let later = queue.insert("later", ms(10_000));
    assert!(consumer.poll().is_pending());
    queue.insert_at("before a later one", Instant::now());
    assert!(consumer.woken(), "not woken by an insert due now");
    assert_eq!(consumer.take(), "before a later one");

    assert!(consumer.poll().is_pending());
    assert!(queue.reset_at(&later, Instant::now() - ms(100)));
    assert!(consumer.woken(), "not woken by a reset into the past");
    assert_eq!(consumer.take(), "later");
    assert!(consumer.poll().is_pending());
    assert!(queue.is_empty());
}

/// Values with deadlines from 2 ms to over five minutes, one of them past several of
/// the wheel's levels: each comes out at its deadline, never before, less than a tick
/// late, to a consumer that waits throughout (tokio-util's `multi_delay_at_start`).
#[tokio::test(start_paused = true)]
async fn each_deadline_comes_out_on_time_to_a_consumer_that_waits() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let start = Instant::now();
    let delays = [1000, 2, 234, 262_144 + 9 * 4096, 60, 10];
    for d in delays {
        queue.insert_at(d, start + ms(d));
    }
    let mut sorted = delays;
    sorted.sort_unstable();
    for ((value, at), want) in take_timed(&queue, delays.len())
        .await
        .into_iter()
        .zip(sorted)
    {
        assert_eq!(value, want);
        assert_at(at, start + ms(want), LATE);
    }
}

/// A consumer that polled and waits is not woken before its value's deadline, and is
/// woken less than a tick after it (tokio-util's `single_short_delay`).
#[tokio::test(start_paused = true)]
async fn a_waiting_consumer_is_woken_by_its_deadline_not_before() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let start = Instant::now();
    queue.insert_at("foo", start + ms(25));
    assert!(consumer.poll().is_pending());
    sleep_until(start + ms(24)).await;
    assert!(!consumer.woken(), "woken before the deadline");
    sleep_until(start + ms(25) + LATE).await;
    assert!(consumer.woken(), "not woken within a tick of the deadline");
    assert_eq!(consumer.take(), "foo");
    assert!(
        consumer.poll().is_pending(),
        "an empty open queue is pending"
    );
}

/// A value removed before its deadline is given back, and never comes out.
#[tokio::test(start_paused = true)]
async fn a_value_removed_before_its_deadline_never_comes_out() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let key = queue.insert("foo", ms(5));
    assert!(consumer.poll().is_pending());
    assert_eq!(queue.remove(&key), Some("foo"));
    sleep(ms(100)).await;
    assert!(consumer.poll().is_pending());
    assert!(queue.is_empty());
}

/// `remove` gives back a value whose deadline has passed as long as no consumer took
/// it: one inserted in the past; one whose deadline passed while nobody polled; one
/// that came due with another, after a consumer took the other
/// (tokio-util's `remove_expired_item`, `remove_at_timer_wheel_threshold`).
#[tokio::test(start_paused = true)]
async fn remove_gives_back_a_due_value_no_consumer_took() {
    let timer = timer();
    sleep(ms(1000)).await;
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let start = Instant::now();

    let past = queue.insert_at("past", start - ms(10));
    assert_eq!(queue.remove(&past), Some("past"));

    let passed = queue.insert_at("passed", start + ms(20));
    sleep(ms(100)).await;
    assert_eq!(queue.deadline(&passed), Some(start + ms(20)));
    assert_eq!(queue.remove(&passed), Some("passed"));

    let foo = queue.insert_at("foo", start + ms(164));
    let bar = queue.insert_at("bar", start + ms(164));
    sleep_until(start + ms(180)).await;
    let (taken, left, key) = match consumer.take() {
        "foo" => ("foo", "bar", bar),
        _ => ("bar", "foo", foo),
    };
    assert_eq!(queue.remove(&key), Some(left), "{taken} taken");
    assert!(consumer.poll().is_pending());
    assert!(queue.is_empty());
}

/// Resets move a value's deadline later or earlier, once or several times, also after
/// a consumer polled and while its deadline's step has begun: it comes out at the last
/// deadline set, never at an earlier one it had, and one moved ahead of another comes
/// out first (tokio-util's `reset_entry`, `reset_much_later`, `reset_twice`,
/// `multi_reset`, `expire_*_key_when_reset_to_expire_earlier`,
/// `reset_first_expiring_item_to_expire_later`, `reset_*_after_slot_starts`).
#[tokio::test(start_paused = true)]
async fn resets_move_deadlines_later_and_earlier() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let start = Instant::now();
    let one = queue.insert_at("one", start + ms(200));
    let two = queue.insert_at("two", start + ms(250));
    let three = queue.insert_at("three", start + ms(100));
    assert!(consumer.poll().is_pending());
    assert!(queue.reset_at(&one, start + ms(300)));
    assert!(queue.reset_at(&two, start + ms(350)));
    assert!(queue.reset_at(&one, start + ms(400)));
    sleep_until(start + ms(80)).await;
    // Within the step of its old deadline's tick: later, then earlier than that.
    assert!(queue.reset_at(&three, start + ms(120)));
    assert!(queue.reset_at(&three, start + ms(90)));
    let four = queue.insert_at("four", start + ms(500));
    assert!(queue.reset_at(&four, start + ms(150)));
    assert_eq!(queue.deadline(&one), Some(start + ms(400)));
    let expected = [("three", 90), ("four", 150), ("two", 350), ("one", 400)];
    let out = take_timed(&queue, expected.len()).await;
    for ((value, at), (want, deadline)) in out.into_iter().zip(expected) {
        assert_eq!(value, want);
        assert_at(at, start + ms(deadline), LATE);
    }
}

/// A value inserted with a deadline already past, then reset (twice) to later ones,
/// waits for the last of them; it counts in `len` throughout
/// (tokio-util's `reset_inserted_expired`, `repeatedly_reset_entry_inserted_as_expired`).
#[tokio::test(start_paused = true)]
async fn a_value_inserted_due_then_reset_waits_for_its_new_deadline() {
    let timer = timer();
    sleep(ms(1000)).await;
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let start = Instant::now();
    let key = queue.insert_at("foo", start - ms(100));
    assert!(queue.reset_at(&key, start + ms(100)));
    assert!(queue.reset_at(&key, start + ms(50)));
    assert_eq!(queue.len(), 1);
    assert!(consumer.poll().is_pending());
    let out = take_timed(&queue, 1).await;
    assert_eq!(out[0].0, "foo");
    assert_at(out[0].1, start + ms(50), LATE);
    assert_eq!(queue.len(), 0);
}

/// A consumer waiting for a far value gets an earlier one inserted after it began to
/// wait, at that value's deadline (tokio-util's `expires_before_last_insert`,
/// `insert_before_first_after_poll`), and one inserted before a value it is taking
/// does not disturb the values already due (`insert_after_ready_poll`).
#[tokio::test(start_paused = true)]
async fn values_inserted_while_a_consumer_waits_or_takes_come_out_in_order() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let start = Instant::now();
    queue.insert_at("far", start + ms(10_000));
    assert!(consumer.poll().is_pending());
    queue.insert_at("near", start + ms(600));
    sleep_until(start + ms(599)).await;
    assert!(consumer.poll().is_pending(), "early");
    let out = take_timed(&queue, 1).await;
    assert_eq!(out[0].0, "near");
    assert_at(out[0].1, start + ms(600), LATE);

    for n in ["1", "2", "3"] {
        queue.insert_at(n, start + ms(700));
    }
    sleep_until(start + ms(700) + LATE).await;
    let mut taken = Vec::new();
    for _ in 0..3 {
        taken.push(consumer.take());
        queue.insert_at("later", start + ms(5000));
    }
    taken.sort_unstable();
    assert_eq!(taken, ["1", "2", "3"]);
    assert!(consumer.poll().is_pending());
    assert_eq!(queue.len(), 4);
}

/// A queue whose clock has run on for years (the paused clock advanced 2^35 ms twice,
/// past tokio-util's wheel) still inserts, times and hands out values; nothing panics
/// (tokio-util's `item_expiry_greater_than_wheel`).
#[tokio::test(start_paused = true)]
async fn a_clock_years_on_still_inserts_and_times_values() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    for round in 0..2u32 {
        tokio::time::advance(ms(1 << 35)).await;
        let start = Instant::now();
        queue.insert(round, Duration::ZERO);
        queue.insert(round + 10, ms(30));
        assert_eq!(queue.next_expired().await.unwrap().into_inner(), round);
        let out = take_timed(&queue, 1).await;
        assert_eq!(out[0].0, round + 10);
        assert_at(out[0].1, start + ms(30), LATE);
    }
}

/// `peek` names the value that comes out next: a due one first, then by deadline;
/// `None` once the queue is empty (tokio-util's `peek`).
#[tokio::test(start_paused = true)]
async fn peek_names_the_value_that_comes_out_next() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    let mut consumer = Consumer::of(&queue);
    let start = Instant::now();
    let foo = queue.insert_at("foo", start + ms(50));
    let now = queue.insert_at("now", start);
    let baz = queue.insert_at("baz", start + ms(100));
    let qux = queue.insert_at("qux", start + ms(55));
    let one = queue.insert_at("one", start + ms(1));
    assert_eq!(queue.peek(), Some(now));
    sleep_until(start + ms(60)).await;
    assert_eq!(queue.peek(), Some(now));
    assert_eq!(consumer.take(), "now");
    assert_eq!(queue.peek(), Some(one));
    assert_eq!(consumer.take(), "one");
    // foo and qux are due, both waiting: foo first.
    assert_eq!(queue.peek(), Some(foo));
    assert_eq!(consumer.take(), "foo");
    assert_eq!(queue.peek(), Some(qux));
    assert_eq!(consumer.take(), "qux");
    assert_eq!(queue.peek(), Some(baz));
    assert!(consumer.poll().is_pending());
    sleep_until(start + ms(100)).await;
    assert_eq!(queue.peek(), Some(baz));
    assert_eq!(consumer.take(), "baz");
    assert_eq!(queue.peek(), None);
}

/// `with_capacity` holds that many values before it allocates again, `reserve` makes
/// room for more, and `shrink_to_fit` gives back the room past the last value held,
/// whose key still works. `compact`'s job needs no call: a removed value's room is
/// taken by the next insert, and keys never move.
#[tokio::test(start_paused = true)]
async fn capacity_reserve_and_shrink_to_fit() {
    let timer = timer();
    let queue = DelayQueue::with_timer(&timer);
    assert_eq!(queue.capacity(), 0);
    queue.reserve(1000);
    let reserved = queue.capacity();
    assert!(reserved >= 1000, "{reserved}");
    let keys: Vec<_> = (0..1000).map(|i| queue.insert(i, ms(100))).collect();
    assert_eq!(queue.capacity(), reserved, "allocated within its reserve");
    for key in &keys[1..] {
        assert!(queue.remove(key).is_some());
    }
    // The room of removed values is reused, not grown.
    let again: Vec<_> = (0..999).map(|i| queue.insert(i, ms(100))).collect();
    assert_eq!(queue.capacity(), reserved);
    for key in &again {
        assert!(queue.remove(key).is_some());
    }
    queue.shrink_to_fit();
    assert!(queue.capacity() < reserved, "{}", queue.capacity());
    assert!(queue.capacity() >= queue.len());
    assert_eq!(
        queue.remove(&keys[0]),
        Some(0),
        "the key held survives the shrink"
    );
}

/// `with_capacity` (on the default timer, outside any runtime) holds that room at once.
#[test]
fn with_capacity_holds_its_room_at_once() {
    let queue: DelayQueue<u32> = DelayQueue::with_capacity(100);
    assert!(queue.capacity() >= 100, "{}", queue.capacity());
    assert!(queue.is_empty());
}
