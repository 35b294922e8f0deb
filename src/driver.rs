//! The tick task, and the sharded wheels every timer of a [`Timer`](crate::Timer)
//! shares.
//!
//! Everything that knows about time, locking or waking lives here; the
//! [`wheel`](crate::wheel) it drives knows none of it. Futures reach the wheels only
//! through [`Shared`]'s methods, which keep each lock short and never wake a waker,
//! or drop one, while holding it.
//!
//! # Implementation
//!
//! Time is cut into wheel ticks, a quarter of the configured tick each
//! ([`WHEEL_TICKS_PER_TICK`]), counted from the timer's `origin`: tick `k` ends at
//! `origin + k * tick / 4`. Below, "tick" means a wheel tick unless it says otherwise.
//! A deadline goes to the first tick that ends at or after it
//! ([`Clock::tick_at_offset`], rounding up), and the driver processes tick `k` only once
//! the clock has passed its end ([`Clock::tick_now`], rounding down). That pair of
//! roundings is the whole "never early" argument; lateness is the rest of the tick plus
//! however late the runtime woke us.
//!
//! The driver task awaits a `tokio::time::Interval` with
//! [`MissedTickBehavior::Skip`], reset before each wait to the end of the configured
//! tick that holds the wheels' next expiration ([`Clock::wake_tick`]): the earliest
//! deadline, or the moment a far one moves down a level of the wheel (see
//! [`wheel`](crate::wheel)), so a lone far deadline costs a handful of wakeups, not
//! one per revolution. Wheel ticks make expiry finer, not wakeups more frequent. When the runtime wakes us late, each turn
//! processes every tick up to the clock anyway, so `Burst`'s make-up ticks would find
//! nothing to do. With nothing pending the driver waits on a [`Notify`] alone: no
//! wakeups while idle.
//!
//! Tokio rounds the interval's deadline up to its own whole millisecond, counted from
//! the runtime's start, which is not where our ticks end. So the driver asks for the
//! last of Tokio's milliseconds at or before the tick's end, where Tokio fires its own
//! sleeps of that tick, or for the next one if that has passed ([`wake_at`]); and when
//! a turn took so long that the next occupied tick has ended meanwhile, it turns again
//! (after the tasks it woke) instead of waiting for Tokio.
//!
//! There is one wheel per core (`Shard`), each under its own lock; a thread registers
//! in its own shard, and a timer remembers which (`Registration`), so threads that
//! register and cancel at once rarely touch the same lock or cache line. The driver
//! advances every shard to the same tick. (With one lock, 1000 tasks on two workers
//! spent a fifth of their time waiting for it: churn-mt went from 359 to ~130 ns.)
//!
//! A registration wakes the driver only if it is due before the tick the driver is
//! parked until (`Shared::parked_until`), so the common case of a deadline later than
//! ones already pending costs no wakeup at all; [`Shared::park`] explains why none is
//! missed.
//!
//! The driver holds only a `Weak` to [`Shared`] while it waits, so when the last
//! `Timer` clone and the last future or callback handle are dropped (those hold an
//! [`Anchor`], a per-shard strong reference), `Shared` drops, notifies the driver, and
//! the driver ends.

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, AtomicUsize as StdAtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, Weak};
use std::task::{Poll, Waker};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::builder::{Config, MAX_WHEEL_SIZE};
use crate::scheduled::{run_caught, Job, Task};
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard};
use crate::wheel::{InsertError, Key, Wheel, KEY_BITS, MAX_ENTRIES, MAX_TICK};
use crate::{Error, Executor, Stats, Unfired};

/// How many timers one turn of the driver expires before it releases the lock, wakes
/// them and yields to the runtime (style rule 6: bound every drain loop).
const BATCH: usize = 4096;

/// Entries' storage a shard keeps when it empties (~200 KiB); beyond that it is freed,
/// so memory follows the load back down after a burst (the soak test checks it).
const RETAIN: usize = 4096;

/// How many wheel ticks make one configured tick (fewer only when the wheel would
/// otherwise exceed 2^20 slots).
///
/// Tokio wakes the driver whenever its own millisecond grid says so, which is rarely
/// at the end of one of our ticks (see [`wake_at`]). Each turn then fires every wheel
/// tick that has ended: with quarter ticks, a timer whose deadline came early in the
/// configured tick fires at the first wakeup after it, as a Tokio sleep with that
/// deadline would, instead of waiting for the whole tick to end. The driver still
/// asks Tokio to wake it for configured ticks only ([`Clock::wake_tick`]); the one
/// wakeup finer ticks add is a turn right after another that outlasted the next
/// wheel tick ([`wake_at`]). It costs 4 × `wheel_size` list heads (16 KiB for the
/// default 1024) per wheel. Measured on the expiry workload (1 ms tick), before that
/// second turn existed: p50 lateness 1.19–1.36 → 0.90–0.95 ms, p99 2.26–2.48 →
/// 1.63–1.79 ms, tokio's own 1.12–1.14 and 2.17–2.33.
const WHEEL_TICKS_PER_TICK: usize = 4;

/// Maps instants to wheel ticks and back.
///
/// Wheel tick `k` ends at `origin + k * tick / per_tick` (`per_tick` is
/// [`WHEEL_TICKS_PER_TICK`], or fewer for the largest wheels); below, "tick" without
/// "configured" means a wheel tick.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    /// The configured tick, as [`Timer::tick`](crate::Timer::tick) reports it.
    tick: Duration,
    /// Wheel ticks per configured tick.
    per_tick: u64,
    /// A wheel tick, in nanoseconds.
    tick_ns: u64,
}

impl Clock {
    fn new(origin: Instant, tick: Duration, per_tick: usize) -> Self {
        let per_tick = u64::try_from(per_tick.max(1)).unwrap_or(1);
        let tick_ns = (u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX) / per_tick).max(1);
        Clock {
            origin,
            tick,
            per_tick,
            tick_ns,
        }
    }

    /// The first tick that ends at or after `deadline` (saturating). The code uses
    /// [`tick_at_offset`](Clock::tick_at_offset), on the offsets it stores instead.
    #[cfg(test)]
    pub(crate) fn tick_at(&self, deadline: Instant) -> u64 {
        self.ticks_rounding_up(nanos(deadline.saturating_duration_since(self.origin)))
    }

    /// The first tick that ends at or after `ns` past the origin (saturating).
    fn ticks_rounding_up(&self, ns: u64) -> u64 {
        (ns / self.tick_ns + u64::from(ns % self.tick_ns != 0)).min(MAX_TICK)
    }

    /// `deadline` as signed nanoseconds from the origin, saturating at ±292 years:
    /// how a `Sleep` stores its deadline in 8 bytes rather than an `Instant`'s 16.
    pub(crate) fn offset_of(&self, deadline: Instant) -> i64 {
        if deadline >= self.origin {
            i64::try_from(nanos(deadline - self.origin)).unwrap_or(i64::MAX)
        } else {
            -i64::try_from(nanos(self.origin - deadline)).unwrap_or(i64::MAX)
        }
    }

    /// The instant `offset` nanoseconds from the origin.
    pub(crate) fn instant_at(&self, offset: i64) -> Instant {
        let d = Duration::from_nanos(offset.unsigned_abs());
        if offset >= 0 {
            self.origin
                .checked_add(d)
                .unwrap_or_else(|| far_future(self.origin))
        } else {
            self.origin.checked_sub(d).unwrap_or(self.origin)
        }
    }

    /// Whether the tick of the deadline at `offset` is at or before `elapsed`, i.e.
    /// `tick_at_offset(offset) <= elapsed`, with a multiplication instead of the
    /// division: a `Sleep` asks this on every poll and drop.
    pub(crate) fn is_processed(&self, offset: i64, elapsed: u64) -> bool {
        match u64::try_from(offset) {
            // ceil(ns / tick) <= elapsed  <=>  ns <= elapsed * tick
            Ok(ns) => elapsed >= MAX_TICK || ns <= elapsed.saturating_mul(self.tick_ns),
            Err(_) => true,
        }
    }

    /// The first tick that ends at or after the deadline `offset` (saturating).
    pub(crate) fn tick_at_offset(&self, offset: i64) -> u64 {
        u64::try_from(offset).map_or(0, |ns| self.ticks_rounding_up(ns))
    }

    /// The offset of `duration` after `now`, saturating as [`deadline_after`] does.
    pub(crate) fn offset_after(&self, now: Instant, duration: Duration) -> i64 {
        let far = i64::try_from(FAR_FUTURE.as_nanos()).unwrap_or(i64::MAX);
        let duration = i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        self.offset_of(now).saturating_add(duration.min(far))
    }

    /// The last tick that has ended by `now`.
    fn tick_now(&self, now: Instant) -> u64 {
        (nanos(now.saturating_duration_since(self.origin)) / self.tick_ns).min(MAX_TICK)
    }

    /// The last wheel tick of the configured tick that wheel tick `tick` lies in: the
    /// driver wakes only at configured ticks' ends (or Tokio's millisecond before one),
    /// so that a timer costs no more wakeups than with a wheel of configured ticks.
    pub(crate) fn wake_tick(&self, tick: u64) -> u64 {
        tick.div_ceil(self.per_tick)
            .saturating_mul(self.per_tick)
            .min(MAX_TICK)
    }

    /// When tick `tick` ends.
    pub(crate) fn instant_of(&self, tick: u64) -> Instant {
        let ns = tick.saturating_mul(self.tick_ns);
        self.origin
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or_else(|| far_future(self.origin))
    }

    /// The configured tick.
    pub(crate) fn tick(&self) -> Duration {
        self.tick
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How far ahead saturating deadlines go: about 30 years, as tokio's do.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Where saturating deadlines go: [`FAR_FUTURE`] after `from`.
pub(crate) fn far_future(from: Instant) -> Instant {
    from + FAR_FUTURE
}

/// `from + d`, saturating to [`far_future`] instead of overflowing.
pub(crate) fn deadline_after(from: Instant, d: Duration) -> Instant {
    from.checked_add(d).unwrap_or_else(|| far_future(from))
}

/// What a wheel entry does when it fires.
pub(crate) enum Payload {
    /// A future's task to wake.
    Wake(Waker),
    /// A callback to hand to the executor.
    Callback(Task),
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Wake(waker) => f.debug_tuple("Wake").field(waker).finish(),
            Payload::Callback(_) => f.write_str("Callback"),
        }
    }
}

/// Where a registered timer is: its shard and its key in that shard's wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Registration {
    shard: u16,
    key: Key,
}

/// Bits a shard index takes in [`Registration::to_bits`]: `MAX_SHARDS` is 64.
const SHARD_BITS: u32 = 6;

/// The bits [`Registration::to_bits`] uses (58).
pub(crate) const REGISTRATION_BITS: u32 = KEY_BITS + SHARD_BITS;

impl Registration {
    /// The registration in [`REGISTRATION_BITS`] bits, for a `Sleep` to pack.
    pub(crate) fn to_bits(self) -> u64 {
        (self.key.to_bits() << SHARD_BITS) | u64::from(self.shard)
    }

    /// The inverse of [`to_bits`](Registration::to_bits).
    pub(crate) fn from_bits(bits: u64) -> Registration {
        Registration {
            shard: (bits & ((1 << SHARD_BITS) - 1)) as u16,
            key: Key::from_bits(bits >> SHARD_BITS),
        }
    }
}

const _: () = assert!(crate::builder::MAX_SHARDS <= 1 << SHARD_BITS);

/// A shard's two wheels, under one lock and always advanced to the same tick.
///
/// Futures and callbacks are kept apart so that a future's entry holds only its waker:
/// 32 bytes instead of the 40 a waker-or-callback enum would take, on the entry that
/// every pending `Sleep` costs.
#[derive(Debug)]
pub(crate) struct Wheels {
    futures: Wheel<Waker>,
    callbacks: Wheel<Task>,
}

impl Wheels {
    fn new(slots: usize) -> Self {
        Wheels {
            futures: Wheel::new(slots),
            callbacks: Wheel::new(slots),
        }
    }

    fn len(&self) -> usize {
        self.futures.len() + self.callbacks.len()
    }

    fn next_expiration(&self) -> Option<u64> {
        match (
            self.futures.next_expiration(),
            self.callbacks.next_expiration(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Two wheels and their lock. Registrations go to the shard of the registering thread,
/// so threads registering and cancelling at once rarely share a lock or a cache line;
/// the driver turns every shard.
#[repr(align(128))] // one shard per cache line pair, against false sharing
struct Shard {
    wheels: Mutex<Wheels>,
    /// `wheels.futures.elapsed()`, mirrored after every change under the lock, so a
    /// future can learn it has fired without taking the lock; `u64::MAX` once shut down.
    elapsed: AtomicU64,
}

/// Statistics the driver keeps, for tests and benchmarks.
#[derive(Debug, Default)]
struct Counters {
    wakeups: StdAtomicU64,
    fired: StdAtomicU64,
    panics: StdAtomicU64,
    rejections: StdAtomicU64,
    stranded: StdAtomicU64,
}

/// What every handle of one timer shares: the sharded wheel, the clock, and the way to
/// wake the driver.
pub(crate) struct Shared {
    shards: Box<[Shard]>,
    /// The tick the driver will next process unprompted: `u64::MAX` when it waits for a
    /// registration, `0` while it is busy. A registration due before it notifies the
    /// driver. See [`Shared::park`] for why no registration can be missed.
    parked_until: AtomicU64,
    /// Set by shutdown or when the driver's runtime drops it, before the shards are
    /// drained; read under a shard's lock. From then on nothing registers and every
    /// future completes at once.
    shutdown: AtomicBool,
    /// Pending callbacks in all shards (the count `max_pending` bounds).
    callbacks: AtomicUsize,
    /// The timer itself, held while a detached callback may be pending: such a
    /// callback has no handle to keep the timer alive, yet must run. Released (outside
    /// the lock) when no callback is pending.
    keep_alive: Mutex<Option<Arc<Shared>>>,
    /// Whether `keep_alive` is set; written only under its lock, read without it by
    /// `detach`'s fast path.
    kept_alive: AtomicBool,
    /// Expired callbacks an executor dropped unrun; the driver runs them inline.
    rejected: Mutex<Vec<Task>>,
    pub(crate) clock: Clock,
    wheel_size: usize,
    max_pending: usize,
    executor: Executor,
    /// Where `Spawn` and `Blocking` callbacks go; `None` only in loom models, which
    /// have no runtime (callbacks then run inline).
    runtime: Option<tokio::runtime::Handle>,
    notify: Arc<Notify>,
    /// Becomes `true` when the driver task has ended (or was dropped).
    stopped: watch::Sender<bool>,
    /// The tick the last complete turn processed to (every shard, every tick up to it).
    caught_up_to: StdAtomicU64,
    /// Notified after every turn and when the driver ends: what `catch_up` waits on.
    turned: Notify,
    counters: Counters,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("clock", &self.clock)
            .field("shards", &self.shards.len())
            .field("executor", &self.executor)
            .finish_non_exhaustive()
    }
}

/// Where a callback is, as its [`Scheduled`](crate::Scheduled) handle sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallbackState {
    /// In the wheel.
    Scheduled,
    /// Taken out by the driver and handed to the executor.
    Expired,
    /// Taken out by its handle's `cancel`.
    Cancelled,
    /// Taken out by shutdown, unrun.
    Unfired,
}

/// Outcome of a registration attempt.
pub(crate) enum Registered {
    /// In the wheel here.
    Pending(Registration),
    /// Due already (or the timer is shut down): complete now.
    Due,
}

/// A strong reference to [`Shared`] with a reference count of its own, one per shard.
///
/// Every `Sleep` and `Scheduled` holds one, taken from the creating thread's shard,
/// instead of a `Timer` clone. Cloning an `Arc` writes its count; with one count for the
/// whole timer, two workers creating and dropping timeouts passed that cache line to
/// each other twice per timeout (about 7% of churn-mt's CPU in `perf`). `Timer` handles
/// own the anchors, and each anchor keeps `Shared`, and so the driver, alive, as the
/// `Timer` clone it replaces did.
#[repr(align(128))] // the counts (at the start of the Arc) alone in their cache lines
pub(crate) struct Anchor {
    pub(crate) shared: Arc<Shared>,
}

impl Anchor {
    /// One anchor per shard of `shared`.
    pub(crate) fn all(shared: &Arc<Shared>) -> Arc<[Arc<Anchor>]> {
        (0..shared.shards.len())
            .map(|_| {
                Arc::new(Anchor {
                    shared: shared.clone(),
                })
            })
            .collect()
    }

    /// The calling thread's anchor among `anchors` (from [`Anchor::all`]).
    pub(crate) fn local(anchors: &[Arc<Anchor>]) -> Arc<Anchor> {
        anchors[thread_shard() % anchors.len()].clone()
    }
}

/// Gives each thread a shard index: threads are numbered in the order they first
/// register, so a runtime's workers land on different shards.
fn thread_shard() -> usize {
    static NEXT: StdAtomicUsize = StdAtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SHARD.with(|shard| *shard)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing user-supplied runs under these locks except `Waker::clone`, done before
    // any state changes, so a poisoned lock still guards consistent state.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// The shared state alone, without a driver task.
    pub(crate) fn new(config: Config, runtime: Option<tokio::runtime::Handle>) -> Arc<Shared> {
        let per_tick = WHEEL_TICKS_PER_TICK.min(MAX_WHEEL_SIZE / config.wheel_size);
        let shards = (0..config.shards)
            .map(|_| Shard {
                wheels: Mutex::new(Wheels::new(config.wheel_size * per_tick)),
                elapsed: AtomicU64::new(0),
            })
            .collect();
        Arc::new(Shared {
            shards,
            parked_until: AtomicU64::new(u64::MAX),
            shutdown: AtomicBool::new(false),
            callbacks: AtomicUsize::new(0),
            keep_alive: Mutex::new(None),
            kept_alive: AtomicBool::new(false),
            rejected: Mutex::new(Vec::new()),
            clock: Clock::new(Instant::now(), config.tick, per_tick),
            wheel_size: config.wheel_size,
            max_pending: config.max_pending,
            executor: config.executor,
            runtime,
            notify: Arc::new(Notify::new()),
            stopped: watch::Sender::new(false),
            caught_up_to: StdAtomicU64::new(0),
            turned: Notify::new(),
            counters: Counters::default(),
        })
    }

    fn shard(&self, reg: Registration) -> &Shard {
        &self.shards[usize::from(reg.shard)]
    }

    /// The shard of the calling thread.
    fn local(&self) -> (u16, &Shard) {
        let index = thread_shard() % self.shards.len();
        // At most `builder::MAX_SHARDS` shards, so the index fits.
        (index as u16, &self.shards[index])
    }

    /// Whether `reg`, due at the deadline `offset` (see [`Clock::offset_of`]), has
    /// certainly fired (lock-free).
    pub(crate) fn has_fired(&self, reg: Registration, offset: i64) -> bool {
        let elapsed = self.shard(reg).elapsed.load(Ordering::Acquire);
        self.clock.is_processed(offset, elapsed)
    }

    /// Registers a future's waker for `tick`.
    pub(crate) fn register(&self, tick: u64, waker: &Waker) -> Registered {
        let (index, shard) = self.local();
        let mut wheels = lock(&shard.wheels);
        if self.shutdown.load(Ordering::SeqCst) {
            return Registered::Due;
        }
        match wheels.futures.insert(tick, waker.clone()) {
            Ok(key) => {
                drop(wheels);
                self.notify_if_earlier(tick);
                Registered::Pending(Registration { shard: index, key })
            }
            // Entries are 32 bytes and a shard holds 2^32 - 1 of them; a future's
            // registration that would overflow it completes instead of panicking.
            Err((_, InsertError::Elapsed | InsertError::Full)) => Registered::Due,
        }
    }

    /// Registers a callback due at its deadline; returns where it is and the tick it
    /// is due at, which together name it (see [`wheel`](crate::wheel)).
    pub(crate) fn schedule(&self, task: Task) -> Result<(Registration, u64), Error> {
        let tick = self.clock.tick_at_offset(task.deadline());
        if self.callbacks.fetch_add(1, Ordering::SeqCst) >= self.max_pending {
            self.callback_gone();
            return Err(Error::AtCapacity {
                max: self.max_pending,
            });
        }
        let (index, shard) = self.local();
        let mut wheels = lock(&shard.wheels);
        if self.shutdown.load(Ordering::SeqCst) {
            drop(wheels);
            // The closure is dropped after the lock: its captures may do anything.
            drop(task);
            self.callback_gone();
            return Err(Error::Shutdown);
        }
        // Due already: run on the next tick rather than on the caller's stack.
        let tick = tick.max(wheels.callbacks.first_open_tick()).min(MAX_TICK);
        match wheels.callbacks.insert(tick, task) {
            Ok(key) => {
                drop(wheels);
                self.notify_if_earlier(tick);
                Ok((Registration { shard: index, key }, tick))
            }
            Err((task, _)) => {
                drop(wheels);
                drop(task);
                self.callback_gone();
                Err(Error::AtCapacity {
                    max: MAX_ENTRIES.min(self.max_pending),
                })
            }
        }
    }

    /// Replaces the waker of `reg`, due at `tick`, unless it would wake the same task.
    /// Returns `false` if the entry has fired.
    pub(crate) fn update_waker(&self, reg: Registration, tick: u64, waker: &Waker) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        match wheels.futures.get_mut(reg.key, tick) {
            Some(stored) => {
                if !stored.will_wake(waker) {
                    let old = std::mem::replace(stored, waker.clone());
                    drop(wheels);
                    drop(old);
                }
                true
            }
            None => false,
        }
    }

    /// Removes a future's entry, due at `tick`, if it is still pending.
    pub(crate) fn cancel(&self, reg: Registration, tick: u64) {
        let mut wheels = lock(&self.shard(reg).wheels);
        let removed = wheels.futures.remove(reg.key, tick);
        let released = wheels.futures.release_if_empty(RETAIN);
        drop(wheels);
        // Dropped here, after the lock: dropping a waker can run arbitrary code.
        drop((removed, released));
    }

    /// Removes the callback at `reg`, due at `tick`, if it is still pending, setting
    /// `cancelled` under the lock. Returns whether it was pending: exactly one of this
    /// returning `true` and the driver taking the callback out can happen, as both take
    /// it out of the wheel under the shard's lock.
    pub(crate) fn cancel_callback(
        &self,
        reg: Registration,
        tick: u64,
        cancelled: &AtomicBool,
    ) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        // Read under the lock that set it: a handle that removed its entry itself no
        // longer names it, and must not reach whatever entry has its key now.
        if cancelled.load(Ordering::Acquire) {
            return false;
        }
        let Some(removed) = wheels.callbacks.remove(reg.key, tick) else {
            return false;
        };
        cancelled.store(true, Ordering::Release);
        let released = wheels.callbacks.release_if_empty(RETAIN);
        drop(wheels);
        // The closure is dropped here, after the lock: its captures may do anything.
        drop((removed, released));
        self.callback_gone();
        true
    }

    /// Where the callback at `reg`, due at `tick`, is, decided under the lock its entry
    /// moves under.
    pub(crate) fn callback_state(
        &self,
        reg: Registration,
        tick: u64,
        cancelled: &AtomicBool,
    ) -> CallbackState {
        let wheels = lock(&self.shard(reg).wheels);
        if cancelled.load(Ordering::Acquire) {
            CallbackState::Cancelled
        } else if wheels.callbacks.contains(reg.key, tick) {
            CallbackState::Scheduled
        } else if tick > wheels.callbacks.elapsed() {
            // Gone, not cancelled, its tick not processed: only shutdown takes out an
            // entry so (and the wheel's ticks stop there).
            CallbackState::Unfired
        } else {
            CallbackState::Expired
        }
    }

    /// A callback left the wheel: count it out, and release the keep-alive with the
    /// last one.
    fn callback_gone(&self) {
        self.callbacks_gone(1);
    }

    fn callbacks_gone(&self, n: usize) {
        if n > 0 && self.callbacks.fetch_sub(n, Ordering::SeqCst) == n {
            let mut keep_alive = lock(&self.keep_alive);
            // Re-checked under the lock, after clearing the flag: a callback scheduled
            // and detached since the count reached zero may have seen the flag still
            // set, and relies on the keep-alive (loom:
            // `detach_vs_last_callback_keeps_the_timer_alive`). Its count was added
            // before it read the flag, so if it read it before this clear, this load
            // sees its count.
            self.kept_alive.store(false, Ordering::SeqCst);
            let release = if self.callbacks.load(Ordering::SeqCst) == 0 {
                keep_alive.take()
            } else {
                self.kept_alive
                    .store(keep_alive.is_some(), Ordering::SeqCst);
                None
            };
            drop(keep_alive);
            // Dropped after the lock: it may be the last reference.
            drop(release);
        }
    }

    /// A callback's handle was detached: keep the timer alive until no callback is
    /// pending, since that one has nothing else keeping it.
    ///
    /// Once shut down (or the driver lost) nothing will run it, so it keeps nothing
    /// alive: `shutdown` returns it, or the last handle's drop drops it.
    pub(crate) fn detach(self: &Arc<Self>) {
        // Lock-free when the timer already keeps itself alive, as it does while any
        // detached callback is pending: `callbacks_gone` clears the flag before it
        // re-reads the count, so seeing it set here means our (counted) callback is
        // seen there.
        if self.kept_alive.load(Ordering::SeqCst) {
            return;
        }
        let mut keep_alive = lock(&self.keep_alive);
        // Checked under the keep-alive lock, under which `callbacks_gone` re-reads the
        // count before releasing: either it sees our callback counted, or we see the
        // keep-alive gone and set it again.
        // `driver_lost` sets the shutdown flag before it takes this lock to release the
        // keep-alive, so either it releases what we set, or we see the flag.
        if self.callbacks.load(Ordering::SeqCst) > 0 && keep_alive.is_none() && !self.is_shutdown()
        {
            *keep_alive = Some(self.clone());
            self.kept_alive.store(true, Ordering::SeqCst);
        }
    }

    /// Whether the future's entry `reg`, due at `tick`, is still in the wheel.
    pub(crate) fn is_pending(&self, reg: Registration, tick: u64) -> bool {
        lock(&self.shard(reg).wheels)
            .futures
            .contains(reg.key, tick)
    }

    /// Moves `reg` from `tick` to `to`. Returns `false` (and wakes the entry's task)
    /// when the entry has already fired or `to` has already been processed.
    pub(crate) fn reschedule(&self, reg: Registration, tick: u64, to: u64) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        match wheels.futures.reschedule(reg.key, tick, to) {
            Ok(()) => {
                drop(wheels);
                self.notify_if_earlier(to);
                true
            }
            Err(fired) => {
                drop(wheels);
                if let Some(waker) = fired {
                    waker.wake();
                }
                false
            }
        }
    }

    /// Number of entries in all shards.
    pub(crate) fn pending(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.wheels).len()).sum()
    }

    #[cfg(loom)]
    pub(crate) fn kept_alive(&self) -> bool {
        lock(&self.keep_alive).is_some()
    }

    #[cfg(loom)]
    pub(crate) fn parked_until(&self) -> u64 {
        self.parked_until.load(Ordering::SeqCst)
    }

    pub(crate) fn wheel_size(&self) -> usize {
        self.wheel_size
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            pending: self.pending(),
            driver_wakeups: self.counters.wakeups.load(Ordering::Relaxed),
            fired: self.counters.fired.load(Ordering::Relaxed),
            callback_panics: self.counters.panics.load(Ordering::Relaxed),
            executor_rejections: self.counters.rejections.load(Ordering::Relaxed),
            stranded_callbacks: self.counters.stranded.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn count_panic(&self) {
        self.counters.panics.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes back an expired callback that its executor dropped without running it; the
    /// driver runs it inline on its next turn (or here, if the timer is shut down).
    pub(crate) fn reject(&self, task: Task) {
        self.counters.rejections.fetch_add(1, Ordering::Relaxed);
        let mut rejected = lock(&self.rejected);
        if self.is_shutdown() {
            drop(rejected);
            if !run_caught(task) {
                self.count_panic();
            }
            return;
        }
        rejected.push(task);
        drop(rejected);
        self.notify.notify_one();
    }

    /// Notifies the driver if it is parked until after `tick`. Called after the entry
    /// is in its shard (see [`Shared::park`]).
    fn notify_if_earlier(&self, tick: u64) {
        if tick < self.parked_until.load(Ordering::SeqCst) {
            self.parked_until.fetch_min(tick, Ordering::SeqCst);
            self.notify.notify_one();
        }
    }

    /// Stops the timer: nothing registers any more, every pending future wakes and
    /// completes, and the callbacks that never ran are returned. Idempotent.
    pub(crate) fn shutdown(&self) -> Vec<Unfired> {
        // Set before draining: a registration that takes a shard's lock after its
        // drain sees it.
        self.shutdown.store(true, Ordering::SeqCst);
        let mut wakers = Vec::new();
        let mut unfired = Vec::new();
        for shard in self.shards.iter() {
            let mut wheels = lock(&shard.wheels);
            wakers.extend(wheels.futures.drain());
            unfired.extend(wheels.callbacks.drain().map(|task| self.unfired(task)));
            shard.elapsed.store(u64::MAX, Ordering::Release);
        }
        let rejected = std::mem::take(&mut *lock(&self.rejected));
        self.notify.notify_one();
        for waker in wakers {
            waker.wake();
        }
        self.callbacks_gone(unfired.len());
        // Expired, handed back by their executor, not yet run: they never ran either.
        unfired.extend(rejected.into_iter().map(|task| self.unfired(task)));
        unfired
    }

    fn unfired(&self, task: Task) -> Unfired {
        let deadline = self.clock.instant_at(task.deadline());
        Unfired::new(task, deadline)
    }

    /// The driver's runtime dropped it: complete every future (nothing would ever wake
    /// them), refuse new callbacks, and keep pending ones for `shutdown` to return,
    /// counted as stranded. Detached ones no longer keep the timer alive: nothing can
    /// run them now, so the last handle's drop drops them rather than leak them.
    fn driver_lost(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        let mut wakers = Vec::new();
        for shard in self.shards.iter() {
            // Pending callbacks stay where they are, for shutdown() to return.
            wakers.extend(lock(&shard.wheels).futures.drain());
            shard.elapsed.store(u64::MAX, Ordering::Release);
        }
        let stranded = self.callbacks.load(Ordering::SeqCst);
        self.counters
            .stranded
            .fetch_add(stranded as u64, Ordering::Relaxed);
        let release = {
            let mut keep_alive = lock(&self.keep_alive);
            self.kept_alive.store(false, Ordering::SeqCst);
            keep_alive.take()
        };
        for waker in wakers {
            waker.wake();
        }
        // Dropped last, after the lock: it may be the last reference.
        drop(release);
    }

    /// Waits until a turn of the driver has processed every tick that has ended by
    /// now, asking the driver for one at once; or until the timer is shut down.
    pub(crate) async fn catch_up(&self) {
        let now = self.clock.tick_now(Instant::now());
        loop {
            let mut turned = pin!(self.turned.notified());
            // Registered before the check, so a turn that ends in between is not missed.
            turned.as_mut().enable();
            if self.is_shutdown() || self.caught_up_to.load(Ordering::SeqCst) >= now {
                return;
            }
            self.notify.notify_one();
            turned.await;
        }
    }

    /// Waits until the driver task has ended.
    pub(crate) async fn stopped(&self) {
        let mut stopped = self.stopped.subscribe();
        // An error means the sender is gone, i.e. so is the driver.
        let _ = stopped.wait_for(|stopped| *stopped).await;
    }

    /// One turn of the driver: processes every tick the clock has passed (at most
    /// [`BATCH`] expirations per shard), then, outside the locks, wakes the futures and
    /// dispatches the callbacks that fired.
    fn turn(self: &Arc<Self>, expired: &mut Vec<Payload>) -> Turn {
        self.turn_to(self.clock.tick_now(Instant::now()), expired)
    }

    /// [`turn`](Shared::turn) as if the clock had reached the end of tick `now`.
    pub(crate) fn turn_to(self: &Arc<Self>, now: u64, expired: &mut Vec<Payload>) -> Turn {
        if self.is_shutdown() {
            return Turn::Exit;
        }
        // Busy: registrations need not notify until we park again.
        self.parked_until.store(0, Ordering::SeqCst);
        let mut done = true;
        let mut fired_callbacks = 0;
        for shard in self.shards.iter() {
            let mut wheels = lock(&shard.wheels);
            done &= wheels
                .futures
                .advance(now, BATCH, |waker| expired.push(Payload::Wake(waker)));
            done &= wheels.callbacks.advance(now, BATCH, |task| {
                // Taken out under the lock: from here on `cancel` returns false and
                // `is_expired` true, with no moment in between.
                fired_callbacks += 1;
                expired.push(Payload::Callback(task));
            });
            shard
                .elapsed
                .store(wheels.futures.elapsed(), Ordering::Release);
            let released = (
                wheels.futures.release_if_empty(RETAIN),
                wheels.callbacks.release_if_empty(RETAIN),
            );
            drop(wheels);
            drop(released);
        }
        // Counted out before they run: an expiry frees capacity at once, so a callback
        // may re-arm itself under `max_pending(1)`.
        self.callbacks_gone(fired_callbacks);
        let rejected = std::mem::take(&mut *lock(&self.rejected));
        self.counters
            .fired
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        for payload in expired.drain(..) {
            match payload {
                Payload::Wake(waker) => waker.wake(),
                Payload::Callback(task) => self.dispatch(task),
            }
        }
        for task in rejected {
            self.run_inline(task);
        }
        if done {
            self.caught_up_to.store(now, Ordering::SeqCst);
        }
        self.turned.notify_waiters();
        if !done {
            return Turn::Again;
        }
        Turn::Park { next: self.park() }
    }

    /// Publishes the tick the driver will wake at and returns it.
    ///
    /// A registration inserts into its shard, then reads `parked_until`; the driver
    /// stores `parked_until`, then reads every shard. With both sides sequentially
    /// consistent, at least one sees the other: either the registration sees the new
    /// value (and notifies if it is earlier), or the second scan here sees the entry.
    fn park(&self) -> Option<u64> {
        // `u64::MAX` stands for "nothing pending" (`None` would sort first).
        let next = self.next_expiration().unwrap_or(u64::MAX);
        self.parked_until.store(next, Ordering::SeqCst);
        let again = self.next_expiration().unwrap_or(u64::MAX);
        // Only ever earlier: an entry cancelled in between just costs a spurious wakeup.
        let park = next.min(again);
        if park < next {
            self.parked_until.fetch_min(park, Ordering::SeqCst);
        }
        (park != u64::MAX).then_some(park)
    }

    fn next_expiration(&self) -> Option<u64> {
        self.shards
            .iter()
            .filter_map(|s| lock(&s.wheels).next_expiration())
            .min()
    }

    /// Hands an expired callback to the configured executor.
    fn dispatch(self: &Arc<Self>, task: Task) {
        match &self.executor {
            Executor::Inline => self.run_inline(task),
            Executor::Spawn | Executor::Blocking if self.runtime.is_none() => self.run_inline(task),
            Executor::Spawn => {
                let job = Job::new(task, self);
                let runtime = self.runtime.as_ref().expect("checked above");
                drop(runtime.spawn(async move {
                    // Spawned from the driver's worker, this task lands in that worker's
                    // LIFO slot, which wakes no idle worker; if the callback then blocks,
                    // nobody drives tokio's timer and every timer stalls behind it.
                    // Yielding once moves it to the stealable run queue and wakes an
                    // idle worker first.
                    tokio::task::yield_now().await;
                    job.run()
                }));
            }
            Executor::Blocking => {
                let job = Job::new(task, self);
                let runtime = self.runtime.as_ref().expect("checked above");
                drop(runtime.spawn_blocking(move || job.run()));
            }
            Executor::Custom(execute) => {
                let job = Job::new(task, self);
                // A panicking executor drops the job while unwinding; the job then comes
                // back through `reject`.
                let _ = catch_unwind(AssertUnwindSafe(|| execute(Box::new(move || job.run()))));
            }
        }
    }

    fn run_inline(&self, task: Task) {
        if !run_caught(task) {
            self.count_panic();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last handle is gone: let the driver see that and end. Callbacks still in
        // the wheel are dropped with it, unrun: only possible once the driver was lost,
        // and counted then in `Stats::stranded_callbacks`.
        self.notify.notify_one();
    }
}

pub(crate) enum Turn {
    /// More is due right now: yield, then turn again.
    Again,
    /// Caught up with the clock; `next` is the wheels' next expiration, if any.
    Park { next: Option<u64> },
    /// The timer was shut down.
    Exit,
}

/// Creates the shared state and spawns its driver on `runtime`.
pub(crate) fn start(
    config: Config,
    runtime: &tokio::runtime::Handle,
) -> Result<Arc<Shared>, Error> {
    let tick = config.tick;
    let interval = {
        let _enter = runtime.enter();
        // tokio panics when the runtime was built without its time driver; turn that
        // into an error here rather than a panic in the tick task later.
        catch_unwind(|| {
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
            interval
        })
        .map_err(|_| {
            Error::InvalidConfig(
                "the Tokio runtime has no time driver: build it with enable_time() or enable_all()"
                    .into(),
            )
        })?
    };
    let shared = Shared::new(config, Some(runtime.clone()));
    // The guard is made here and moved into the task, not made by the task's body:
    // a runtime dropped before it first polls the task still drops the guard.
    let guard = DriverGuard {
        shared: Arc::downgrade(&shared),
    };
    runtime.spawn(run(guard, shared.notify.clone(), interval));
    Ok(shared)
}

/// Marks the driver stopped when its task ends, and completes every pending future if
/// the task is dropped before it ends by itself (its runtime shut down, perhaps before
/// ever running it), so that no task elsewhere waits forever.
struct DriverGuard {
    shared: Weak<Shared>,
}

impl Drop for DriverGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            if !shared.is_shutdown() {
                shared.driver_lost();
            }
            shared.stopped.send_replace(true);
            shared.turned.notify_waiters();
        }
    }
}

/// When the driver, at `now`, asks Tokio to wake it for the next expiration `next`;
/// `None` if that tick has already ended (the turn took that long), so that the
/// driver turns again instead of waiting for Tokio.
///
/// The driver wakes for the end of the configured tick that holds `next`
/// ([`Clock::wake_tick`]). Tokio's timer counts whole milliseconds from its runtime's
/// start and rounds every deadline up to the next one. That end rarely falls on
/// Tokio's grid (we cannot see where it lies), so asking for the end itself would wait
/// for the millisecond boundary after it: a sleep Tokio would have woken at the
/// boundary before the end waits one more millisecond with us. Asking for
/// `end - 999_999 ns` makes Tokio round to the last boundary at or before the end
/// instead, where it fires its own sleeps of that tick. If that boundary has already
/// passed (the end is less than a millisecond away), Tokio would fire at once, so the
/// driver asks for `now` instead, which Tokio rounds to the next boundary. Either way
/// Tokio does the rounding against a grid only it knows: no boundary is guessed, none
/// is ever in the past, and a wakeup at a boundary before the end (the turn fires only
/// the quarter ticks that have ended) is followed by one at the next boundary.
fn wake_at(clock: &Clock, next: u64, now: Instant) -> Option<Instant> {
    const ROUNDING: Duration = Duration::from_nanos(999_999);
    if clock.instant_of(next) <= now {
        return None;
    }
    let end = clock.instant_of(clock.wake_tick(next));
    let boundary_before_end = end.checked_sub(ROUNDING).unwrap_or(end);
    Some(boundary_before_end.max(now + Duration::from_nanos(1)))
}

/// The driver task.
async fn run(guard: DriverGuard, notify: Arc<Notify>, mut interval: Interval) {
    let weak = guard.shared.clone();
    let mut expired = Vec::new();
    loop {
        let Some(shared) = weak.upgrade() else { return };
        shared.counters.wakeups.fetch_add(1, Ordering::Relaxed);
        let clock = shared.clock;
        let next = match shared.turn(&mut expired) {
            Turn::Exit => return,
            Turn::Again => {
                drop(shared);
                tokio::task::yield_now().await;
                continue;
            }
            Turn::Park { next } => next,
        };
        // Hold only the `Weak` while waiting, so that dropping the last handle ends
        // the driver (detached callbacks hold the timer through `Shared::keep_alive`).
        drop(shared);
        let notified = pin!(notify.notified());
        match next {
            None => notified.await,
            Some(next) => match wake_at(&clock, next, Instant::now()) {
                Some(at) => {
                    interval.reset_at(at);
                    wait(notified, &mut interval).await;
                }
                // Due already: turn again once the tasks just woken have run.
                None => tokio::task::yield_now().await,
            },
        }
    }
}

/// Waits for a notification or the interval's next tick.
async fn wait(
    mut notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    interval: &mut Interval,
) {
    std::future::poll_fn(|cx| {
        if notified.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        interval.poll_tick(cx).map(drop)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_deadlines_up_and_now_down() {
        let origin = Instant::now();
        let clock = Clock::new(origin, Duration::from_millis(10), 1);
        assert_eq!(clock.tick_at(origin), 0);
        assert_eq!(clock.tick_at(origin + Duration::from_millis(1)), 1);
        assert_eq!(clock.tick_at(origin + Duration::from_millis(10)), 1);
        assert_eq!(clock.tick_at(origin + Duration::from_millis(11)), 2);
        assert_eq!(clock.tick_now(origin + Duration::from_millis(9)), 0);
        assert_eq!(clock.tick_now(origin + Duration::from_millis(10)), 1);
        assert_eq!(clock.instant_of(3), origin + Duration::from_millis(30));
    }

    #[test]
    fn wheel_ticks_are_quarters_and_the_driver_wakes_for_whole_ticks() {
        let origin = Instant::now();
        let ms = |n: u64| origin + Duration::from_micros(n * 100); // tenths of a ms
        let clock = Clock::new(origin, Duration::from_millis(10), 4);
        assert_eq!(clock.tick(), Duration::from_millis(10));
        assert_eq!(clock.tick_at(ms(10)), 1);
        assert_eq!(clock.tick_at(ms(25)), 1);
        assert_eq!(clock.tick_at(ms(26)), 2);
        assert_eq!(clock.tick_now(ms(24)), 0);
        assert_eq!(clock.tick_now(ms(99)), 3);
        assert_eq!(clock.instant_of(1), ms(25));
        assert_eq!(
            [0, 1, 3, 4, 5, 8, 9].map(|t| clock.wake_tick(t)),
            [0, 4, 4, 4, 8, 8, 12]
        );
        assert_eq!(clock.instant_of(clock.wake_tick(1)), ms(100));
    }

    #[test]
    fn offsets_round_trip_and_round_like_instants() {
        let origin = Instant::now() + Duration::from_secs(10);
        let clock = Clock::new(origin, Duration::from_millis(10), 1);
        for ns in [0, 1, -1, 9_999_999, 10_000_000, 10_000_001, -5_000_000_000] {
            let instant = clock.instant_at(ns);
            assert_eq!(clock.offset_of(instant), ns);
            let tick = clock.tick_at_offset(ns);
            assert_eq!(tick, clock.tick_at(instant), "{ns}");
            for elapsed in [0, 1, 2, tick.saturating_sub(1), tick, tick + 1, u64::MAX] {
                assert_eq!(
                    clock.is_processed(ns, elapsed),
                    tick <= elapsed,
                    "{ns} {elapsed}"
                );
            }
        }
        // Past 292 years the offset saturates; the tick stays in range.
        let far = origin + Duration::from_secs(86_400 * 365 * 400);
        assert_eq!(clock.offset_of(far), i64::MAX);
        assert!(clock.tick_at_offset(i64::MAX) <= MAX_TICK);
        let tiny = Clock::new(origin, Duration::from_nanos(1), 1);
        assert_eq!(tiny.tick_at_offset(i64::MAX), MAX_TICK);
        assert!(tiny.is_processed(i64::MAX, MAX_TICK));
        assert!(!tiny.is_processed(i64::MAX, MAX_TICK - 1));
        let after = clock.offset_after(origin, Duration::MAX);
        assert_eq!(clock.instant_at(after), far_future(origin));
    }

    #[test]
    fn registrations_pack_into_58_bits() {
        let mut wheel = Wheel::new(4);
        for _ in 0..3 {
            let key = wheel.insert(2, ()).unwrap();
            let reg = Registration { shard: 63, key };
            assert!(reg.to_bits() < 1 << REGISTRATION_BITS);
            assert_eq!(Registration::from_bits(reg.to_bits()), reg);
        }
    }

    #[test]
    fn far_deadlines_saturate() {
        let origin = Instant::now();
        // The finest tick the builder allows: 30 years fit in the wheel's range.
        let clock = Clock::new(origin, crate::builder::MIN_TICK, WHEEL_TICKS_PER_TICK);
        let far = deadline_after(origin, Duration::MAX);
        assert_eq!(far, far_future(origin));
        assert!(clock.tick_at(far) < MAX_TICK);
        assert!(clock.instant_of(MAX_TICK) > origin);
        let coarse = Clock::new(origin, Duration::MAX, 1);
        assert_eq!(coarse.tick_at(far), 1);
    }

    #[test]
    fn the_driver_asks_tokio_for_the_millisecond_before_a_ticks_end_or_turns_again() {
        let origin = Instant::now();
        let us = |n: u64| origin + Duration::from_micros(n);
        // 10 ms ticks of four 2.5 ms wheel ticks: wheel tick 2 ends at 5 ms, in the
        // configured tick that ends at 10 ms; Tokio's millisecond before that end
        // starts within (9, 10] ms, which `end - 999_999 ns` rounds to.
        let clock = Clock::new(origin, Duration::from_millis(10), 4);
        let before_end = us(10_000) - Duration::from_nanos(999_999);
        assert_eq!(wake_at(&clock, 2, us(1_000)), Some(before_end));
        assert_eq!(wake_at(&clock, 4, us(4_999)), Some(before_end));
        // That millisecond has begun: ask for now, which Tokio rounds to the next.
        assert_eq!(
            wake_at(&clock, 4, us(9_500)),
            Some(us(9_500) + Duration::from_nanos(1))
        );
        // The tick has ended while the turn ran: turn again, do not wait.
        assert_eq!(wake_at(&clock, 2, us(5_000)), None);
        assert_eq!(wake_at(&clock, 4, us(10_001)), None);
    }

    #[test]
    fn a_wheel_has_four_slots_per_tick_up_to_two_to_the_twenty() {
        for (ticks, slots) in [
            (1, 4),
            (1024, 4096),
            (1 << 18, 1 << 20),
            (1 << 19, 1 << 20),
            (1 << 20, 1 << 20),
        ] {
            let mut config = crate::Builder::default().validate().expect("defaults");
            config.wheel_size = ticks;
            config.shards = 1;
            let shared = Shared::new(config, None);
            let wheels = lock(&shared.shards[0].wheels);
            assert_eq!(
                (wheels.futures.slots(), wheels.callbacks.slots()),
                (slots, slots)
            );
            // A revolution still covers `ticks` configured ticks.
            let revolution = shared.clock.instant_of(slots as u64) - shared.clock.instant_of(0);
            assert_eq!(revolution, shared.clock.tick() * ticks as u32, "{ticks}");
        }
    }

    #[test]
    fn each_thread_holds_its_own_shards_anchor() {
        let mut config = crate::Builder::default().validate().expect("defaults");
        config.shards = 2;
        let shared = Shared::new(config, None);
        let anchors = Anchor::all(&shared);
        assert_eq!(anchors.len(), 2);
        assert_eq!(
            Arc::strong_count(&shared),
            3,
            "the test's and one per anchor"
        );
        let here = Anchor::local(&anchors);
        assert!(
            Arc::ptr_eq(&here, &Anchor::local(&anchors)),
            "same thread, same anchor"
        );
        // Each thread takes the anchor of its own shard number, and threads are
        // numbered in turn, so new threads soon cover both (other tests' threads may
        // take numbers in between, hence the loop).
        let mut others: Vec<Arc<Anchor>> = Vec::new();
        for _ in 0..64 {
            let (number, anchor) = std::thread::scope(|s| {
                s.spawn(|| (thread_shard(), Anchor::local(&anchors)))
                    .join()
                    .unwrap()
            });
            assert!(Arc::ptr_eq(&anchor, &anchors[number % 2]));
            if !others.iter().any(|seen| Arc::ptr_eq(seen, &anchor)) {
                others.push(anchor);
            }
            if others.len() == 2 {
                break;
            }
        }
        assert_eq!(others.len(), 2, "threads spread over both anchors");
        // Holding an anchor holds the shared state: dropping everything else leaves it.
        let weak = Arc::downgrade(&shared);
        drop((shared, anchors, others));
        assert!(weak.upgrade().is_some(), "`here` keeps it");
        drop(here);
        assert!(weak.upgrade().is_none());
    }
}
