//! What a [`Scheduled`](crate::Scheduled) asks of the driver (schedule, cancel, its
//! callback's state), the keep-alive that lets a detached callback outlive every
//! handle, and handing expired callbacks to their [`Executor`].
//!
//! A callback's entry is named by its [`Registration`] and its step, as a future's is;
//! its handle also keeps a `cancelled` flag, set under the shard's lock by the cancel
//! that took the entry out, and read under it before anything else.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::{lock, Registration, Shared, RETAIN};
use crate::callback::{run_caught, Callback};
use crate::sync::AtomicBool;
use crate::wheel::{InsertError, MAX_ENTRIES, MAX_STEP};
use crate::{Error, Executor};

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

/// An expired callback on its way to an executor other than the driver task. If it is
/// dropped without having run (the executor panicked, shut down, or dropped it), it
/// goes back to the timer to run on the driver task; nothing is lost silently.
pub(crate) struct Job {
    callback: Option<Callback>,
    timer: Weak<Shared>,
}

impl Job {
    pub(crate) fn new(callback: Callback, timer: &Arc<Shared>) -> Job {
        Job {
            callback: Some(callback),
            timer: Arc::downgrade(timer),
        }
    }

    /// Runs the callback here, catching and counting a panic.
    pub(crate) fn run(mut self) {
        if let Some(callback) = self.callback.take() {
            if !run_caught(callback) {
                if let Some(timer) = self.timer.upgrade() {
                    timer.count_panic();
                }
            }
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(callback) = self.callback.take() {
            match self.timer.upgrade() {
                Some(timer) => timer.reject(callback),
                // The timer is gone: this is the last place the callback can run.
                None => {
                    run_caught(callback);
                }
            }
        }
    }
}

impl Shared {
    /// Registers a callback due at its deadline; returns where it is and the step it
    /// is due at, which together name it (see [`wheel`](crate::wheel)).
    pub(crate) fn schedule(&self, callback: Callback) -> Result<(Registration, u64), Error> {
        let step = self.clock.step_at_offset(callback.deadline());
        let (index, shard) = self.local();
        let mut wheels = lock(&shard.wheels);
        if self.shutdown.load(Ordering::SeqCst) {
            drop(wheels);
            // The closure is dropped after the lock: its captures may do anything.
            drop(callback);
            return Err(Error::Shutdown);
        }
        // Due already: run at the next step rather than on the caller's stack.
        let step = step.max(wheels.callbacks.first_open_step()).min(MAX_STEP);
        // Past the last step a deadline can name, a callback would have saturated to a
        // step already processed (and run at once, however far it was asked for) or to
        // one the clock never reaches (and never run, the driver spinning): past the
        // range, like the wheel's own `Elapsed`. At that last step, where far deadlines
        // saturate, the driver's clock decides, not what the wheel has processed: an
        // idle driver is not woken by the paused clock's jump. (Unknown: refused.)
        let last = self.clock.last_step();
        let clock_past_last = || {
            self.driver_now()
                .is_none_or(|now| self.clock.step_now(now) >= last)
        };
        let refused = if step > last || (step == last && clock_past_last()) {
            Some(Error::OutOfRange)
        } else if !self.count_in() {
            Some(Error::AtCapacity {
                max: self.max_pending,
            })
        } else {
            None
        };
        if let Some(error) = refused {
            drop(wheels);
            drop(callback);
            return Err(error);
        }
        match wheels.callbacks.insert(step, callback) {
            Ok(key) => {
                drop(wheels);
                self.notify_if_earlier(step);
                Ok((Registration { shard: index, key }, step))
            }
            Err((callback, why)) => {
                drop(wheels);
                drop(callback);
                self.callback_gone();
                Err(match why {
                    InsertError::Elapsed => Error::OutOfRange,
                    InsertError::Full => Error::AtCapacity {
                        max: MAX_ENTRIES.min(self.max_pending),
                    },
                })
            }
        }
    }

    /// Counts one more pending callback if fewer than `max_pending` are: a
    /// compare-and-swap below the limit, so that the count never holds a callback
    /// that is then refused, which a concurrent `schedule` would see as pending (with
    /// `max_pending(1)`, a refusal with nothing pending). Called under the shard's
    /// lock, after every other check, just before the insert.
    fn count_in(&self) -> bool {
        let mut count = self.callbacks.load(Ordering::SeqCst);
        loop {
            if count >= self.max_pending {
                return false;
            }
            match self.callbacks.compare_exchange_weak(
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

    /// Removes the callback at `reg`, due at `step`, if it is still pending, setting
    /// `cancelled` under the lock. Returns whether it was pending: exactly one of this
    /// returning `true` and the driver taking the callback out can happen, as both take
    /// it out of the wheel under the shard's lock.
    pub(crate) fn cancel_callback(
        &self,
        reg: Registration,
        step: u64,
        cancelled: &AtomicBool,
    ) -> bool {
        let mut wheels = lock(&self.shard(reg).wheels);
        // Read under the lock that set it: a handle that removed its entry itself no
        // longer names it, and must not reach whatever entry has its key now.
        if cancelled.load(Ordering::Acquire) {
            return false;
        }
        let Some(removed) = wheels.callbacks.remove(reg.key, step) else {
            return false;
        };
        cancelled.store(true, Ordering::Release);
        wheels.cancelled += 1;
        let released = wheels.callbacks.release_if_empty(RETAIN);
        drop(wheels);
        // Counted out before the closure is dropped, as an expiry is before it runs:
        // its captures may schedule again, and the room is free at once.
        self.callback_gone();
        // The closure is dropped here, after the lock: its captures may do anything.
        drop((removed, released));
        true
    }

    /// Where the callback at `reg`, due at `step`, is, decided under the lock its entry
    /// moves under.
    pub(crate) fn callback_state(
        &self,
        reg: Registration,
        step: u64,
        cancelled: &AtomicBool,
    ) -> CallbackState {
        let wheels = lock(&self.shard(reg).wheels);
        if cancelled.load(Ordering::Acquire) {
            CallbackState::Cancelled
        } else if wheels.callbacks.contains(reg.key, step) {
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

    /// A callback left the wheel: count it out, and release the keep-alive with the
    /// last one.
    fn callback_gone(&self) {
        self.callbacks_gone(1);
    }

    pub(super) fn callbacks_gone(&self, n: usize) {
        if n > 0 && self.callbacks.fetch_sub(n, Ordering::SeqCst) == n {
            let mut keep_alive = lock(&self.keep_alive);
            // Re-checked under the lock, after clearing the flag: a callback scheduled
            // and detached since the count reached zero may have seen the flag still
            // set, and relies on the keep-alive (loom:
            // `detach_vs_last_callback_keeps_the_timer_alive`). Its count was added
            // before it read the flag, so if it read it before this clear, this load
            // sees its count.
            self.kept_alive.store(false, Ordering::SeqCst);
            let release = if self.callbacks.load(Ordering::SeqCst) == 0 {
                keep_alive.take()
            } else {
                self.kept_alive
                    .store(keep_alive.is_some(), Ordering::SeqCst);
                None
            };
            drop(keep_alive);
            // Dropped after the lock: it may be the last reference.
            drop(release);
        }
    }

    /// The handle of the callback `reg` names at `step` was detached: record that
    /// no handle owns it (see `Callback::disown`), or, once the driver is lost, drop
    /// it now, as the loss dropped the unowned ones. After `shutdown()` it is left
    /// for `shutdown` to return. Takes the shard's lock.
    pub(crate) fn disown(&self, reg: Registration, step: u64, cancelled: &AtomicBool) {
        let mut wheels = lock(&self.shard(reg).wheels);
        // Read under the lock that set it: a cancelled handle names no entry.
        if cancelled.load(Ordering::Acquire) {
            return;
        }
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
        self.callback_gone();
    }

    /// A callback's handle was detached: keep the timer alive until no callback is
    /// pending, since that one has nothing else keeping it.
    ///
    /// Once shut down (or the driver lost) nothing will run it, so it keeps nothing
    /// alive: `shutdown` returns it, or the driver's loss dropped it.
    pub(crate) fn detach(self: &Arc<Self>) {
        // Lock-free when the timer already keeps itself alive, as it does while any
        // detached callback is pending: `callbacks_gone` clears the flag before it
        // re-reads the count, so seeing it set here means our (counted) callback is
        // seen there.
        if self.kept_alive.load(Ordering::SeqCst) {
            return;
        }
        let mut keep_alive = lock(&self.keep_alive);
        // Checked under the keep-alive lock, under which `callbacks_gone` re-reads the
        // count before releasing: either it sees our callback counted, or we see the
        // keep-alive gone and set it again.
        // `driver_lost` sets the shutdown flag before it takes this lock to release the
        // keep-alive, so either it releases what we set, or we see the flag.
        if self.callbacks.load(Ordering::SeqCst) > 0 && keep_alive.is_none() && !self.is_shutdown()
        {
            *keep_alive = Some(self.clone());
            self.kept_alive.store(true, Ordering::SeqCst);
        }
    }

    #[cfg(loom)]
    pub(crate) fn kept_alive(&self) -> bool {
        lock(&self.keep_alive).is_some()
    }

    pub(crate) fn count_panic(&self) {
        self.counters.panics.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes back an expired callback that its executor dropped without running it; the
    /// driver runs it inline on its next turn (or here, if the timer is shut down).
    pub(crate) fn reject(&self, callback: Callback) {
        self.counters.rejections.fetch_add(1, Ordering::Relaxed);
        let mut rejected = lock(&self.rejected);
        if self.is_shutdown() {
            drop(rejected);
            if !run_caught(callback) {
                self.count_panic();
            }
            return;
        }
        rejected.push(callback);
        drop(rejected);
        self.notify.notify_one();
    }

    /// Hands an expired callback to the configured executor.
    pub(super) fn dispatch(self: &Arc<Self>, callback: Callback) {
        match &self.executor {
            Executor::Inline => self.run_inline(callback),
            Executor::Spawn | Executor::Blocking if self.runtime.is_none() => {
                self.run_inline(callback)
            }
            Executor::Spawn => {
                let job = Job::new(callback, self);
                let runtime = self.runtime.as_ref().expect("checked above");
                drop(runtime.spawn(async move {
                    // Spawned from the driver's worker, this task lands in that worker's
                    // LIFO slot, which wakes no idle worker; if the callback then blocks,
                    // nobody drives tokio's timer and every timer stalls behind it.
                    // Yielding once moves it to the stealable run queue and wakes an
                    // idle worker first.
                    tokio::task::yield_now().await;
                    job.run()
                }));
            }
            Executor::Blocking => {
                let job = Job::new(callback, self);
                let runtime = self.runtime.as_ref().expect("checked above");
                drop(runtime.spawn_blocking(move || job.run()));
            }
            Executor::Custom(execute) => {
                let job = Job::new(callback, self);
                // A panicking executor drops the job while unwinding; the job then comes
                // back through `reject`.
                let _ = catch_unwind(AssertUnwindSafe(|| execute(Box::new(move || job.run()))));
            }
        }
    }

    pub(super) fn run_inline(&self, callback: Callback) {
        if !run_caught(callback) {
            self.count_panic();
        }
    }
}
