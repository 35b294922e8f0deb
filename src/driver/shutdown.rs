//! The end of the wheel: [`shutdown`](Shared::shutdown), asked by the user, and
//! [`driver_lost`](Shared::driver_lost), when the driver's runtime drops it. Both walk
//! every shard once, under its lock, taking out every future (nothing would wake them
//! now) and the callbacks each gives up, then wake and drop outside the locks.
//!
//! Neither moves a shard's `processed`: a `Sleep` tells "fired" (its step processed)
//! from "drained" (gone unfired) by it, and is timed by its
//! [`Fallback`](super::fallbacks::Fallback) from then on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::task::Waker;

use super::shared::{Shared, Wheels};
use crate::callback::Callback;
use crate::sync::lock;

impl Shared {
    /// Stops the timer: nothing registers any more, every pending future wakes and
    /// completes, and the callbacks that never ran are returned. Idempotent.
    pub(crate) fn shutdown(&self) -> Vec<Callback> {
        let mut unfired = Vec::new();
        let (wakers, rejected) = self.drain_shards(|wheels| {
            for (key, step, callback) in wheels.callbacks.drain() {
                wheels.unfired.push((key.to_bits(), step));
                unfired.push(callback);
            }
            wheels.unfired.sort_unstable();
        });
        self.parking.wake_driver();
        self.wake_all(wakers);
        self.callbacks_left(unfired.len());
        // Expired, handed back by their executor, not yet run: they never ran either.
        unfired.extend(rejected);
        unfired
    }

    /// The driver's runtime dropped it: complete every future (nothing would ever wake
    /// them), refuse new callbacks, and keep the pending callbacks a handle owns for
    /// `shutdown` to return, counted as stranded. The unowned ones (scheduled
    /// detached, detached since, or handed back by an executor) are counted and
    /// dropped, as Tokio drops a spawned task with its runtime: nothing could reach
    /// them but `shutdown`, and one holding a `Timer` clone would keep the timer, and
    /// itself, alive for ever. Detached ones no longer keep the timer alive.
    pub(crate) fn driver_lost(&self) {
        self.runtime.mark_lost();
        let mut unowned = Vec::new();
        let mut stranded = 0;
        let (wakers, rejected) = self.drain_shards(|wheels| {
            // Counted here, under the lock, not from the pending count after the walk:
            // a detach after this visit drops its callback at once (see
            // `Shared::disown`), and would have gone uncounted.
            wheels.lost = true;
            stranded += wheels.callbacks.len();
            unowned.extend(wheels.callbacks.remove_where(Callback::is_unowned));
        });
        // Those in the wheel (the unowned just taken out included) and those handed
        // back since the last turn (no handle owns them either): nothing will run them
        // now.
        let stranded = stranded + rejected.len();
        self.counters
            .stranded
            .fetch_add(stranded as u64, Ordering::Relaxed);
        self.callbacks_left(unowned.len());
        let release = self.keep_alive.release();
        self.wake_all(wakers);
        // After every lock: their captures may do anything, panic included, which
        // must not end the loss before the rest are dropped, or the driver's guard
        // before it marks the driver stopped (`shutdown().await` would hang).
        for callback in unowned.into_iter().chain(rejected) {
            if catch_unwind(AssertUnwindSafe(move || drop(callback))).is_err() {
                self.count_panic();
            }
        }
        // Dropped last, after the lock: it may be the last reference.
        drop(release);
    }

    /// Marks the timer shut down, then visits every shard under its lock: `each` takes
    /// what it gives up of the shard's callbacks, and the futures' wakers are taken
    /// out. Returns those wakers and the callbacks executors handed back since the
    /// last turn, for the caller to wake and run or drop after the locks.
    fn drain_shards(&self, mut each: impl FnMut(&mut Wheels)) -> (Vec<Waker>, Vec<Callback>) {
        // Set before the walk: a registration that takes a shard's lock after its
        // visit sees it.
        self.shutdown.store(true, Ordering::SeqCst);
        let mut wakers = Vec::new();
        for shard in self.shards.iter() {
            let mut wheels = lock(&shard.wheels);
            wakers.extend(wheels.futures.drain().map(|(_, _, waker)| waker));
            each(&mut wheels);
        }
        let rejected = self.executing.take_handed_back();
        (wakers, rejected)
    }

    /// Wakes every one of `wakers`, a panic in one stranding none of the rest.
    fn wake_all(&self, wakers: Vec<Waker>) {
        for waker in wakers {
            self.wake_caught(waker);
        }
    }
}
