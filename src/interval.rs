//! [`Interval`]: a periodic ticker with `tokio::time::Interval`'s semantics.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use crate::jitter;
use crate::sleep::Sleep;

/// Tokio's own threshold for a missed tick: a timer finer than 4 ms keeps it, so that
/// tests written for Tokio (the `test-util` timer's tick is 1 ms) see its schedule.
const TOKIO_MISSED: Duration = Duration::from_millis(5);

/// Ticks every `period`, as [`tokio::time::Interval`][tokio-interval] does, to within a tick and a
/// millisecond.
///
/// Made by [`Timer::interval`](crate::Timer::interval),
/// [`Timer::interval_at`](crate::Timer::interval_at) or the free function
/// [`interval`](crate::interval).
///
/// The first tick completes at once (at `start` for `interval_at`), then one every
/// `period`. It is also a [`Stream`][stream] of the ticks' scheduled instants.
///
/// # Missed ticks
///
/// A tick counts as missed when it is taken more than a tick and a millisecond late,
/// the timer's own lateness bound, or 5 ms, Tokio's, if that is more (ticks under
/// 4 ms, as the `test-util` timer's 1 ms). What happens then is the
/// interval's `MissedTickBehavior` ([`set_missed_tick_behavior`]), Tokio's own type
/// and variants, `Burst` by default as in Tokio:
///
/// * `Burst`: the missed ticks complete at once, one per call, until caught up.
/// * `Delay`: the missed tick completes at once; the next is `period` after it.
/// * `Skip`: the missed tick completes at once; the ticks it ran over are dropped,
///   and the next is the next multiple of `period` after `start`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::{Instant, MissedTickBehavior, Timer};
///
/// let timer = Timer::new(); // the default tick: 10 ms, 1 ms under `test-util`
/// let mut heartbeat = timer.interval(Duration::from_millis(100));
/// heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
/// heartbeat.tick().await;
/// timer.sleep(Duration::from_millis(250)).await; // misses the tick at 100 ms
/// let late = heartbeat.tick().await; // at once, though scheduled for 100 ms
/// let next = heartbeat.tick().await; // a period after the late one was taken
/// assert!(next - late >= Duration::from_millis(250));
/// assert!(Instant::now() - next < timer.tick() + Duration::from_millis(1));
/// # }
/// ```
///
/// # Jitter
///
/// Intervals started in the same tick, as the heartbeats of connections opened together
/// after a deploy are, tick in the same tick of the wheel every period: a burst of
/// wakeups, and of messages, that lasts. [`set_jitter(max)`](Interval::set_jitter)
/// delays each tick after the first by a random amount, drawn afresh for each tick,
/// uniform in `[0, max)`, from its scheduled instant, and so spreads such intervals
/// over `max`.
///
/// The schedule does not drift: tick `n` stays scheduled at `start + n × period`, and
/// completes no earlier than that and less than `max` plus a tick and a millisecond
/// after it (plus scheduling delay). A tick counts as missed when taken later than the
/// [missed-tick threshold](#missed-ticks) after the instant it was due at (its draw
/// included), and the `MissedTickBehavior` then acts on the schedule (`Delay` moves the schedule to a period after the late tick, as without
/// jitter). The first tick, and one set by a `reset`, complete at the instant asked for;
/// [`tick`](Interval::tick) returns the instant each tick was due at, draw included.
/// Each interval draws from a generator of its own (SplitMix64), seeded from std's
/// per-process random hash keys and a counter, so two intervals, or two processes, do
/// not draw alike. With no jitter (the default) ticks are exactly as
/// Tokio's.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::{Instant, Timer};
///
/// let timer = Timer::new();
/// let start = Instant::now();
/// let mut heartbeat = timer.interval(Duration::from_secs(1));
/// heartbeat.set_jitter(Duration::from_millis(100));
/// assert_eq!(heartbeat.tick().await, start); // the first at once, as ever
/// for n in 1..=5u32 {
///     let due = heartbeat.tick().await;
///     let scheduled = start + Duration::from_secs(1) * n;
///     assert!(due >= scheduled && due < scheduled + Duration::from_millis(100));
/// }
/// # }
/// ```
///
/// [tokio-interval]: https://docs.rs/tokio/1/tokio/time/struct.Interval.html
/// [stream]: https://docs.rs/futures-core/0.3/futures_core/stream/trait.Stream.html
/// [`set_missed_tick_behavior`]: Interval::set_missed_tick_behavior
///
/// # Shutdown
///
/// After [`Timer::shutdown`](crate::Timer::shutdown), or the loss of the driver's
/// runtime, it goes on ticking once a period, never early (see
/// [`Sleep`](crate::Sleep#shutdown)): a loop on it never spins. Check
/// [`Timer::is_shutdown`](crate::Timer::is_shutdown) to stop it.
///
/// # Cancellation
///
/// [`tick`](Interval::tick) is cancel-safe: if its future is dropped before it
/// completes, no tick is lost. Dropping the `Interval` removes it from the wheel.
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
/// let mut heartbeat = timer.interval(Duration::from_secs(1));
/// let first = heartbeat.tick().await; // at once
/// let second = heartbeat.tick().await; // one second later
/// assert_eq!(second - first, Duration::from_secs(1));
/// # }
/// ```
#[derive(Debug)]
pub struct Interval {
    /// Due at the pending tick's instant: its scheduled instant plus its draw (see
    /// `pending`). Exact, so the schedule is recovered by subtracting the draw: a
    /// `Sleep`'s deadline is the instant it was given, short of the wheel's range.
    sleep: Sleep,
    period: Duration,
    /// The jitter's bound in nanoseconds, at most the period's; zero when off.
    jitter: u64,
    /// The jitter's generator: a pending `Scheduled` tick's draw is
    /// `jitter::draw(rng, jitter)`, drawn again from it when needed.
    rng: u64,
    behavior: MissedTickBehavior,
    /// How the pending tick's instant was set.
    pending: Pending,
}

/// How an [`Interval`]'s pending tick got its instant, and so whether it carries a
/// draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Asked for: the first tick, or one a `reset` set. No draw.
    Exact,
    /// Scheduled by the tick before it: its scheduled instant plus what `rng` draws
    /// below `jitter` (nothing when `jitter` is zero).
    Scheduled,
}

impl Interval {
    pub(crate) fn new(sleep: Sleep, period: Duration) -> Interval {
        let period = if period.is_zero() {
            sleep.shared().clock.tick()
        } else {
            period
        };
        Interval {
            sleep,
            period,
            jitter: 0,
            rng: 0,
            behavior: MissedTickBehavior::Burst,
            pending: Pending::Exact,
        }
    }

    /// Completes at the next tick, returning the instant it was due at: its scheduled
    /// instant, plus its draw when [jittered](Interval::set_jitter).
    ///
    /// The first tick completes at once (at `start` for `interval_at`); see
    /// [missed ticks](Interval#missed-ticks) for a tick taken late.
    ///
    /// # Cancellation
    ///
    /// Cancel-safe: if the returned future is dropped before it completes, no tick is
    /// lost, and the next call waits for the same tick.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick: `Ready` with the instant it was due at (as
    /// [`tick`](Interval::tick) returns) once it is due.
    ///
    /// When this returns `Pending`, the waker of `cx` is woken at the tick (only the
    /// most recent waker is kept, as with any future).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        // A due tick (the first, Burst's make-up ticks) is ready at once: the sleep
        // is, as a due `Sleep` always is, without waiting for the driver's next turn.
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let due = self.sleep.deadline_on_clock();
        // Burst schedules the next tick a period after this one's schedule whether or
        // not this one was missed, and with no jitter the schedule is the deadline: no
        // clock to read, and the deadline moves by the period in the sleep's own
        // offset, exactly where `reset_scheduled` would put it (short of saturation,
        // which the general path below handles).
        if self.jitter == 0
            && self.behavior == MissedTickBehavior::Burst
            && self.sleep.postpone(self.period)
        {
            self.pending = Pending::Scheduled;
        } else {
            self.schedule_after(due);
        }
        Poll::Ready(self.sleep.shared().reported(due))
    }

    /// Schedules the tick after the one due at `due`, just taken, by the clock: for a
    /// tick that jitter, `Delay` or `Skip` decide on, or one whose sum saturates.
    /// Out of line, so that `poll_tick`'s common path keeps a small frame.
    #[inline(never)]
    fn schedule_after(&mut self, due: Instant) {
        let now = self.sleep.shared().now();
        let scheduled = self.scheduled(due);
        // Missed only beyond the timer's own lateness bound (a tick and Tokio's
        // millisecond) past the instant the tick was due at, draw included; what
        // follows a miss is decided on the schedule.
        let late = now.saturating_duration_since(due);
        let on_time =
            (self.sleep.shared().clock.tick() + Duration::from_millis(1)).max(TOKIO_MISSED);
        let next = if late > on_time {
            self.missed(scheduled, now)
        } else {
            scheduled.checked_add(self.period)
        };
        let next = next.unwrap_or_else(|| crate::clock::far_future(now));
        if self.jitter != 0 {
            self.rng = jitter::next(self.rng);
        }
        self.reset_scheduled(next);
    }

    /// Makes the pending tick the one scheduled at `scheduled`: due then plus its draw.
    fn reset_scheduled(&mut self, scheduled: Instant) {
        self.pending = Pending::Scheduled;
        if self.jitter == 0 {
            return self.reset_sleep(scheduled);
        }
        let due = scheduled.checked_add(self.draw());
        self.reset_sleep(due.unwrap_or(scheduled));
        // Beyond the wheel's range the sleep's deadline saturates, and less the draw it
        // would name an instant before the schedule: such a tick (and one past
        // `Instant`'s range) keeps no draw, as a `Sleep` keeps no exact deadline there.
        if due != Some(self.sleep.deadline_on_clock()) {
            self.pending = Pending::Exact;
        }
    }

    /// The scheduled instant of the pending tick, due at `due`: `due` less its draw.
    fn scheduled(&self, due: Instant) -> Instant {
        if self.pending == Pending::Scheduled && self.jitter != 0 {
            due.checked_sub(self.draw()).unwrap_or(due)
        } else {
            due
        }
    }

    /// What the generator's state draws, below the jitter's bound.
    fn draw(&self) -> Duration {
        let draw = jitter::draw(self.rng, self.jitter);
        debug_assert!(draw < self.jitter || self.jitter == 0);
        Duration::from_nanos(draw)
    }

    /// The scheduled instant of the next tick after the one scheduled at `scheduled`
    /// was taken late, at `now`.
    fn missed(&self, scheduled: Instant, now: Instant) -> Option<Instant> {
        match self.behavior {
            MissedTickBehavior::Delay => now.checked_add(self.period),
            MissedTickBehavior::Skip => {
                let period = self.period.as_nanos();
                let into = (now - scheduled).as_nanos() % period;
                let back = Duration::from_nanos(u64::try_from(into).unwrap_or(u64::MAX));
                now.checked_add(self.period - back)
            }
            // Burst, and any behaviour tokio adds later.
            _ => scheduled.checked_add(self.period),
        }
    }

    /// Moves the pending tick to `due`: the one place this interval moves its `Sleep`.
    fn reset_sleep(&mut self, due: Instant) {
        self.sleep.reset_on_clock(due);
    }

    /// Sets the pending tick to `deadline` exactly, as a reset does.
    fn reset_exact(&mut self, deadline: Instant) {
        self.pending = Pending::Exact;
        self.reset_sleep(deadline);
    }

    /// Makes the next tick complete one `period` from now; later ticks follow every
    /// `period` from it.
    ///
    /// It ignores the [`MissedTickBehavior`], as tokio's does, and is not
    /// [jittered](Interval::set_jitter) (later ticks are). A `period` too long to add
    /// to now saturates to a far instant (tokio panics).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::{Instant, Timer};
    ///
    /// let timer = Timer::new();
    /// let mut interval = timer.interval(Duration::from_millis(100));
    /// interval.tick().await;
    /// timer.sleep(Duration::from_millis(30)).await;
    /// let now = Instant::now();
    /// interval.reset();
    /// assert_eq!(interval.tick().await, now + Duration::from_millis(100));
    /// # }
    /// ```
    pub fn reset(&mut self) {
        self.reset_after(self.period);
    }

    /// Makes the next tick complete at once (on the next `tick`); later ticks follow
    /// every `period` from now.
    ///
    /// It ignores the [`MissedTickBehavior`], as tokio's does, and is not
    /// [jittered](Interval::set_jitter) (later ticks are).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::{Instant, Timer};
    ///
    /// let timer = Timer::new();
    /// let mut interval = timer.interval(Duration::from_millis(100));
    /// interval.tick().await;
    /// timer.sleep(Duration::from_millis(30)).await;
    /// let now = Instant::now();
    /// interval.reset_immediately();
    /// assert_eq!(interval.tick().await, now); // at once
    /// assert_eq!(interval.tick().await, now + Duration::from_millis(100));
    /// # }
    /// ```
    pub fn reset_immediately(&mut self) {
        self.reset_exact(self.sleep.shared().now());
    }

    /// Makes the next tick complete `after` from now; later ticks follow every `period`
    /// from it.
    ///
    /// It ignores the [`MissedTickBehavior`], as tokio's does, and is not
    /// [jittered](Interval::set_jitter) (later ticks are). An `after` too long to add
    /// to now saturates to a far instant (tokio panics).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::{Instant, Timer};
    ///
    /// let timer = Timer::new();
    /// let mut interval = timer.interval(Duration::from_millis(100));
    /// interval.tick().await;
    /// let now = Instant::now();
    /// interval.reset_after(Duration::from_millis(250));
    /// assert_eq!(interval.tick().await, now + Duration::from_millis(250));
    /// assert_eq!(interval.tick().await, now + Duration::from_millis(350));
    /// # }
    /// ```
    pub fn reset_after(&mut self, after: Duration) {
        let now = self.sleep.shared().now();
        self.reset_exact(crate::clock::deadline_after(now, after));
    }

    /// Makes the next tick complete at `deadline`; later ticks follow every `period`
    /// from it.
    ///
    /// It ignores the [`MissedTickBehavior`] for that tick, as tokio's does, and is
    /// not [jittered](Interval::set_jitter) (later ticks are). A `deadline` already
    /// passed completes the next tick at once, and counts as missed if it passed more
    /// than a tick and a millisecond (or 5 ms, if more) ago: the tick after it then follows the
    /// `MissedTickBehavior`, as in tokio.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::{Instant, Timer};
    ///
    /// let timer = Timer::new();
    /// let mut interval = timer.interval(Duration::from_millis(100));
    /// interval.tick().await;
    /// let deadline = Instant::now() + Duration::from_millis(40);
    /// interval.reset_at(deadline);
    /// assert_eq!(interval.tick().await, deadline);
    /// assert_eq!(interval.tick().await, deadline + Duration::from_millis(100));
    /// # }
    /// ```
    pub fn reset_at(&mut self, deadline: Instant) {
        self.reset_exact(self.sleep.shared().given(deadline));
    }

    /// The time between ticks.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// What happens when ticks are missed; see [missed ticks](Interval#missed-ticks).
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.behavior
    }

    /// Sets what happens when ticks are missed; see [missed ticks](Interval#missed-ticks).
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.behavior = behavior;
    }

    /// Delays each tick after the first by a random amount, drawn afresh for each
    /// tick, uniform in `[0, max)`, from its scheduled instant; see
    /// [jitter](Interval#jitter).
    ///
    /// `Duration::ZERO` (the default) turns it off. A `max` longer than the period is
    /// the period, so that ticks stay in order (and one beyond 2^64 ns, 584 years, is
    /// that).
    /// It applies from the pending tick on, unless that one is exact (the first, or
    /// set by a `reset`): a pending jittered tick is drawn again within the new
    /// bound. A tick due beyond the wheel's range saturates there as a
    /// [`Sleep`](crate::Sleep#method.deadline) does, and keeps no draw.
    pub fn set_jitter(&mut self, max: Duration) {
        let max = u64::try_from(max.min(self.period).as_nanos()).unwrap_or(u64::MAX);
        if max == self.jitter {
            return;
        }
        let due = self.sleep.deadline_on_clock();
        let scheduled = self.scheduled(due);
        if self.jitter == 0 {
            self.rng = jitter::seed();
        }
        self.jitter = max;
        if self.pending == Pending::Scheduled {
            self.reset_scheduled(scheduled);
        }
    }

    /// The bound of each tick's draw, set by [`set_jitter`](Interval::set_jitter):
    /// `Duration::ZERO` when off.
    pub fn jitter(&self) -> Duration {
        Duration::from_nanos(self.jitter)
    }
}

impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jitter costs an interval 16 bytes, a cache line in all: its bound and its
    /// generator (the draw is made again, not stored; `pending` fits beside the
    /// behaviour).
    #[test]
    fn an_interval_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Interval>(), 64);
    }
}
