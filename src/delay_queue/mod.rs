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
//! # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
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
//! tokio-util's paths work too: `tokio_util::time::delay_queue::{self, DelayQueue}`
//! is `tokio_wheel::delay_queue::{self, DelayQueue}`, and its `delay_queue::Key` and
//! `delay_queue::Expired` are these; every item is also at the crate root.

// Implementation
//
// tokio-util's shape, shared, and sharded: the values live in wheels of the queue's
// own (the crate's [`Wheel`](crate::wheel::Wheel), in steps of the timer's clock),
// one per shard, each under the shard's lock, so insert, remove and reset touch one
// shard and nothing else; each shard keeps one [`Sleep`] on the timer, at the step of
// its earliest value, for consumers to wait on. Threads that insert at once work in
// shards of their own ([`queue`] says how), rather than pass one lock and one wheel
// between their cores. A consumer's poll locks the shards in use, reads the timer's
// clock and moves what is due to each wheel's due list, in place (the values of every
// step that has ended, and those of the step under way whose deadlines have passed),
// then takes the earliest first: due means ready, whether or not the driver has
// turned. A value stays in its wheel's storage until a consumer takes it, so its key
// finds it until then (`remove` gives it back).
//
// The queue ends like a channel: empty, and closed or with no other handle ([`handle`]).
// The sleeps' waker wakes every consumer waiting ([`waiting`]), so no wakeup is lost
// with a consumer that is dropped before it polls again. Consumers register under an
// owner (a [`NextExpired`] future, or the handle they poll) that takes its
// registration with it when it goes. An insert or reset earlier than the step its
// shard's sleep waits for, while consumers wait, moves that sleep itself, or wakes
// them if the value is due already. A remove leaves the sleep where it is: at worst
// it wakes the consumers early, and they wait again.
//
// A [`Key`] is the value's shard, its index in the shard's storage and a serial
// number the shard never hands out twice (it would take 2^64 inserts), so a key
// whose value was taken, removed or cleared names nothing, however often its slot has
// been reused since. Each queue's serials start 2^32 past the last queue's
// (`expired::first_serial`), so a key used on another queue names nothing there
// either, unless a shard of one of them has taken 2^32 inserts.

use std::fmt;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_core::Stream;
use tokio::time::Instant;

mod capacity;
mod expired;
mod handle;
mod next_expired;
mod queue;
mod shard;
mod state;
mod waiting;

pub use expired::{Expired, Key, TryInsertError};
pub use next_expired::NextExpired;

use self::expired::first_serial;
use self::handle::Handle;
use self::queue::{discard, shard_count, Queue};
use self::shard::Shard;
use self::state::{lock, State, IDLE};
use self::waiting::Waiting;
use crate::sites::{SiteSource, Tags};
use crate::sync::{AtomicUsize, Mutex};
use crate::timer::Timer;
use crate::wheel::Wheel;

/// A queue of values that come out, through [`poll_expired`](DelayQueue::poll_expired),
/// [`next_expired`](DelayQueue::next_expired) or the [`Stream`] impl, once their
/// deadlines pass: in deadline order, never early; ready at the first poll after the
/// deadline, and a consumer that waits is woken less than a tick and a millisecond
/// after it (the timer's tick), plus the runtime's scheduling delay.
///
/// [`Stream`]: https://docs.rs/futures-core/0.3/futures_core/stream/trait.Stream.html
///
/// A `DelayQueue` is a handle: clones share the queue, and it is `Send + Sync` when
/// `T: Send`. Any task inserts, [`remove`](DelayQueue::remove)s and
/// [`reset`](DelayQueue::reset)s; any number of consumers take expired values, each
/// value going to exactly one of them. Insert, remove and reset are O(1) and touch
/// only the queue.
///
/// * **Due means ready.** A value whose deadline has passed on the timer's clock is
///   ready at the next poll, without waiting for the timer's driver to turn: one
///   inserted or reset to a deadline already past, or one whose deadline the (paused)
///   clock has just reached. A consumer waiting is woken at once by such an insert or
///   reset.
/// * **The queue's until taken.** A value whose deadline has passed is the queue's
///   until a consumer takes it: [`remove`](DelayQueue::remove) gives it back,
///   [`reset`](DelayQueue::reset) moves it, [`deadline`](DelayQueue::deadline) and
///   [`peek`](DelayQueue::peek) see it.
/// * **It ends like a channel.** A consumer of an empty queue gets `None` once no
///   handle but the one it polls is left (nothing can insert any more: a one-owner
///   queue's `while let Some(e) = queue.next().await` drain ends), or once the queue
///   is [`close`](DelayQueue::close)d; while another handle lives, it waits
///   (`Pending`) and gets a value inserted later by any task when it expires. The drop
///   that leaves one handle, and a `remove` or `clear` that empties a queue so ended,
///   wake the consumers waiting. Handles are counted, not tasks: tasks sharing one
///   handle (an `Arc<DelayQueue>`) count as one; give each a clone.
/// * **Stale keys are inert.** [`remove`](DelayQueue::remove),
///   [`reset`](DelayQueue::reset) and [`deadline`](DelayQueue::deadline) return
///   `None`/`false` for a key whose value was taken, removed or cleared, never panic,
///   and never reach a value inserted later in the same slot.
/// * **Several consumers.** Every consumer waiting is woken when values expire (or the
///   queue ends); those that find nothing left wait again. No wakeup is lost when a
///   woken consumer is dropped before taking anything. A consumer that gives up
///   waiting (a `select!` or a `timeout` around
///   [`next_expired`](DelayQueue::next_expired)) leaves nothing behind; one that polls
///   through [`poll_expired`](DelayQueue::poll_expired) or the `Stream` is registered
///   under the handle it polls, until that handle is dropped or it is woken.
/// * **Order.** Values come out in the order of their deadlines' steps (a quarter of
///   the timer's tick); within one step, in either order. A value found due while its
///   step is under way (its deadline passed) comes out with the step before, after
///   the values already due there; one inserted into that earlier step's past later
///   comes out after it.
///
/// The values live in the queue, not in the timer: dropping the last handle drops
/// them. (So a value that holds a handle of its own queue keeps the queue alive, as
/// any `Arc` cycle does, until it is taken, removed or cleared.) None of them is a
/// timer's callback: [`Timer::pending`] counts the queue's sleep while consumers wait
/// (one for each shard that held values when a consumer last aimed it: one unless
/// several threads insert at once), and [`Timer::shutdown`] returns none of them.
///
/// # Migration from tokio-util
///
/// Every method of tokio-util's `DelayQueue` has a counterpart here; docs/GUIDE.md has
/// the table. Where tokio-util panics (a stale key in `remove`, `reset`, `deadline`)
/// this answers `None` or `false`; `try_remove`'s job is `remove`'s. There is no
/// `compact`: a removed value's room is taken by the next insert, and keys never
/// move, so nothing needs compacting; [`shrink_to_fit`](DelayQueue::shrink_to_fit)
/// gives back the room past the last value held. An empty queue with one handle is
/// `Ready(None)`, as tokio-util's; one that another handle could still insert into is
/// `Pending` (until [`close`](DelayQueue::close)).
///
/// # Errors
///
/// [`try_insert`](DelayQueue::try_insert) returns the value in a [`TryInsertError`]
/// after the timer's [shutdown](Timer::shutdown), or once its (paused) clock has run
/// past the end of its range; [`insert`](DelayQueue::insert) keeps the value in both
/// cases (see `# Shutdown`, and [`deadline`](DelayQueue::deadline) for the range).
///
/// # Shutdown
///
/// Never early holds here too. After the timer's [shutdown](Timer::shutdown), or once
/// its driver's runtime is gone, the values stay the queue's and come out no earlier
/// than their deadlines: the queue's sleep is timed as every `Sleep` of a stopped
/// timer is (on the polling task's runtime if it is the driver's, otherwise on the
/// real clock), and the consumers' polls read the timer's clock as before.
///
/// # Examples
///
/// Several consumers, one producer:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
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
    queue: Handle<T>,
}

impl<T: Send + 'static> DelayQueue<T> {
    /// A queue on the [default timer](crate#default-timer): the process-wide one,
    /// which follows the real clock, or with the feature `test-util` the caller's
    /// runtime's, which follows its clock, paused or not.
    ///
    /// The timer is the one of the caller's runtime *now*: a queue made outside a
    /// runtime (before `block_on`, in a `static`) is the process-wide timer's, on the
    /// real clock, wherever it is polled later, a paused test included. Make it on the
    /// runtime whose clock it should follow, or use [`with_timer`](DelayQueue::with_timer).
    ///
    /// # Panics
    ///
    /// As [`sleep`](crate::sleep): if the default timer cannot be created.
    #[track_caller]
    pub fn new() -> Self {
        DelayQueue::with_capacity(0)
    }

    /// A queue on the [default timer](crate#default-timer) that holds `capacity`
    /// values before it allocates again.
    ///
    /// # Panics
    ///
    /// As [`new`](DelayQueue::new).
    #[track_caller]
    pub fn with_capacity(capacity: usize) -> Self {
        crate::default::with_default(|timer| DelayQueue::build(timer, capacity))
    }

    /// A queue whose deadlines `timer` keeps (and whose tick bounds how late a
    /// waiting consumer is woken).
    ///
    /// # Panics
    ///
    /// In a debug build without the feature `test-util`, on a runtime whose clock is
    /// paused, which `timer` does not follow then (see
    /// [the crate docs](crate#testing-with-the-paused-clock)).
    #[track_caller]
    pub fn with_timer(timer: &Timer) -> Self {
        crate::missing_test_util::check();
        DelayQueue::build(timer, 0)
    }

    fn build(timer: &Timer, capacity: usize) -> Self {
        let shared = timer.shared();
        let clock = shared.clock;
        let waiting = Arc::new(Waiting::new());
        let slots = shared.wheel_size() * clock.steps_per_tick();
        let serial = first_serial();
        let shards = (0..shard_count())
            .map(|shard| Shard {
                state: Mutex::new(State {
                    shard,
                    wheel: Wheel::new(slots),
                    tags: shared.track_call_sites.then(Tags::default),
                    clock,
                    next_serial: serial,
                    sleep: None,
                    armed: (shard > 0).then_some(IDLE),
                    closed: false,
                }),
            })
            .collect();
        let queue = Arc::new(Queue {
            timer: timer.clone(),
            shards,
            in_use: AtomicUsize::new(1),
            handles: AtomicUsize::new(0),
            wake_all: Waker::from(waiting.clone()),
            waiting,
            id: serial >> 32,
        });
        if shared.track_call_sites {
            let source: Arc<dyn SiteSource> = queue.clone();
            shared.register_sites(Arc::downgrade(&source));
        }
        let queue = DelayQueue {
            queue: Handle::new(queue),
        };
        if capacity > 0 {
            queue.reserve(capacity);
        }
        queue
    }

    /// Inserts `value`, to expire `timeout` from now on the timer's clock. O(1).
    /// Durations saturate as [`Timer::sleep`]'s do.
    ///
    /// # Panics
    ///
    /// If the shard the calling thread's inserts go to already holds 2^32 − 1 values
    /// (as a `Vec` panics past its capacity);
    /// [`try_insert`](DelayQueue::try_insert) returns an error instead.
    #[track_caller]
    pub fn insert(&self, value: T, timeout: Duration) -> Key {
        let shared = self.queue.timer.shared();
        let now = shared.now();
        let offset = shared.clock.offset_after(now, timeout);
        self.queue
            .insert(value, offset, Some(now), Location::caller())
            .unwrap_or_else(|e| full(&e))
    }

    /// Inserts `value`, to expire at `when`: ready at the next poll if `when` has
    /// passed. O(1). Far instants saturate as [`deadline`](DelayQueue::deadline)
    /// says.
    ///
    /// # Panics
    ///
    /// As [`insert`](DelayQueue::insert).
    #[track_caller]
    pub fn insert_at(&self, value: T, when: Instant) -> Key {
        let shared = self.queue.timer.shared();
        let offset = shared.clock.offset_of(shared.given(when));
        self.queue
            .insert(value, offset, None, Location::caller())
            .unwrap_or_else(|e| full(&e))
    }

    /// Inserts `value`, to expire `timeout` from now, or gives it back.
    ///
    /// # Errors
    ///
    /// [`TryInsertError`], holding the value, if the timer is shut down
    /// ([`Error::Shutdown`]: the value would be timed by its fallback, see
    /// [`DelayQueue`]'s `# Shutdown`), its (paused) clock has run past the end of its
    /// range ([`Error::OutOfRange`]: the deadline would saturate into the past), or
    /// the shard it would go to holds 2^32 − 1 values ([`Error::AtCapacity`]).
    ///
    /// [`Error::Shutdown`]: crate::error::Error::Shutdown
    /// [`Error::OutOfRange`]: crate::error::Error::OutOfRange
    /// [`Error::AtCapacity`]: crate::error::Error::AtCapacity
    #[track_caller]
    pub fn try_insert(&self, value: T, timeout: Duration) -> Result<Key, TryInsertError<T>> {
        let shared = self.queue.timer.shared();
        let now = shared.now();
        let offset = shared.clock.offset_after(now, timeout);
        self.queue
            .try_insert(value, offset, now, Location::caller())
    }

    /// Inserts `value`, to expire at `when`, or gives it back.
    ///
    /// # Errors
    ///
    /// As [`try_insert`](DelayQueue::try_insert).
    #[track_caller]
    pub fn try_insert_at(&self, value: T, when: Instant) -> Result<Key, TryInsertError<T>> {
        let shared = self.queue.timer.shared();
        let offset = shared.clock.offset_of(shared.given(when));
        self.queue
            .try_insert(value, offset, shared.now(), Location::caller())
    }
}

/// `insert`'s panic on a full queue.
#[cold]
#[track_caller]
fn full<T>(refused: &TryInsertError<T>) -> Key {
    panic!("{refused}")
}

impl<T: Send + 'static> Default for DelayQueue<T> {
    /// [`DelayQueue::new`].
    #[track_caller]
    fn default() -> Self {
        DelayQueue::new()
    }
}

impl<T> DelayQueue<T> {
    /// Removes the value `key` names and returns it, whether its deadline has passed
    /// or not, as long as no consumer took it. O(1). `None` if a consumer took it, it
    /// was removed or cleared, or the key is from another queue.
    pub fn remove(&self, key: &Key) -> Option<T> {
        let mut state = self.queue.lock_key(key)?;
        let (wheel_key, step, _) = state.get(key)?;
        let value = state.wheel.remove_any(wheel_key, step)?.value;
        // The sleep stays where it is, even if nothing is left: at worst it wakes the
        // consumers for nothing once. Standing it down here would make every insert
        // and remove into an otherwise empty shard register and cancel it.
        let emptied_ended = state.wheel.len() == 0 && (state.closed || self.queue.is_sole());
        drop(state);
        // The other shards are looked at only then, under all the locks, and only if
        // a consumer waits: one registers under the lock of every shard in use, this
        // one's included, so one that registered before this removal is counted by
        // now, and one that comes after finds the queue ended itself.
        let wake = if emptied_ended && self.queue.waiting.any() {
            self.queue.wake_if_ended()
        } else {
            Vec::new()
        };
        self.queue.wake(wake);
        Some(value)
    }

    /// Moves the deadline of the value `key` names to `timeout` from now, earlier or
    /// later, in place, whether its deadline has passed or not, as long as no consumer
    /// took it. O(1). Returns `false` (and changes nothing) if a consumer took it, it
    /// was removed or cleared, or the key is from another queue.
    #[must_use = "`false` means nothing moved: the value was taken, removed or cleared"]
    pub fn reset(&self, key: &Key, timeout: Duration) -> bool {
        let shared = self.queue.timer.shared();
        let now = shared.now();
        let offset = shared.clock.offset_after(now, timeout);
        self.queue.reset(key, offset, Some(now))
    }

    /// Moves the deadline of the value `key` names to `when`; see
    /// [`reset`](DelayQueue::reset). A `when` already past makes it ready at the next
    /// poll.
    #[must_use = "`false` means nothing moved: the value was taken, removed or cleared"]
    pub fn reset_at(&self, key: &Key, when: Instant) -> bool {
        let shared = self.queue.timer.shared();
        let offset = shared.clock.offset_of(shared.given(when));
        self.queue.reset(key, offset, None)
    }

    /// The deadline of the value `key` names, while the queue holds it (its deadline
    /// passed or not).
    ///
    /// Exactly the instant it was given, unless that lies beyond the end of the
    /// timer's range (2^44 quarter ticks from the timer's creation: 139 years at a 1 ms
    /// tick, 292 years from a 2.2 ms tick on): such deadlines saturate there, as every
    /// timer's do ([`Sleep::deadline`](crate::Sleep::deadline)), and this reports the saturated instant, which
    /// the value never comes out before. A `Duration::MAX` timeout saturates sooner,
    /// at about 30 years from now.
    pub fn deadline(&self, key: &Key) -> Option<Instant> {
        let state = self.queue.lock_key(key)?;
        let (_, _, item) = state.get(key)?;
        let deadline = state.clock.instant_at(item.deadline);
        drop(state);
        Some(self.queue.timer.shared().reported(deadline))
    }

    /// The key of the value that comes out next: one whose deadline has passed first
    /// (in deadline order), else the one with the earliest deadline; `None` if the
    /// queue is empty. Of several whose deadlines fall in one step (a quarter tick), any.
    pub fn peek(&self) -> Option<Key> {
        let states = self.queue.lock_all();
        // A due value's step is processed, so earlier than any pending one's; one moved
        // due from the step under way (its deadline passed) carries the step before,
        // and its deadline, later than that step's, orders it after them.
        states
            .iter()
            .filter_map(|state| {
                let (key, step, item) = state.wheel.first()?;
                let key = Key::new(state.shard, key.index(), item.serial);
                Some(((step, item.deadline), key))
            })
            .min_by_key(|&(order, _)| order)
            .map(|(_, key)| key)
    }

    /// How many values the queue holds: pending, or due and not yet taken. Counted
    /// with every shard held at once, so that a value moving between shards (removed
    /// from one after it was inserted into another) is counted once.
    pub fn len(&self) -> usize {
        self.queue
            .lock_all()
            .iter()
            .map(|state| state.wheel.len())
            .sum()
    }

    /// Whether the queue holds no value. (An empty queue with other handles is not
    /// finished: its consumers wait for values inserted later.)
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every value, pending or due; their keys become inert. The queue keeps
    /// its room ([`capacity`](DelayQueue::capacity)).
    pub fn clear(&self) {
        let mut states = self.queue.lock_all();
        let (mut values, mut idle) = (Vec::new(), Vec::new());
        for state in states.iter_mut() {
            values.push(state.wheel.take_all());
            idle.extend(state.stand_down_if_empty());
        }
        let wake = if self.queue.is_ended(&states) {
            self.queue.waiting.take()
        } else {
            Vec::new()
        };
        drop(states);
        idle.into_iter().for_each(|sleep| discard(Some(sleep)));
        // Woken first: a value's `Drop` may panic, and the consumers are out of
        // `waiting` already. Values dropped after the lock.
        self.queue.wake(wake);
        drop(values);
    }

    /// Closes the queue: consumers get `None` once nothing is left in it (after taking
    /// every value still pending, as each expires). Inserts are still accepted, and
    /// delay that end.
    pub fn close(&self) {
        let mut states = self.queue.lock_all();
        for state in states.iter_mut() {
            state.closed = true;
        }
        let waiting = self.queue.waiting.take();
        drop(states);
        self.queue.wake(waiting);
    }

    /// Whether [`close`](DelayQueue::close) was called.
    pub fn is_closed(&self) -> bool {
        lock(&self.queue.shards[0].state).closed
    }

    /// Takes the next value whose deadline has passed: `Ready(Some(_))` with it,
    /// `Pending` (waking the task when a value expires, the queue closes or its last
    /// other handle drops) if there is none yet, and `Ready(None)` once the queue is
    /// empty and closed, or empty with no handle but this one.
    ///
    /// A task that waits is registered under this handle until it is woken, or the
    /// handle is dropped; [`next_expired`](DelayQueue::next_expired) registers under
    /// its future instead. Each task that polls one handle and waits keeps its waker
    /// there: tasks that share a handle (an `Arc<DelayQueue>`) and give up waiting
    /// leave theirs until a value expires. Give each consumer a clone of its own, or
    /// use `next_expired`.
    pub fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.queue.poll_expired(cx)
    }

    /// Waits for the next value whose deadline has passed; `None` once the queue is
    /// empty and closed, or empty with no handle but this one. See
    /// [`poll_expired`](DelayQueue::poll_expired).
    ///
    /// # Cancellation
    ///
    /// Cancel-safe: a value is taken only when the future completes, and a future
    /// dropped while it waits (a `select!`, a `timeout`) leaves nothing behind.
    pub fn next_expired(&self) -> NextExpired<'_, T> {
        NextExpired::new(&self.queue)
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

    /// [`poll_expired`](DelayQueue::poll_expired): `None` once the queue is empty and
    /// closed, or empty with no handle but this one; `Pending` while it is empty and
    /// another handle could insert. A later insert through this handle makes it yield
    /// again, as tokio-util's does.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.poll_expired(cx)
    }
}

impl<T> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayQueue")
            .field("len", &self.len())
            .field("waiting", &self.queue.waiting.count())
            .field("closed", &self.is_closed())
            .field("timer", &self.queue.timer)
            .finish()
    }
}

#[cfg(test)]
mod tests;
