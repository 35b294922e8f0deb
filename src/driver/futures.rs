//! What a [`Sleep`](crate::Sleep) asks of the driver: register its waker at a step,
//! replace the waker, move the entry, cancel it, and whether it has fired.
//!
//! An entry is named by its [`Registration`] and the step it is due at, which the
//! `Sleep` derives from its deadline: a `Sleep` whose entry fired can never reach the
//! entry that later reuses its slab index (see [`wheel`](crate::wheel)).

use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::Duration;

use super::shared::{drop_released, Registration, Shared};
use crate::sites::{ShardTags, Site, Tag};
use crate::sync::lock;
use crate::wheel::InsertError;

/// Outcome of a registration attempt.
pub(crate) enum Registered {
    /// In the wheel here.
    Pending(Registration),
    /// Due already: complete now.
    Due,
    /// Not in the wheel, which no longer turns (shut down, its runtime gone) or is
    /// full: time it with a [`Fallback`](super::fallbacks::Fallback) instead.
    Fallback,
}

/// Why a future's entry leaves the wheel other than by the driver firing it, for the
/// counts `Stats` reports.
enum Leaving {
    Cancelled,
    Reset,
    /// Found due when polled, this late: counted as fired.
    Due(Duration),
    /// The crate's own future, let go of: not counted.
    Discarded,
}

impl Shared {
    /// Whether `reg`, due at the deadline `offset` (see
    /// [`Clock::offset_of`](crate::clock::Clock::offset_of)), has certainly fired: its
    /// shard has processed the deadline's step (lock-free).
    pub(crate) fn has_fired(&self, reg: Registration, offset: i64) -> bool {
        let processed = self.shard(reg).processed.load(Ordering::Acquire);
        self.clock.is_processed(offset, processed)
    }

    /// How late the deadline `offset` is, if it has passed on the driver's clock (at
    /// the deadline itself, not at the end of its step): what a future the driver has
    /// not fired asks before it would return `Pending`, so that a due deadline is ready
    /// when polled, whether or not the driver has turned since. On a driver whose
    /// clock may be paused, the clock is read only when its armed wakeup cannot rule
    /// the deadline out ([`ClockBound`](super::parking::ClockBound)); on the real
    /// clock, only when its coarse bound cannot ([`DriverRuntime::is_before`]). Never
    /// before the deadline.
    ///
    /// [`DriverRuntime::is_before`]: super::runtime::DriverRuntime::is_before
    #[inline]
    pub(crate) fn due(&self, offset: i64) -> Option<Duration> {
        if self.parking.bound().is_before(offset) || self.runtime.is_before(offset) {
            return None;
        }
        self.late_by(offset)
    }

    /// Out of line, so that [`due`](Shared::due), on every first poll, stays inline:
    /// a real-clock driver's coarse bound leaves here only deadlines within its
    /// margin of now (an interval's tick, a sleep about to end), a paused one's bound
    /// only those its armed wakeup cannot rule out.
    #[inline(never)]
    fn late_by(&self, offset: i64) -> Option<Duration> {
        let now = self.now();
        let deadline = self.clock.instant_at(offset);
        (now >= deadline).then(|| now - deadline)
    }

    /// Registers a future's waker at `step`, with the line that made it (`Some` iff
    /// the timer tracks call sites) and its `deadline` (an offset) beside the entry.
    #[inline]
    pub(crate) fn register(
        &self,
        step: u64,
        waker: &Waker,
        site: Option<Site>,
        deadline: i64,
    ) -> Registered {
        let (index, shard) = self.local();
        let mut wheels = lock(&shard.wheels);
        if self.shutdown.load(Ordering::SeqCst) {
            return Registered::Fallback;
        }
        match wheels.futures.insert(step, waker.clone()) {
            Ok(key) => {
                debug_assert_eq!(site.is_some(), self.track_call_sites, "a line iff tracking");
                if let Some(site) = site {
                    let tags = ShardTags::of(&mut wheels.tags);
                    tags.futures.set(key.index(), Tag { site, deadline });
                }
                drop(wheels);
                self.arm_if_earlier(step);
                Registered::Pending(Registration { shard: index, key })
            }
            Err((_, InsertError::Processed)) => Registered::Due,
            // Entries are 32 bytes and a shard holds 2^32 - 1 of them; a future's
            // registration that would overflow it is timed elsewhere.
            Err((_, InsertError::Full)) => Registered::Fallback,
        }
    }

    /// Replaces the waker of `reg`, due at `step`, unless it would wake the same task.
    /// Returns `false` if the entry has fired.
    pub(crate) fn update_waker(&self, reg: Registration, step: u64, waker: &Waker) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        match wheels.futures.get_mut(reg.key, step) {
            Some(stored) => {
                if !stored.will_wake(waker) {
                    let old = std::mem::replace(stored, waker.clone());
                    drop(wheels);
                    drop(old);
                }
                true
            }
            None => false,
        }
    }

    /// Removes a future's entry, due at `step`, if it is still pending.
    #[inline]
    pub(crate) fn cancel(&self, reg: Registration, step: u64) {
        let removed = self.take_out(reg, step, Leaving::Cancelled);
        // Dropped here, after the lock: dropping a waker can run arbitrary code.
        drop(removed);
    }

    /// Removes the entry of a future the crate itself made and lets go of (a
    /// `DelayQueue`'s own sleep, re-aimed), without counting it as cancelled: no user
    /// cancelled anything.
    pub(crate) fn discard(&self, reg: Registration, step: u64) {
        drop(self.take_out(reg, step, Leaving::Discarded));
    }

    /// Takes out a future's entry, due at `step`, whose deadline passed `late` ago
    /// before the driver fired it (see [`due`](Shared::due)), and returns its waker:
    /// the future completes as if fired, and counts as fired (with its lateness) or,
    /// if a `reset` moved it there, as reset.
    pub(crate) fn complete_due(
        &self,
        reg: Registration,
        step: u64,
        late: Duration,
        reset: bool,
    ) -> Option<Waker> {
        let leaving = if reset {
            Leaving::Reset
        } else {
            Leaving::Due(late)
        };
        self.take_out(reg, step, leaving)
    }

    /// Takes the entry out of the wheel, counting it as `leaving` says, and frees the
    /// wheel's storage if it emptied; the waker is dropped or woken by the caller,
    /// after the lock.
    #[inline]
    fn take_out(&self, reg: Registration, step: u64, leaving: Leaving) -> Option<Waker> {
        let mut wheels = lock(&self.shard(reg).wheels);
        let removed = wheels.futures.remove(reg.key, step);
        let left = u64::from(removed.is_some());
        match leaving {
            Leaving::Cancelled => wheels.cancelled += left,
            Leaving::Reset => wheels.reset += left,
            Leaving::Due(_) | Leaving::Discarded => {}
        }
        let released = wheels.release_futures();
        drop(wheels);
        if let (Leaving::Due(late), 1) = (leaving, left) {
            self.count_fired(late);
        }
        if let Some(released) = released {
            drop_released(released);
        }
        removed
    }

    /// Whether the future's entry `reg`, due at `step`, is still in the wheel.
    pub(crate) fn is_pending(&self, reg: Registration, step: u64) -> bool {
        lock(&self.shard(reg).wheels)
            .futures
            .contains(reg.key, step)
    }

    /// Moves `reg` from `step` to `to`, the step of the new `deadline` (an offset).
    /// Returns `false` (and wakes the entry's task) when the entry has already fired or
    /// `to` has already been processed.
    pub(crate) fn reschedule(&self, reg: Registration, step: u64, to: u64, deadline: i64) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        match wheels.futures.reschedule(reg.key, step, to) {
            Ok(()) => {
                if let Some(tags) = &mut wheels.tags {
                    tags.futures.moved(reg.key.index(), deadline);
                }
                wheels.reset += 1;
                drop(wheels);
                self.arm_if_earlier(to);
                true
            }
            Err(due) => {
                // Moved to a step already processed: out of the wheel (the entry is
                // due, not fired), its task woken to complete it. Still a reset (a
                // pending timer moved), not a cancel.
                wheels.reset += u64::from(due.is_some());
                drop(wheels);
                if let Some(waker) = due {
                    waker.wake();
                }
                false
            }
        }
    }
}
