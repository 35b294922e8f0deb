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
//! reads). Its fallback lives in its timer's
//! [`Fallbacks`](super::fallbacks::Fallbacks), under a [`FallbackKey`] the `Sleep`
//! keeps in its state.

use std::future::Future;
use std::task::{Context, Poll};

use tokio::time::Instant;

use super::context;
use super::fallbacks::{Fallback, FallbackKey, Source};
use super::runtime::real_now;
use super::shared::Shared;

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
            return self.reported(deadline);
        }
        let real = real_now();
        real + deadline.saturating_duration_since(self.now())
    }

    /// Whether `deadline` has passed, as a fallback timed from here would find it.
    pub(crate) fn fallback_has_passed(&self, deadline: Instant) -> bool {
        self.has_passed_on(self.source(), deadline)
    }

    /// Whether `deadline` has passed on the clock a fallback on `on` follows: what
    /// `is_elapsed` and a fallback's poll both answer by.
    fn has_passed_on(&self, on: Source, deadline: Instant) -> bool {
        match on {
            Source::Driver => Instant::now() >= self.reported(deadline),
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

    /// Polls the fallback `key` names (the caller's own; none yet: a new one) for
    /// `deadline`, making or remaking it as [`poll_slot`](Shared::poll_slot) does.
    /// Pending, `key` names it after; ready, it is gone and `key` is `None`. The lock
    /// is not held while Tokio's timer is polled.
    #[cold]
    pub(crate) fn poll_fallback(
        &self,
        key: &mut Option<FallbackKey>,
        deadline: Instant,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let mut slot = key.and_then(|key| self.fallbacks.take(key));
        let ready = self.poll_slot(&mut slot, deadline, cx);
        *key = match (ready, slot) {
            (Poll::Pending, Some(fallback)) => Some(self.fallbacks.put(fallback)),
            _ => None,
        };
        ready
    }

    /// Polls the fallback in `slot` for `deadline`, making it (or remaking it on the
    /// clock that applies from here) first. `Ready` at once only if no background
    /// thread can be started, the one case where nothing else could wake the task.
    fn poll_slot(
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
            // Due means ready here too: Tokio's sleep fires at its next whole
            // millisecond, but the deadline is due when the clock reaches it.
            if self.has_passed_on(Source::Driver, deadline) {
                return Poll::Ready(());
            }
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

    /// Moves the deadline of the fallback `key` names, in place.
    #[cold]
    pub(crate) fn reset_fallback(
        &self,
        key: FallbackKey,
        deadline: Instant,
    ) -> Option<FallbackKey> {
        // Out of the lock while reset: Tokio's reset may wake the task at once.
        let mut fallback = self.fallbacks.take(key)?;
        let at = match fallback.on {
            Source::Driver => deadline,
            Source::Background => self.real_deadline(deadline),
        };
        fallback.sleep.as_mut().reset(at);
        Some(self.fallbacks.put(fallback))
    }

    /// Lets go of the fallback `key` names (its `Sleep` dropped); Tokio's sleep in it
    /// is dropped outside the lock.
    #[cold]
    pub(crate) fn drop_fallback(&self, key: FallbackKey) {
        drop(self.fallbacks.take(key));
    }
}

// On the paused clock, which timers follow with `test-util` only.
#[cfg(feature = "test-util")]
#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use tokio::time::Instant;

    use crate::timer::Timer;

    fn poll(sleep: &mut crate::sleep::Sleep) -> Poll<()> {
        let waker = std::task::Waker::noop();
        Pin::new(sleep).poll(&mut Context::from_waker(waker))
    }

    /// A `Sleep` timed by a fallback holds one entry of its timer's fallbacks from its
    /// first poll after shutdown, the same one across polls and resets, until it
    /// completes or drops.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_sleeps_fallback_is_its_own_until_it_completes_or_drops() {
        let timer = Timer::new();
        let _ = timer.shutdown().await;
        let start = Instant::now();
        let mut completes = timer.sleep(Duration::from_millis(20));
        let mut dropped = timer.sleep(Duration::from_millis(20));
        let shared = timer.shared();
        assert_eq!(shared.fallbacks.len(), 0, "none before a poll");
        assert!(poll(&mut completes).is_pending());
        assert!(poll(&mut dropped).is_pending());
        assert!(poll(&mut completes).is_pending());
        assert_eq!(shared.fallbacks.len(), 2, "one each, kept across polls");
        Pin::new(&mut completes).reset(start + Duration::from_millis(30));
        assert_eq!(shared.fallbacks.len(), 2, "moved in place by a reset");
        drop(dropped);
        assert_eq!(shared.fallbacks.len(), 1, "given back by a drop");
        (&mut completes).await;
        assert_eq!(
            Instant::now() - start,
            Duration::from_millis(30),
            "its new deadline"
        );
        assert_eq!(shared.fallbacks.len(), 0, "given back once complete");
        assert!(completes.is_elapsed());
    }
}
