//! The driver: the sharded wheels every timer of a [`Timer`](crate::Timer) shares, and
//! the Tokio task that turns them.
//!
//! Everything that knows about locking or waking lives here; the [`wheel`](crate::wheel)
//! it turns knows none of it, and the [`clock`](crate::clock) does the arithmetic of
//! time. Handles reach the wheels only through [`Shared`]'s methods, which keep each
//! lock short and never wake a waker, run a callback, or drop either, while holding it.
//!
//! * `mod.rs` — the shared state: shards, registrations, anchors.
//! * `futures.rs` — what a [`Sleep`](crate::Sleep) asks: register, update its waker,
//!   move, cancel.
//! * `callbacks.rs` — what a [`Scheduled`](crate::Scheduled) asks (schedule, cancel,
//!   move, its state), the keep-alive of detached callbacks, and handing expired
//!   callbacks to their executor.
//! * `turn.rs` — one turn of the driver, parking without lost wakeups, shutdown.
//! * `context.rs` — entering a runtime's context without `Handle::enter`'s panics.
//! * `fallback.rs` — timing a `Sleep` once the wheel no longer turns (shut down, its
//!   runtime gone): never early, on another clock.
//! * `task.rs` — the Tokio task that turns, and when it asks Tokio to wake it.
//!
//! # Implementation
//!
//! There is one shard per core (or per worker of the runtime the timer is built on,
//! if it has more), each two wheels (futures' wakers, callbacks) under
//! one lock. A thread registers in its own shard and the timer remembers which
//! ([`Registration`]), so threads that register and cancel at once rarely touch the
//! same lock or cache line; the driver advances every shard to the same step.
//!
//! Futures and callback handles keep the timer alive through an [`Anchor`], a strong
//! reference of their shard's own, so that threads creating and dropping timers write
//! their own reference count rather than one they all share. The driver task holds
//! only a `Weak` while it waits: when the last `Timer` clone and the last handle are
//! gone, [`Shared`] drops, notifies the driver, and the driver ends.

use std::fmt;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, AtomicUsize as StdAtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::task::Waker;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::callback::{run_caught, Callback};
use crate::clock::{Clock, STEPS_PER_TICK};
use crate::config::{Config, MAX_WHEEL_SIZE};
use crate::stats::Lateness;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard};
use crate::wheel::{Key, Wheel, KEY_BITS};
use crate::{Executor, Stats};

mod callbacks;
mod context;
mod fallback;
mod futures;
mod task;
mod turn;

pub(crate) use callbacks::{CallbackState, Place};
pub(crate) use fallback::Fallback;
pub(crate) use futures::Registered;
pub(crate) use task::start;
#[cfg(loom)]
pub(crate) use turn::Turn;

/// How many timers one turn of the driver expires before it releases the lock, wakes
/// them and yields to the runtime (every drain loop is bounded).
const BATCH: usize = 4096;

/// Entries' storage a shard keeps when it empties (~200 KiB); beyond that it is freed,
/// so memory follows the load back down after a burst (the soak test checks it).
const RETAIN: usize = 4096;

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

const _: () = assert!(crate::config::MAX_SHARDS <= 1 << SHARD_BITS);

/// A shard's two wheels, under one lock and always advanced to the same step.
///
/// Futures and callbacks are kept apart so that a future's entry holds only its waker:
/// 32 bytes instead of the 40 a waker-or-callback enum would take, on the entry that
/// every pending `Sleep` costs.
#[derive(Debug)]
pub(crate) struct Wheels {
    futures: Wheel<Waker>,
    callbacks: Wheel<Callback>,
    /// The callbacks shutdown took out unrun, as `(key bits, step)`, sorted: how a
    /// `Scheduled` tells "returned by shutdown" from "handed to its executor" once its
    /// entry is gone. Empty until shutdown.
    unfired: Vec<(u64, u64)>,
    /// Timers (futures and callbacks) removed before they fired: counted under the
    /// lock the removal takes anyway, so the count costs no shared write.
    cancelled: u64,
    /// Pending futures moved to a new step (or, for a step already processed, out of
    /// the wheel to complete on their next poll), counted likewise.
    reset: u64,
    /// Set by the driver's loss when it visits this shard, under its lock: it then
    /// counted the shard's callbacks as stranded and dropped the unowned ones. Tells
    /// that loss, which leaves owned callbacks here, from `shutdown()`, which drains
    /// every callback to return it.
    lost: bool,
}

impl Wheels {
    fn new(slots: usize) -> Self {
        Wheels {
            futures: Wheel::new(slots),
            callbacks: Wheel::new(slots),
            unfired: Vec::new(),
            cancelled: 0,
            reset: 0,
            lost: false,
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
    /// future can learn it has fired without taking the lock. Shutdown leaves it
    /// where it is: what had fired by then, not what shutdown drained unfired.
    elapsed: AtomicU64,
}

/// Statistics the driver keeps, for tests and benchmarks.
#[derive(Debug, Default)]
struct Counters {
    wakeups: StdAtomicU64,
    panics: StdAtomicU64,
    rejections: StdAtomicU64,
    stranded: StdAtomicU64,
    /// Timers fired, by lateness; added once per turn. Their sum is `Stats::fired`.
    lateness: [StdAtomicU64; 7],
}

/// What every handle of one timer shares: the sharded wheel, the clock, and the way to
/// wake the driver.
pub(crate) struct Shared {
    shards: Box<[Shard]>,
    /// The step the driver will next process unprompted: `u64::MAX` when it waits for a
    /// registration, `0` while it is busy. A registration due before it notifies the
    /// driver. See [`Shared::park`] for why no registration can be missed.
    parked_until: AtomicU64,
    /// Set by shutdown or when the driver's runtime drops it, before the shards are
    /// drained; read under a shard's lock. From then on nothing registers, and futures
    /// are timed by a [`Fallback`] instead.
    shutdown: AtomicBool,
    /// Set when the driver's runtime dropped the driver (its clock is gone too).
    lost: AtomicBool,
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
    rejected: Mutex<Vec<Callback>>,
    pub(crate) clock: Clock,
    wheel_size: usize,
    max_pending: usize,
    executor: Executor,
    /// Where `Spawn` and `Blocking` callbacks go; `None` only in loom models, which
    /// have no runtime (callbacks then run inline).
    runtime: Option<tokio::runtime::Handle>,
    /// See [`Config::real_clock`] and [`Shared::now`].
    real_clock: bool,
    notify: Arc<Notify>,
    /// Becomes `true` when the driver stops turning: at shutdown, or when its task
    /// ends or is dropped.
    stopped: watch::Sender<bool>,
    /// Turns started, numbering them from 1.
    turns_started: StdAtomicU64,
    /// The number of the latest turn that completed (processed every shard up to its
    /// clock): what `catch_up` waits on.
    last_complete_turn: StdAtomicU64,
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

/// A strong reference to [`Shared`] with a reference count of its own, one per shard.
///
/// Every `Sleep` and `Scheduled` holds one, taken from the creating thread's shard,
/// instead of a `Timer` clone. Cloning an `Arc` writes its count, and with one count
/// for the whole timer, threads creating and dropping timeouts at once would pass that
/// cache line between them twice per timeout. `Timer` handles own the anchors; each
/// anchor keeps `Shared`, and so the driver, alive, as a `Timer` clone would.
///
/// A `Sleep` that meets a wheel that no longer turns takes an anchor of its own and
/// keeps its [`Fallback`] there: in the room the alignment leaves, so that neither a
/// `Sleep` nor a shared anchor grows for it.
#[repr(align(128))] // the counts (at the start of the Arc) alone in their cache lines
pub(crate) struct Anchor {
    pub(crate) shared: Arc<Shared>,
    /// Only in an anchor one `Sleep` holds alone.
    pub(crate) fallback: Option<Fallback>,
}

/// A clone holds the same timer and no fallback: what `Arc::make_mut` gives a `Sleep`
/// that needs an anchor of its own.
impl Clone for Anchor {
    fn clone(&self) -> Self {
        Anchor::new(self.shared.clone())
    }
}

impl Anchor {
    fn new(shared: Arc<Shared>) -> Anchor {
        Anchor {
            shared,
            fallback: None,
        }
    }

    /// One anchor per shard of `shared`.
    pub(crate) fn all(shared: &Arc<Shared>) -> Arc<[Arc<Anchor>]> {
        (0..shared.shards.len())
            .map(|_| Arc::new(Anchor::new(shared.clone())))
            .collect()
    }

    /// The calling thread's anchor among `anchors` (from [`Anchor::all`]).
    pub(crate) fn local(anchors: &[Arc<Anchor>]) -> Arc<Anchor> {
        anchors[thread_shard(anchors.len())].clone()
    }
}

/// The calling thread's shard among `shards`: threads are numbered in the order they
/// first register, so a runtime's workers land on different shards.
#[inline]
fn thread_shard(shards: usize) -> usize {
    static NEXT: StdAtomicUsize = StdAtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    let number = NUMBER.with(|number| *number);
    // Most threads are numbered below the shard count (a runtime's workers first):
    // they skip the division.
    if number < shards {
        number
    } else {
        number % shards
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing user-supplied runs under these locks except `Waker::clone`, done before
    // any state changes, so a poisoned lock still guards consistent state.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// The shared state alone, without a driver task.
    pub(crate) fn new(config: Config, runtime: Option<tokio::runtime::Handle>) -> Arc<Shared> {
        let steps_per_tick = STEPS_PER_TICK.min(MAX_WHEEL_SIZE / config.wheel_size);
        let shards = (0..config.shards)
            .map(|_| Shard {
                wheels: Mutex::new(Wheels::new(config.wheel_size * steps_per_tick)),
                elapsed: AtomicU64::new(0),
            })
            .collect();
        // A multi-thread runtime's clock cannot be paused: it is the real one.
        let real_clock = config.real_clock
            || runtime.as_ref().is_some_and(|runtime| {
                runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread
            });
        Arc::new(Shared {
            shards,
            parked_until: AtomicU64::new(u64::MAX),
            shutdown: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            callbacks: AtomicUsize::new(0),
            keep_alive: Mutex::new(None),
            kept_alive: AtomicBool::new(false),
            rejected: Mutex::new(Vec::new()),
            clock: Clock::new(Instant::now(), config.tick, steps_per_tick),
            wheel_size: config.wheel_size,
            max_pending: config.max_pending,
            executor: config.executor,
            runtime,
            real_clock,
            notify: Arc::new(Notify::new()),
            stopped: watch::Sender::new(false),
            turns_started: StdAtomicU64::new(0),
            last_complete_turn: StdAtomicU64::new(0),
            turned: Notify::new(),
            counters: Counters::default(),
        })
    }

    fn shard(&self, reg: Registration) -> &Shard {
        &self.shards[usize::from(reg.shard)]
    }

    /// The shard of the calling thread.
    fn local(&self) -> (u16, &Shard) {
        let index = thread_shard(self.shards.len());
        // At most `builder::MAX_SHARDS` shards, so the index fits.
        (index as u16, &self.shards[index])
    }

    /// How many shards there are.
    #[cfg(test)]
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Number of entries in all shards.
    pub(crate) fn pending(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.wheels).len()).sum()
    }

    /// Bytes of heap the shards hold (not the `Shared` itself, nor the anchors).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        let wheels: usize = self
            .shards
            .iter()
            .map(|s| {
                let wheels = lock(&s.wheels);
                wheels.futures.heap_bytes() + wheels.callbacks.heap_bytes()
            })
            .sum();
        std::mem::size_of_val(&*self.shards) + wheels
    }

    pub(crate) fn wheel_size(&self) -> usize {
        self.wheel_size
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    pub(crate) fn stats(&self) -> Stats {
        let (mut pending, mut cancelled, mut reset) = (0, 0, 0);
        for shard in self.shards.iter() {
            let wheels = lock(&shard.wheels);
            pending += wheels.len();
            cancelled += wheels.cancelled;
            reset += wheels.reset;
        }
        let lateness = self
            .counters
            .lateness
            .each_ref()
            .map(|count| count.load(Ordering::Relaxed));
        Stats {
            pending,
            driver_wakeups: self.counters.wakeups.load(Ordering::Relaxed),
            fired: lateness.iter().sum(),
            cancelled,
            reset,
            lateness: Lateness::from_counts(lateness),
            callback_panics: self.counters.panics.load(Ordering::Relaxed),
            executor_rejections: self.counters.rejections.load(Ordering::Relaxed),
            stranded_callbacks: self.counters.stranded.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last handle is gone: let the driver see that and end. Callbacks still in
        // the wheel are dropped with it, unrun: only possible once the driver was lost,
        // and counted then in `Stats::stranded_callbacks`.
        self.notify.notify_one();
        // Jobs an executor handed back (`Shared::reject`) just before the last reference
        // went, with no turn left to run them. They run on the driver's runtime, as
        // the driver would have run them: not inside whatever drop (under whatever
        // lock of the user's) let the last reference go. Once shut down, `shutdown`
        // took them, or the driver was lost and they were counted as stranded.
        if !self.is_shutdown() {
            let rejected = RunOnDrop(std::mem::take(&mut *lock(&self.rejected)));
            match &self.runtime {
                Some(runtime) if !rejected.0.is_empty() => {
                    drop(runtime.spawn(async move { drop(rejected) }));
                }
                _ => drop(rejected),
            }
        }
    }
}

/// Callbacks that run when this is dropped: in the task `Shared`'s drop spawns, or
/// where a runtime that has shut down drops that task unrun. Never lost.
struct RunOnDrop(Vec<Callback>);

impl Drop for RunOnDrop {
    fn drop(&mut self) {
        for callback in self.0.drain(..) {
            run_caught(callback);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let revolution = shared.clock.step_end(slots as u64) - shared.clock.step_end(0);
            assert_eq!(revolution, shared.clock.tick() * ticks as u32, "{ticks}");
        }
    }

    /// A timer allocates a level's slots when a timer first lands in it, so an idle
    /// one holds a few hundred bytes per shard whatever its wheel size, and one timer
    /// costs one level of one wheel of one shard.
    #[test]
    fn an_idle_timer_holds_little_whatever_its_shards_and_wheel_size() {
        for wheel_size in [1024, 1 << 20] {
            for shards in [2, 64] {
                let mut config = crate::Builder::default()
                    .wheel_size(wheel_size)
                    .validate()
                    .expect("valid");
                config.shards = shards;
                let shared = Shared::new(config, None);
                let idle = shared.heap_bytes();
                eprintln!("idle: {shards} shards, wheel_size {wheel_size}: {idle} bytes");
                assert!(idle <= shards * 1024, "{shards} shards: {idle} bytes idle");
                let waker = std::task::Waker::noop();
                let Registered::Pending(_) = shared.register(2, waker) else {
                    panic!("step 2 is pending");
                };
                let level0 = wheel_size * STEPS_PER_TICK.min(MAX_WHEEL_SIZE / wheel_size);
                let one = shared.heap_bytes() - idle;
                let expected = level0 * 4 + level0.div_ceil(64) * 8;
                assert!(
                    (expected..expected + 1024).contains(&one),
                    "one timer: {one} bytes, level 0 is {expected}"
                );
            }
        }
    }

    #[test]
    fn a_threads_shard_is_its_number_modulo_the_shard_count() {
        // `thread_shard(usize::MAX)` is the thread's own number (the branch without a
        // division); every thread gets a new one, so of eight new threads some are
        // numbered 4 or more and take the division for every count below.
        let mut above = false;
        for _ in 0..8 {
            let number = std::thread::spawn(|| {
                let number = thread_shard(usize::MAX);
                for shards in 1..=4 {
                    assert_eq!(thread_shard(shards), number % shards, "{number}");
                }
                number
            })
            .join()
            .unwrap();
            above |= number >= 4;
        }
        assert!(above);
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
                s.spawn(|| (thread_shard(2), Anchor::local(&anchors)))
                    .join()
                    .unwrap()
            });
            assert!(Arc::ptr_eq(&anchor, &anchors[number]));
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
