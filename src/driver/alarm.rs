//! The driver's alarm: Tokio's timer, armed for the driver's next wakeup, whose waker
//! passes over the wheels itself.
//!
//! A task woken by Tokio's timer runs only once every task ahead of it in the run
//! queue has, and the tasks it wakes then queue behind those that became ready
//! meanwhile: under load a timer fired by a driver *task* waits twice. Tokio's own
//! sleeps wake their tasks straight from the runtime's pass over its timers. The
//! alarm's waker (`task::Wakeup`) does the same: called by that pass, it advances the
//! wheels and wakes every due future's task there, so a due timer's task waits once,
//! as a Tokio sleep's does. What must run on the driver task (callbacks on the
//! `Inline` executor, those an executor handed back) is left to it.
//!
//! Tokio calls wakers with its own locks released, so the waker may take the shards'
//! locks. Arming resets and polls the `Sleep` under [`Parking`](super::parking)'s
//! lock, and Tokio may fire it on the spot (a deadline it counts as passed already):
//! the waker then finds that lock held and leaves its pass to the holder
//! (`Parking::ring`), so no user waker ever runs under a lock of ours.

use std::fmt;
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Waker};

use tokio::time::{Instant, Sleep};

use super::context;

/// Tokio's sleep for the driver's next wakeup, and the waker it wakes.
pub(super) struct Alarm {
    /// `None` only in the loom models and unit tests, which ring the alarm by hand.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The driver's `Wakeup`: what Tokio's timer calls when the sleep goes off.
    waker: Waker,
    /// The instant it was last armed for.
    armed_at: Option<Instant>,
    /// Whether `sleep` was moved to the process-wide real-clock runtime (see
    /// [`went_off_early`](Alarm::went_off_early)).
    on_real_clock: bool,
    /// A loom model's alarm: armed since it last rang, as Tokio's sleep would be.
    #[cfg(loom)]
    armed: bool,
}

impl fmt::Debug for Alarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Alarm")
            .field(
                "deadline",
                &self.sleep.as_ref().map(|sleep| sleep.deadline()),
            )
            .finish_non_exhaustive()
    }
}

impl Alarm {
    /// An alarm on `sleep` (made on the driver's runtime, which times it) that wakes
    /// `waker`.
    pub(super) fn new(sleep: Pin<Box<Sleep>>, waker: Waker) -> Alarm {
        Alarm {
            sleep: Some(sleep),
            waker,
            armed_at: None,
            on_real_clock: false,
            #[cfg(loom)]
            armed: false,
        }
    }

    /// An alarm that Tokio never fires: a model or unit test rings it by hand.
    #[cfg(any(test, loom))]
    pub(super) fn by_hand(waker: Waker) -> Alarm {
        Alarm {
            sleep: None,
            waker,
            armed_at: None,
            on_real_clock: false,
            #[cfg(loom)]
            armed: false,
        }
    }

    /// A loom model's alarm going off, as Tokio's would if it is armed: its waker, and
    /// no longer armed.
    #[cfg(loom)]
    pub(super) fn go_off(&mut self) -> Option<Waker> {
        std::mem::take(&mut self.armed).then(|| self.waker.clone())
    }

    /// Arms the alarm for `at`. Returns `true` if it has gone off already: Tokio fired
    /// it on the spot (its waker then found the caller's lock held) or it was due.
    ///
    /// Polled outside the coop budget: this may run inside any task's poll (a
    /// registration), and a task that has spent its budget would have Tokio's sleep
    /// return `Pending` without registering, waking the alarm's waker instead.
    pub(super) fn arm(&mut self, at: Instant) -> bool {
        self.armed_at = Some(at);
        let Some(sleep) = &mut self.sleep else {
            #[cfg(loom)]
            {
                self.armed = true;
            }
            return false;
        };
        sleep.as_mut().reset(at);
        let mut cx = Context::from_waker(&self.waker);
        pin!(tokio::task::unconstrained(sleep.as_mut()))
            .poll(&mut cx)
            .is_ready()
    }
}

impl Alarm {
    /// For a driver on the real clock: Tokio's timer fired the alarm though the real
    /// clock (`now`) has not reached the instant it was armed for, so the clock of the
    /// runtime it is on runs ahead of the real one (paused and advanced: a test
    /// without the feature `test-util`, or one that pauses after the timer's first
    /// use). Every later wakeup there would go off at once. Moves the alarm to the
    /// process-wide runtime, whose clock is the real one; its wakeups then reach the
    /// driver's tasks from that runtime's thread. Returns whether it moved.
    pub(super) fn went_off_early(&mut self, now: Instant) -> bool {
        if self.armed_at.is_none_or(|at| now >= at) {
            return false;
        }
        self.move_to_real_clock(now)
    }

    /// Moves the alarm to the process-wide real-clock runtime (see
    /// [`went_off_early`](Alarm::went_off_early)), unarmed; `now` is the real clock.
    /// Returns whether it moved.
    pub(super) fn move_to_real_clock(&mut self, now: Instant) -> bool {
        if self.on_real_clock || self.sleep.is_none() {
            return false;
        }
        let Some(real) = crate::background::runtime() else {
            return false;
        };
        let Some(sleep) = context::enter(real, || Box::pin(tokio::time::sleep_until(now))) else {
            return false;
        };
        self.sleep = Some(sleep);
        self.on_real_clock = true;
        true
    }
}
