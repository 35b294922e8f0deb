//! [`Interval`]: a periodic ticker with `tokio::time::Interval`'s semantics.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use crate::Sleep;

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
/// the timer's own lateness bound (Tokio uses 5 ms). What happens then is the
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
/// use std::time::Duration;
/// use tokio_wheel::{Instant, MissedTickBehavior, Timer};
///
/// let timer = Timer::new(); // 10 ms tick
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
    /// Due at the next tick's scheduled instant.
    sleep: Sleep,
    period: Duration,
    behavior: MissedTickBehavior,
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
            behavior: MissedTickBehavior::Burst,
        }
    }

    /// Completes at the next tick, returning its scheduled instant.
    ///
    /// Cancel-safe.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick: `Ready` with its scheduled instant once it is due.
    ///
    /// When this returns `Pending`, the waker of `cx` is woken at the tick (only the
    /// most recent waker is kept, as with any future).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let scheduled = self.sleep.deadline();
        // A due tick (the first, Burst's make-up ticks) is ready at once: the sleep
        // is, as a due `Sleep` always is, without waiting for the driver's next turn.
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let now = self.sleep.shared().now();
        let late = now.saturating_duration_since(scheduled);
        // Missed only beyond the timer's own lateness bound: a tick and Tokio's
        // millisecond.
        let on_time = self.sleep.shared().clock.tick() + Duration::from_millis(1);
        let next = if late > on_time {
            self.missed(scheduled, now)
        } else {
            scheduled.checked_add(self.period)
        };
        let next = next.unwrap_or_else(|| crate::clock::far_future(now));
        Pin::new(&mut self.sleep).reset(next);
        Poll::Ready(scheduled)
    }

    /// The next tick after `scheduled` was taken late, at `now`.
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

    /// Makes the next tick `period` from now.
    pub fn reset(&mut self) {
        self.reset_after(self.period);
    }

    /// Makes the next tick complete at once.
    pub fn reset_immediately(&mut self) {
        self.reset_at(self.sleep.shared().now());
    }

    /// Makes the next tick `after` from now (saturating).
    pub fn reset_after(&mut self, after: Duration) {
        self.reset_at(crate::clock::deadline_after(
            self.sleep.shared().now(),
            after,
        ));
    }

    /// Makes the next tick due at `deadline`; later ticks follow every `period` from it.
    pub fn reset_at(&mut self, deadline: Instant) {
        Pin::new(&mut self.sleep).reset(deadline);
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
}

impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }
}
