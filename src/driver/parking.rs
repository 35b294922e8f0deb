//! Parking: publishing the step the driver will next wake at, and arming Tokio's timer
//! for it, so that a registration due earlier moves the wakeup, without a lost
//! wakeup.
//!
//! A registration inserts into its shard, then reads [`Parking::until`]; a park stores
//! it, then reads every shard. With both sides sequentially consistent, at least one
//! sees the other: either the registration sees the new value (and, if it is earlier,
//! arms the alarm for its own step), or the park's second read of the shards sees the
//! entry (loom: `registration_vs_park_loses_no_wakeup`). Parks and a registration's
//! arming publish `until` and arm the [`Alarm`] under one lock, so the alarm is
//! always armed for the `until` published last.
//!
//! Parking also tells a future whether its deadline can have passed without reading
//! the clock ([`ClockBound`]): while the driver's wakeup is armed with Tokio's timer
//! and has not gone off, the driver's clock is before it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::alarm::Alarm;
use crate::clock::Clock;
#[cfg(doc)]
use crate::config::STEPS_PER_TICK;
use crate::sync::{lock, AtomicI64, AtomicU64, AtomicUsize, Mutex, MutexGuard};

/// When the driver will next wake, and how to wake it sooner.
#[derive(Debug)]
pub(super) struct Parking {
    /// The step the driver will next process unprompted: `u64::MAX` when it waits for a
    /// registration, `0` while it is busy. A registration due before it notifies the
    /// driver.
    until: AtomicU64,
    /// What the driver waits on besides its interval.
    notify: Arc<Notify>,
    /// Below what the driver's clock reads while its wakeup has not gone off.
    bound: Arc<ClockBound>,
    /// Tokio's timer, armed for the end of step `until`: `None` where no
    /// runtime runs the driver, and once the driver's task is gone (its runtime's
    /// timer may be shutting down then, and polling it would panic).
    alarm: Mutex<Option<Alarm>>,
    /// Whether the driver's clock may be paused, so that `bound` holds (see
    /// [`ClockBound`]).
    may_pause: bool,
    /// Whether the driver is on the real clock and not suspend-aware: its alarm going
    /// off on the spot means Tokio's clock runs ahead (see `Alarm::went_off_early`).
    real_clock: bool,
    /// The step whose end a loom model's alarm turns to (it never reads the clock).
    #[cfg(loom)]
    pub(super) alarm_step: std::sync::atomic::AtomicU64,
    /// [`HELD`] while `alarm`'s lock is held; [`RANG`] from the alarm going off until
    /// a pass takes it. One atomic, changed only by read-modify-writes, which are
    /// totally ordered: an alarm that finds the lock held leaves its pass to the
    /// holder, which takes `RANG` after clearing `HELD`, so one of the two sees the
    /// other ([`Parking::ring`]).
    state: AtomicUsize,
}

/// In [`Parking::state`]: someone holds the alarm's lock.
const HELD: usize = 1;
/// In [`Parking::state`]: the alarm went off, and no pass has answered it yet.
const RANG: usize = 2;

/// The alarm's lock, held; [`HELD`] in the state while it is.
struct Held<'a> {
    alarm: MutexGuard<'a, Option<Alarm>>,
    state: &'a AtomicUsize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Cleared while the lock is still held: the next holder sets it after taking it.
        self.state.fetch_and(!HELD, Ordering::SeqCst);
    }
}

/// What a park found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parked {
    /// Nothing pending: no wakeup until a registration.
    Idle,
    /// The alarm is armed for this step.
    Until(u64),
    /// This step, the next expiration, has ended already (the turn took that long):
    /// turn again rather than wait.
    Due(u64),
}

/// An upper bound on the driver's clock, as an offset from the timer's origin (see
/// [`Clock::offset_of`](crate::clock::Clock::offset_of)): known while the driver's
/// wakeup is armed with Tokio's timer and has not gone off, on a runtime whose clock
/// may be paused; unknown (`i64::MAX`) otherwise.
///
/// *Invariant:* while it holds `b < i64::MAX`, Tokio's timer has not fired the
/// driver's wakeup, whose deadline Tokio rounds up to at most `b`. Tokio fires a timer
/// once its clock has reached the timer's deadline; a paused clock moves only by
/// `advance` or auto-advance, each of which lets Tokio fire what it passed before any
/// task sees the new time. So the clock reads before `b`, and a deadline at or after
/// `b` has not passed: a `Sleep` polled then need not read the clock to know it is not
/// due. A current-thread runtime's clock that is not paused runs on between Tokio's
/// passes: there a deadline at or after `b` counts as due once that runtime's timer
/// has passed it, as Tokio's own sleeps on it do. A runtime whose clock is never
/// paused (multi-thread, the default timer's) arms no bound. The driver's wakeup
/// clears it when it goes off, before the driver task is woken.
#[derive(Debug)]
pub(super) struct ClockBound(AtomicI64);

impl ClockBound {
    pub(super) fn new() -> ClockBound {
        ClockBound(AtomicI64::new(i64::MAX))
    }

    /// The driver arms its wakeup, which Tokio fires before its clock reaches `bound`.
    /// Stored before the wakeup is armed: until then the previous wakeup, if any, is
    /// still armed, and a larger bound than its own is still above the clock.
    pub(super) fn arm(&self, bound: i64) {
        self.0.store(bound, Ordering::SeqCst);
    }

    /// The driver's wakeup went off, or is no longer armed: nothing is known.
    pub(super) fn clear(&self) {
        self.0.store(i64::MAX, Ordering::SeqCst);
    }

    /// Whether the driver's clock is certainly before the deadline `offset`.
    #[inline]
    pub(super) fn is_before(&self, offset: i64) -> bool {
        offset >= self.0.load(Ordering::SeqCst)
    }
}

/// When the driver, at `now`, asks Tokio to wake it for the next expiration `next`;
/// `None` if that step has already ended (the turn took that long), so that the
/// driver turns again instead of waiting for Tokio.
///
/// The driver wakes for the end of step `next`, a quarter tick, not of its tick, so that
/// one pass wakes at most a step's worth of tasks ([`STEPS_PER_TICK`] says why).
/// Tokio's timer counts whole milliseconds from its runtime's start and rounds every
/// deadline up to the next one. That end rarely falls on Tokio's grid (we cannot see
/// where it lies), so asking for the end itself would wait for the millisecond
/// boundary after it: a sleep Tokio would have woken at the boundary before the end
/// waits one more millisecond with us. Asking for `end - 999_999 ns` makes Tokio round
/// to the last boundary at or before the end instead, where it fires its own sleeps of
/// that step. If that boundary has already passed (the end is less than a millisecond
/// away), Tokio would fire at once, so the driver asks for `now` instead, which Tokio
/// rounds to the next boundary. Either way Tokio does the rounding against a grid only
/// it knows: no boundary is guessed, none is ever in the past, and a wakeup at a
/// boundary before the end (the turn fires only the steps that have ended) is followed
/// by one at the next boundary.
pub(super) fn wake_at(clock: &Clock, next: u64, now: Instant) -> Option<Instant> {
    const ROUNDING: Duration = Duration::from_nanos(999_999);
    let end = clock.step_end(next);
    if end <= now {
        return None;
    }
    let boundary_before_end = end.checked_sub(ROUNDING).unwrap_or(end);
    Some(boundary_before_end.max(now + Duration::from_nanos(1)))
}

/// Tokio's timer's resolution: it rounds a deadline up to its next whole millisecond.
const TOKIO_MILLISECOND: i64 = 1_000_000;

impl Parking {
    /// Parking for a driver whose clock may be paused and that arms the bound
    /// (`may_pause`), on the real clock and not suspend-aware (`real_clock`: only such
    /// a driver's alarm going off on the spot says Tokio's clock runs ahead), with no
    /// alarm yet.
    pub(super) fn new(may_pause: bool, real_clock: bool) -> Parking {
        Parking {
            until: AtomicU64::new(u64::MAX),
            notify: Arc::new(Notify::new()),
            bound: Arc::new(ClockBound::new()),
            alarm: Mutex::new(None),
            may_pause,
            real_clock,
            #[cfg(loom)]
            alarm_step: std::sync::atomic::AtomicU64::new(0),
            state: AtomicUsize::new(0),
        }
    }

    /// Takes the alarm's lock, marking it [`HELD`]. Whoever lets it go looks for a
    /// ring it missed ([`answer`](Parking::answer) or [`rang`](Parking::rang)).
    fn hold(&self) -> Held<'_> {
        let alarm = lock(&self.alarm);
        self.state.fetch_or(HELD, Ordering::SeqCst);
        Held {
            alarm,
            state: &self.state,
        }
    }

    /// Gives the driver its alarm, once its runtime runs it.
    pub(super) fn install(&self, alarm: Alarm) {
        *self.hold().alarm = Some(alarm);
    }

    /// Takes the alarm away: the driver's task is gone, and its runtime's timer may be
    /// about to shut down. Dropped here, before that timer is, so that it is never
    /// polled once it would panic. The bound goes with it.
    pub(super) fn uninstall(&self) {
        let alarm = self.hold().alarm.take();
        self.bound.clear();
        drop(alarm);
    }

    /// The alarm went off: returns whether the caller passes over the wheels now
    /// (then, for as long as [`answer`](Parking::answer) says so). `false` when the
    /// alarm's lock is held, by this thread (Tokio fired the alarm on the spot while
    /// it was being armed) or another: the holder passes after letting it go.
    pub(super) fn ring(&self) -> bool {
        // Tokio has fired the wakeup: its clock may have reached the bound.
        self.bound.clear();
        self.state.fetch_or(RANG, Ordering::SeqCst) & HELD == 0
    }

    /// A loom model's alarm going off, if it is armed: its waker, to wake with no lock
    /// held, as Tokio does.
    #[cfg(loom)]
    pub(super) fn go_off(&self) -> Option<std::task::Waker> {
        self.hold().alarm.as_mut().and_then(Alarm::go_off)
    }

    /// A real-clock driver's alarm went off before the real clock (`now`) reached it:
    /// see [`Alarm::went_off_early`].
    pub(super) fn went_off_early(&self, now: Instant) {
        if let Some(alarm) = self.hold().alarm.as_mut() {
            alarm.went_off_early(now);
        }
    }

    /// The alarm's waker, if it is installed: for ringing it by hand.
    #[cfg(feature = "test-util")]
    pub(super) fn alarm_waker(&self) -> Option<std::task::Waker> {
        self.hold()
            .alarm
            .as_ref()
            .map(|alarm| alarm.waker().clone())
    }

    /// Takes the pass owed for a ring, if one is.
    pub(super) fn answer(&self) -> bool {
        self.state.fetch_and(!RANG, Ordering::SeqCst) & RANG != 0
    }

    /// Owes a pass, as a ring does, for whoever answers next (the caller, in its loop).
    pub(super) fn owe_a_pass(&self) {
        self.state.fetch_or(RANG, Ordering::SeqCst);
    }

    /// Whether a pass is owed, without taking it.
    fn rang(&self) -> bool {
        self.state.fetch_or(0, Ordering::SeqCst) & RANG != 0
    }

    /// The bound the driver's clock is known to be below (the driver task holds it
    /// while it waits, as it holds [`notify`](Parking::notify)).
    pub(super) fn bound(&self) -> &Arc<ClockBound> {
        &self.bound
    }

    /// What the driver task waits on (it holds no `Shared` while it waits).
    pub(super) fn notify(&self) -> &Arc<Notify> {
        &self.notify
    }

    /// Wakes the driver (or has its next wait end at once).
    pub(super) fn wake_driver(&self) {
        self.notify.notify_one();
    }

    /// The driver is turning: registrations need not notify until it parks again.
    pub(super) fn busy(&self) {
        self.until.store(0, Ordering::SeqCst);
    }

    /// The step the driver is parked until.
    #[cfg(loom)]
    pub(super) fn until(&self) -> u64 {
        self.until.load(Ordering::SeqCst)
    }

    /// Moves the alarm to `step` if the driver is parked until after it: a
    /// registration's, called after the entry is in its shard (and its lock released).
    /// `now` reads the driver's clock (read only if the alarm moves).
    ///
    /// It never passes over the wheels itself (the caller may hold a lock of its own,
    /// a `DelayQueue`'s, under which no user waker may run): a ring it kept from
    /// passing, holding the alarm's lock, is answered by Tokio's next pass
    /// ([`owe_soon`](Parking::owe_soon)).
    #[inline]
    pub(super) fn arm_if_earlier(&self, step: u64, clock: &Clock, now: impl FnOnce() -> Instant) {
        if step < self.until.load(Ordering::SeqCst) {
            self.arm_earlier(step, clock, now);
        }
    }

    #[cold]
    #[inline(never)]
    fn arm_earlier(&self, step: u64, clock: &Clock, now: impl FnOnce() -> Instant) {
        let mut held = self.hold();
        let mut now = Some(now);
        let mut read = None;
        let mut owed = false;
        // A park since the check above may have armed it earlier still.
        if step < self.until.load(Ordering::SeqCst) {
            self.until.store(step, Ordering::SeqCst);
            if let Some(alarm) = held.alarm.as_mut() {
                let at_now = (now.take().expect("read once"))();
                read = Some(at_now);
                // A step that has ended already (a callback due in the past goes to the
                // first step not processed, which may have ended) gets the alarm at
                // Tokio's next millisecond, as a Tokio sleep due in the past does: one
                // pass then serves every registration until it.
                let at = wake_at(clock, step, at_now).unwrap_or(at_now + Duration::from_nanos(1));
                owed = self.arm_at(alarm, clock, at, false);
            }
        }
        drop(held);
        // Looked at once the lock is let go, on every path: a ring that found it held
        // owes its pass to this caller.
        if owed || self.rang() {
            let now = read.unwrap_or_else(|| (now.take().expect("read once"))());
            self.owe_soon(clock, now);
        }
    }

    /// A pass is owed (`RANG` is set) and nobody is passing: has Tokio's next pass over
    /// its timers answer it, by arming the alarm for its next millisecond (the ring
    /// then finds `RANG` and passes); the driver task answers instead if the alarm
    /// goes off on the spot again.
    #[cold]
    fn owe_soon(&self, clock: &Clock, now: Instant) {
        self.state.fetch_or(RANG, Ordering::SeqCst);
        let mut held = self.hold();
        let again = held
            .alarm
            .as_mut()
            .is_some_and(|alarm| self.arm_at(alarm, clock, now + Duration::from_nanos(1), false));
        drop(held);
        if again {
            self.wake_driver();
        }
    }

    /// Arms `alarm` for `step`, which has not ended at `now`, and the bound with it.
    /// Returns whether the alarm went off on the spot: then a pass is owed.
    fn arm(&self, alarm: &mut Alarm, clock: &Clock, step: u64, now: Instant) -> bool {
        let Some(at) = wake_at(clock, step, now) else {
            debug_assert!(false, "armed for a step that has ended");
            return true;
        };
        self.arm_at(alarm, clock, at, true)
    }

    /// Arms `alarm` for the instant `at`, and, for a park (`bound`), the bound with it.
    /// Returns whether the alarm went off on the spot: then a pass is owed.
    ///
    /// A registration moving the alarm earlier leaves the bound as it was: still above
    /// the deadline now armed, so still true. It arms none where none was: on a
    /// current-thread runtime on the real clock whose thread is kept busy, a bound
    /// would hold a deadline that has just passed as not passed until that runtime's
    /// timer turns, and a deadline given in the past is ready at once.
    fn arm_at(&self, alarm: &mut Alarm, clock: &Clock, at: Instant, bound: bool) -> bool {
        // Tokio fires the wakeup before its clock reaches its next whole millisecond
        // at or after `at`. Stored before arming: until then the previous wakeup, if
        // any, is still armed, and a larger bound than its own is still above the
        // clock.
        if bound && self.may_pause {
            self.bound.arm(
                clock
                    .unclamped_offset_of(at)
                    .saturating_add(TOKIO_MILLISECOND),
            );
        }
        let mut went_off = alarm.arm(at);
        // On the real clock `at` is ahead of it, so Tokio fires on the spot only if its
        // clock runs ahead (paused and advanced): move to the real clock and arm there.
        if went_off && self.real_clock && alarm.move_to_real_clock(at - Duration::from_nanos(1)) {
            went_off = alarm.arm(at);
        }
        if went_off {
            self.bound.clear();
        }
        went_off
    }

    /// Publishes the step the driver will wake at, the earliest of `next_expiration`
    /// (which reads every shard) read before and after publishing, and arms the alarm
    /// for it at `now` (the driver's clock), all under the alarm's lock. With nothing
    /// pending the alarm is left as it was: at most one wakeup after the timer
    /// empties, which finds nothing and arms nothing.
    pub(super) fn park(
        &self,
        clock: &Clock,
        now: impl FnOnce() -> Instant,
        next_expiration: impl Fn() -> Option<u64>,
    ) -> Parked {
        let mut held = self.hold();
        // `u64::MAX` stands for "nothing pending" (`None` would sort first).
        let next = next_expiration().unwrap_or(u64::MAX);
        self.until.store(next, Ordering::SeqCst);
        let again = next_expiration().unwrap_or(u64::MAX);
        // Only ever earlier: an entry cancelled in between just costs a spurious wakeup.
        let park = next.min(again);
        if park < next {
            self.until.fetch_min(park, Ordering::SeqCst);
        }
        if park == u64::MAX {
            self.bound.clear();
            return Parked::Idle;
        }
        let Some(alarm) = held.alarm.as_mut() else {
            return Parked::Until(park);
        };
        let now = now();
        if wake_at(clock, park, now).is_none() {
            self.bound.clear();
            return Parked::Due(park);
        }
        if self.arm(alarm, clock, park, now) {
            // Went off on the spot: answered by a pass, as any ring.
            self.state.fetch_or(RANG, Ordering::SeqCst);
        }
        Parked::Until(park)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alarm_going_off_clears_the_bound_and_owes_one_pass() {
        let parking = Parking::new(true, false);
        assert!(
            !parking.bound.is_before(i64::MAX - 1),
            "known before any wakeup"
        );
        parking.bound.arm(1_000);
        assert!(parking.bound.is_before(1_000));
        assert!(!parking.bound.is_before(999));
        assert!(parking.ring(), "nobody holds the alarm: the ringer passes");
        assert!(
            !parking.bound.is_before(i64::MAX - 1),
            "unknown once gone off"
        );
        assert!(parking.answer());
        assert!(!parking.answer(), "one pass for one ring");
        // Rung while the alarm is held (armed here, or by another thread): the holder
        // passes after letting it go.
        let held = parking.hold();
        parking.bound.arm(2_000);
        assert!(!parking.ring());
        assert!(!parking.bound.is_before(i64::MAX - 1));
        drop(held);
        assert!(parking.answer(), "the holder finds the pass owed");
    }

    #[test]
    fn the_driver_asks_tokio_for_the_millisecond_before_a_steps_end_or_turns_again() {
        let origin = Instant::now();
        let us = |n: u64| origin + Duration::from_micros(n);
        let before_end = |end_us: u64| us(end_us) - Duration::from_nanos(999_999);
        // 10 ms ticks of four 2.5 ms steps: step 2 ends at 5 ms, step 3 at 7.5 ms, step 4
        // at 10 ms, each its own wakeup, not the tick's end (10 ms); Tokio's millisecond
        // before an end starts within (end - 1 ms, end], which `end - 999_999 ns`
        // rounds to.
        let clock = Clock::new(origin, Duration::from_millis(10), 4);
        assert_eq!(wake_at(&clock, 2, us(1_000)), Some(before_end(5_000)));
        assert_eq!(wake_at(&clock, 3, us(1_000)), Some(before_end(7_500)));
        assert_eq!(wake_at(&clock, 4, us(4_999)), Some(before_end(10_000)));
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
