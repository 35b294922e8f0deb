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
use std::task::{Context, Waker};

use std::sync::Arc;

use tokio::time::{Instant, Sleep};

#[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
use super::boot_alarm::BootAlarm;
use crate::suspend_clock::Suspended;

/// Tokio's sleep for the driver's next wakeup, and the waker it wakes.
pub(super) struct Alarm {
    /// `None` only in the loom models, which ring the alarm by hand.
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
        Alarm {
            sleep: Some(sleep),
            waker,
            suspended,
            #[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
            boot: None,
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

    /// An alarm that Tokio never fires: a loom model rings it by hand.
    #[cfg(loom)]
    pub(super) fn by_hand(waker: Waker) -> Alarm {
        Alarm {
            sleep: None,
            waker,
            suspended: None,
        }
    }

    /// The waker the alarm wakes.
    pub(super) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// Arms the alarm for `at`, on the timer's clock. Returns `true` if it has gone off already: Tokio fired
    /// it on the spot (its waker then found the caller's lock held) or it was due.
    ///
    /// Polled outside the coop budget: this may run inside any task's poll (a
    /// registration), and a task that has spent its budget would have Tokio's sleep
    /// return `Pending` without registering, waking the alarm's waker instead.
    pub(super) fn arm(&mut self, at: Instant) -> bool {
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
