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
//!
//! A suspend-aware timer's deadlines are on its own clock, Tokio's plus the time
//! suspended: the alarm moves each back to Tokio's clock as it arms it. Tokio's clock
//! stops while the machine is suspended, so a suspend that begins after the alarm is
//! armed delays it by its length. On Linux and Android a suspend-aware driver on the
//! real clock has an alarm on the boot clock instead (`boot_alarm.rs`), which goes
//! off at its deadline counting the suspend; Tokio's sleep stays for where that alarm
//! cannot be made, or fails.

use std::fmt;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Waker};

use tokio::time::{Instant, Sleep};

#[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
use super::boot_alarm::BootAlarm;
use super::context;
use crate::suspend_clock::Suspended;

/// Tokio's sleep for the driver's next wakeup, and the waker it wakes.
pub(super) struct Alarm {
    /// `None` only in the loom models and unit tests, which ring the alarm by hand.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The driver's `Wakeup`: what Tokio's timer calls when the sleep goes off.
    waker: Waker,
    /// A suspend-aware timer's time suspended, which its deadlines count and Tokio's
    /// timer does not.
    suspended: Option<Arc<Suspended>>,
    /// The boot-clock alarm armed instead of `sleep`, for a suspend-aware driver on
    /// the real clock.
    #[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
    boot: Option<BootAlarm>,
    /// The instant it was last armed for, on the timer's clock.
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
    /// `waker`, for deadlines on a clock `suspended` ahead of Tokio's.
    pub(super) fn new(
        sleep: Pin<Box<Sleep>>,
        waker: Waker,
        suspended: Option<Arc<Suspended>>,
    ) -> Alarm {
        Alarm::on(Some(sleep), waker, suspended)
    }

    /// An alarm on `sleep` (none: rung by hand), unarmed, for deadlines on a clock
    /// `suspended` ahead of Tokio's.
    fn on(
        sleep: Option<Pin<Box<Sleep>>>,
        waker: Waker,
        suspended: Option<Arc<Suspended>>,
    ) -> Alarm {
        Alarm {
            sleep,
            waker,
            suspended,
            #[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
            boot: None,
            armed_at: None,
            on_real_clock: false,
            #[cfg(loom)]
            armed: false,
        }
    }

    /// The same alarm, on the boot clock where the platform has one: for a
    /// suspend-aware driver on the real clock, whose "now" is Tokio's real clock plus
    /// the time suspended from any thread.
    #[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
    pub(super) fn on_boot_clock(mut self) -> Alarm {
        if self.suspended.is_some() {
            self.boot = BootAlarm::new(self.waker.clone());
        }
        self
    }

    /// An alarm that Tokio never fires: a model or unit test rings it by hand.
    #[cfg(any(test, loom))]
    pub(super) fn by_hand(waker: Waker) -> Alarm {
        Alarm::on(None, waker, None)
    }

    /// The waker the alarm wakes: `Timer::simulate_suspend` rings it by hand.
    #[cfg(feature = "test-util")]
    pub(super) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// A loom model's alarm going off, as Tokio's would if it is armed: its waker, and
    /// no longer armed.
    #[cfg(loom)]
    pub(super) fn go_off(&mut self) -> Option<Waker> {
        std::mem::take(&mut self.armed).then(|| self.waker.clone())
    }

    /// Arms the alarm for `at`, on the timer's clock. Returns `true` if it has gone off already: Tokio fired
    /// it on the spot (its waker then found the caller's lock held) or it was due.
    ///
    /// Polled outside the coop budget: this may run inside any task's poll (a
    /// registration), and a task that has spent its budget would have Tokio's sleep
    /// return `Pending` without registering, waking the alarm's waker instead.
    pub(super) fn arm(&mut self, at: Instant) -> bool {
        self.armed_at = Some(at);
        #[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
        if let (Some(boot), Some(suspended)) = (&self.boot, &self.suspended) {
            let now = crate::clock::deadline_after(
                Instant::from_std(std::time::Instant::now()),
                suspended.since_origin(),
            );
            // Only a step that has not ended is armed for, so never on the spot.
            if boot.arm(at.saturating_duration_since(now)) {
                return false;
            }
            // Refused: Tokio's sleep from now on.
            self.boot = None;
        }
        let Some(sleep) = &mut self.sleep else {
            #[cfg(loom)]
            {
                self.armed = true;
            }
            return false;
        };
        let at = match &self.suspended {
            // If the offset grew since the caller read its "now", this is earlier than
            // meant: the turn it rings processes only the steps that have ended.
            Some(suspended) => at.checked_sub(suspended.since_origin()).unwrap_or(at),
            None => at,
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
