//! Parking: publishing the step the driver will next wake at, so that a registration
//! due earlier wakes it, without a lost wakeup.
//!
//! A registration inserts into its shard, then reads [`Parking::until`]; the driver
//! stores it, then reads every shard. With both sides sequentially consistent, at
//! least one sees the other: either the registration sees the new value (and notifies
//! if it is earlier), or the driver's second read of the shards sees the entry (loom:
//! `registration_vs_park_loses_no_wakeup`).
//!
//! Parking also tells a future whether its deadline can have passed without reading
//! the clock ([`ClockBound`]): while the driver's wakeup is armed with Tokio's timer
//! and has not gone off, the driver's clock is before it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::sync::{AtomicI64, AtomicU64};

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

impl Parking {
    pub(super) fn new() -> Parking {
        Parking {
            until: AtomicU64::new(u64::MAX),
            notify: Arc::new(Notify::new()),
            bound: Arc::new(ClockBound::new()),
        }
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

    /// Wakes the driver if it is parked until after `step`. Called after the entry is
    /// in its shard.
    #[inline]
    pub(super) fn notify_if_earlier(&self, step: u64) {
        if step < self.until.load(Ordering::SeqCst) {
            self.until.fetch_min(step, Ordering::SeqCst);
            self.notify.notify_one();
        }
    }

    /// Publishes the step the driver will wake at and returns it: the earliest of
    /// `next_expiration` (which reads every shard), read before and after publishing.
    pub(super) fn park(&self, next_expiration: impl Fn() -> Option<u64>) -> Option<u64> {
        // `u64::MAX` stands for "nothing pending" (`None` would sort first).
        let next = next_expiration().unwrap_or(u64::MAX);
        self.until.store(next, Ordering::SeqCst);
        let again = next_expiration().unwrap_or(u64::MAX);
        // Only ever earlier: an entry cancelled in between just costs a spurious wakeup.
        let park = next.min(again);
        if park < next {
            self.until.fetch_min(park, Ordering::SeqCst);
        }
        (park != u64::MAX).then_some(park)
    }
}
