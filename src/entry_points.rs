//! [`Timer`]'s entry points that make timers (sleeps, timeouts, intervals,
//! callbacks), and [`CalledFrom`], the path each takes with its caller's line.

use std::future::IntoFuture;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::callback;
use crate::clock::deadline_after;
use crate::driver::Anchor;
use crate::error::Error;
use crate::interval::Interval;
use crate::scheduled::Scheduled;
use crate::sites::Site;
use crate::sleep::Sleep;
use crate::timeout::Timeout;
use crate::timer::Timer;

impl Timer {
    /// The entry points that make timers, for a caller at `site`: what the public
    /// ones (`#[track_caller]`) call with their caller's line, and what code that
    /// cannot pass `#[track_caller]` on (a closure in between) calls with the line it
    /// took itself.
    ///
    /// In debug builds without the feature `test-util`, panics at its caller's line if
    /// the caller's runtime's clock is paused, which no timer follows then
    /// ([`missing_test_util`](crate::missing_test_util)).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn called_from(&self, site: &'static Location<'static>) -> CalledFrom<'_> {
        crate::missing_test_util::check();
        CalledFrom { timer: self, site }
    }

    /// A future that completes `duration` from now, less than a tick and a millisecond
    /// late.
    ///
    /// Saturates: `Duration::MAX` sleeps about 30 years, without overflow.
    /// See [`Sleep`] for when it touches the wheel and what dropping it does.
    #[doc(alias = "delay")]
    #[track_caller]
    pub fn sleep(&self, duration: Duration) -> Sleep {
        self.called_from(Location::caller()).sleep(duration)
    }

    /// A future that completes at `deadline`, less than a tick and a millisecond late,
    /// and is ready whenever it is polled once `deadline` has passed: a deadline in the
    /// past completes on its first poll.
    #[track_caller]
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        self.called_from(Location::caller()).sleep_until(deadline)
    }

    /// [`sleep_until`](Timer::sleep_until) a deadline on the timer's clock, as the
    /// timer's own parts compute them from its "now" (see `Shared::given`).
    #[track_caller]
    pub(crate) fn sleep_until_on_clock(&self, deadline: Instant) -> Sleep {
        self.called_from(Location::caller())
            .sleep_until_on_clock(deadline)
    }

    /// Runs `future` with a deadline `duration` from now; see [`Timeout`].
    ///
    /// The deadline fires less than a tick and a millisecond late, and the future is
    /// polled first, as with Tokio's `timeout`: on the real clock an answer just past
    /// the deadline (101 ms under 100 ms) can win; see
    /// [`Timeout`](Timeout#an-answer-just-past-the-deadline).
    #[track_caller]
    pub fn timeout<F: IntoFuture>(&self, duration: Duration, future: F) -> Timeout<F::IntoFuture> {
        self.called_from(Location::caller())
            .timeout(duration, future)
    }

    /// Runs `future` with a deadline at `deadline`; see [`Timeout`].
    #[track_caller]
    pub fn timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        self.called_from(Location::caller())
            .timeout_at(deadline, future)
    }

    /// An [`Interval`] whose first tick completes at once, then every `period`.
    ///
    /// A zero `period` is raised to one tick of this timer (tokio panics instead).
    #[track_caller]
    pub fn interval(&self, period: Duration) -> Interval {
        self.called_from(Location::caller()).interval(period)
    }

    /// An [`Interval`] whose first tick is at `start`, then every `period`.
    ///
    /// A zero `period` is raised to one tick of this timer (tokio panics instead).
    #[track_caller]
    pub fn interval_at(&self, start: Instant, period: Duration) -> Interval {
        self.called_from(Location::caller())
            .interval_at(start, period)
    }

    /// Runs `f` once, `delay` from now (less than a tick and a millisecond late), on the
    /// timer's [`Executor`](crate::Executor).
    ///
    /// The returned [`Scheduled`] cancels the callback when dropped; call
    /// [`Scheduled::detach`] to let it run regardless. So `let _ = timer.schedule(..)`,
    /// the fix rustc suggests for the unused result, cancels it at once: keep the
    /// handle, `.detach()` it, or use [`Timer::schedule_detached`]. A callback may itself schedule
    /// (through a `Timer` clone) and cancel other callbacks, on any executor.
    ///
    /// A zero or past delay runs it on the next tick, never on the caller's stack.
    /// Saturates like [`Timer::sleep`].
    ///
    /// # Errors
    ///
    /// [`Error::AtCapacity`] if [`Builder::max_pending`] callbacks are pending;
    /// [`Error::Shutdown`] after [`Timer::shutdown`], or once the driver's runtime
    /// has shut down; [`Error::OutOfRange`] once the paused clock has run past the
    /// timer's range.
    ///
    /// [`Builder::max_pending`]: crate::builder::Builder::max_pending
    ///
    /// # Examples
    ///
    /// A heartbeat that re-arms itself, Dubbo-style:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tokio_wheel::Error> {
    /// # if cfg!(not(feature = "test-util")) { return Ok(()); } // the paused clock needs it
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// fn beat(timer: Timer, count: Arc<AtomicUsize>) {
    ///     if count.fetch_add(1, Ordering::SeqCst) < 4 {
    ///         let next = timer.clone();
    ///         if let Ok(handle) = timer.schedule(Duration::from_secs(1), move || beat(next, count)) {
    ///             handle.detach();
    ///         }
    ///     }
    /// }
    ///
    /// let timer = Timer::new();
    /// let count = Arc::new(AtomicUsize::new(0));
    /// beat(timer.clone(), count.clone());
    /// tokio::time::sleep(Duration::from_secs(10)).await;
    /// assert_eq!(count.load(Ordering::SeqCst), 5);
    /// # Ok(())
    /// # }
    /// ```
    #[track_caller]
    pub fn schedule<F>(&self, delay: Duration, f: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.called_from(Location::caller()).schedule(delay, f)
    }

    /// Runs `f` once at `deadline` (less than a tick and a millisecond late); see
    /// [`Timer::schedule`].
    ///
    /// # Errors
    ///
    /// As [`Timer::schedule`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tokio_wheel::Error> {
    /// # if cfg!(not(feature = "test-util")) { return Ok(()); } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::{Instant, Timer};
    ///
    /// let timer = Timer::new();
    /// let at = Instant::now() + Duration::from_secs(30);
    /// let handle = timer.schedule_at(at, || println!("lease expired"))?;
    /// assert_eq!(handle.deadline(), at);
    /// # Ok(())
    /// # }
    /// ```
    #[track_caller]
    pub fn schedule_at<F>(&self, deadline: Instant, f: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.called_from(Location::caller())
            .schedule_at(deadline, f)
    }

    /// Runs `f` once, `delay` from now, with no handle: as
    /// [`schedule`](Timer::schedule)`(delay, f)?.`[`detach`](Scheduled::detach)`()`,
    /// minus the handle's cost (a reference count taken and dropped on the timer).
    /// For fire-and-forget work that is never cancelled, as `tokio::spawn` with its
    /// `JoinHandle` dropped. The timer's driver stays alive until `f` has run.
    ///
    /// # Errors
    ///
    /// As [`Timer::schedule`]; the closure is dropped unrun.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tokio_wheel::Error> {
    /// # if cfg!(not(feature = "test-util")) { return Ok(()); } // the paused clock needs it
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// let timer = Timer::new();
    /// let flushed = Arc::new(AtomicBool::new(false));
    /// let flag = flushed.clone();
    /// timer.schedule_detached(Duration::from_secs(5), move || flag.store(true, Ordering::SeqCst))?;
    /// drop(timer); // the callback keeps the driver alive
    /// tokio::time::sleep(Duration::from_secs(6)).await;
    /// assert!(flushed.load(Ordering::SeqCst));
    /// # Ok(())
    /// # }
    /// ```
    #[track_caller]
    pub fn schedule_detached<F>(&self, delay: Duration, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.called_from(Location::caller())
            .schedule_detached(delay, f)
    }

    /// Runs `f` once at `deadline`, with no handle; see [`Timer::schedule_detached`].
    ///
    /// # Errors
    ///
    /// As [`Timer::schedule`].
    #[track_caller]
    pub fn schedule_detached_at<F>(&self, deadline: Instant, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.called_from(Location::caller())
            .schedule_detached_at(deadline, f)
    }
}

/// A [`Timer`]'s entry points that make timers, for a caller at a given line (see
/// [`Timer::called_from`]): the line is kept beside each timer it makes if the timer
/// tracks call sites, and costs nothing otherwise.
#[derive(Clone, Copy)]
pub(crate) struct CalledFrom<'a> {
    timer: &'a Timer,
    site: Site,
}

impl CalledFrom<'_> {
    /// The anchor a future made here holds (see [`Timer::anchor_at`]).
    #[inline(always)]
    fn anchor(self) -> Arc<Anchor> {
        self.timer.anchor_at(self.site)
    }

    /// [`Timer::sleep`]. Always inlined, as the rest of this path: a timer that
    /// does not track call sites pays nothing for the line passed along.
    #[inline(always)]
    pub(crate) fn sleep(self, duration: Duration) -> Sleep {
        let anchor = self.anchor();
        let now = anchor.shared.now();
        Sleep::after(anchor, now, duration)
    }

    /// [`Timer::sleep_until`]: Tokio's `deadline`, on the timer's clock.
    #[inline(always)]
    pub(crate) fn sleep_until(self, deadline: Instant) -> Sleep {
        self.sleep_until_on_clock(self.timer.shared().given(deadline))
    }

    /// [`Timer::sleep_until_on_clock`].
    #[inline(always)]
    pub(crate) fn sleep_until_on_clock(self, deadline: Instant) -> Sleep {
        Sleep::new(self.anchor(), deadline)
    }

    /// [`Timer::timeout`].
    pub(crate) fn timeout<F: IntoFuture>(
        self,
        duration: Duration,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep(duration))
    }

    /// [`Timer::timeout_at`].
    pub(crate) fn timeout_at<F: IntoFuture>(
        self,
        deadline: Instant,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep_until(deadline))
    }

    /// [`Timer::interval`].
    pub(crate) fn interval(self, period: Duration) -> Interval {
        Interval::new(self.sleep_until_on_clock(self.timer.shared().now()), period)
    }

    /// [`Timer::interval_at`].
    pub(crate) fn interval_at(self, start: Instant, period: Duration) -> Interval {
        Interval::new(self.sleep_until(start), period)
    }

    /// [`Timer::schedule`].
    pub(crate) fn schedule<F>(self, delay: Duration, f: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.schedule_on_clock(deadline_after(self.timer.shared().now(), delay), f)
    }

    /// [`Timer::schedule_at`]: Tokio's `deadline`, on the timer's clock.
    pub(crate) fn schedule_at<F>(self, deadline: Instant, f: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.schedule_on_clock(self.timer.shared().given(deadline), f)
    }

    /// [`Timer::schedule_at`] a deadline on the timer's clock.
    fn schedule_on_clock<F>(self, deadline: Instant, f: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let shared = self.timer.shared();
        let offset = shared.clock.offset_of(deadline);
        let (reg, step) = shared.schedule(callback::callback(offset, f), self.site)?;
        Ok(Scheduled::new(self.timer.anchor(), reg, step, offset))
    }

    /// [`Timer::schedule_detached`].
    pub(crate) fn schedule_detached<F>(self, delay: Duration, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.schedule_detached_on_clock(deadline_after(self.timer.shared().now(), delay), f)
    }

    /// [`Timer::schedule_detached_at`]: Tokio's `deadline`, on the timer's clock.
    pub(crate) fn schedule_detached_at<F>(self, deadline: Instant, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.schedule_detached_on_clock(self.timer.shared().given(deadline), f)
    }

    /// [`Timer::schedule_detached_at`] a deadline on the timer's clock.
    fn schedule_detached_on_clock<F>(self, deadline: Instant, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let shared = self.timer.shared();
        let offset = shared.clock.offset_of(deadline);
        let mut callback = callback::callback(offset, f);
        callback.disown();
        shared.schedule(callback, self.site)?;
        // Counted as pending by `schedule`, so `detach` keeps the timer alive for it,
        // as `Scheduled::detach` does.
        shared.keep_alive_while_pending();
        Ok(())
    }
}
