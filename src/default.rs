//! The [default timers](crate#default-timer), the one place every default entry point
//! gets its timer from ([`with_default`]), and the free functions on them.
//!
//! A caller inside a Tokio runtime gets a timer built on that runtime (one per
//! runtime), so that its due timers wake their tasks from that runtime's own timer
//! pass, as Tokio's do: a timer driven from another thread wakes them through the
//! runtime's remote queue, which a busy runtime takes from once every few dozen
//! tasks. With the feature `test-util` that timer follows the runtime's clock, paused
//! or not. Outside any runtime (or on one without a time driver) the process-wide
//! timer, on a thread of its own, serves.

use std::future::{Future, IntoFuture};
use std::panic::Location;
use std::sync::OnceLock;
use std::time::Duration;

use crate::builder::Builder;
use crate::interval::Interval;
use crate::sites::PendingSite;
use crate::sleep::Sleep;
use crate::stats::Stats;
use crate::timeout::Timeout;
use crate::timer::Timer;
use tokio::time::Instant;

/// The environment variable that turns call-site tracking on for the default timers
/// (see [`pending_by_site`]).
pub(crate) const TRACK_CALL_SITES_VAR: &str = "TOKIO_WHEEL_TRACK_CALL_SITES";

/// A builder for a default timer: call-site tracking as the environment says, read
/// once per process.
fn default_builder() -> Builder {
    static FROM_ENV: OnceLock<bool> = OnceLock::new();
    let on = *FROM_ENV.get_or_init(|| {
        std::env::var_os(TRACK_CALL_SITES_VAR)
            .is_some_and(|value| !value.is_empty() && value != "0")
    });
    Timer::builder().track_call_sites(on)
}

/// The process-wide timer behind the free functions; see [the crate docs](crate#default-timer).
pub(crate) fn default_timer() -> &'static Timer {
    static DEFAULT: OnceLock<Timer> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        // Its runtime is built, run and kept on its own thread: nothing here enters
        // Tokio's context or drops a runtime, so a first use where Tokio holds its
        // context borrowed works, and a failure panics (documented) without aborting
        // and leaves the next call to try again.
        let runtime = crate::background::runtime()
            .expect("tokio-wheel: cannot start the default timer's thread and runtime");
        default_builder()
            .real_clock()
            .build_on(runtime)
            .expect("tokio-wheel: cannot start the default timer's driver")
    })
}

/// Runs `f` with the timer the default entry points use from here (the free functions,
/// `tower::TimeoutLayer::new`): inside a Tokio runtime with a time driver, that
/// runtime's own; elsewhere the process-wide [`default_timer`].
///
/// A task on a multi-thread runtime that asked before on this thread finds it in a
/// thread-local cache without a lookup (see `per_runtime::with_current`).
#[inline]
#[track_caller]
pub(crate) fn with_default<R>(f: impl FnOnce(&Timer) -> R) -> R {
    crate::missing_test_util::check();
    per_runtime::with_current(f)
}

/// One timer per Tokio runtime.
///
/// # Implementation
///
/// A runtime is known by its `tokio::runtime::Id`, which is never reused in a
/// process. The cache holds a clone of each runtime's timer, which keeps its driver
/// task alive for as long as the runtime runs; once the runtime shuts down, the
/// driver's task is dropped and the timer [is shut down](Timer::is_shutdown), and the
/// next runtime that needs a timer prunes it, so a test suite that builds thousands
/// of runtimes holds the timers of the live ones only. A runtime without a time driver
/// cannot run one; it is remembered as such (the most recent few, which is all a test
/// suite has alive at once) and uses the process-wide timer. So does, without the
/// feature `test-util`, a current-thread runtime whose clock is paused when its timer
/// would be built (a release build's paused test: that timer would follow the real
/// clock while Tokio's paused timer armed its wakeups).
///
/// Two thread-local caches spare the lookup its lock: the last runtime this thread
/// asked from, and, for a multi-thread runtime, the last task, which needs no
/// `Handle` at all (Tokio numbers tasks from one process-wide counter, so a task id
/// names one task of one runtime; a multi-thread runtime drives its timer for as long
/// as it lives, wherever the task is polled from). A current-thread runtime is asked
/// for its `Handle` every time: a `LocalSet`'s task may be driven by one such runtime
/// and then another, and the first, not running, would never fire its timers.
mod per_runtime {
    use std::cell::RefCell;
    use std::sync::{Mutex, PoisonError};

    use tokio::runtime::{Handle, Id, RuntimeFlavor};

    use crate::timer::Timer;

    /// How many runtimes without a time driver are remembered.
    const NO_TIME_DRIVER_REMEMBERED: usize = 16;

    /// Per runtime: its timer, or `None` if none could be built on it (no time driver,
    /// or shut down already). Live runtimes, plus those gone since the last new one
    /// came; few enough to search in order.
    static TIMERS: Mutex<Vec<(Id, Option<Timer>)>> = Mutex::new(Vec::new());

    thread_local! {
        /// The runtime this thread last asked from, and its timer (`None`: the
        /// process-wide one).
        static BY_RUNTIME: RefCell<Option<(Id, Option<Timer>)>> = const { RefCell::new(None) };
        /// The task on a multi-thread runtime that last asked on this thread, and its
        /// runtime's timer.
        static BY_TASK: RefCell<Option<(tokio::task::Id, Timer)>> = const { RefCell::new(None) };
    }

    /// Runs `f` with the caller's runtime's timer, or the process-wide one.
    #[inline]
    pub(super) fn with_current<R>(f: impl FnOnce(&Timer) -> R) -> R {
        let task = tokio::task::try_id();
        let mut f = Some(f);
        if let Some(task) = task {
            // `f` runs inside the cache's shared borrow: a call it makes in turn finds
            // the cache, or, missing, leaves it as it is.
            let hit = BY_TASK.try_with(|cached| {
                let cached = cached.try_borrow().ok()?;
                let (id, timer) = cached.as_ref()?;
                (*id == task && !timer.is_shutdown()).then(|| (f.take().expect("once"))(timer))
            });
            if let Ok(Some(done)) = hit {
                return done;
            }
        }
        let Ok(runtime) = Handle::try_current() else {
            return (f.take().expect("not called yet"))(super::default_timer());
        };
        let id = runtime.id();
        // This thread's last runtime: `f` runs inside the cache's shared borrow, as
        // above, without a clone of the timer.
        let hit = BY_RUNTIME.try_with(|cached| {
            let cached = cached.try_borrow().ok()?;
            let (known, timer) = cached.as_ref()?;
            if *known != id || timer.as_ref().is_some_and(Timer::is_shutdown) {
                return None;
            }
            let f = f.take().expect("once");
            Some(match timer {
                Some(timer) => f(timer),
                None => f(super::default_timer()),
            })
        });
        if let Ok(Some(done)) = hit {
            return done;
        }
        let f = f.take().expect("not called yet");
        let timer = current(&runtime);
        let _ = BY_RUNTIME.try_with(|cached| {
            if let Ok(mut cached) = cached.try_borrow_mut() {
                *cached = Some((id, timer.clone()));
            }
        });
        let Some(timer) = timer else {
            return f(super::default_timer());
        };
        if let Some(task) = task {
            if runtime.runtime_flavor() != RuntimeFlavor::CurrentThread {
                let _ = BY_TASK.try_with(|cached| {
                    if let Ok(mut cached) = cached.try_borrow_mut() {
                        *cached = Some((task, timer.clone()));
                    }
                });
            }
        }
        f(&timer)
    }

    /// `runtime`'s timer, made on its first use; `None` on one without a time driver
    /// (or, without `test-util`, a paused one).
    fn current(runtime: &Handle) -> Option<Timer> {
        let id = runtime.id();
        let mut timers = TIMERS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, timer)) = timers.iter().find(|(known, _)| *known == id) {
            // A timer that is shut down belongs to a runtime shutting down (nothing else
            // can shut it down): the process-wide timer serves what runs in its drop.
            return timer.as_ref().filter(|timer| !timer.is_shutdown()).cloned();
        }
        // A new runtime: the first use of the timer by it. Take out the timers of
        // runtimes that are gone, to drop once the lock is released (dropping one may
        // drop user values, which might call back into here).
        let (gone, mut live): (Vec<_>, Vec<_>) = std::mem::take(&mut *timers)
            .into_iter()
            .partition(|(_, timer)| timer.as_ref().is_some_and(Timer::is_shutdown));
        let timer = build(runtime);
        if timer.is_none() {
            let without = live.iter().filter(|(_, timer)| timer.is_none()).count();
            if without >= NO_TIME_DRIVER_REMEMBERED {
                if let Some(oldest) = live.iter().position(|(_, timer)| timer.is_none()) {
                    live.remove(oldest);
                }
            }
        }
        live.push((id, timer.clone()));
        *timers = live;
        drop(timers);
        drop(gone);
        timer
    }

    /// A default timer on `runtime`: its tick unset, so Tokio's own millisecond under
    /// `test-util` (paused tests asserting whole milliseconds after a sleep hold as on
    /// Tokio's timer), following the runtime's clock.
    #[cfg(feature = "test-util")]
    fn build(runtime: &Handle) -> Option<Timer> {
        super::default_builder().build_on(runtime).ok()
    }

    /// A default timer on `runtime`, on the real clock, as the process-wide one;
    /// `None` for a current-thread runtime whose clock is paused (see above).
    #[cfg(not(feature = "test-util"))]
    fn build(runtime: &Handle) -> Option<Timer> {
        if runtime.runtime_flavor() == RuntimeFlavor::CurrentThread
            && crate::missing_test_util::clock_is_paused()
        {
            return None;
        }
        super::default_builder().real_clock().build_on(runtime).ok()
    }

    /// How many runtimes the cache holds an entry for.
    #[cfg(all(test, feature = "test-util"))]
    pub(super) fn cached() -> usize {
        TIMERS.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// Sleeps for `duration` on the [default timer](crate#default-timer); see
/// [`Timer::sleep`].
///
/// # Panics
///
/// The first call panics if the default timer's thread or runtime cannot be created;
/// in a debug build without the feature `test-util`, the first call on a runtime whose
/// clock is paused panics, saying to turn the feature on (see
/// [the crate docs](crate#default-timer)).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
///
/// tokio_wheel::sleep(Duration::from_millis(20)).await;
/// # }
/// ```
#[track_caller]
pub fn sleep(duration: Duration) -> Sleep {
    let site = Location::caller();
    with_default(|timer| timer.called_from(site).sleep(duration))
}

/// Sleeps until `deadline` on the [default timer](crate#default-timer); see
/// [`Timer::sleep_until`].
///
/// # Panics
///
/// As [`sleep`].
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Sleep {
    let site = Location::caller();
    with_default(|timer| timer.called_from(site).sleep_until(deadline))
}

/// Runs `future` with a deadline `duration` from now on the
/// [default timer](crate#default-timer); see [`Timeout`].
///
/// As with Tokio's `timeout`, the future is polled first, and the deadline fires less
/// than a tick (10 ms in production) and a millisecond late: an answer just past
/// the deadline (101 ms under 100 ms) can win; see
/// [`Timeout`](Timeout#an-answer-just-past-the-deadline).
///
/// # Panics
///
/// As [`sleep`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
///
/// let slow = tokio_wheel::timeout(Duration::from_millis(20), std::future::pending::<()>());
/// assert!(slow.await.is_err());
/// # }
/// ```
#[track_caller]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let site = Location::caller();
    with_default(|timer| timer.called_from(site).timeout(duration, future))
}

/// Runs `future` with a deadline at `deadline` on the
/// [default timer](crate#default-timer); see [`Timeout`].
///
/// # Panics
///
/// As [`sleep`].
#[track_caller]
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    let site = Location::caller();
    with_default(|timer| timer.called_from(site).timeout_at(deadline, future))
}

/// An [`Interval`] on the [default timer](crate#default-timer); see
/// [`Timer::interval`].
///
/// # Panics
///
/// As [`sleep`].
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    let site = Location::caller();
    with_default(|timer| timer.called_from(site).interval(period))
}

/// An [`Interval`] whose first tick is at `start`, on the
/// [default timer](crate#default-timer); see [`Timer::interval_at`].
///
/// # Panics
///
/// As [`sleep`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio_wheel::{Instant, MissedTickBehavior};
///
/// let start = Instant::now() + Duration::from_millis(20);
/// let mut every = tokio_wheel::interval_at(start, Duration::from_millis(20));
/// every.set_missed_tick_behavior(MissedTickBehavior::Skip);
/// assert_eq!(every.tick().await, start);
/// assert!(Instant::now() >= start);
/// # }
/// ```
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    let site = Location::caller();
    with_default(|timer| timer.called_from(site).interval_at(start, period))
}

/// The [default timer](crate#default-timer)'s pending timers by the line of code that
/// made them, most pending first; see [`Timer::pending_by_site`]. Empty unless the
/// environment variable `TOKIO_WHEEL_TRACK_CALL_SITES` is set (to anything but `0` or
/// nothing) when the default timer is built.
///
/// A program that uses only the free functions turns tracking on without changing
/// them, or any other code: start it with `TOKIO_WHEEL_TRACK_CALL_SITES=1`, as
/// `RUST_BACKTRACE=1` turns on backtraces, and report this where you report
/// [`Stats`](crate::Stats) (a log line every minute, an admin endpoint), so that it is
/// there when needed, empty and nearly free otherwise. The variable is read once, when
/// the first default timer is built (the process-wide one, on the first use of a free
/// function; with the feature `test-util`, each runtime's), so set it before the
/// program starts, not from inside it. An explicit [`Timer`] is turned on with
/// [`Builder::track_call_sites`](crate::Builder::track_call_sites) instead, and does
/// not read the environment.
///
/// The lines are those of the calls to [`sleep`], [`sleep_until`], [`timeout`],
/// [`timeout_at`], [`interval`] and [`interval_at`] (and of timers the default timer
/// makes for [`DelayQueue::new`](crate::DelayQueue::new),
/// [`io::TimeoutStream::new`](crate::io::TimeoutStream::new) and, with the feature
/// `tower`, `tower::TimeoutLayer::new`, at this crate's own lines).
///
/// # Panics
///
/// As [`sleep`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
///
/// // Run with TOKIO_WHEEL_TRACK_CALL_SITES=1 to see the line below listed.
/// let deadline = tokio_wheel::timeout(Duration::from_secs(60), std::future::pending::<()>());
/// for site in tokio_wheel::pending_by_site() {
///     eprintln!("timers: {site}");
/// }
/// # drop(deadline);
/// # }
/// ```
#[track_caller]
pub fn pending_by_site() -> Vec<PendingSite> {
    with_default(Timer::pending_by_site)
}

/// Counters of what the [default timer](crate#default-timer) has done; see
/// [`Timer::stats`] and [`Stats`].
///
/// The timer is the one the free functions use from here: the process-wide one, or
/// with the feature `test-util`, inside a runtime, that runtime's own. Report it
/// beside [`pending_by_site`] (a log line every minute, an admin endpoint).
///
/// # Panics
///
/// As [`sleep`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
///
/// let before = tokio_wheel::stats().fired;
/// tokio_wheel::sleep(Duration::from_millis(20)).await;
/// assert!(tokio_wheel::stats().fired > before);
/// # }
/// ```
#[track_caller]
pub fn stats() -> Stats {
    with_default(Timer::stats)
}

/// Waits until the [default timer](crate#default-timer) has fired every timer due by
/// now; see [`Timer::catch_up`].
///
/// For tests with the paused clock and the feature `test-util`: after
/// `tokio::time::advance(d).await`, the timers `d` passed are ready when polled, but
/// their tasks are woken by the timer's driver, a task that has yet to run; this runs
/// it. Not needed when the test simply awaits: the runtime's auto-advance runs the
/// driver.
///
/// # Panics
///
/// As [`sleep`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// # // Without the feature `test-util` the default timer follows the real clock.
/// # if cfg!(not(feature = "test-util")) { return; }
/// use std::time::Duration;
///
/// let mut sleep = tokio_test::task::spawn(tokio_wheel::sleep(Duration::from_secs(30)));
/// assert!(sleep.poll().is_pending());
/// tokio::time::advance(Duration::from_secs(31)).await;
/// tokio_wheel::catch_up().await;
/// assert!(sleep.poll().is_ready());
/// # }
/// ```
#[track_caller]
pub fn catch_up() -> impl Future<Output = ()> + Send + 'static {
    // The timer is looked up here, where the caller's line is known, not at the
    // first poll.
    let timer = with_default(Timer::clone);
    async move { timer.catch_up().await }
}

/// Advances the caller's paused clock by `duration` with Tokio's
/// [`advance`][tokio-advance], then waits until the [default timer](crate#default-timer)
/// has fired every timer the new time has passed: [`catch_up`] included, so a test
/// that called `tokio::time::advance` keeps working after the swap (feature
/// `test-util`).
///
/// Never early: a timer is ready when polled once the clock has reached its deadline,
/// and the driver fires it (waking its task) once the clock has passed the end of the
/// wheel's step its deadline falls in: a quarter of the default timer's 1 ms tick
/// under `test-util`, where whole-millisecond deadlines end steps, so a task waiting
/// on one is woken as Tokio's would be. An explicit [`Timer`] is not caught up by
/// this: `timer.catch_up().await` after it.
///
/// # Panics
///
/// As Tokio's: if the clock is not paused, or outside a current-thread runtime.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
///
/// let mut sleep = tokio_test::task::spawn(tokio_wheel::sleep(Duration::from_secs(30)));
/// assert!(sleep.poll().is_pending());
/// tokio_wheel::advance(Duration::from_secs(31)).await;
/// assert!(sleep.poll().is_ready());
/// # }
/// ```
///
/// [tokio-advance]: https://docs.rs/tokio/1/tokio/time/fn.advance.html
#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub async fn advance(duration: Duration) {
    tokio::time::advance(duration).await;
    catch_up().await;
}

#[cfg(all(test, feature = "test-util"))]
mod tests {
    use super::*;

    fn paused_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    /// A suite that builds a runtime per test keeps the timers of the live ones only.
    #[test]
    fn the_timers_of_runtimes_that_are_gone_are_pruned() {
        for _ in 0..200 {
            let runtime = paused_runtime();
            runtime.block_on(async {
                let start = Instant::now();
                sleep(Duration::from_secs(1)).await;
                // The paused clock: never early, late by less than a tick and a
                // millisecond.
                let took = start.elapsed();
                assert!(took >= Duration::from_secs(1), "early: {took:?}");
                assert!(took < Duration::from_millis(1011), "late: {took:?}");
            });
        }
        // Other tests of this binary run beside this one, each with a runtime or two.
        let cached = per_runtime::cached();
        assert!(
            cached < 20,
            "{cached} runtimes cached after 200 came and went"
        );
    }

    /// Each runtime gets its own timer, on its own clock; the same runtime always
    /// gets the same one.
    #[test]
    fn a_runtime_has_one_timer_of_its_own() {
        let (a, b) = (paused_runtime(), paused_runtime());
        let in_a = a.block_on(async { with_default(Timer::clone) });
        let again = a.block_on(async { with_default(Timer::clone) });
        let in_b = b.block_on(async { with_default(Timer::clone) });
        assert!(std::sync::Arc::ptr_eq(in_a.shared(), again.shared()));
        assert!(!std::sync::Arc::ptr_eq(in_a.shared(), in_b.shared()));
        assert!(!std::sync::Arc::ptr_eq(
            in_a.shared(),
            default_timer().shared()
        ));
    }

    /// Outside a runtime, and on a runtime without a time driver (where no timer can
    /// run), the process-wide timer serves, on the real clock.
    #[test]
    fn outside_a_runtime_or_without_a_time_driver_the_process_wide_timer_serves() {
        let outside = with_default(Timer::clone);
        assert!(std::sync::Arc::ptr_eq(
            outside.shared(),
            default_timer().shared()
        ));
        let no_time = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        no_time.block_on(async {
            for _ in 0..2 {
                let timer = with_default(Timer::clone);
                assert!(std::sync::Arc::ptr_eq(
                    timer.shared(),
                    default_timer().shared()
                ));
            }
            let start = std::time::Instant::now();
            sleep(Duration::from_millis(20)).await;
            let took = start.elapsed();
            // Real clock: never early; tolerant above of a loaded machine.
            assert!(took >= Duration::from_millis(20), "early: {took:?}");
            assert!(took < Duration::from_secs(5), "{took:?}");
        });
    }
}
