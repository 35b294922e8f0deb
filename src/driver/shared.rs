//! The state every handle of one timer shares: its shards (two wheels under one lock
//! each), the clock, the driver's runtime, the pending callbacks' count and
//! keep-alive, the driver's progress, and its counters.
//!
//! Everything above this file in the driver reaches the wheels through [`Shared`]; the
//! groups of its state that have rules of their own (the runtime's clock, parking,
//! the keep-alive, the driver's progress) are types of their own, below it.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64 as StdAtomicU64, AtomicUsize as StdAtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::Duration;

use tokio::time::Instant;

use super::executor::{run_inline, Executing, HandsBack};
use super::fallbacks::Fallbacks;
use super::keep_alive::KeepAlive;
use super::parking::Parking;
use super::progress::Progress;
use super::runtime::{real_now, DriverRuntime};
use crate::callback::Callback;
use crate::clock::Clock;
use crate::config::Config;
use crate::sites::{ShardTags, SiteSource, Tag, Tags};
use crate::stats::Lateness;
use crate::stats::Stats;
use crate::suspend_clock::Suspended;
use crate::sync::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex};
use crate::wheel::{Entry, Key, Wheel, KEY_BITS};

/// Entries' storage a shard keeps when it empties (~200 KiB); beyond that it is freed,
/// so memory follows the load back down after a burst (the soak test checks it).
pub(super) const RETAIN: usize = 4096;

/// Where a registered timer is: its shard and its key in that shard's wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Registration {
    pub(super) shard: u16,
    pub(super) key: Key,
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
    pub(super) futures: Wheel<Waker>,
    pub(super) callbacks: Wheel<Callback>,
    /// Which line made each entry of `futures`, and each of `callbacks`, by storage
    /// index: `None` unless the timer tracks call sites (see [`ShardTags`]).
    pub(super) tags: Option<Box<ShardTags>>,
    /// The callbacks shutdown took out unrun, as `(key bits, step)`, sorted: how a
    /// `Scheduled` tells "returned by shutdown" from "handed to its executor" once its
    /// entry is gone. Empty until shutdown.
    pub(super) unfired: Vec<(u64, u64)>,
    /// Timers (futures and callbacks) removed before they fired: counted under the
    /// lock the removal takes anyway, so the count costs no shared write.
    pub(super) cancelled: u64,
    /// Pending futures moved to a new step (or, for a step already processed, out of
    /// the wheel to complete on their next poll), counted likewise.
    pub(super) reset: u64,
    /// Set by the driver's loss when it visits this shard, under its lock: it then
    /// counted the shard's callbacks as stranded and dropped the unowned ones. Tells
    /// that loss, which leaves owned callbacks here, from `shutdown()`, which drains
    /// every callback to return it.
    pub(super) lost: bool,
}

impl Wheels {
    fn new(slots: usize) -> Self {
        Wheels {
            futures: Wheel::new(slots),
            callbacks: Wheel::new(slots),
            tags: None,
            unfired: Vec::new(),
            cancelled: 0,
            reset: 0,
            lost: false,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.futures.len() + self.callbacks.len()
    }

    /// The futures' wheel's storage and tags, if it has emptied and holds more than
    /// [`RETAIN`] entries' room: for the caller to drop after the lock.
    #[inline]
    pub(super) fn release_futures(&mut self) -> Option<Released<Waker>> {
        let tags = self.tags.as_mut().map(|tags| &mut tags.futures);
        release(&mut self.futures, tags)
    }

    /// As [`release_futures`](Wheels::release_futures), for the callbacks' wheel.
    #[inline]
    pub(super) fn release_callbacks(&mut self) -> Option<Released<Callback>> {
        let tags = self.tags.as_mut().map(|tags| &mut tags.callbacks);
        release(&mut self.callbacks, tags)
    }

    pub(super) fn next_expiration(&self) -> Option<u64> {
        match (
            self.futures.next_expiration(),
            self.callbacks.next_expiration(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A wheel's storage and tags that [`Wheels::release_futures`] or
/// [`Wheels::release_callbacks`] gave back.
pub(super) type Released<T> = (slab::Slab<Entry<T>>, Option<Vec<Option<Tag>>>);

/// `wheel`'s storage and the table of the `tags` beside it, if the wheel has emptied
/// and holds more than [`RETAIN`] entries' room.
#[inline]
fn release<T>(wheel: &mut Wheel<T>, tags: Option<&mut Tags>) -> Option<Released<T>> {
    let storage = wheel.release_if_empty(RETAIN)?;
    Some((storage, tags.and_then(|tags| tags.release(RETAIN))))
}

/// Drops what a wheel gave back, out of line: the check for it is inline, and it is
/// rare (a burst's storage, once the wheel empties).
#[cold]
#[inline(never)]
pub(super) fn drop_released<T>(released: Released<T>) {
    drop(released);
}

/// Two wheels and their lock. Registrations go to the shard of the registering thread,
/// so threads registering and cancelling at once rarely share a lock or a cache line;
/// the driver turns every shard.
#[repr(align(128))] // one shard per cache line pair, against false sharing
pub(super) struct Shard {
    pub(super) wheels: Mutex<Wheels>,
    /// `wheels.futures.processed()`, mirrored after every change under the lock, so a
    /// future can learn it has fired without taking the lock. Shutdown leaves it
    /// where it is: what had fired by then, not what shutdown drained unfired.
    pub(super) processed: AtomicU64,
}

/// The counts the driver keeps beside the shards' own, which [`Stats`] reports.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) wakeups: StdAtomicU64,
    pub(super) panics: StdAtomicU64,
    pub(super) rejections: StdAtomicU64,
    pub(super) stranded: StdAtomicU64,
    /// Timers fired, by lateness; added once per turn. Their sum is `Stats::fired`.
    pub(super) lateness: [StdAtomicU64; 7],
}

/// What every handle of one timer shares: the sharded wheel, the clock, and the way to
/// wake the driver.
pub(crate) struct Shared {
    pub(super) shards: Box<[Shard]>,
    /// Instants ↔ steps, from the origin read on the driver's runtime.
    pub(crate) clock: Clock,
    /// The driver's runtime, and which clock "now" is read on.
    pub(super) runtime: DriverRuntime,
    /// When the driver will next wake, and how to wake it sooner.
    pub(super) parking: Parking,
    /// Set by shutdown or when the driver's runtime drops it, before the shards are
    /// drained; read under a shard's lock. From then on nothing registers, and futures
    /// are timed by a [`Fallback`](super::fallbacks::Fallback) instead.
    pub(super) shutdown: AtomicBool,
    /// The fallbacks of the `Sleep`s that met the wheel stopped.
    pub(super) fallbacks: Fallbacks,
    /// Pending callbacks in all shards: what `max_pending` bounds, and what the
    /// keep-alive is held for.
    pub(super) pending_callbacks: AtomicUsize,
    pub(super) max_pending: usize,
    /// The timer itself, held while a detached callback may be pending: such a
    /// callback has no handle to keep the timer alive, yet must run. Released (outside
    /// the lock) when no callback is pending.
    pub(super) keep_alive: KeepAlive<Shared>,
    /// The executor, and the callbacks it handed back unrun.
    pub(super) executing: Executing,
    /// The driver's turns and its stop: what `catch_up` and `shutdown` wait on.
    pub(super) progress: Progress,
    pub(super) counters: Counters,
    /// Whether handles tag the entries they insert with the line that made them
    /// (`Builder::track_call_sites`); fixed for the timer's life.
    pub(crate) track_call_sites: bool,
    /// In a tracking timer, the delay queues on it, held weakly (a queue holds the
    /// timer): their values count in `pending_by_site` too. Empty otherwise.
    pub(super) site_sources: Mutex<Vec<Weak<dyn SiteSource>>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("clock", &self.clock)
            .field("shards", &self.shards.len())
            .field("executor", self.executing.executor())
            .finish_non_exhaustive()
    }
}

/// The calling thread's shard among `shards`: threads are numbered in the order they
/// first register, so a runtime's workers land on different shards.
#[inline]
pub(super) fn thread_shard(shards: usize) -> usize {
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

impl Shared {
    /// The shared state alone, without a driver task.
    pub(crate) fn new(config: Config, runtime: Option<tokio::runtime::Handle>) -> Arc<Shared> {
        let steps_per_tick = config.steps_per_tick();
        let shards = (0..config.shards)
            .map(|_| Shard {
                wheels: Mutex::new(Wheels::new(config.wheel_size * steps_per_tick)),
                processed: AtomicU64::new(0),
            })
            .collect();
        // On the real clock, its origin too: the caller's Tokio clock may be paused
        // (and advanced) where the driver's "now" will not be.
        let origin = if DriverRuntime::follows_real_clock(runtime.as_ref(), config.real_clock) {
            real_now()
        } else {
            Instant::now()
        };
        let clock = Clock::new(origin, config.tick, steps_per_tick);
        let suspended = config.suspend_aware.then(|| Arc::new(Suspended::new()));
        let runtime = DriverRuntime::new(runtime, config.real_clock, &clock, suspended);
        Arc::new(Shared {
            shards,
            // The bound holds only while the clock stands still between Tokio's passes
            // over its timers, that is, while it is paused: a real clock runs on while
            // a busy runtime has yet to fire the wakeup, and a caller on another
            // runtime never waits for this one's pass. So a driver whose clock is never
            // paused (where the clock is cheap to read: no runtime handle) arms none,
            // nor does a suspend-aware one, whose clock a suspend moves on between
            // Tokio's passes.
            parking: Parking::new(
                !runtime.has_real_clock() && !config.suspend_aware,
                runtime.has_real_clock() && !config.suspend_aware,
            ),
            runtime,
            clock,
            shutdown: AtomicBool::new(false),
            fallbacks: Fallbacks::new(),
            pending_callbacks: AtomicUsize::new(0),
            max_pending: config.max_pending,
            keep_alive: KeepAlive::new(),
            executing: Executing::new(config.executor),
            progress: Progress::new(),
            counters: Counters::default(),
            track_call_sites: config.track_call_sites,
            site_sources: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn shard(&self, reg: Registration) -> &Shard {
        &self.shards[usize::from(reg.shard)]
    }

    /// The shard of the calling thread.
    pub(super) fn local(&self) -> (u16, &Shard) {
        let index = thread_shard(self.shards.len());
        // At most `config::MAX_SHARDS` shards, so the index fits.
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
                wheels.futures.heap_bytes()
                    + wheels.callbacks.heap_bytes()
                    + wheels.tags.as_ref().map_or(0, |tags| {
                        size_of::<ShardTags>()
                            + tags.futures.heap_bytes()
                            + tags.callbacks.heap_bytes()
                    })
            })
            .sum();
        std::mem::size_of_val(&*self.shards) + wheels
    }

    /// Configured ticks per revolution of level 0, derived from its slots.
    pub(crate) fn wheel_size(&self) -> usize {
        lock(&self.shards[0].wheels).futures.slots() / self.clock.steps_per_tick()
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

    /// Moves the driver's alarm to `step` if it is armed for later: a registration's,
    /// once its entry is in its shard and its lock released.
    #[inline]
    pub(super) fn arm_if_earlier(&self, step: u64) {
        self.parking
            .arm_if_earlier(step, &self.clock, || self.now());
    }

    /// "Now" for a deadline given relative to it, on the clock the driver follows,
    /// wherever the caller is (see [`DriverRuntime::now`]).
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        self.runtime.now()
    }

    /// A caller's instant, on Tokio's clock, on the timer's clock: the same instant
    /// but for a suspend-aware timer, which moves it by the time suspended so far.
    #[inline]
    pub(crate) fn given(&self, at: Instant) -> Instant {
        match self.runtime.suspend_clock() {
            None => at,
            Some(_) => crate::clock::deadline_after(at, self.runtime.suspended()),
        }
    }

    /// An instant on the timer's clock, on Tokio's, for a caller: the inverse of
    /// [`given`](Shared::given) as of now.
    #[inline]
    pub(crate) fn reported(&self, at: Instant) -> Instant {
        match self.runtime.suspend_clock() {
            None => at,
            // An instant the platform's clock cannot name (before it started) stays
            // as it is.
            Some(_) => at.checked_sub(self.runtime.suspended()).unwrap_or(at),
        }
    }

    /// As if the machine had been suspended for `duration` just now: a suspend-aware
    /// timer's clock moves on by it, and the alarm rings, so that the driver turns at
    /// once for what fell due. Nothing for a timer that is not suspend-aware.
    #[cfg(feature = "test-util")]
    pub(crate) fn simulate_suspend(&self, duration: Duration) {
        let Some(suspended) = self.runtime.suspend_clock() else {
            return;
        };
        suspended.simulate(duration);
        // As Tokio's timer rings it: outside every lock of ours.
        match self.parking.alarm_waker() {
            Some(alarm) => alarm.wake(),
            None => self.parking.wake_driver(),
        }
    }

    /// Counts a future that completed at its deadline without the driver firing it
    /// (found due when polled, `late` after it), as fired.
    pub(super) fn count_fired(&self, late: Duration) {
        self.counters.lateness[Lateness::bucket(late)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_panic(&self) {
        self.counters.panics.fetch_add(1, Ordering::Relaxed);
    }

    /// Wakes `waker`, catching and counting a panic (a waker runs its executor's code,
    /// or a user's): the loops that wake many must go on to the rest.
    pub(super) fn wake_caught(&self, waker: Waker) {
        if catch_unwind(AssertUnwindSafe(move || waker.wake())).is_err() {
            self.count_panic();
        }
    }

    /// Takes back an expired callback that its executor dropped without running it; the
    /// driver runs it inline on its next turn (or here, if the timer is shut down).
    pub(crate) fn reject(&self, callback: Callback) {
        self.counters.rejections.fetch_add(1, Ordering::Relaxed);
        match self.executing.hand_back(callback, || self.is_shutdown()) {
            Ok(()) => self.parking.wake_driver(),
            Err(callback) => run_inline(callback, self),
        }
    }

    /// Waits until a turn of the driver that started after this call has completed
    /// (processed every step its clock had reached), asking the driver for one at
    /// once; or until the timer is shut down. A turn, not a step, so that a caller on
    /// another runtime's clock waits for one turn rather than for the two clocks to
    /// agree.
    pub(crate) async fn catch_up(&self) {
        self.progress
            .catch_up(|| self.is_shutdown(), || self.parking.wake_driver())
            .await;
    }

    /// Waits until the driver has stopped turning for good.
    pub(crate) async fn stopped(&self) {
        self.progress.stopped().await;
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last handle is gone: let the driver see that and end. Callbacks still in
        // the wheel are dropped with it, unrun: only possible once the driver was lost,
        // and counted then in `Stats::stranded_callbacks`.
        self.parking.wake_driver();
        // Jobs an executor handed back (`Shared::reject`) just before the last reference
        // went, with no turn left to run them.
        if !self.is_shutdown() {
            self.executing.release_handed_back(self.runtime.handle());
        }
    }
}

impl HandsBack for Shared {
    fn hand_back(&self, callback: Callback) {
        self.reject(callback);
    }

    fn count_panic(&self) {
        Shared::count_panic(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::futures::Registered;

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
            let mut config = crate::builder::Builder::default()
                .validate(1)
                .expect("defaults");
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
                let mut config = crate::builder::Builder::default()
                    .wheel_size(wheel_size)
                    .validate(1)
                    .expect("valid");
                config.shards = shards;
                let steps_per_tick = config.steps_per_tick();
                let shared = Shared::new(config, None);
                let idle = shared.heap_bytes();
                assert!(idle <= shards * 1024, "{shards} shards: {idle} bytes idle");
                let waker = std::task::Waker::noop();
                let Registered::Pending(_) = shared.register(2, waker, None, 0) else {
                    panic!("step 2 is pending");
                };
                let level0 = wheel_size * steps_per_tick;
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
}
