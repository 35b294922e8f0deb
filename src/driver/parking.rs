//! Parking: publishing the step the driver will next wake at, so that a registration
//! due earlier wakes it, without a lost wakeup.
//!
//! A registration inserts into its shard, then reads [`Parking::until`]; the driver
//! stores it, then reads every shard. With both sides sequentially consistent, at
//! least one sees the other: either the registration sees the new value (and notifies
//! if it is earlier), or the driver's second read of the shards sees the entry (loom:
//! `registration_vs_park_loses_no_wakeup`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::sync::AtomicU64;

/// When the driver will next wake, and how to wake it sooner.
#[derive(Debug)]
pub(super) struct Parking {
    /// The step the driver will next process unprompted: `u64::MAX` when it waits for a
    /// registration, `0` while it is busy. A registration due before it notifies the
    /// driver.
    until: AtomicU64,
    /// What the driver waits on besides its interval.
    notify: Arc<Notify>,
}

impl Parking {
    pub(super) fn new() -> Parking {
        Parking {
            until: AtomicU64::new(u64::MAX),
            notify: Arc::new(Notify::new()),
        }
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
