//! [`Builder`]: every setting a [`Timer`](crate::Timer) has, and their validation.
//! `build` and `build_on`, which start the driver, are in `timer.rs`: the builder
//! stays below the driver and the handles.

use std::time::Duration;

use crate::config::Executor;
use crate::config::{Config, DEFAULT_TICK, MAX_WHEEL_SIZE, MIN_TICK};
use crate::error::Error;

/// Configures and starts a [`Timer`](crate::Timer).
///
/// | setting | default | range |
/// |---|---|---|
/// | [`tick`](Builder::tick) | 10 ms (1 ms with the feature `test-util`) | > 0 and < 584 years; below 1 ms raised to 1 ms |
/// | [`wheel_size`](Builder::wheel_size) | 1024 ticks per revolution | 1 ..= 2^20, rounded up to a power of two |
/// | [`max_pending`](Builder::max_pending) | unbounded | any; 0 refuses every callback |
/// | [`executor`](Builder::executor) | [`Executor::Inline`] | see [`Executor`] |
/// | [`track_call_sites`](Builder::track_call_sites) | off | on or off |
/// | [`suspend_aware`](Builder::suspend_aware) | off | on or off |
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tokio_wheel::Error> {
/// use std::time::Duration;
/// use tokio_wheel::Timer;
///
/// let timer = Timer::builder()
///     .tick(Duration::from_millis(1))
///     .wheel_size(4096) // one revolution: 4.096 s
///     .build()?;
/// assert_eq!(timer.tick(), Duration::from_millis(1));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a Builder does nothing until build() is called"]
pub struct Builder {
    tick: Duration,
    wheel_size: usize,
    max_pending: usize,
    executor: Executor,
    real_clock: bool,
    track_call_sites: bool,
    suspend_aware: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            tick: DEFAULT_TICK,
            wheel_size: 1024,
            max_pending: usize::MAX,
            executor: Executor::Inline,
            real_clock: false,
            track_call_sites: false,
            suspend_aware: false,
        }
    }
}

impl Builder {
    /// The timer's resolution: a timer fires less than one tick after its deadline
    /// (plus up to one millisecond, plus the runtime's scheduling delay), never before
    /// it. Default 10 ms. The millisecond is Tokio's: its timer, which wakes the
    /// driver, counts whole milliseconds, and a step's end (below) rarely falls on one.
    ///
    /// With the feature `test-util` (for tests, in `[dev-dependencies]`), a timer
    /// whose tick is not set has a 1 ms tick instead, Tokio's resolution, as the free
    /// functions' timer there: a paused test of code on [`Timer::new`](crate::Timer::new)
    /// sees a 25 ms deadline fire at exactly 25 ms, as on Tokio's timer, not at the
    /// next 10 ms tick. A tick set here is kept, with or without the feature.
    ///
    /// The wheel turns in steps of a quarter tick (half or all of one on wheels over
    /// 2^18 ticks; see [`wheel_size`](Builder::wheel_size)), and while timers are due
    /// the driver wakes at the end of each step that holds one (or at the whole
    /// millisecond of Tokio's before it), so a timer is in fact late by less than a
    /// step and a millisecond. That is about one wakeup per step that holds a timer
    /// (two where Tokio's millisecond before the step's end comes first and finds it
    /// not yet ended), and none while nothing is pending: a coarser tick costs fewer.
    /// Waking step by step rather than once a tick keeps each wakeup's burst of woken
    /// tasks small, which matters on a busy multi-thread runtime: there Tokio moves the
    /// tasks woken last onto a worker's full local queue to the global queue, behind
    /// every worker's backlog.
    ///
    /// A tick below 1 ms is raised to 1 ms ([`Timer::tick`](crate::Timer::tick) reports it): Tokio's own
    /// timer, which wakes the driver, has 1 ms resolution, so a finer tick would save
    /// well under a millisecond of lateness, and the wheel counts quarter ticks in 44
    /// bits, which at 1 ms lasts 139 years but at 1 µs only 51 days.
    ///
    /// # Errors
    ///
    /// [`Builder::build`] fails with [`Error::InvalidConfig`] for a zero tick, or one
    /// too long to count in nanoseconds in a `u64` (over 584 years).
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// How many ticks one revolution of the wheel covers, rounded up to a power of
    /// two. Default 1024.
    ///
    /// Deadlines beyond the current block of `wheel_size` ticks wait in coarser levels
    /// above the wheel (64 slots each, each slot as long as the whole level below) and
    /// move down as their time comes: a move per level, and a driver wakeup per level
    /// at most (about six for a 10-year sleep at the default settings), never one per
    /// revolution. Size the wheel so that one revolution (`tick × wheel_size`) covers
    /// your common timeouts, and most timers never move.
    ///
    /// The wheel has four slots per tick (see [`tick`](Builder::tick)), each a 4-byte
    /// list head: 16 KiB for the default, and a timer has two wheels (futures,
    /// callbacks) per core, each allocated when a timer first lands in it. Above 2^18 ticks it has fewer slots per tick, to stay
    /// within 2^20 (one per tick at 2^20).
    ///
    /// # Errors
    ///
    /// [`Builder::build`] fails with [`Error::InvalidConfig`] for 0 or more than 2^20.
    pub fn wheel_size(mut self, ticks: usize) -> Self {
        self.wheel_size = ticks;
        self
    }

    /// The most callbacks ([`Timer::schedule`](crate::Timer::schedule)) that may be pending at once; past it,
    /// `schedule` returns [`Error::AtCapacity`]. A cancel or an expiry frees room at
    /// once. Default: unbounded.
    ///
    /// [`Timer::pending`](crate::Timer::pending) counts futures and callbacks, so it can
    /// exceed this limit; only callbacks are checked against it.
    ///
    /// Futures ([`Sleep`](crate::Sleep), [`Timeout`](crate::Timeout),
    /// [`Interval`](crate::Interval)) are not counted and never refused: each is owned
    /// by the task awaiting it, which bounds them already, and a future has no way to
    /// report an error except firing early, which this crate never does.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tokio_wheel::{Error, Timer};
    ///
    /// let timer = Timer::builder().max_pending(1).build().unwrap();
    /// let first = timer.schedule(Duration::from_secs(1), || {}).unwrap();
    /// let refused = timer.schedule(Duration::from_secs(1), || {});
    /// assert_eq!(refused.unwrap_err(), Error::AtCapacity { max: 1 });
    /// first.cancel(); // frees room at once
    /// assert!(timer.schedule(Duration::from_secs(1), || {}).is_ok());
    /// # }
    /// ```
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = max;
        self
    }

    /// Where expired callbacks run; default [`Executor::Inline`]. See [`Executor`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use tokio_wheel::{Executor, Timer};
    ///
    /// // Callbacks that may block go to tokio's blocking pool.
    /// let timer = Timer::builder().executor(Executor::Blocking).build().unwrap();
    /// # }
    /// ```
    pub fn executor(mut self, executor: Executor) -> Self {
        self.executor = executor;
        self
    }

    /// Whether the timer keeps, for each pending timer, the line of code that made it,
    /// for [`Timer::pending_by_site`](crate::Timer::pending_by_site) to count: to find
    /// the code path that leaks timers (deadlines made and never dropped) when
    /// [`Timer::pending`](crate::Timer::pending) only grows. Off by default.
    ///
    /// The line is the caller of `sleep`, `sleep_until`, `timeout`, `timeout_at`,
    /// `interval`, `interval_at`, `schedule`, `schedule_at`, `schedule_detached` or
    /// `schedule_detached_at` (`#[track_caller]`), as a panic's message names it; for
    /// a [`DelayQueue`](crate::DelayQueue)'s values on this timer, the caller of
    /// `insert`, `insert_at`, `try_insert` or `try_insert_at`.
    ///
    /// Off, it costs nothing: no memory, and a branch or two per timer. On, each
    /// pending timer costs 16 bytes more, and making a future looks its line up in a
    /// small map (a lock of the calling thread's own, uncontended); docs/BENCHMARKS.md
    /// has the figures. The free functions' [default timer](crate#default-timer) is
    /// turned on by the environment instead, `TOKIO_WHEEL_TRACK_CALL_SITES=1`, so that
    /// a program that uses only them needs no change; see
    /// [`pending_by_site`](crate::pending_by_site).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::collections::HashMap;
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// let timer = Timer::builder().track_call_sites(true).build().unwrap();
    /// // A deadline per request, kept in a map that nothing ever clears.
    /// let mut deadlines = HashMap::new();
    /// for id in 0..100 {
    ///     deadlines.insert(id, timer.schedule(Duration::from_secs(60), || {}).unwrap());
    /// }
    /// let worst = &timer.pending_by_site()[0];
    /// assert_eq!(worst.pending(), 100);
    /// assert_eq!(worst.location().line(), line!() - 4);
    /// # }
    /// ```
    pub fn track_call_sites(mut self, on: bool) -> Self {
        self.track_call_sites = on;
        self
    }

    /// Whether the timer's timers count the time the machine spends suspended (off by
    /// default, as Tokio's, whose clock stops then).
    ///
    /// On, every timer of this `Timer` (sleeps, timeouts, intervals, callbacks, its
    /// [`DelayQueue`](crate::DelayQueue)s and idle I/O timeouts) counts time on a
    /// clock that runs on through a suspend: on Linux and Android, `CLOCK_BOOTTIME`.
    /// A `sleep` of an hour with 50 minutes of suspend in it completes 10 minutes after
    /// the machine resumes, not an hour after; a deadline that passed while the machine
    /// slept fires on resume, within a tick and a millisecond plus however long the
    /// system takes to resume; an [`Interval`](crate::Interval)'s ticks missed then
    /// follow its [`MissedTickBehavior`](crate::MissedTickBehavior). Never early.
    ///
    /// The timer's clock is Tokio's plus the time suspended since the timer was built.
    /// [`Instant`](crate::Instant)s given to it (`sleep_until`, `timeout_at`,
    /// `interval_at`, `DelayQueue::insert_at`, resets) are Tokio's and are moved by
    /// that offset when given; those it reports (`Sleep::deadline`, an `Interval`'s
    /// ticks, `Scheduled::deadline`, a `DelayQueue`'s deadlines) are moved back when
    /// reported, so that they compare with `Instant::now()`.
    ///
    /// On Linux and Android the driver wakes on a `CLOCK_BOOTTIME` timerfd, waited on
    /// by a thread of its own: a deadline that passed during a suspend fires at
    /// resume. With the feature `test-util`, on a current-thread runtime (whose clock
    /// may be paused, which the boot clock does not follow) it wakes on Tokio's timer,
    /// which a suspend delays by its length: tests use
    /// [`Timer::simulate_suspend`](crate::Timer) there.
    ///
    /// On other platforms only [`Timer::simulate_suspend`](crate::Timer) moves the
    /// clock (macOS: Tokio's clock stops in sleep and this setting does not change
    /// that; Windows: Tokio's clock counts sleep already): see the guide's
    /// "Suspend-aware timers" for the table. It costs two clock reads on each "now"
    /// the timer reads, and nothing when off.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// // A token valid for an hour, refreshed a minute early, even across a suspend.
    /// let timer = Timer::builder().suspend_aware(true).build().unwrap();
    /// let refresh = timer.sleep(Duration::from_secs(59 * 60));
    /// # drop(refresh);
    /// # }
    /// ```
    pub fn suspend_aware(mut self, on: bool) -> Self {
        self.suspend_aware = on;
        self
    }

    /// For a driver on a runtime whose clock is never paused (the default timer's): the
    /// timer's "now" is then the real clock, not the caller's runtime's, which a test
    /// may have paused and advanced, or left behind.
    pub(crate) fn real_clock(mut self) -> Self {
        self.real_clock = true;
        self
    }

    /// The settings checked, for a driver on a runtime with `workers` workers (which
    /// the shard count follows).
    pub(crate) fn validate(self, workers: usize) -> Result<Config, Error> {
        if self.tick.is_zero() {
            return Err(Error::InvalidConfig(format!(
                "tick must be greater than zero (the default is {DEFAULT_TICK:?})"
            )));
        }
        if u64::try_from(self.tick.as_nanos()).is_err() {
            return Err(Error::InvalidConfig(format!(
                "tick {:?} is too long: it must fit in u64 nanoseconds",
                self.tick
            )));
        }
        if self.wheel_size == 0 || self.wheel_size > MAX_WHEEL_SIZE {
            return Err(Error::InvalidConfig(format!(
                "wheel_size must be between 1 and {MAX_WHEEL_SIZE} ticks, not {}",
                self.wheel_size
            )));
        }
        Ok(Config {
            tick: self.tick.max(MIN_TICK),
            wheel_size: self.wheel_size.next_power_of_two(),
            shards: Config::shards_for(workers),
            max_pending: self.max_pending,
            executor: self.executor,
            real_clock: self.real_clock,
            track_call_sites: self.track_call_sites,
            suspend_aware: self.suspend_aware,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        let ok = |b: Builder| b.validate(1).unwrap();
        let err = |b: Builder| b.validate(1).unwrap_err();
        let default = ok(Builder::default());
        // Tokio's millisecond in tests with the feature; the production tick without.
        let unset = if cfg!(feature = "test-util") {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(10)
        };
        assert_eq!((default.tick, default.wheel_size), (unset, 1024));
        // A tick set explicitly is kept, either way.
        assert_eq!(
            ok(Builder::default().tick(Duration::from_millis(10))).tick,
            Duration::from_millis(10)
        );
        assert_eq!(ok(Builder::default().wheel_size(1000)).wheel_size, 1024);
        assert_eq!(ok(Builder::default().wheel_size(1)).wheel_size, 1);
        assert_eq!(
            ok(Builder::default().wheel_size(1 << 20)).wheel_size,
            1 << 20
        );
        assert!(matches!(
            err(Builder::default().wheel_size(0)),
            Error::InvalidConfig(_)
        ));
        assert!(matches!(
            err(Builder::default().wheel_size((1 << 20) + 1)),
            Error::InvalidConfig(_)
        ));
        assert!(matches!(
            err(Builder::default().tick(Duration::ZERO)),
            Error::InvalidConfig(_)
        ));
        assert!(matches!(
            err(Builder::default().tick(Duration::MAX)),
            Error::InvalidConfig(_)
        ));
        // Finer than Tokio can wake us, and than 44-bit ticks can span: saturates.
        assert_eq!(
            ok(Builder::default().tick(Duration::from_nanos(1))).tick,
            MIN_TICK
        );
        assert_eq!(
            ok(Builder::default().tick(Duration::from_micros(999))).tick,
            MIN_TICK
        );
        assert_eq!(ok(Builder::default().tick(MIN_TICK)).tick, MIN_TICK);
    }
}
