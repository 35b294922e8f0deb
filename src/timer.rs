//! [`Timer`]: the cheap, cloneable handle through which everything is registered;
//! what it reports (pending, stats), its shutdown, and [`Builder::build`], which
//! starts one. The entry points that make timers are in
//! [`entry_points`](crate::entry_points).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::builder::Builder;
use crate::driver::{self, Anchor, Shared, SiteAnchors};
use crate::error::Error;
use crate::scheduled::Unfired;
use crate::sites::{PendingSite, Site};
use crate::stats::Stats;

/// A hashed-wheel timer, driven by one Tokio task.
///
/// Cloning is cheap (one `Arc`); every clone and every future made from it share one
/// wheel. The driver task ends by itself once every clone and every future is gone.
///
/// A `Timer` follows the real clock, as Tokio's `Instant` does without Tokio's own
/// `test-util`. With this crate's feature `test-util` (for tests: in
/// `[dev-dependencies]`, as Tokio's) it follows the clock of the runtime it was built
/// on instead, including `tokio::time::pause()` and `advance()`; in debug builds
/// without the feature, a timer used on a runtime whose clock is paused panics, at
/// the caller's line, saying to add the feature (see
/// [the crate docs](crate#testing-with-the-paused-clock)).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::Timer;
///
/// let timer = Timer::new();
/// let start = tokio::time::Instant::now();
/// timer.sleep(Duration::from_millis(100)).await;
/// let slept = start.elapsed();
/// assert!(slept >= Duration::from_millis(100) && slept < Duration::from_millis(110));
/// # }
/// ```
#[derive(Clone)]
pub struct Timer {
    /// One per shard, each holding the shared state: what the timer's futures and
    /// callback handles hold instead of a clone of it (see `driver::Anchor`).
    anchors: Arc<[Arc<Anchor>]>,
    /// The anchors per call site that futures hold instead, if the timer tracks call
    /// sites (`Builder::track_call_sites`): a field of the handle, so that a timer
    /// that does not pays one branch on it, and no lookup.
    sites: Option<Arc<SiteAnchors>>,
}

impl Timer {
    /// A timer with the default settings (10 ms tick, 1024 ticks per revolution, callbacks run
    /// [inline](crate::Executor::Inline), no cap on pending callbacks), its driver spawned
    /// on the current Tokio runtime.
    ///
    /// With the feature `test-util` its tick is 1 ms, Tokio's own resolution, so that
    /// paused tests see a deadline fire at its exact millisecond, as on Tokio's timer
    /// (see [`Builder::tick`]).
    ///
    /// # Panics
    ///
    /// If called outside a Tokio runtime, on one without its time driver, or on one that
    /// has shut down. Use [`Timer::builder`] to get an [`Error`](crate::Error) instead.
    pub fn new() -> Timer {
        match Builder::default().build() {
            Ok(timer) => timer,
            Err(e) => panic!("Timer::new: {e}"),
        }
    }

    /// A [`Builder`] to configure the tick, the wheel size, and the runtime.
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn from_shared(shared: Arc<Shared>) -> Timer {
        let anchors = Anchor::all(&shared);
        let sites = shared
            .track_call_sites
            .then(|| Arc::new(SiteAnchors::new(anchors.len())));
        Timer { anchors, sites }
    }

    /// The shared state (every anchor holds the same).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.anchors[0].shared
    }

    /// A reference that keeps this timer alive, from the calling thread's shard.
    #[inline]
    pub(crate) fn anchor(&self) -> Arc<Anchor> {
        Anchor::local(&self.anchors)
    }

    /// The anchor a future made at `site` holds: the calling thread's shard's, or in
    /// a timer that tracks call sites, the one of that shard for this line.
    #[inline(always)]
    pub(crate) fn anchor_at(&self, site: Site) -> Arc<Anchor> {
        match &self.sites {
            None => self.anchor(),
            Some(sites) => sites.local(&self.anchors, site),
        }
    }

    /// How many timers are registered, not yet fired and not cancelled: futures that
    /// have been polled and are waiting (a future registers on its first poll), and
    /// callbacks. [`Builder::max_pending`] bounds the callbacks only, so this can
    /// exceed it.
    ///
    /// Exact at the moment of the call (it takes the wheel's lock).
    pub fn pending(&self) -> usize {
        self.shared().pending()
    }

    /// The pending timers by the line of code that made them, most pending first:
    /// where a leak (deadlines made on some path and never dropped) comes from.
    /// Empty unless the timer was built with
    /// [`Builder::track_call_sites`]`(true)`.
    ///
    /// A line is the caller of the entry point that made the timer (`sleep`,
    /// `timeout`, `interval`, `schedule` and their `_at`/`_until` forms, on a `Timer`
    /// or the free functions); see [`PendingSite`]. Timers are counted as
    /// [`pending`](Timer::pending) counts them: a future from its first poll until it
    /// fires, is dropped or is reset into the past; a callback from `schedule` until
    /// it runs or is cancelled. The values of the [`DelayQueue`](crate::DelayQueue)s
    /// on this timer are counted too, at the lines that inserted them, from insert
    /// until removed, taken or cleared (their sum is beyond `pending()`, which counts
    /// a queue's one sleep). Sites of equal count come earliest deadline first.
    ///
    /// It walks every pending timer, each shard of the wheel under its lock (the
    /// shards are read one after another, so a timer made or gone meanwhile may or
    /// may not be counted; one pending throughout is counted exactly once): for a
    /// report every few seconds or on demand, not for every request.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// let timer = Timer::builder().track_call_sites(true).build().unwrap();
    /// for _ in 0..3 {
    ///     let timer = timer.clone();
    ///     tokio::spawn(async move { timer.sleep(Duration::from_secs(60)).await });
    /// }
    /// let retry = timer.schedule(Duration::from_secs(5), || {}).unwrap();
    /// tokio::task::yield_now().await; // the tasks run: their sleeps register
    ///
    /// let sites = timer.pending_by_site();
    /// for site in &sites {
    ///     println!("{site}"); // "src/main.rs:9:39: 3 pending", then the retry's line
    /// }
    /// let counts: Vec<usize> = sites.iter().map(|site| site.pending()).collect();
    /// assert_eq!(counts, [3, 1]);
    /// assert_eq!(sites[1].earliest_deadline(), Some(retry.deadline()));
    /// # }
    /// ```
    pub fn pending_by_site(&self) -> Vec<PendingSite> {
        match self.sites {
            Some(_) => self.shared().pending_by_site(),
            None => Vec::new(),
        }
    }

    /// The timer's resolution: how late, at most, a timer fires (plus the runtime's
    /// scheduling delay). The wheel itself turns in quarters of it.
    ///
    /// A setting, not a wait: unlike [`Interval::tick`] it returns at once. To wait a
    /// tick, `timer.sleep(timer.tick()).await`.
    ///
    /// [`Interval::tick`]: crate::interval::Interval::tick
    #[must_use = "a setting, not a wait: to wait a tick, `timer.sleep(timer.tick()).await`"]
    pub fn tick(&self) -> Duration {
        self.shared().clock.tick()
    }

    /// As if the machine had been suspended for `duration` just now: for testing a
    /// [suspend-aware](crate::Builder::suspend_aware) timer without suspending a
    /// machine.
    ///
    /// This timer's clock moves on by `duration`; Tokio's clock and every other timer
    /// do not see it, and neither does this one if it is not suspend-aware. The driver
    /// turns at once, from here, so that what fell due fires and its tasks are woken
    /// (callbacks that run on the driver task run when it next runs).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tokio_wheel::{Instant, Timer};
    ///
    /// let timer = Timer::builder().suspend_aware(true).build().unwrap();
    /// let start = Instant::now();
    /// let sleep = timer.sleep(Duration::from_secs(3600));
    /// timer.simulate_suspend(Duration::from_secs(50 * 60));
    /// sleep.await;
    /// // Ten minutes on Tokio's clock: the other fifty passed while "suspended".
    /// assert!(start.elapsed() >= Duration::from_secs(10 * 60));
    /// assert!(start.elapsed() < Duration::from_secs(10 * 60) + timer.tick() * 2);
    /// # }
    /// ```
    #[cfg(feature = "test-util")]
    pub fn simulate_suspend(&self, duration: Duration) {
        self.shared().simulate_suspend(duration);
    }

    /// Counters of what the timer has done; see [`Stats`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// let timer = Timer::new();
    /// timer.sleep(Duration::from_secs(10)).await;
    /// let stats = timer.stats();
    /// assert_eq!(stats.fired, 1);
    /// // A lone 10 s sleep wakes the driver a few times, not 1000 (once per tick).
    /// assert!(stats.driver_wakeups < 10, "{stats:?}");
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared().stats()
    }

    /// Waits until the driver has processed every step of the wheel (a quarter tick)
    /// that has ended by now: every timer due by then has fired (its task woken, its
    /// inline callback run), except one due within the current step. Returns at once
    /// once the timer is shut down. "Now" is the driver's runtime's clock: it waits
    /// for one complete turn of the driver that started after the call.
    ///
    /// For tests with the paused clock. After `tokio::time::advance(d).await`, this
    /// timer's futures that `d` passed are ready when polled, but their tasks are woken
    /// by its driver, a task that has yet to run; `timer.catch_up().await` asks it to
    /// turn now and waits for that turn. Callbacks on [`Executor::Spawn`](crate::Executor::Spawn) or
    /// [`Executor::Blocking`](crate::Executor::Blocking) have been handed to the
    /// runtime then, not necessarily run.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_test::{assert_pending, assert_ready, task};
    /// use tokio_wheel::Timer;
    ///
    /// let timer = Timer::new(); // 1 ms tick under `test-util` (10 ms without)
    /// let mut sleep = task::spawn(timer.sleep(Duration::from_millis(5)));
    /// assert_pending!(sleep.poll());
    /// tokio::time::advance(Duration::from_millis(10)).await;
    /// timer.catch_up().await; // the driver has run its turn for the new time
    /// assert!(sleep.is_woken());
    /// assert_ready!(sleep.poll());
    /// # }
    /// ```
    pub async fn catch_up(&self) {
        self.shared().catch_up().await;
    }

    /// Stops the timer and returns every callback that never ran.
    ///
    /// Once it returns, the driver has stopped turning (its task only waits, idle, for
    /// the timer's end, to notice meanwhile if its runtime is dropped), [`pending`] is 0 and later
    /// [`schedule`](Timer::schedule) calls return [`Error::Shutdown`]. Callbacks
    /// already handed to an executor are not waited for. Calling it again returns an
    /// empty `Vec`.
    ///
    /// Futures are never early, shut down or not: every [`Sleep`], [`Timeout`] and
    /// [`Interval`] of this timer, pending now or made later, still completes no
    /// earlier than its deadline, timed by Tokio's timer instead of the wheel: on
    /// the driver's runtime when polled from a task there (its clock, paused or not),
    /// otherwise on the process-wide [default timer](crate#default-timer)'s runtime
    /// (the real clock, checked against the driver's runtime's clock while that
    /// runtime is alive). So no task waits for ever, and no loop on an `Interval` spins.
    ///
    /// [`pending`]: Timer::pending
    /// [`Sleep`]: crate::sleep::Sleep
    /// [`Timeout`]: crate::timeout::Timeout
    /// [`Interval`]: crate::interval::Interval
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tokio_wheel::Error> {
    /// # if cfg!(not(feature = "test-util")) { return Ok(()); } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::{Error, Timer};
    ///
    /// let timer = Timer::new();
    /// timer.schedule(Duration::from_secs(60), || println!("retry"))?.detach();
    /// let sleeper = tokio::spawn(timer.sleep(Duration::from_secs(3600)));
    /// tokio::task::yield_now().await;
    ///
    /// let unfired = timer.shutdown().await;
    /// assert_eq!(unfired.len(), 1); // the retry, which never ran
    /// assert_eq!(timer.pending(), 0);
    /// let start = tokio::time::Instant::now();
    /// sleeper.await.unwrap(); // still an hour: never early
    /// assert!(start.elapsed() >= Duration::from_secs(3599));
    /// assert!(matches!(timer.schedule(Duration::ZERO, || {}), Err(Error::Shutdown)));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn shutdown(&self) -> Vec<Unfired> {
        let unfired = self.shutdown_now();
        self.shared().stopped().await;
        unfired
    }

    /// The part of [`shutdown`](Timer::shutdown) that does not wait for the driver.
    pub(crate) fn shutdown_now(&self) -> Vec<Unfired> {
        let shared = self.shared();
        let unrun = shared.shutdown();
        unrun
            .into_iter()
            .map(|callback| {
                let deadline = shared.reported(shared.clock.instant_at(callback.deadline()));
                Unfired::new(deadline, callback)
            })
            .collect()
    }

    /// Whether [`shutdown`](Timer::shutdown) was called, or the driver's runtime shut
    /// down. From then on `schedule` fails with [`Error::Shutdown`], and futures are
    /// timed by Tokio's timer instead of the wheel (still never early; see
    /// [`shutdown`](Timer::shutdown)): a loop driven by an [`Interval`] goes on
    /// ticking once a period, and should check this to stop.
    ///
    /// [`Interval`]: crate::interval::Interval
    pub fn is_shutdown(&self) -> bool {
        self.shared().is_shutdown()
    }
}

impl Default for Timer {
    /// Same as [`Timer::new`].
    fn default() -> Self {
        Timer::new()
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("tick", &self.tick())
            .field("wheel_size", &self.shared().wheel_size())
            .field("pending", &self.pending())
            .finish()
    }
}

/// Starting a timer from its settings. Here rather than in `builder.rs` so that the
/// builder, a bag of checked settings, depends on nothing above the configuration.
impl Builder {
    /// Checks the settings and spawns the driver on the current Tokio runtime.
    ///
    /// The runtime must have its time driver enabled (`enable_time()` or
    /// `enable_all()`, as `#[tokio::main]` does).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if a setting is out of range, if this is not called
    /// from within a Tokio runtime, or if that runtime has no time driver;
    /// [`Error::Shutdown`] if it has shut down.
    ///
    /// # Panics
    ///
    /// Never, with unwinding. Tokio offers no way to ask whether a runtime has its
    /// time driver, so a runtime without one is found by catching the panic of
    /// `tokio::time::interval` (the panic hook still reports it, on stderr by
    /// default); built with `panic = "abort"`, the process aborts there instead, as
    /// at any use of Tokio's timer on such a runtime. Nothing else here panics.
    pub fn build(self) -> Result<Timer, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::InvalidConfig(
                "Builder::build must be called from within a Tokio runtime; \
                 use Builder::build_on(&handle) elsewhere"
                    .into(),
            )
        })?;
        self.build_on(&runtime)
    }

    /// Like [`build`](Builder::build), but spawns the driver on `runtime`, which may be
    /// any Tokio runtime with its time driver enabled; the timer's futures can then be
    /// awaited from any runtime or executor.
    ///
    /// It can be called from anywhere, including where `Handle::enter` would panic: in
    /// a thread-local's destructor, or while Tokio holds its context borrowed (in the
    /// drop of a future that `tokio::spawn` refused on a runtime that has shut down).
    /// From another runtime's context it enters `runtime` on a short-lived thread of
    /// its own (tens of microseconds), since Tokio cannot tell whether entering in
    /// place would panic.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if a setting is out of range or `runtime` has no time
    /// driver; [`Error::Shutdown`] if `runtime` has shut down, where the driver could
    /// never run.
    ///
    /// # Panics
    ///
    /// As [`build`](Builder::build): only under `panic = "abort"`, and only for a
    /// runtime without its time driver.
    pub fn build_on(self, runtime: &tokio::runtime::Handle) -> Result<Timer, Error> {
        let config = self.validate(runtime.metrics().num_workers())?;
        let shared = driver::start(config, runtime)?;
        // A runtime that has shut down drops the driver's task as it is spawned, and
        // the task's guard marks the timer shut down.
        if shared.is_shutdown() {
            return Err(Error::Shutdown);
        }
        Ok(Timer::from_shared(shared))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_has_a_shard_per_core_or_per_worker_if_more() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for workers in [1, 8, 100] {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_time()
                .build()
                .unwrap();
            let timer = Timer::builder().build_on(runtime.handle()).unwrap();
            let expected = cores.max(workers).min(crate::config::MAX_SHARDS);
            assert_eq!(timer.shared().shards(), expected, "{workers} workers");
        }
    }
}
