//! The driver task, and the waker of the driver's alarm ([`Wakeup`]).
//!
//! Tokio's timer wakes the alarm ([`Alarm`]) at the end of the step (a quarter tick)
//! that holds the wheels' next expiration: the earliest deadline, or the moment a far
//! one moves down a level of the wheel, so a lone far deadline costs a handful of
//! wakeups.
//! The alarm's waker turns the wheels itself, from Tokio's pass over its timers, and
//! re-arms the alarm; the driver task turns when it is notified: for callbacks that
//! run on it, when a shard stopped at its batch, for `catch_up`, at shutdown, and when
//! the timer is gone. With nothing pending nothing is armed: no wakeups while idle.
//! When the runtime wakes either late, a turn processes every step up to the clock.

use std::panic::catch_unwind;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::alarm::Alarm;
use super::context;
use super::shared::Shared;
use super::turn::{Runner, Turn};
use crate::config::Config;
use crate::error::Error;

/// Creates the shared state and spawns its driver on `runtime`.
///
/// Everything that needs `runtime`'s context (its clock, its time driver) is done
/// through [`context::enter`], which never panics: a timer can be built where Tokio
/// holds its context borrowed, or has torn it down.
pub(crate) fn start(
    config: Config,
    runtime: &tokio::runtime::Handle,
) -> Result<Arc<Shared>, Error> {
    let handle = runtime.clone();
    let made = context::enter(runtime, move || {
        // tokio panics when the runtime was built without its time driver, and offers
        // no way to ask first: the panic is caught, to be an error here rather than
        // a panic in the driver task later (under `panic = "abort"` the process
        // aborts, as at any use of Tokio's timer there; documented on `build`). Made
        // here, on the driver's runtime, whose timer times it wherever it is armed.
        let sleep = catch_unwind(|| Box::pin(tokio::time::sleep_until(Instant::now()))).ok()?;
        // On the driver's runtime, so that the origin is read from the clock the
        // driver follows: a caller on another runtime whose clock is paused and
        // advanced (a test using the default timer first) would otherwise put the
        // origin ahead of it, and every later deadline would be due early.
        Some((sleep, Shared::new(config, Some(handle))))
    });
    let (sleep, shared) =
        match made {
            Some(Some(made)) => made,
            Some(None) => return Err(Error::InvalidConfig(
                "the Tokio runtime has no time driver: build it with enable_time() or enable_all()"
                    .into(),
            )),
            None => return Err(Error::InvalidConfig(
                "cannot enter the runtime's context from here, and no thread could be started to"
                    .into(),
            )),
        };
    let wakeup = Waker::from(Arc::new(Wakeup {
        shared: Arc::downgrade(&shared),
    }));
    let suspended = shared.runtime.suspend_clock().cloned();
    #[allow(unused_mut)]
    let mut alarm = Alarm::new(sleep, wakeup, suspended);
    // Only on the real clock: the boot clock does not follow a paused one.
    #[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
    if shared.runtime.has_real_clock() {
        alarm = alarm.on_boot_clock();
    }
    shared.parking.install(alarm);
    // The guard is made here and moved into the task, not made by the task's body:
    // a runtime dropped before it first polls the task still drops the guard.
    let guard = DriverGuard {
        shared: Arc::downgrade(&shared),
        ended: false,
    };
    let notify = shared.parking.notify().clone();
    runtime.spawn(run(guard, notify));
    Ok(shared)
}

/// Marks the driver stopped when its task stops turning, and reports the loss of its
/// runtime if the task is dropped before it ends by itself (its runtime shut down,
/// perhaps before ever running it, or after `shutdown`): pending futures are handed
/// to their fallback, and the runtime's clock is known gone, so that no task
/// elsewhere waits for it forever.
struct DriverGuard {
    shared: Weak<Shared>,
    /// Set when the task ends by itself: the timer is gone.
    ended: bool,
}

impl Drop for DriverGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            // First: the runtime's timer shuts down after its tasks are dropped, and the
            // alarm must not be armed (polled) once it has.
            shared.parking.uninstall();
            if !self.ended {
                shared.runtime.mark_lost();
            }
            if !shared.is_shutdown() {
                shared.driver_lost();
            }
            shared.progress.stop();
        }
    }
}

/// The driver task: a turn each time it is notified.
async fn run(mut guard: DriverGuard, notify: Arc<Notify>) {
    let weak = guard.shared.clone();
    let mut expired = Vec::new();
    loop {
        let Some(shared) = weak.upgrade() else {
            guard.ended = true;
            return;
        };
        shared.counters.wakeups.fetch_add(1, Ordering::Relaxed);
        match shared.turn(Runner::Task, &mut expired) {
            Turn::Exit => {
                // Shut down: stopped, but the task stays, idle, until the timer is
                // gone (`Shared`'s drop notifies), so that the loss of its runtime
                // after the shutdown is still seen (its clock then stops for good).
                shared.progress.stop();
                drop(shared);
                drop(expired);
                idle_until_gone(&weak, &notify).await;
                guard.ended = true;
                return;
            }
            Turn::Again => {
                drop(shared);
                // After the tasks just woken have run.
                tokio::task::yield_now().await;
                continue;
            }
            Turn::Parked { .. } => {}
        }
        // The alarm went off while this turn held its lock: this task passes for it,
        // after the tasks just woken have run.
        if shared.parking.answer() {
            drop(shared);
            tokio::task::yield_now().await;
            continue;
        }
        // Hold only the `Weak` while waiting, so that dropping the last handle ends
        // the driver (detached callbacks hold the timer through `Shared::keep_alive`).
        drop(shared);
        notify.notified().await;
    }
}

/// The shut-down driver's wait for the timer's end: `Shared`'s drop notifies.
async fn idle_until_gone(weak: &Weak<Shared>, notify: &Notify) {
    while weak.strong_count() > 0 {
        notify.notified().await;
    }
}

/// The waker Tokio's timer holds for the driver's alarm: a pass over the wheels, from
/// wherever Tokio fires it (see [`Alarm`]).
struct Wakeup {
    shared: Weak<Shared>,
}

impl Wake for Wakeup {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            #[cfg(not(loom))]
            shared.alarm_went_off(|| shared.now());
            // A model's clock: the step it rang the alarm for.
            #[cfg(loom)]
            shared.alarm_went_off(|| {
                let step = shared.parking.alarm_step.load(Ordering::SeqCst);
                shared.clock.step_end(step)
            });
        }
    }
}

/// Gives `shared` an alarm that a loom model rings by hand (`loom_hooks::ring`).
#[cfg(loom)]
pub(crate) fn install_alarm_by_hand(shared: &Arc<Shared>) {
    let wakeup = Waker::from(Arc::new(Wakeup {
        shared: Arc::downgrade(shared),
    }));
    shared.parking.install(Alarm::by_hand(wakeup));
}

/// What the driver's guard does when the driver's runtime drops it: the alarm goes,
/// then the wheels are drained.
#[cfg(loom)]
pub(crate) fn lose_by_hand(shared: &Shared) {
    shared.parking.uninstall();
    shared.driver_lost();
}

/// Rings `shared`'s alarm as Tokio would once its clock has passed the end of `step`,
/// if it is armed.
#[cfg(loom)]
pub(crate) fn ring_by_hand(shared: &Shared, step: u64) {
    shared.parking.alarm_step.fetch_max(step, Ordering::SeqCst);
    if let Some(alarm) = shared.parking.go_off() {
        alarm.wake();
    }
}

impl Shared {
    /// The alarm went off: turn the wheels here, waking the due futures' tasks, and
    /// re-arm it; again for as long as it goes off meanwhile. Left to the holder of
    /// the alarm's lock if it is held (see [`Parking::ring`](super::parking)).
    ///
    /// `now` reads the driver's clock from wherever Tokio fires the alarm.
    fn alarm_went_off(self: &Arc<Self>, now: impl Fn() -> Instant) {
        if !self.parking.ring() {
            return;
        }
        // Only a real-clock driver that is not suspend-aware: a suspend-aware one's
        // rings come from its boot-clock alarm and `simulate_suspend` too, and its
        // clock moves on with a suspend between Tokio's passes, so a ring before the
        // instant armed says nothing of Tokio's clock.
        if self.runtime.has_real_clock() && self.runtime.suspend_clock().is_none() {
            self.parking.went_off_early(now());
        }
        let mut expired = Vec::new();
        let mut passes = 0;
        while self.parking.answer() {
            passes += 1;
            if passes > PASSES {
                // The driver task, which yields between turns, answers the rest.
                self.parking.owe_a_pass();
                self.parking.wake_driver();
                return;
            }
            self.counters.wakeups.fetch_add(1, Ordering::Relaxed);
            // A shard stopped at its batch, or the next step ended while this pass ran:
            // pass again here, as Tokio's own pass goes on to every timer it finds due
            // (handing it to the driver task would make those timers wait for the
            // task's turn).
            if self.turn_with(&now, &now, Runner::Alarm, &mut expired) == Turn::Again {
                self.parking.owe_a_pass();
            }
        }
    }
}

/// How many passes one ring of the alarm makes at most, when more is due after each
/// or it keeps going off: every drain loop is bounded.
const PASSES: u32 = 8;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64};

    use super::*;
    use crate::driver::futures::Registered;

    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Shared state of one shard, with an alarm the test rings by hand.
    fn one_shard_with_an_alarm() -> Arc<Shared> {
        let mut config = crate::builder::Builder::default()
            .validate(1)
            .expect("defaults");
        config.shards = 1;
        let shared = Shared::new(config, None);
        let unused = Waker::from(Arc::new(Flag(AtomicBool::new(false))));
        shared.parking.install(Alarm::by_hand(unused));
        shared
    }

    /// A step ends while the alarm's pass runs, with a timer in it: the pass turns
    /// again itself (as Tokio's pass goes on to every timer it finds due) rather than
    /// leave it to the driver task, which under load waits its turn behind every
    /// ready task.
    #[test]
    fn a_step_that_ends_during_the_alarms_pass_is_fired_by_it() {
        let shared = one_shard_with_an_alarm();
        let woken = Arc::new(Flag(AtomicBool::new(false)));
        let Registered::Pending(_) = shared.register(2, &Waker::from(woken.clone()), None, 0)
        else {
            panic!("step 2 is pending");
        };
        // The clock reads the end of step 1 when the pass turns, the end of step 2
        // when it parks, and from then on.
        let reads = AtomicU64::new(0);
        let now = || {
            let read = reads.fetch_add(1, Ordering::SeqCst);
            shared.clock.step_end(if read == 0 { 1 } else { 2 })
        };
        shared.alarm_went_off(now);
        assert!(
            woken.0.load(Ordering::SeqCst),
            "the step that ended during the pass was left to the driver task"
        );
        assert_eq!(shared.pending(), 0);
    }

    /// With the `Inline` executor the alarm's pass leaves the callbacks' wheel behind
    /// the futures'. A callback registered while the pass runs (on another worker;
    /// here, from a waker the pass wakes) at a step the futures' wheel has processed
    /// is not one the pass arms for, so the pass wakes the driver task for it.
    #[test]
    fn an_inline_callback_registered_during_an_alarm_pass_wakes_the_task() {
        let shared = one_shard_with_an_alarm();
        let timer = crate::timer::Timer::from_shared(shared.clone());
        struct Schedules(
            crate::timer::Timer,
            Instant,
            std::sync::Mutex<Vec<crate::Scheduled>>,
        );
        impl Wake for Schedules {
            fn wake(self: Arc<Self>) {
                let scheduled = self.0.schedule_at(self.1, || {}).expect("scheduled");
                self.2.lock().unwrap().push(scheduled);
            }
        }
        // A deadline in step 1, which the pass (to the end of step 2) has processed.
        let past = shared.clock.step_end(1) - std::time::Duration::from_nanos(1);
        let schedules = Arc::new(Schedules(timer.clone(), past, Default::default()));
        let Registered::Pending(_) = shared.register(2, &Waker::from(schedules.clone()), None, 0)
        else {
            panic!("step 2 is pending");
        };
        shared.alarm_went_off(|| shared.clock.step_end(2));
        assert_eq!(schedules.2.lock().unwrap().len(), 1, "the waker scheduled");
        assert_eq!(shared.pending(), 1, "the callback is in the wheel");
        let notify = shared.parking.notify().clone();
        let mut notified = std::pin::pin!(notify.notified());
        let told = std::future::Future::poll(
            notified.as_mut(),
            &mut std::task::Context::from_waker(Waker::noop()),
        )
        .is_ready();
        assert!(
            told,
            "an inline callback is due and the driver task was not woken"
        );
    }
}
