//! What a [`Scheduled`](crate::Scheduled) asks of the driver (schedule, cancel, move,
//! its callback's state), and the count of pending callbacks and the keep-alive held
//! for the detached ones. Expired callbacks go to their executor through
//! [`executor`](super::executor).
//!
//! A callback's entry is named by its [`Registration`] and its step, as a future's is;
//! its handle keeps that step in a [`Place`], with a cancelled mark set under the
//! shard's lock by the cancel that took the entry out. Both are read under that lock
//! before anything else, and the step is rewritten under it by a reset that moves the
//! entry, so a handle never names its entry by a step it has left.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::{drop_released, Registration, Shared};
use crate::callback::Callback;
use crate::error::Error;
use crate::sites::{ShardTags, Site, Tag};
use crate::sync::{lock, AtomicU64};
use crate::wheel::{InsertError, MAX_ENTRIES, MAX_STEP};

/// Where a callback is, as its [`Scheduled`](crate::Scheduled) handle sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallbackState {
    /// In the wheel.
    Scheduled,
    /// Taken out by the driver and handed to the executor.
    Expired,
    /// Taken out by its handle's `cancel`.
    Cancelled,
    /// Taken out by shutdown, unrun.
    Unfired,
}

/// Where a callback's entry is, as its [`Scheduled`](crate::Scheduled) handle knows it.
///
/// *Invariant:* the step and deadline change, and the cancelled mark is set, only under
/// the lock of the entry's shard, and the driver's methods read them only under it: a
/// reset racing a cancel, a state query or an expiry is decided by that lock.
#[derive(Debug)]
pub(crate) struct Place {
    /// The step the entry is due at (with the registration, what names it), with
    /// [`CANCELLED`] set by the `cancel` that took the entry out. One word rather than
    /// a step and a flag keeps a `Scheduled` at 40 bytes.
    step: AtomicU64,
    /// The deadline as an offset from the clock's origin (`Clock::offset_of`), as bits;
    /// read without the lock, for `Scheduled::deadline`.
    deadline: AtomicU64,
}

/// The mark in [`Place::step`] of a cancelled entry: above every step (`MAX_STEP` is
/// below 2^44).
const CANCELLED: u64 = 1 << 63;
const _: () = assert!(MAX_STEP < CANCELLED);

impl Place {
    pub(crate) fn new(step: u64, deadline: i64) -> Place {
        Place {
            step: AtomicU64::new(step),
            deadline: AtomicU64::new(deadline as u64),
        }
    }

    /// The deadline, as an offset (`Clock::offset_of`); the latest a reset set.
    pub(crate) fn deadline(&self) -> i64 {
        self.deadline.load(Ordering::Acquire) as i64
    }

    /// Whether a `cancel` took the entry out.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.step.load(Ordering::Acquire) & CANCELLED != 0
    }

    /// The step the entry is at, or `None` once cancelled (it names no entry then).
    /// Under the shard's lock.
    fn step(&self) -> Option<u64> {
        let step = self.step.load(Ordering::Acquire);
        (step & CANCELLED == 0).then_some(step)
    }
}

impl Shared {
    /// Registers a callback due at its deadline, made at `site` (kept if the timer
    /// tracks call sites); returns where it is and the step it is due at, which
    /// together name it (see [`wheel`](crate::wheel)).
    pub(crate) fn schedule(
        &self,
        callback: Callback,
        site: Site,
    ) -> Result<(Registration, u64), Error> {
        let step = self.clock.step_at_offset(callback.deadline());
        let (index, shard) = self.local();
        let mut wheels = lock(&shard.wheels);
        // Due already: run at the next step rather than on the caller's stack.
        let step = step.max(wheels.callbacks.first_open_step()).min(MAX_STEP);
        if let Err(error) = self.admit(step) {
            drop(wheels);
            // The closure is dropped after the lock: its captures may do anything.
            drop(callback);
            return Err(error);
        }
        let deadline = callback.deadline();
        match wheels.callbacks.insert(step, callback) {
            Ok(key) => {
                if self.track_call_sites {
                    let tags = ShardTags::of(&mut wheels.tags);
                    tags.callbacks.set(key.index(), Tag { site, deadline });
                }
                drop(wheels);
                self.arm_if_earlier(step);
                Ok((Registration { shard: index, key }, step))
            }
            Err((callback, why)) => {
                drop(wheels);
                drop(callback);
                self.callbacks_left(1);
                Err(match why {
                    InsertError::Processed => Error::OutOfRange,
                    InsertError::Full => Error::AtCapacity {
                        max: MAX_ENTRIES.min(self.max_pending),
                    },
                })
            }
        }
    }

    /// Admits a callback due at `step` (one not yet processed), under its shard's
    /// lock: counts it in as pending, or says why it is refused.
    #[inline]
    fn admit(&self, step: u64) -> Result<(), Error> {
        if self.shutdown.load(Ordering::SeqCst) {
            return Err(Error::Shutdown);
        }
        // Past the last step a deadline can name, a callback would have saturated to a
        // step already processed (and run at once, however far it was asked for) or to
        // one the clock never reaches (and never run, the driver spinning): past the
        // range, like the wheel's own `Processed`. At that last step, where far deadlines
        // saturate, the driver's clock decides, not what the wheel has processed: an
        // idle driver is not woken by the paused clock's jump. (Unknown: refused.)
        let last = self.clock.last_step();
        if step > last || (step == last && self.runtime.is_past_last_step(&self.clock)) {
            return Err(Error::OutOfRange);
        }
        // Last, as it counts the callback in.
        if !self.count_in_callback() {
            return Err(Error::AtCapacity {
                max: self.max_pending,
            });
        }
        Ok(())
    }

    /// Counts one more pending callback if fewer than `max_pending` are: a
    /// compare-and-swap below the limit, so that the count never holds a callback
    /// that is then refused, which a concurrent `schedule` would see as pending (with
    /// `max_pending(1)`, a refusal with nothing pending). Called under the shard's
    /// lock, after every other check, just before the insert.
    #[inline]
    fn count_in_callback(&self) -> bool {
        // Unbounded (the default): no count reaches the limit, so no `schedule` is
        // refused for one, and one addition counts the callback in.
        if self.max_pending == usize::MAX {
            self.pending_callbacks.fetch_add(1, Ordering::SeqCst);
            return true;
        }
        let mut count = self.pending_callbacks.load(Ordering::SeqCst);
        loop {
            if count >= self.max_pending {
                return false;
            }
            match self.pending_callbacks.compare_exchange_weak(
                count,
                count + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
    }

    /// Removes the callback at `reg`, at its `place`, if it is still pending, setting
    /// the cancelled mark under the lock. Returns whether it was pending: exactly one of this
    /// returning `true` and the driver taking the callback out can happen, as both take
    /// it out of the wheel under the shard's lock.
    pub(crate) fn cancel_callback(&self, reg: Registration, place: &Place) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        // Read under the lock that set it: a handle that removed its entry itself no
        // longer names it, and must not reach whatever entry has its key now.
        let Some(step) = place.step() else {
            return false;
        };
        let Some(removed) = wheels.callbacks.remove(reg.key, step) else {
            return false;
        };
        place.step.store(step | CANCELLED, Ordering::Release);
        wheels.cancelled += 1;
        let released = wheels.release_callbacks();
        drop(wheels);
        // Counted out before the closure is dropped, as an expiry is before it runs:
        // its captures may schedule again, and the room is free at once.
        self.callbacks_left(1);
        // The closure is dropped here, after the lock: its captures may do anything.
        drop(removed);
        if let Some(released) = released {
            drop_released(released);
        }
        true
    }

    /// Moves the callback at `reg`, at its `place`, to the deadline `offset` (see
    /// `Clock::offset_of`), if it is still pending, keeping its entry, key and closure;
    /// updates `place` under the lock. Returns whether it was pending: the driver's
    /// expiry and `cancel` take the entry out under the same lock, so exactly one of
    /// "moved" and "taken out" happens, and a moved callback still runs exactly once.
    ///
    /// A deadline whose step is already processed (or being processed) moves it to the
    /// next step, as `schedule` places a past deadline: it runs on the driver, never on
    /// the caller's stack.
    pub(crate) fn reset_callback(&self, reg: Registration, place: &Place, offset: i64) -> bool {
        let to = self.clock.step_at_offset(offset);
        let mut wheels = lock(&self.shard(reg).wheels);
        let Some(step) = place.step() else {
            return false;
        };
        // Far deadlines saturate at the last step the clock can name (as `schedule`'s
        // do, short of refusing), and the result at the wheel's own `MAX_STEP`, so that
        // the step recorded is the one the entry is named by.
        let to = to
            .min(self.clock.last_step())
            .max(wheels.callbacks.first_open_step())
            .min(MAX_STEP);
        match wheels.callbacks.reschedule(reg.key, step, to) {
            Ok(()) => {
                if let Some(callback) = wheels.callbacks.get_mut(reg.key, to) {
                    callback.set_deadline(offset);
                }
                if let Some(tags) = &mut wheels.tags {
                    tags.callbacks.moved(reg.key.index(), offset);
                }
                place.step.store(to, Ordering::Release);
                place.deadline.store(offset as u64, Ordering::Release);
                wheels.reset += 1;
                drop(wheels);
                self.arm_if_earlier(to);
                true
            }
            Err(None) => false,
            // Only when the wheel has processed `MAX_STEP` itself (the paused clock
            // 557 years on): the entry came out, and runs on the driver's next turn
            // (or here, once shut down), as a callback an executor handed back does.
            Err(Some(callback)) => {
                drop(wheels);
                self.reject(callback);
                true
            }
        }
    }

    /// Where the callback at `reg`, at its `place`, is, decided under the lock its
    /// entry moves under.
    pub(crate) fn callback_state(&self, reg: Registration, place: &Place) -> CallbackState {
        let wheels = lock(&self.shard(reg).wheels);
        let Some(step) = place.step() else {
            return CallbackState::Cancelled;
        };
        if wheels.callbacks.contains(reg.key, step) {
            CallbackState::Scheduled
        } else if wheels
            .unfired
            .binary_search(&(reg.key.to_bits(), step))
            .is_ok()
        {
            CallbackState::Unfired
        } else {
            CallbackState::Expired
        }
    }

    /// `n` callbacks left the wheel (fired, cancelled, drained or dropped): count them
    /// out, and release the keep-alive with the last one.
    pub(super) fn callbacks_left(&self, n: usize) {
        if n > 0 && self.pending_callbacks.fetch_sub(n, Ordering::SeqCst) == n {
            // Re-checked under the keep-alive's lock, after clearing its flag: a
            // callback scheduled and detached since the count reached zero may have
            // seen the flag still set, and relies on the keep-alive (loom:
            // `detach_vs_last_callback_keeps_the_timer_alive`). Its count was added
            // before it read the flag, so if it read it before the clear, this load
            // sees its count.
            let release = self
                .keep_alive
                .release_unless(|| self.pending_callbacks.load(Ordering::SeqCst) != 0);
            // Dropped after the lock: it may be the last reference.
            drop(release);
        }
    }

    /// The handle of the callback `reg` names at its `place` was detached: record that
    /// no handle owns it (see `Callback::disown`), or, once the driver is lost, drop
    /// it now, as the loss dropped the unowned ones. After `shutdown()` it is left
    /// for `shutdown` to return. Takes the shard's lock.
    pub(crate) fn disown(&self, reg: Registration, place: &Place) {
        let mut wheels = lock(&self.shard(reg).wheels);
        // Read under the lock that set it: a cancelled handle names no entry.
        let Some(step) = place.step() else {
            return;
        };
        let lost = wheels.lost;
        let Some(callback) = wheels.callbacks.get_mut(reg.key, step) else {
            return;
        };
        if !lost {
            // Before the loss visits this shard (it then drops it and counts it), or
            // after an explicit shutdown's drain, which took it out (there is no
            // entry then).
            callback.disown();
            return;
        }
        // The loss has visited this shard (and counted it as stranded): nothing can
        // run it, and now nothing owns it.
        let removed = wheels.callbacks.remove(reg.key, step);
        drop(wheels);
        // After the lock: its captures may do anything.
        drop(removed);
        self.callbacks_left(1);
    }

    /// A callback no handle owns was scheduled, or its handle was detached: keep the
    /// timer alive until no callback is pending, since that one has nothing else
    /// keeping it.
    ///
    /// Once shut down (or the driver lost) nothing will run it, so it keeps nothing
    /// alive: `shutdown` returns it, or the driver's loss dropped it.
    pub(crate) fn keep_alive_while_pending(self: &Arc<Self>) {
        // Under the keep-alive's lock, under which `callbacks_left` re-reads the count
        // before releasing: either it sees our callback counted, or we see the
        // keep-alive gone and hold it again. `driver_lost` sets the shutdown flag
        // before it takes that lock to release the keep-alive, so either it releases
        // what we hold, or we see the flag.
        self.keep_alive.hold(self, || {
            self.pending_callbacks.load(Ordering::SeqCst) > 0 && !self.is_shutdown()
        });
    }

    #[cfg(loom)]
    pub(crate) fn kept_alive(&self) -> bool {
        self.keep_alive.is_held()
    }
}
