//! The driver task: turn, then wait until the next expiration or a notification.
//!
//! It awaits a `tokio::time::Interval` with [`MissedTickBehavior::Skip`], reset before
//! each wait to the end of the configured tick that holds the wheels' next expiration
//! ([`Clock::wake_step`]): the earliest deadline, or the moment a far one moves down a
//! level of the wheel, so a lone far deadline costs a handful of wakeups. When the
//! runtime wakes it late, a turn processes every step up to the clock anyway, so
//! `Burst`'s make-up ticks would find nothing to do. With nothing pending it waits on
//! a [`Notify`] alone: no wakeups while idle.
//!
//! Tokio rounds the interval's deadline up to its own whole millisecond, counted from
//! the runtime's start, which is not where our ticks end. So the driver asks for the
//! last of Tokio's milliseconds at or before the tick's end, where Tokio fires its own
//! sleeps of that tick, or for the next one if that has passed ([`wake_at`]); and when
//! a turn took so long that the next expiration has passed meanwhile, it turns again
//! (after the tasks it woke) instead of waiting for Tokio.

use std::future::Future;
use std::panic::catch_unwind;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::context;
use super::parking::ClockBound;
use super::shared::Shared;
use super::turn::Turn;
use crate::clock::Clock;
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
    let tick = config.tick;
    let handle = runtime.clone();
    let made = context::enter(runtime, move || {
        // tokio panics when the runtime was built without its time driver, and offers
        // no way to ask first: the panic is caught, to be an error here rather than
        // a panic in the driver task later (under `panic = "abort"` the process
        // aborts, as at any use of Tokio's timer there; documented on `build`).
        let interval = catch_unwind(|| {
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
            interval
        })
        .ok()?;
        // On the driver's runtime, so that the origin is read from the clock the
        // driver follows: a caller on another runtime whose clock is paused and
        // advanced (a test using the default timer first) would otherwise put the
        // origin ahead of it, and every later deadline would be due early.
        Some((interval, Shared::new(config, Some(handle))))
    });
    let (interval, shared) =
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
    // The guard is made here and moved into the task, not made by the task's body:
    // a runtime dropped before it first polls the task still drops the guard.
    let guard = DriverGuard {
        shared: Arc::downgrade(&shared),
        ended: false,
    };
    let parked = Parked {
        notify: shared.parking.notify().clone(),
        bound: shared.parking.bound().clone(),
    };
    runtime.spawn(run(guard, parked, interval));
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

/// When the driver, at `now`, asks Tokio to wake it for the next expiration `next`;
/// `None` if that step has already ended (the turn took that long), so that the
/// driver turns again instead of waiting for Tokio.
///
/// The driver wakes for the end of the configured tick that holds `next`
/// ([`Clock::wake_step`]). Tokio's timer counts whole milliseconds from its runtime's
/// start and rounds every deadline up to the next one. That end rarely falls on
/// Tokio's grid (we cannot see where it lies), so asking for the end itself would wait
/// for the millisecond boundary after it: a sleep Tokio would have woken at the
/// boundary before the end waits one more millisecond with us. Asking for
/// `end - 999_999 ns` makes Tokio round to the last boundary at or before the end
/// instead, where it fires its own sleeps of that tick. If that boundary has already
/// passed (the end is less than a millisecond away), Tokio would fire at once, so the
/// driver asks for `now` instead, which Tokio rounds to the next boundary. Either way
/// Tokio does the rounding against a grid only it knows: no boundary is guessed, none
/// is ever in the past, and a wakeup at a boundary before the end (the turn fires only
/// the steps that have ended) is followed by one at the next boundary.
fn wake_at(clock: &Clock, next: u64, now: Instant) -> Option<Instant> {
    const ROUNDING: Duration = Duration::from_nanos(999_999);
    if clock.step_end(next) <= now {
        return None;
    }
    let end = clock.step_end(clock.wake_step(next));
    let boundary_before_end = end.checked_sub(ROUNDING).unwrap_or(end);
    Some(boundary_before_end.max(now + Duration::from_nanos(1)))
}

/// What the driver task holds of `Parking` while it waits (it holds no `Shared` then).
struct Parked {
    notify: Arc<Notify>,
    bound: Arc<ClockBound>,
}

/// The driver task.
async fn run(mut guard: DriverGuard, parked: Parked, interval: Interval) {
    let weak = guard.shared.clone();
    let Parked { notify, bound } = parked;
    let mut waiting = Waiting::new(interval, bound, &weak);
    let mut expired = Vec::new();
    loop {
        let Some(shared) = weak.upgrade() else {
            guard.ended = true;
            return;
        };
        shared.counters.wakeups.fetch_add(1, Ordering::Relaxed);
        let clock = shared.clock;
        let next = match shared.turn(&mut expired) {
            Turn::Exit => {
                // Shut down: stopped, but the task stays, idle, until the timer is
                // gone (`Shared`'s drop notifies), so that the loss of its runtime
                // after the shutdown is still seen (its clock then stops for good).
                shared.progress.stop();
                drop(shared);
                // Nothing of Tokio's timer left behind to wake it, or to move a
                // paused clock.
                waiting.bound.clear();
                drop(waiting);
                drop(expired);
                idle_until_gone(&weak, &notify).await;
                guard.ended = true;
                return;
            }
            Turn::Again => {
                waiting.bound.clear();
                drop(shared);
                tokio::task::yield_now().await;
                continue;
            }
            Turn::Park { next } => next,
        };
        // Hold only the `Weak` while waiting, so that dropping the last handle ends
        // the driver (detached callbacks hold the timer through `Shared::keep_alive`).
        drop(shared);
        waiting.until(&clock, next, &notify).await;
    }
}

/// The shut-down driver's wait for the timer's end: `Shared`'s drop notifies.
async fn idle_until_gone(weak: &Weak<Shared>, notify: &Notify) {
    while weak.strong_count() > 0 {
        notify.notified().await;
    }
}

/// The driver's wakeup between turns: Tokio's interval, and the bound on the clock it
/// arms (see [`ClockBound`]).
struct Waiting {
    interval: Interval,
    bound: Arc<ClockBound>,
    /// Whether the driver's clock may be paused, so that the bound holds.
    may_pause: bool,
}

impl Waiting {
    /// The wakeup of the driver of `shared`, on `interval`, arming `bound`.
    fn new(interval: Interval, bound: Arc<ClockBound>, shared: &Weak<Shared>) -> Waiting {
        Waiting {
            interval,
            // The bound holds only while the clock stands still between Tokio's passes
            // over its timers, that is, while it is paused: a real clock runs on while a
            // busy runtime has yet to fire the wakeup, and a caller on another runtime
            // never waits for this one's pass. So a driver on a runtime whose clock is
            // never paused (where the clock is cheap to read: no runtime handle) leaves
            // it unknown.
            may_pause: shared
                .upgrade()
                .is_some_and(|shared| !shared.runtime.has_real_clock()),
            bound,
        }
    }

    /// Waits for the next expiration `next` (by the clock `clock`), or for a
    /// notification; with nothing pending, for a notification alone.
    async fn until(&mut self, clock: &Clock, next: Option<u64>, notify: &Notify) {
        let notified = pin!(notify.notified());
        let Some(next) = next else {
            self.bound.clear();
            return notified.await;
        };
        let Some(at) = wake_at(clock, next, Instant::now()) else {
            // Due already: turn again once the tasks just woken have run.
            self.bound.clear();
            return tokio::task::yield_now().await;
        };
        // Tokio fires the wakeup before its clock reaches its next whole millisecond
        // at or after `at`.
        if self.may_pause {
            self.bound.arm(
                clock
                    .unclamped_offset_of(at)
                    .saturating_add(TOKIO_MILLISECOND),
            );
        }
        self.interval.reset_at(at);
        wait(notified, &mut self.interval, &self.bound).await;
    }
}

/// Tokio's timer's resolution: it rounds a deadline up to its next whole millisecond.
const TOKIO_MILLISECOND: i64 = 1_000_000;

/// Waits for a notification or the interval's next tick, which clears `bound` when it
/// goes off (see [`ClockBound`]).
async fn wait(
    mut notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    interval: &mut Interval,
    bound: &Arc<ClockBound>,
) {
    // The task's waker, and the `Wakeup` made for it (once per wait, as a rule).
    let mut wakeup: Option<(Waker, Waker)> = None;
    std::future::poll_fn(|cx| {
        if notified.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let task = cx.waker();
        if wakeup
            .as_ref()
            .is_some_and(|(known, _)| !known.will_wake(task))
        {
            wakeup = None;
        }
        let (_, ours) = wakeup.get_or_insert_with(|| {
            let ours = Waker::from(Arc::new(Wakeup {
                bound: bound.clone(),
                task: task.clone(),
            }));
            (task.clone(), ours)
        });
        let ticked = interval.poll_tick(&mut Context::from_waker(ours));
        if ticked.is_ready() {
            bound.clear();
        }
        ticked.map(drop)
    })
    .await
}

/// The waker Tokio's timer holds for the driver's wakeup: clears the bound on the
/// driver's clock, then wakes the driver task.
struct Wakeup {
    bound: Arc<ClockBound>,
    task: Waker,
}

impl Wake for Wakeup {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.bound.clear();
        self.task.wake_by_ref();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_drivers_wakeup_going_off_clears_the_bound_and_wakes_the_driver() {
        let bound = Arc::new(ClockBound::new());
        assert!(!bound.is_before(i64::MAX - 1), "known before any wakeup");
        bound.arm(1_000);
        assert!(bound.is_before(1_000));
        assert!(!bound.is_before(999));
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let wakeup = Waker::from(Arc::new(Wakeup {
            bound: bound.clone(),
            task: Waker::from(task.clone()),
        }));
        wakeup.wake_by_ref();
        assert!(!bound.is_before(i64::MAX - 1), "still known once gone off");
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        bound.arm(2_000);
        wakeup.wake();
        assert!(!bound.is_before(i64::MAX - 1));
        assert_eq!(task.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn the_driver_asks_tokio_for_the_millisecond_before_a_ticks_end_or_turns_again() {
        let origin = Instant::now();
        let us = |n: u64| origin + Duration::from_micros(n);
        // 10 ms ticks of four 2.5 ms steps: step 2 ends at 5 ms, in the
        // configured tick that ends at 10 ms; Tokio's millisecond before that end
        // starts within (9, 10] ms, which `end - 999_999 ns` rounds to.
        let clock = Clock::new(origin, Duration::from_millis(10), 4);
        let before_end = us(10_000) - Duration::from_nanos(999_999);
        assert_eq!(wake_at(&clock, 2, us(1_000)), Some(before_end));
        assert_eq!(wake_at(&clock, 4, us(4_999)), Some(before_end));
        // That millisecond has begun: ask for now, which Tokio rounds to the next.
        assert_eq!(
            wake_at(&clock, 4, us(9_500)),
            Some(us(9_500) + Duration::from_nanos(1))
        );
        // The step has ended while the turn ran: turn again, do not wait.
        assert_eq!(wake_at(&clock, 2, us(5_000)), None);
        assert_eq!(wake_at(&clock, 4, us(10_001)), None);
    }
}
