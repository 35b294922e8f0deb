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
//!   which follows the real clock. A driver whose clock may be paused and whose
//!   runtime is alive is asked as well when that sleep fires: if its clock has not
//!   reached the deadline, the sleep waits again for what remains (at least a tick), so
//!   it is never early on that clock either. Once the runtime is gone its clock is
//!   gone: the real clock decides.
//!
//! Only a `Sleep` that meets a stopped wheel pays for this (an allocation, the clock
//! reads); it keeps its fallback in an [`Anchor`](super::Anchor) of its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use tokio::time::Instant;

use super::{context, Shared};

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

/// The real clock, as a Tokio instant.
fn real_now() -> Instant {
    Instant::from_std(std::time::Instant::now())
}

impl Shared {
    /// Records that the driver's runtime is gone (its clock with it).
    pub(super) fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
    }

    /// Where a fallback polled from here is timed.
    fn source(&self) -> Source {
        if !self.lost.load(Ordering::SeqCst) && self.in_driver_runtime() {
            Source::Driver
        } else {
            Source::Background
        }
    }

    /// Whether the driver's clock, where it may be paused and can still be read, has
    /// not reached `deadline`: how long it still has to go.
    fn driver_clock_short_of(&self, deadline: Instant) -> Option<std::time::Duration> {
        if self.real_clock || self.lost.load(Ordering::SeqCst) {
            return None;
        }
        let now = self.driver_now()?;
        deadline
            .checked_duration_since(now)
            .filter(|d| !d.is_zero())
    }

    /// Whether `deadline` has passed, as a fallback timed from here would find it.
    pub(crate) fn passed_elsewhere(&self, deadline: Instant) -> bool {
        match self.source() {
            Source::Driver => Instant::now() >= deadline,
            Source::Background => {
                real_now() >= deadline && self.driver_clock_short_of(deadline).is_none()
            }
        }
    }

    fn new_fallback(&self, on: Source, deadline: Instant) -> Option<Fallback> {
        let sleep = match on {
            // The polling task is in the driver's runtime: its context is current.
            Source::Driver => Box::pin(tokio::time::sleep_until(deadline)),
            Source::Background => {
                let runtime = crate::background::runtime()?;
                context::enter(runtime, || Box::pin(tokio::time::sleep_until(deadline)))?
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
        loop {
            if fallback.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if fallback.on == Source::Driver {
                return Poll::Ready(());
            }
            let Some(rest) = self.driver_clock_short_of(deadline) else {
                return Poll::Ready(());
            };
            // The real clock passed the deadline before the driver's paused clock
            // did: wait again for what remains there, at least a tick (a paused clock
            // moves only when its runtime advances it), never spinning.
            let rest = rest.max(self.clock.tick());
            fallback.sleep.as_mut().reset(real_now() + rest);
        }
    }

    /// Moves a fallback's deadline, in place.
    pub(crate) fn reset_fallback(&self, fallback: &mut Fallback, deadline: Instant) {
        fallback.sleep.as_mut().reset(deadline);
    }
}
