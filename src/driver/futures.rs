//! What a [`Sleep`](crate::Sleep) asks of the driver: register its waker at a step,
//! replace the waker, move the entry, cancel it, and whether it has fired.
//!
//! An entry is named by its [`Registration`] and the step it is due at, which the
//! `Sleep` derives from its deadline: a `Sleep` whose entry fired can never reach the
//! entry that later reuses its slab index (see [`wheel`](crate::wheel)).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::task::Waker;

use tokio::time::Instant;

use super::{context, lock, Registration, Shared, RETAIN};
use crate::wheel::InsertError;

/// Outcome of a registration attempt.
pub(crate) enum Registered {
    /// In the wheel here.
    Pending(Registration),
    /// Due already: complete now.
    Due,
    /// Not in the wheel, which no longer turns (shut down, its runtime gone) or is
    /// full: time it with a [`Fallback`](super::Fallback) instead.
    Elsewhere,
}

impl Shared {
    /// Whether `reg`, due at the deadline `offset` (see [`Clock::offset_of`]), has
    /// certainly fired (lock-free).
    pub(crate) fn has_fired(&self, reg: Registration, offset: i64) -> bool {
        let elapsed = self.shard(reg).elapsed.load(Ordering::Acquire);
        self.clock.is_processed(offset, elapsed)
    }

    /// "Now" for a deadline given relative to it (`sleep(d)`, hyper's `now() + d`):
    /// the clock the driver follows, whatever runtime the caller is on, since a
    /// caller's paused clock would put deadlines early or late by however far it lags
    /// or leads the driver's. The real clock for a driver whose runtime's clock is
    /// never paused (the default timer's, a multi-thread runtime's): cheap, no runtime
    /// handle, and for one whose runtime is gone (a paused clock is frozen there).
    /// Otherwise (a current-thread runtime's) the caller's Tokio clock when
    /// the caller is in the driver's runtime, and from anywhere else that runtime's
    /// clock, read inside it (see [`driver_now`](Shared::driver_now)); the real clock
    /// only if that fails (no thread can be started to read it).
    pub(crate) fn now(&self) -> Instant {
        if self.real_clock || self.lost.load(Ordering::SeqCst) {
            Instant::from_std(std::time::Instant::now())
        } else if self.in_driver_runtime() {
            Instant::now()
        } else {
            self.driver_now()
                .unwrap_or_else(|| Instant::from_std(std::time::Instant::now()))
        }
    }

    /// Whether the caller's Tokio context is the driver's runtime, so that its Tokio
    /// clock is the driver's. Asked of the context, not of the thread: a thread that
    /// ran the driver may since have left its runtime (its `block_on` returned) for one
    /// whose clock is paused, or entered another one inside it.
    pub(super) fn in_driver_runtime(&self) -> bool {
        let Some(runtime) = &self.runtime else {
            return true;
        };
        tokio::runtime::Handle::try_current().is_ok_and(|current| current.id() == runtime.id())
    }

    /// Now, by the clock the driver follows (its runtime's, which may be paused when
    /// the caller's is not, or the other way round): what the driver will find when it
    /// next turns, whoever asks. `None` only when no thread can be started to read it.
    ///
    /// Read in place where that cannot panic; in a thread-local's destructor, once the
    /// thread's Tokio context is torn down, on a thread of its own
    /// ([`context::on_own_thread`]). From another runtime's context it enters the
    /// driver's runtime in place, as cheaply as every `sleep(d)` there needs: that
    /// panics only while Tokio holds the context borrowed (a future dropped by
    /// `tokio::spawn` on a runtime that has shut down), which Tokio gives no way to
    /// ask about. The panic, which happens before `enter` changes anything, is caught
    /// and the clock read on a thread of its own; under `panic = "abort"` it aborts,
    /// as Tokio's own `Handle::enter` does there (documented in RELIABILITY.md).
    pub(crate) fn driver_now(&self) -> Option<Instant> {
        if self.lost.load(Ordering::SeqCst) {
            // Its runtime is gone: its clock, if paused, is frozen where it stopped,
            // behind or ahead of the real clock, which decides from now on.
            return Some(Instant::from_std(std::time::Instant::now()));
        }
        let Some(runtime) = &self.runtime else {
            return Some(Instant::now());
        };
        match tokio::runtime::Handle::try_current() {
            Ok(current) if current.id() == runtime.id() => Some(Instant::now()),
            Ok(_) => catch_unwind(AssertUnwindSafe(|| {
                let _enter = runtime.enter();
                Instant::now()
            }))
            .ok()
            .or_else(|| context::on_own_thread(runtime, Instant::now)),
            Err(e) if e.is_missing_context() => {
                let _enter = runtime.enter();
                Some(Instant::now())
            }
            Err(_) => context::on_own_thread(runtime, Instant::now),
        }
    }

    /// Whether the deadline `offset` of a future that is not in the wheel has passed,
    /// lock-free: every shard has processed its step (registering it now would find it
    /// due), or the driver's clock has passed that step's end (the driver may be
    /// parked, with nothing to wake for). Never before the deadline.
    pub(crate) fn has_passed(&self, offset: i64) -> bool {
        self.shards.iter().all(|shard| {
            self.clock
                .is_processed(offset, shard.elapsed.load(Ordering::Acquire))
        }) || self
            .driver_now()
            .is_some_and(|now| self.clock.has_passed(offset, now))
    }

    /// Registers a future's waker at `step`.
    pub(crate) fn register(&self, step: u64, waker: &Waker) -> Registered {
        let (index, shard) = self.local();
        let mut wheels = lock(&shard.wheels);
        if self.shutdown.load(Ordering::SeqCst) {
            return Registered::Elsewhere;
        }
        match wheels.futures.insert(step, waker.clone()) {
            Ok(key) => {
                drop(wheels);
                self.notify_if_earlier(step);
                Registered::Pending(Registration { shard: index, key })
            }
            Err((_, InsertError::Elapsed)) => Registered::Due,
            // Entries are 32 bytes and a shard holds 2^32 - 1 of them; a future's
            // registration that would overflow it is timed elsewhere.
            Err((_, InsertError::Full)) => Registered::Elsewhere,
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
    pub(crate) fn cancel(&self, reg: Registration, step: u64) {
        let mut wheels = lock(&self.shard(reg).wheels);
        let removed = wheels.futures.remove(reg.key, step);
        wheels.cancelled += u64::from(removed.is_some());
        let released = wheels.futures.release_if_empty(RETAIN);
        drop(wheels);
        // Dropped here, after the lock: dropping a waker can run arbitrary code.
        drop((removed, released));
    }

    /// Whether the future's entry `reg`, due at `step`, is still in the wheel.
    pub(crate) fn is_pending(&self, reg: Registration, step: u64) -> bool {
        lock(&self.shard(reg).wheels)
            .futures
            .contains(reg.key, step)
    }

    /// Moves `reg` from `step` to `to`. Returns `false` (and wakes the entry's task)
    /// when the entry has already fired or `to` has already been processed.
    pub(crate) fn reschedule(&self, reg: Registration, step: u64, to: u64) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        match wheels.futures.reschedule(reg.key, step, to) {
            Ok(()) => {
                wheels.reset += 1;
                drop(wheels);
                self.notify_if_earlier(to);
                true
            }
            Err(fired) => {
                // Moved to a step already processed: out of the wheel, its task woken
                // to complete it. Still a reset (a pending timer moved), not a cancel.
                wheels.reset += u64::from(fired.is_some());
                drop(wheels);
                if let Some(waker) = fired {
                    waker.wake();
                }
                false
            }
        }
    }
}
