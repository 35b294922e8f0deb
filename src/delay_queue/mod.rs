//! [`DelayQueue`]: values that come out when their deadlines pass, shared by any
//! number of producers and consumers.
//!
//! Retry queues (Dubbo's failback), TTL caches and lease renewals are keyed timers:
//! each value has a deadline that moves (`reset`) or goes away (`remove`) before it
//! passes, and something takes the values whose deadline passed. tokio-util's
//! `DelayQueue` does this for one owner (`&mut self`, polled by the task that owns it);
//! this one is a cheap [`Clone`] handle whose every operation takes `&self`, so any
//! task inserts, removes and resets while one or several consumers take expired values.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use std::time::Duration;
//! use tokio_wheel::{DelayQueue, Timer};
//!
//! let timer = Timer::new();
//! let retries = DelayQueue::with_timer(&timer);
//! let key = retries.insert("order 17", Duration::from_secs(5));
//! retries.insert("order 18", Duration::from_secs(1));
//! // The first retry of order 17 failed again: back off.
//! assert!(retries.reset(&key, Duration::from_secs(10)));
//!
//! let consumer = retries.clone();
//! let first = consumer.next_expired().await.unwrap();
//! assert_eq!(first.into_inner(), "order 18");
//! assert_eq!(retries.remove(&key), Some("order 17"));
//! # }
//! ```
//!
//! # Implementation
//!
//! Each pending value is one callback on the timer ([`Timer::schedule_at`]), whose
//! [`Scheduled`] handle the queue keeps beside the value in its own slab; `reset` moves
//! that callback in place ([`Scheduled::reset_at`]) and `remove` cancels it, both O(1).
//! The callback holds only a `Weak` reference to the queue and the value's [`Key`], so
//! the driver never keeps values alive: when the last handle goes, the values are
//! dropped and their callbacks cancelled. When a callback runs, it moves its value from
//! the slab to the expired list (under the queue's lock, so exactly once) and wakes the
//! consumers waiting.
//!
//! A value the wheel cannot time (see [`DelayQueue`]'s `# Shutdown`) moves to a
//! small fallback set ordered by deadline, in the same slab; consumers that find
//! nothing expired poll the queue's one [`Sleep`] for its first deadline, with a
//! waker that wakes them all. While only the wheel times values, that sleep waits at
//! a far deadline, for the timer to drain it at shutdown or loss. Consumers poll it
//! only when what it waits for changed (`State::armed`), so a consumer that waits
//! again costs nothing more than before.
//!
//! A [`Key`] is the value's slab index and a serial number the queue never hands out
//! twice (it would take 2^64 inserts), so a key whose value was removed, expired or
//! cleared names nothing, however often its slot has been reused since. Each queue's
//! serials start 2^32 past the last queue's (`expired::first_serial`), so a key used
//! on another queue names nothing there either, unless one of them has taken 2^32
//! inserts.

use std::cell::Cell;
use std::collections::{BTreeSet, BinaryHeap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_core::Stream;
use slab::Slab;
use tokio::time::Instant;

mod expired;
mod state;

pub use expired::{Expired, Key, TryInsertError};

use self::expired::{first_serial, Due};
use self::state::{lock, slot, Aim, Item, State, Timing};
use crate::clock::deadline_after;
use crate::sync::{Mutex, MutexGuard};
use crate::{Sleep, Timer};

/// A queue of values that come out, through [`poll_expired`](DelayQueue::poll_expired)
/// or the [`Stream`] impl, once their deadlines pass: in deadline order, never early,
/// less than a tick and a millisecond late (the timer's tick).
///
/// [`Stream`]: https://docs.rs/futures-core/0.3/futures_core/stream/trait.Stream.html
///
/// A `DelayQueue` is a handle: clones share the queue, and it is `Send + Sync` when
/// `T: Send`. Any task inserts, [`remove`](DelayQueue::remove)s and
/// [`reset`](DelayQueue::reset)s; any number of consumers take expired values, each
/// value going to exactly one of them. Insert, remove and reset are O(1).
///
/// * **Empty is not finished.** A consumer of an empty queue waits (`Pending`), and
///   gets a value inserted later by any task when it expires (the expiry wakes it; the
///   first insert into a queue with no value pending wakes it once too, to arm the
///   queue's sleep: see `# Shutdown`). It gets `None` only once the
///   queue is [`close`](DelayQueue::close)d and nothing is left in it, pending or
///   expired; a `remove` or `clear` that leaves a closed queue so wakes its consumers.
/// * **Stale keys are inert.** [`remove`](DelayQueue::remove),
///   [`reset`](DelayQueue::reset) and [`deadline`](DelayQueue::deadline) return
///   `None`/`false` for a key whose value expired, was removed or cleared, never panic,
///   and never reach a value inserted later in the same slot.
/// * **Several consumers.** Every consumer waiting is woken when values expire (or the
///   queue closes); those that find nothing left wait again. No wakeup is lost when a
///   woken consumer is dropped before taking anything. The queue keeps one waker per
///   waiting task, until it wakes them: a task that gives up waiting (a `select!` or
///   a `timeout` around [`next_expired`](DelayQueue::next_expired)) leaves its waker
///   there until then, so prefer long-lived consumers to many short-lived ones.
/// * **Order.** Expired values wait in deadline order. Values whose deadlines fall in
///   the same tick may come out in either order. Each value's expiry is a callback on
///   the timer: on a timer whose [`Executor`](crate::Executor) is not `Inline`, it runs
///   there, and that executor's delay adds to the lateness.
///
/// The values live in the queue, not in the timer: dropping the last handle drops them
/// and cancels their timers. (So a value that holds a handle of its own queue keeps
/// the queue alive, as any `Arc` cycle does, until it is taken, removed or cleared.)
///
/// # Errors
///
/// A value normally takes one pending callback on the timer. Where the timer refuses
/// one (shut down, at [`Builder::max_pending`](crate::Builder::max_pending), or its
/// paused clock past the end of its range),
/// [`try_insert`](DelayQueue::try_insert) returns the value in a [`TryInsertError`];
/// [`insert`](DelayQueue::insert) keeps it: the queue times it itself, never early
/// and never lost, and never panics (see `# Shutdown`). Such values cost
/// O(log n) to insert, remove and reset, and are timed on the timer's tick only while
/// the timer runs.
///
/// # Shutdown
///
/// Never early holds here too. A value the wheel can no longer time — refused by the
/// timer, still pending when the timer is [shut down](Timer::shutdown) or its
/// driver's runtime is dropped, or whose callback, returned unrun by
/// [`Timer::shutdown`] as an [`Unfired`](crate::Unfired), is dropped — moves to the
/// queue's fallback: a set by deadline, whose first deadline one [`Sleep`] of the
/// timer waits for while a consumer waits, timed as every `Sleep` of a stopped timer
/// is (on the polling task's runtime if it is the driver's, otherwise on the real
/// clock). It comes out no earlier than its deadline, and `remove`, `reset` and
/// `deadline` keep working on it. Running such an `Unfired` is asking for the value
/// now: it expires at once.
///
/// While values are pending and a consumer waits, the queue keeps that `Sleep`
/// registered at a far deadline (one entry per queue, counted by
/// [`Timer::pending`]), so that the timer's shutdown or loss wakes its consumers.
///
/// # Examples
///
/// Several consumers, one producer:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio_wheel::{DelayQueue, Timer};
///
/// let timer = Timer::new();
/// let queue = DelayQueue::with_timer(&timer);
/// let workers: Vec<_> = (0..2)
///     .map(|_| {
///         let queue = queue.clone();
///         tokio::spawn(async move {
///             let mut taken = Vec::new();
///             while let Some(expired) = queue.next_expired().await {
///                 taken.push(expired.into_inner());
///             }
///             taken
///         })
///     })
///     .collect();
/// for n in 0..10 {
///     queue.insert(n, Duration::from_millis(100 * n));
/// }
/// tokio::time::sleep(Duration::from_secs(2)).await;
/// queue.close();
/// let mut all = Vec::new();
/// for worker in workers {
///     all.extend(worker.await.unwrap());
/// }
/// all.sort();
/// assert_eq!(all, (0..10).collect::<Vec<_>>());
/// # }
/// ```
pub struct DelayQueue<T> {
    queue: Arc<Queue<T>>,
}

/// The queue all handles share.
struct Queue<T> {
    timer: Timer,
    state: Mutex<State<T>>,
    /// The queue's one [`Sleep`] (see [`Aim`]). Taken before `state` when both are
    /// held, never while `state` is: `wake_all`, which takes `state`, may be woken
    /// from inside the sleep.
    sleep: Mutex<Option<(Aim, Sleep)>>,
    /// The waker `sleep` is polled with: it wakes every consumer waiting, so that no
    /// wakeup is lost with the consumer that last polled it.
    wake_all: Waker,
}

impl<T: Send + 'static> DelayQueue<T> {
    /// A queue on the [default timer](crate#default-timer): the process-wide one,
    /// which follows the real clock, or with the feature `test-util` the caller's
    /// runtime's, which follows its clock, paused or not.
    ///
    /// # Panics
    ///
    /// As [`sleep`](crate::sleep): if the default timer cannot be created.
    pub fn new() -> Self {
        crate::default::with_default(DelayQueue::with_timer)
    }

    /// A queue whose deadlines `timer` keeps (and whose tick bounds their lateness).
    pub fn with_timer(timer: &Timer) -> Self {
        DelayQueue {
            queue: Arc::new_cyclic(|queue| Queue {
                timer: timer.clone(),
                state: Mutex::new(State {
                    pending: Slab::new(),
                    fallback: BTreeSet::new(),
                    next_serial: first_serial(),
                    expired: BinaryHeap::new(),
                    waiting: Vec::new(),
                    armed: None,
                    closed: false,
                }),
                sleep: Mutex::new(None),
                wake_all: Waker::from(Arc::new(WakeAll {
                    queue: queue.clone(),
                })),
            }),
        }
    }

    /// Inserts `value`, to expire `timeout` from now. O(1).
    ///
    /// If the timer refuses it (shut down, at its
    /// [`max_pending`](crate::Builder::max_pending), or out of range), the value is kept all the same,
    /// and still expires no earlier than its deadline: the queue times it itself, as
    /// the timer times its sleeps after a shutdown (see [`DelayQueue`]'s `# Errors`).
    /// Use [`try_insert`](DelayQueue::try_insert) to be told instead.
    pub fn insert(&self, value: T, timeout: Duration) -> Key {
        self.insert_at(
            value,
            deadline_after(self.queue.timer.shared().now(), timeout),
        )
    }

    /// Inserts `value`, to expire at `when` (at once, on the timer's next tick, if
    /// `when` has passed). O(1). As [`insert`](DelayQueue::insert) if the timer refuses it.
    pub fn insert_at(&self, value: T, when: Instant) -> Key {
        match self.try_insert_at(value, when) {
            Ok(key) => key,
            Err(refused) => self.insert_fallback(refused.value, when),
        }
    }

    /// Inserts `value`, to expire `timeout` from now, or gives it back.
    ///
    /// # Errors
    ///
    /// [`TryInsertError`], holding the value, if the timer is shut down
    /// ([`Error::Shutdown`](crate::Error::Shutdown)), already holds its
    /// [`max_pending`](crate::Builder::max_pending) callbacks ([`Error::AtCapacity`](crate::Error::AtCapacity)),
    /// or its (paused) clock has passed the end of its range ([`Error::OutOfRange`](crate::Error::OutOfRange)).
    pub fn try_insert(&self, value: T, timeout: Duration) -> Result<Key, TryInsertError<T>> {
        self.try_insert_at(
            value,
            deadline_after(self.queue.timer.shared().now(), timeout),
        )
    }

    /// Inserts `value`, to expire at `when`, or gives it back.
    ///
    /// # Errors
    ///
    /// As [`try_insert`](DelayQueue::try_insert).
    pub fn try_insert_at(&self, value: T, when: Instant) -> Result<Key, TryInsertError<T>> {
        let mut state = lock(&self.queue.state);
        let State {
            pending,
            next_serial,
            ..
        } = &mut *state;
        let slot = pending.vacant_entry();
        let key = Key {
            index: slot.key(),
            serial: *next_serial,
        };
        let expiry = Expiry {
            queue: Arc::downgrade(&self.queue),
            key,
        };
        // Scheduled under the queue's lock, so that the callback, which takes it, finds
        // the value in its slot. It never runs on this stack (a past deadline runs on
        // the driver's next step), and the closure, dropped unrun on an error, is
        // dropped quietly: it would take the lock held here.
        match quietly(|| self.queue.timer.schedule_at(when, move || expiry.expire())) {
            Ok(timer) => {
                slot.insert(Item {
                    value,
                    serial: key.serial,
                    timing: Timing::Wheel(timer),
                });
                *next_serial = next_serial.wrapping_add(1);
                // Consumers waiting with no sleep armed must arm one, to learn of
                // the timer's loss: woken here, once, when the first value comes.
                let waiting = if state.armed.is_none() {
                    std::mem::take(&mut state.waiting)
                } else {
                    Vec::new()
                };
                drop(state);
                waiting.into_iter().for_each(Waker::wake);
                Ok(key)
            }
            Err(error) => Err(TryInsertError { error, value }),
        }
    }

    /// Inserts a value the timer refused into the fallback.
    #[cold]
    fn insert_fallback(&self, value: T, when: Instant) -> Key {
        let shut = self.queue.timer.is_shutdown();
        let mut state = lock(&self.queue.state);
        let key = Key {
            index: state.pending.vacant_key(),
            serial: state.next_serial,
        };
        state.next_serial = state.next_serial.wrapping_add(1);
        state.pending.insert(Item {
            value,
            serial: key.serial,
            timing: Timing::Fallback(when),
        });
        state.fallback.insert((when, key.serial, key.index));
        let waiting = state.rearm(shut);
        drop(state);
        waiting.into_iter().for_each(Waker::wake);
        key
    }
}

impl<T: Send + 'static> Default for DelayQueue<T> {
    /// [`DelayQueue::new`].
    fn default() -> Self {
        DelayQueue::new()
    }
}

impl<T> DelayQueue<T> {
    /// Removes the value `key` names, before its deadline, and returns it; its timer is
    /// cancelled. O(1). `None` if it expired (it is then a consumer's), was removed or
    /// was cleared.
    pub fn remove(&self, key: &Key) -> Option<T> {
        let shut = self.queue.timer.is_shutdown();
        let mut state = lock(&self.queue.state);
        let item = state.take(key)?;
        let mut wake = state.if_ended();
        if wake.is_empty() {
            wake = state.rearm(shut);
        }
        drop(state);
        // The cancel after the lock: if the callback is running already, it waits for
        // the queue's lock and then finds the slot empty.
        let Item { value, timing, .. } = item;
        quietly(|| drop(timing));
        wake.into_iter().for_each(Waker::wake);
        Some(value)
    }

    /// Moves the deadline of the value `key` names to `timeout` from now, earlier or
    /// later, in place. O(1). Returns `false` (and changes nothing) if it expired, was
    /// removed or was cleared.
    #[must_use = "`false` means nothing moved: the value was taken, removed or cleared"]
    pub fn reset(&self, key: &Key, timeout: Duration) -> bool {
        self.reset_at(
            key,
            deadline_after(self.queue.timer.shared().now(), timeout),
        )
    }

    /// Moves the deadline of the value `key` names to `when`; see
    /// [`reset`](DelayQueue::reset). A `when` already past expires it on the timer's
    /// next tick.
    #[must_use = "`false` means nothing moved: the value was taken, removed or cleared"]
    pub fn reset_at(&self, key: &Key, when: Instant) -> bool {
        let mut state = lock(&self.queue.state);
        let State {
            pending, fallback, ..
        } = &mut *state;
        let Some(item) = slot(pending, key) else {
            return false;
        };
        let stopped = match &item.timing {
            // Under the queue's lock, so that a `remove` cannot drop the handle
            // meanwhile.
            Timing::Wheel(timer) if timer.reset_at(when) => return true,
            // Not moved: the callback is taking the value out (or is waiting for this
            // lock to), or the timer's shutdown or loss took it from the wheel.
            Timing::Wheel(timer) if !self.queue.timer.is_shutdown() || timer.is_expired() => {
                return false;
            }
            Timing::Wheel(_) => Some(std::mem::replace(&mut item.timing, Timing::Fallback(when))),
            Timing::Fallback(deadline) => {
                fallback.remove(&(*deadline, key.serial, key.index));
                item.timing = Timing::Fallback(when);
                None
            }
        };
        fallback.insert((when, key.serial, key.index));
        let wake = state.rearm(self.queue.timer.is_shutdown());
        drop(state);
        quietly(|| drop(stopped));
        wake.into_iter().for_each(Waker::wake);
        true
    }

    /// The deadline of the value `key` names, if it is still pending.
    pub fn deadline(&self, key: &Key) -> Option<Instant> {
        lock(&self.queue.state)
            .get(key)
            .map(|item| item.timing.deadline())
    }

    /// How many values the queue holds: pending, or expired and not yet taken.
    pub fn len(&self) -> usize {
        let state = lock(&self.queue.state);
        state.pending.len() + state.expired.len()
    }

    /// Whether the queue holds no value, pending or expired. (An empty queue is not
    /// finished: its consumers wait for values inserted later.)
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every value, pending or expired; their keys become inert.
    pub fn clear(&self) {
        let mut state = lock(&self.queue.state);
        let pending = std::mem::take(&mut state.pending);
        let expired = std::mem::take(&mut state.expired);
        state.fallback.clear();
        let mut wake = state.if_ended();
        if wake.is_empty() {
            wake = state.rearm(false);
        }
        drop(state);
        // Woken first: a value's `Drop` may panic, and the consumers are out of
        // `waiting` already. Values dropped and timers cancelled after the lock.
        wake.into_iter().for_each(Waker::wake);
        quietly(|| drop((pending, expired)));
    }

    /// Closes the queue: consumers get `None` once nothing is left in it (after taking
    /// every value still pending, as each expires). Inserts are still accepted, and
    /// delay that end.
    pub fn close(&self) {
        let mut state = lock(&self.queue.state);
        state.closed = true;
        let waiting = std::mem::take(&mut state.waiting);
        drop(state);
        waiting.into_iter().for_each(Waker::wake);
    }

    /// Whether [`close`](DelayQueue::close) was called.
    pub fn is_closed(&self) -> bool {
        lock(&self.queue.state).closed
    }

    /// Takes the next expired value: `Ready(Some(_))` with it, `Pending` (waking the
    /// task when a value expires or the queue closes) if there is none yet, and
    /// `Ready(None)` once the queue is closed and empty.
    pub fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        let shut = self.queue.timer.is_shutdown();
        let mut state = lock(&self.queue.state);
        if state.fallback_may_come_first() {
            drop(state);
            if let Some(expired) = self.aim_sleep(shut) {
                return Poll::Ready(Some(expired));
            }
            state = lock(&self.queue.state);
        }
        if let Some(Due(expired)) = state.expired.pop() {
            // The last value taken: the sleep, if armed, has nothing to wait for.
            let idle = state.armed.is_some() && state.aim(shut).is_none();
            drop(state);
            if idle {
                self.disarm(shut);
            }
            return Poll::Ready(Some(expired));
        }
        if state.is_ended() {
            return Poll::Ready(None);
        }
        let waker = cx.waker();
        if !state.waiting.iter().any(|w| w.will_wake(waker)) {
            state.waiting.push(waker.clone());
        }
        let stopped = if shut { state.stop_wheel() } else { Vec::new() };
        let aimed = state.armed == state.aim(shut);
        drop(state);
        quietly(|| drop(stopped));
        if aimed {
            return Poll::Pending;
        }
        match self.aim_sleep(shut) {
            Some(expired) => Poll::Ready(Some(expired)),
            None => Poll::Pending,
        }
    }

    /// Drops the queue's sleep if it still has nothing to wait for. Unlike
    /// [`aim_sleep`](DelayQueue::aim_sleep) it never expires a value, so a consumer
    /// that already took one loses none: a value the fallback got meanwhile waits for
    /// the next consumer (its insert woke those waiting).
    #[cold]
    fn disarm(&self, shut: bool) {
        let mut sleep = self.queue.lock_sleep();
        let mut state = lock(&self.queue.state);
        if state.aim(shut).is_some() {
            return;
        }
        state.armed = None;
        drop(state);
        let idle = sleep.take();
        drop(sleep);
        drop(idle);
    }

    /// Aims the queue's sleep where [`State::aim`] says, and polls it with
    /// `wake_all`; or drops it, if nothing is to be waited for. Returns a value the
    /// fallback expired if the sleep had fired. The consumer polling is among
    /// `waiting`, or has an expired value to take if this returns none.
    #[cold]
    fn aim_sleep(&self, shut: bool) -> Option<Expired<T>> {
        let mut sleep = self.queue.lock_sleep();
        // Bounded: a round ends `Pending` unless its sleep had fired, which a fresh
        // sleep (a far one, or at the fallback's new first deadline) seldom has.
        for _ in 0..3 {
            let mut state = lock(&self.queue.state);
            let aim = state.aim(shut);
            let aimed = state.armed == aim;
            state.armed = aim;
            drop(state);
            let Some(aim) = aim else {
                let idle = sleep.take();
                drop(sleep);
                drop(idle);
                return None;
            };
            if aimed && sleep.is_some() {
                return None;
            }
            if sleep.as_ref().is_none_or(|(at, _)| *at != aim) {
                let timer = &self.queue.timer;
                let fresh = match aim {
                    Aim::Stop => timer.sleep(Duration::MAX),
                    Aim::Due(deadline) => timer.sleep_until(deadline),
                };
                *sleep = Some((aim, fresh));
            }
            let (_, current) = sleep.as_mut().expect("aimed above");
            let mut cx = Context::from_waker(&self.queue.wake_all);
            if Pin::new(current).poll(&mut cx).is_pending() {
                if !shut && self.queue.timer.is_shutdown() {
                    // Shut down before the sleep registered: no drain woke it, and the
                    // wheel's values must move to the fallback.
                    self.queue.wake_all.wake_by_ref();
                }
                return None;
            }
            let mut state = lock(&self.queue.state);
            if state.armed == Some(aim) {
                state.armed = None;
            }
            let Aim::Due(through) = aim else {
                // Its far deadline reached (a paused clock jumped there): a fresh one.
                drop(state);
                let fired = sleep.take();
                drop(fired);
                continue;
            };
            let wake = state.expire_fallback(through);
            let first = state.expired.pop().map(|Due(expired)| expired);
            drop(state);
            drop(sleep);
            wake.into_iter().for_each(Waker::wake);
            if first.is_some() {
                return first;
            }
            // Its first deadline was removed or reset meanwhile: aim again.
            sleep = self.queue.lock_sleep();
        }
        drop(sleep);
        self.queue.wake_all.wake_by_ref();
        None
    }

    /// Waits for the next expired value; `None` once the queue is closed and empty. See
    /// [`poll_expired`](DelayQueue::poll_expired).
    ///
    /// # Cancellation
    ///
    /// Cancel-safe: a value is taken only when this completes.
    pub async fn next_expired(&self) -> Option<Expired<T>> {
        std::future::poll_fn(|cx| self.poll_expired(cx)).await
    }
}

/// A value's callback: expires the value when it runs, the wheel having reached its
/// deadline, or the user running the [`Unfired`](crate::Unfired) that
/// [`Timer::shutdown`] returned it as ("expire it now"). Dropped unrun (such an
/// `Unfired` dropped), it moves the value to the queue's fallback, which still times
/// it, so that the value is neither stranded nor early. The queue's own drops of it (a
/// remove, a clear, a refused insert) are quiet: the value is gone or was never in,
/// and the check would take the queue's lock.
struct Expiry<T> {
    /// Empty once the callback has run.
    queue: Weak<Queue<T>>,
    key: Key,
}

impl<T> Expiry<T> {
    /// The callback's body.
    fn expire(mut self) {
        let queue = std::mem::take(&mut self.queue);
        Queue::expire(&queue, self.key);
    }
}

impl<T> Drop for Expiry<T> {
    fn drop(&mut self) {
        if !QUIET.with(Cell::get) {
            Queue::unfired(&self.queue, self.key);
        }
    }
}

thread_local! {
    /// Set while this thread drops callbacks the queue itself took out of the timer.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with [`QUIET`] set: callbacks it drops on this thread do nothing.
fn quietly<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            QUIET.with(|quiet| quiet.set(self.0));
        }
    }
    let _restore = Restore(QUIET.with(|quiet| quiet.replace(true)));
    f()
}

impl<T> Queue<T> {
    /// Takes the lock of the queue's sleep: before `state`'s, never while holding it.
    fn lock_sleep(&self) -> MutexGuard<'_, Option<(Aim, Sleep)>> {
        // No user code runs under it but the queue's own waker's clone and drop.
        self.sleep.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The callback of the value `key` names ran: moves the value to the expired list
    /// and wakes the consumers, unless it was removed (or the queue dropped) meanwhile.
    fn expire(queue: &Weak<Queue<T>>, key: Key) {
        let Some(queue) = queue.upgrade() else {
            return;
        };
        let mut state = lock(&queue.state);
        let Some(item) = state.take(&key) else {
            return;
        };
        let Item { value, timing, .. } = item;
        let waiting = state.push_expired(Expired {
            value,
            key,
            deadline: timing.deadline(),
        });
        drop(state);
        if let Timing::Wheel(timer) = timing {
            // Its callback is this one, running: nothing to cancel.
            timer.drop_from_callback();
        }
        waiting.into_iter().for_each(Waker::wake);
    }

    /// The callback of the value `key` names was dropped unrun: the fallback times the
    /// value from now on.
    #[cold]
    fn unfired(queue: &Weak<Queue<T>>, key: Key) {
        let Some(queue) = queue.upgrade() else {
            return;
        };
        let shut = queue.timer.is_shutdown();
        let mut state = lock(&queue.state);
        let State {
            pending, fallback, ..
        } = &mut *state;
        let Some(item) = slot(pending, &key) else {
            return;
        };
        let Timing::Wheel(timer) = &item.timing else {
            return;
        };
        let deadline = timer.deadline();
        let stopped = std::mem::replace(&mut item.timing, Timing::Fallback(deadline));
        fallback.insert((deadline, key.serial, key.index));
        let waiting = state.rearm(shut);
        drop(state);
        quietly(|| drop(stopped));
        waiting.into_iter().for_each(Waker::wake);
    }
}

/// The waker of the queue's sleep: the sleep woke (it fired, or its timer drained it
/// at shutdown or loss), so it is no longer armed, and every consumer waiting polls
/// again (one aims it anew).
struct WakeAll<T> {
    queue: Weak<Queue<T>>,
}

impl<T: Send + 'static> Wake for WakeAll<T> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let Some(queue) = self.queue.upgrade() else {
            return;
        };
        let mut state = lock(&queue.state);
        state.armed = None;
        let waiting = std::mem::take(&mut state.waiting);
        drop(state);
        waiting.into_iter().for_each(Waker::wake);
    }
}

impl<T> Clone for DelayQueue<T> {
    fn clone(&self) -> Self {
        DelayQueue {
            queue: self.queue.clone(),
        }
    }
}

impl<T> Stream for DelayQueue<T> {
    type Item = Expired<T>;

    /// [`poll_expired`](DelayQueue::poll_expired): `Pending` while the queue is
    /// empty, `None` only once it is closed and empty.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.poll_expired(cx)
    }
}

impl<T> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.queue.state);
        f.debug_struct("DelayQueue")
            .field("pending", &state.pending.len())
            .field("fallback", &state.fallback.len())
            .field("expired", &state.expired.len())
            .field("waiting", &state.waiting.len())
            .field("closed", &state.closed)
            .field("timer", &self.queue.timer)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `cfg(test)` the wheel's generations wrap every three inserts, so the
    /// callbacks of values removed here leave wheel keys whose index and generation a
    /// later value's callback shares: the queue's serials, and the wheel's steps under
    /// them, keep every stale key inert all the same.
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
        assert_eq!(timer.pending(), 1);
        let expired = queue.next_expired().await.unwrap();
        assert_eq!((expired.key(), expired.into_inner()), (keep, u32::MAX));
        assert!(queue.is_empty());
    }
}
