//! How a [`Sleep`](crate::Sleep) is timed once its timer's wheel no longer turns: after
//! [`Timer::shutdown`](crate::Timer::shutdown), after the driver's runtime is gone, or
//! when its shard is full. It still completes no earlier than its deadline, on another
//! clock source, so that a loop on an [`Interval`](crate::Interval) does not spin and a
//! retry loop does not retry at full speed.
//!
//! The deadline is an instant on the clock of the driver's runtime, which may be
//! paused. A `tokio::time::Sleep` times it:
//!
//! * on the driver's runtime itself while the polling task runs there and the runtime
//!   is alive: that clock exactly, paused or not;
//! * otherwise on the [background runtime](crate::background) (the default timer's),
//!   which follows the real clock, for as long as the driver's clock still has to go
//!   (a paused clock may lag or lead the real one by any amount). The driver's clock
//!   decides: if it has not reached the deadline when that sleep fires, the sleep
//!   waits again for what remains (at least a tick), so it is never early on that
//!   clock. Once the runtime is gone its clock is frozen, or gone with it: from its
//!   last reading it is taken to move on with the real clock (`runtime::Lost`), so that a
//!   sleep neither waits for a frozen clock nor completes at once.
//!
//! Only a `Sleep` that meets a stopped wheel pays for this (an allocation, the clock
//! reads); it keeps its fallback in an [`Anchor`](super::anchor::Anchor) of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::Instant;

use super::context;
use super::runtime::real_now;
use super::shared::Shared;

/// A fallback sleep and the clock it is timed on.
pub(crate) struct Fallback {
    sleep: Pin<Box<tokio::time::Sleep>>,
    on: Source,
}

impl std::fmt::Debug for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fallback")
            .field("deadline", &self.sleep.deadline())
            .field("on", &self.on)
            .finish()
    }
}

/// Which runtime's clock a [`Fallback`] is timed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The driver's runtime, which the polling task runs on.
    Driver,
    /// The background runtime: the real clock.
    Background,
}

impl Shared {
    /// Where a fallback polled from here is timed.
    fn source(&self) -> Source {
        if !self.runtime.is_lost() && self.runtime.is_current() {
            Source::Driver
        } else {
            Source::Background
        }
    }

    /// How long the driver's clock (moved on with the real one once lost) still has to
    /// go to `deadline`; `None` once it is there.
    fn driver_clock_short_of(&self, deadline: Instant) -> Option<std::time::Duration> {
        deadline
            .checked_duration_since(self.now())
            .filter(|d| !d.is_zero())
    }

    /// The real-clock instant at which the driver's clock, read now, would reach
    /// `deadline` if it moved with the real clock from here: what a fallback on the
    /// background runtime first waits for.
    fn real_deadline(&self, deadline: Instant) -> Instant {
        if self.runtime.has_real_clock() {
            return deadline;
        }
        let real = real_now();
        real + deadline.saturating_duration_since(self.now())
    }

    /// Whether `deadline` has passed, as a fallback timed from here would find it.
    pub(crate) fn fallback_has_passed(&self, deadline: Instant) -> bool {
        match self.source() {
            Source::Driver => Instant::now() >= deadline,
            Source::Background => self.driver_clock_short_of(deadline).is_none(),
        }
    }

    fn new_fallback(&self, on: Source, deadline: Instant) -> Option<Fallback> {
        let sleep = match on {
            // The polling task is in the driver's runtime: its context is current.
            Source::Driver => Box::pin(tokio::time::sleep_until(deadline)),
            Source::Background => {
                let runtime = crate::background::runtime()?;
                let at = self.real_deadline(deadline);
                context::enter(runtime, || Box::pin(tokio::time::sleep_until(at)))?
            }
        };
        Some(Fallback { sleep, on })
    }

    /// Polls the fallback in `slot` for `deadline`, making it (or remaking it on the
    /// clock that applies from here) first. `Ready` at once only if no background
    /// thread can be started, the one case where nothing else could wake the task.
    pub(crate) fn poll_fallback(
        &self,
        slot: &mut Option<Fallback>,
        deadline: Instant,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let on = self.source();
        if slot.as_ref().is_none_or(|fallback| fallback.on != on) {
            *slot = self.new_fallback(on, deadline);
        }
        let Some(fallback) = slot else {
            return Poll::Ready(());
        };
        if fallback.on == Source::Driver {
            return fallback.sleep.as_mut().poll(cx);
        }
        // The driver's clock decides; the real-clock sleep only brings the poll.
        loop {
            let Some(rest) = self.driver_clock_short_of(deadline) else {
                return Poll::Ready(());
            };
            if fallback.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The real clock got there before the driver's (paused) clock did: wait
            // again for what remains there, at least a tick (a paused clock moves only
            // when its runtime advances it), never spinning.
            let rest = rest.max(self.clock.tick());
            fallback.sleep.as_mut().reset(real_now() + rest);
        }
    }

    /// Moves a fallback's deadline, in place.
    pub(crate) fn reset_fallback(&self, fallback: &mut Fallback, deadline: Instant) {
        let at = match fallback.on {
            Source::Driver => deadline,
            Source::Background => self.real_deadline(deadline),
        };
        fallback.sleep.as_mut().reset(at);
    }
}
