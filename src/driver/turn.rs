//! One turn of the driver: advance every shard to the clock, then, outside the locks,
//! wake the futures and dispatch the callbacks that fired. Also parking (publishing
//! when the driver will next wake, without losing a registration that races it),
//! shutdown, and the driver's loss with its runtime.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use tokio::time::Instant;

use super::{lock, Shared, BATCH, RETAIN};
use crate::callback::Callback;
use crate::clock::Clock;
use crate::stats::{Lateness, LatenessCounts};

/// What a wheel entry does when it fires.
pub(crate) enum Payload {
    /// A future's task to wake.
    Wake(Waker),
    /// A callback to hand to the executor.
    Callback(Callback),
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Wake(waker) => f.debug_tuple("Wake").field(waker).finish(),
            Payload::Callback(_) => f.write_str("Callback"),
        }
    }
}

pub(crate) enum Turn {
    /// More is due right now: yield, then turn again.
    Again,
    /// Caught up with the clock; `next` is the wheels' next expiration, if any.
    Park { next: Option<u64> },
    /// The timer was shut down.
    Exit,
}

/// The lateness buckets of what one turn fires: for futures, from the start of their
/// step, found once per step rather than once per timer; for callbacks, which keep
/// their deadline, exactly (a callback due in the past was placed in a later step).
struct LatenessTally<'a> {
    clock: &'a Clock,
    now: Instant,
    /// `now` as an offset from the origin, as callbacks keep their deadlines: a
    /// callback's lateness is one subtraction, not two conversions of instants. Not
    /// clamped at the wheel's range: a callback saturated there and fired later is
    /// as late as `now` says.
    now_offset: i64,
    /// The step last counted and its bucket.
    step: Option<(u64, usize)>,
    counts: LatenessCounts,
}

impl<'a> LatenessTally<'a> {
    fn new(clock: &'a Clock, now: Instant) -> Self {
        LatenessTally {
            clock,
            now,
            now_offset: clock.unclamped_offset_of(now),
            step: None,
            counts: LatenessCounts::default(),
        }
    }

    fn count(&mut self, step: u64) {
        let bucket = match self.step {
            Some((counted, bucket)) if counted == step => bucket,
            _ => {
                let bucket = Lateness::bucket(self.clock.lateness(step, self.now));
                self.step = Some((step, bucket));
                bucket
            }
        };
        self.counts[bucket] += 1;
    }

    fn count_deadline(&mut self, deadline: i64) {
        let late = self
            .now_offset
            .saturating_sub(deadline)
            .max(0)
            .unsigned_abs();
        self.counts[Lateness::bucket(Duration::from_nanos(late))] += 1;
    }
}

/// A caller's waker, wrapped so that waking it cannot unwind into whoever wakes it: a
/// `Notify` or `watch` (tokio's) wakes its waiters in batches, and one that panics
/// leaves the rest of its batch unwoken.
struct CaughtWaker(Waker);

impl std::task::Wake for CaughtWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let _ = catch_unwind(AssertUnwindSafe(|| self.0.wake_by_ref()));
    }
}

/// Awaits `future`, handing it the caller's waker wrapped in a [`CaughtWaker`].
async fn with_caught_waker<F: std::future::Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut wrapped: Option<(Waker, Waker)> = None;
    std::future::poll_fn(|cx| {
        if !matches!(&wrapped, Some((caller, _)) if caller.will_wake(cx.waker())) {
            let caught = Waker::from(Arc::new(CaughtWaker(cx.waker().clone())));
            wrapped = Some((cx.waker().clone(), caught));
        }
        let caught = &wrapped.as_ref().expect("set above").1;
        future
            .as_mut()
            .poll(&mut std::task::Context::from_waker(caught))
    })
    .await
}

impl Shared {
    /// Wakes `waker`, catching and counting a panic (a waker runs its executor's code,
    /// or a user's): the loops that wake many must go on to the rest.
    fn wake_caught(&self, waker: Waker) {
        if catch_unwind(AssertUnwindSafe(move || waker.wake())).is_err() {
            self.count_panic();
        }
    }

    #[cfg(loom)]
    pub(crate) fn parked_until(&self) -> u64 {
        self.parked_until.load(Ordering::SeqCst)
    }

    /// Notifies the driver if it is parked until after `step`. Called after the entry
    /// is in its shard (see [`Shared::park`]).
    pub(super) fn notify_if_earlier(&self, step: u64) {
        if step < self.parked_until.load(Ordering::SeqCst) {
            self.parked_until.fetch_min(step, Ordering::SeqCst);
            self.notify.notify_one();
        }
    }

    /// Stops the timer: nothing registers any more, every pending future wakes and
    /// completes, and the callbacks that never ran are returned. Idempotent.
    pub(crate) fn shutdown(&self) -> Vec<Callback> {
        // Set before draining: a registration that takes a shard's lock after its
        // drain sees it.
        self.shutdown.store(true, Ordering::SeqCst);
        let mut wakers = Vec::new();
        let mut unfired = Vec::new();
        for shard in self.shards.iter() {
            let mut wheels = lock(&shard.wheels);
            let wheels = &mut *wheels;
            wakers.extend(wheels.futures.drain().map(|(_, _, waker)| waker));
            for (key, step, callback) in wheels.callbacks.drain() {
                wheels.unfired.push((key.to_bits(), step));
                unfired.push(callback);
            }
            wheels.unfired.sort_unstable();
        }
        let rejected = std::mem::take(&mut *lock(&self.rejected));
        self.notify.notify_one();
        for waker in wakers {
            self.wake_caught(waker);
        }
        self.callbacks_gone(unfired.len());
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
        self.mark_lost();
        self.shutdown.store(true, Ordering::SeqCst);
        let mut wakers = Vec::new();
        let mut unowned = Vec::new();
        let mut stranded = 0;
        for shard in self.shards.iter() {
            let mut wheels = lock(&shard.wheels);
            // Counted here, under the lock, not from `callbacks` after the loop: a
            // detach after this visit drops its callback at once (see
            // `Shared::disown`), and would have gone uncounted.
            wheels.lost = true;
            stranded += wheels.callbacks.len();
            wakers.extend(wheels.futures.drain().map(|(_, _, waker)| waker));
            unowned.extend(wheels.callbacks.remove_where(Callback::is_unowned));
        }
        // Handed back by an executor since the last turn: no handle owns them either.
        let rejected = std::mem::take(&mut *lock(&self.rejected));
        // Those in the wheel (the unowned just taken out included) and those handed
        // back: nothing will run them now.
        let stranded = stranded + rejected.len();
        self.counters
            .stranded
            .fetch_add(stranded as u64, Ordering::Relaxed);
        self.callbacks_gone(unowned.len());
        let release = {
            let mut keep_alive = lock(&self.keep_alive);
            self.kept_alive.store(false, Ordering::SeqCst);
            keep_alive.take()
        };
        for waker in wakers {
            self.wake_caught(waker);
        }
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

    /// Waits until a turn of the driver that started after this call has completed
    /// (processed every step its clock had reached), asking the driver for one at
    /// once; or until the timer is shut down. A turn, not a step, so that a caller on
    /// another runtime's clock waits for one turn rather than for the two clocks to
    /// agree.
    pub(crate) async fn catch_up(&self) {
        let called = self.turns_started.load(Ordering::SeqCst);
        loop {
            let mut turned = pin!(self.turned.notified());
            // Registered before the check, so a turn that ends in between is not missed.
            turned.as_mut().enable();
            if self.is_shutdown() || self.last_complete_turn.load(Ordering::SeqCst) > called {
                return;
            }
            self.notify.notify_one();
            with_caught_waker(turned).await;
        }
    }

    /// Waits until the driver has stopped turning.
    pub(crate) async fn stopped(&self) {
        let mut stopped = self.stopped.subscribe();
        // An error means the sender is gone, i.e. so is the driver.
        let _ = with_caught_waker(stopped.wait_for(|stopped| *stopped)).await;
    }

    /// One turn of the driver: processes every step the clock has passed (at most
    /// [`BATCH`] expirations per shard), then, outside the locks, wakes the futures and
    /// dispatches the callbacks that fired.
    pub(super) fn turn(self: &Arc<Self>, expired: &mut Vec<Payload>) -> Turn {
        self.turn_with(Instant::now, expired)
    }

    /// [`turn`](Shared::turn) as if the clock read `now`.
    #[cfg(any(test, loom))]
    pub(crate) fn turn_to(self: &Arc<Self>, now: Instant, expired: &mut Vec<Payload>) -> Turn {
        self.turn_with(|| now, expired)
    }

    /// [`turn`](Shared::turn), reading the clock with `clock`.
    fn turn_with(
        self: &Arc<Self>,
        clock: impl FnOnce() -> Instant,
        expired: &mut Vec<Payload>,
    ) -> Turn {
        if self.is_shutdown() {
            return Turn::Exit;
        }
        // Numbered before the clock is read: a `catch_up` that has not seen this number
        // was called before the read, so this turn processes all that was due by then.
        // (The other way round, a `catch_up` called between the two would count this
        // turn, which stops short of the call, as one that started after it.)
        let turn = self.turns_started.fetch_add(1, Ordering::SeqCst) + 1;
        let now = clock();
        let (now, mut lateness) = (
            self.clock.step_now(now),
            LatenessTally::new(&self.clock, now),
        );
        // Busy: registrations need not notify until we park again.
        self.parked_until.store(0, Ordering::SeqCst);
        let mut done = true;
        let mut fired_callbacks = 0;
        let mut shut_down = false;
        for shard in self.shards.iter() {
            let mut wheels = lock(&shard.wheels);
            if self.is_shutdown() {
                // Drained (or about to be) by shutdown: its steps stop where they
                // are. What earlier shards handed out is still woken below.
                shut_down = true;
                break;
            }
            done &= wheels.futures.advance(now, BATCH, |step, waker| {
                lateness.count(step);
                expired.push(Payload::Wake(waker));
            });
            done &= wheels.callbacks.advance(now, BATCH, |_, callback| {
                lateness.count_deadline(callback.deadline());
                // Taken out under the lock: from here on `cancel` returns false and
                // `is_expired` true, with no moment in between.
                fired_callbacks += 1;
                expired.push(Payload::Callback(callback));
            });
            shard
                .elapsed
                .store(wheels.futures.elapsed(), Ordering::Release);
            let released = (
                wheels.futures.release_if_empty(RETAIN),
                wheels.callbacks.release_if_empty(RETAIN),
            );
            drop(wheels);
            drop(released);
        }
        // Counted out before they run: an expiry frees capacity at once, so a callback
        // may re-arm itself under `max_pending(1)`.
        self.callbacks_gone(fired_callbacks);
        // `Stats::fired` is the sum of these: one count, so a snapshot never sees a
        // timer fired but not yet in the histogram.
        for (shared, &count) in self.counters.lateness.iter().zip(&lateness.counts) {
            if count > 0 {
                shared.fetch_add(count, Ordering::Relaxed);
            }
        }
        for payload in expired.drain(..) {
            match payload {
                Payload::Wake(waker) => self.wake_caught(waker),
                Payload::Callback(callback) => self.dispatch(callback),
            }
        }
        // Taken after dispatching, so that an executor that hands a job straight back
        // has it run in this turn: a detached callback's keep-alive is gone by now, and
        // this turn may be the timer's last.
        let rejected = std::mem::take(&mut *lock(&self.rejected));
        for callback in rejected {
            self.run_inline(callback);
        }
        if done {
            self.last_complete_turn.fetch_max(turn, Ordering::SeqCst);
        }
        self.turned.notify_waiters();
        if shut_down {
            return Turn::Exit;
        }
        if !done {
            return Turn::Again;
        }
        Turn::Park { next: self.park() }
    }

    /// Publishes the step the driver will wake at and returns it.
    ///
    /// A registration inserts into its shard, then reads `parked_until`; the driver
    /// stores `parked_until`, then reads every shard. With both sides sequentially
    /// consistent, at least one sees the other: either the registration sees the new
    /// value (and notifies if it is earlier), or the second scan here sees the entry.
    fn park(&self) -> Option<u64> {
        // `u64::MAX` stands for "nothing pending" (`None` would sort first).
        let next = self.next_expiration().unwrap_or(u64::MAX);
        self.parked_until.store(next, Ordering::SeqCst);
        let again = self.next_expiration().unwrap_or(u64::MAX);
        // Only ever earlier: an entry cancelled in between just costs a spurious wakeup.
        let park = next.min(again);
        if park < next {
            self.parked_until.fetch_min(park, Ordering::SeqCst);
        }
        (park != u64::MAX).then_some(park)
    }

    fn next_expiration(&self) -> Option<u64> {
        self.shards
            .iter()
            .filter_map(|s| lock(&s.wheels).next_expiration())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::atomic::AtomicBool;
    use std::task::{Context, Wake};

    use super::*;
    use crate::driver::Registered;

    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// `catch_up` called just after the driver read the clock for a turn (the driver
    /// thread preempted there, say) must not take that turn, which stops short of the
    /// call, for the one it waits for: a sleep due between the two stays unfired.
    #[test]
    fn catch_up_called_after_a_turn_read_the_clock_waits_for_the_next_turn() {
        let mut config = crate::Builder::default().validate().expect("defaults");
        config.shards = 1;
        let shared = Shared::new(config, None);
        let woken = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(woken.clone());
        // Due at step 2: after the driver's clock read (the end of step 1), before the
        // call (the caller's clock reads the end of step 3).
        let Registered::Pending(_) = shared.register(2, &waker) else {
            panic!("step 2 is pending");
        };
        let mut catch_up = Box::pin(shared.catch_up());
        let mut cx = Context::from_waker(Waker::noop());
        let mut expired = Vec::new();
        let mut returned = false;
        let _ = shared.turn_with(
            || {
                let now = shared.clock.step_end(1);
                // The caller's `catch_up` starts right after the driver read `now`.
                returned |= catch_up.as_mut().poll(&mut cx).is_ready();
                now
            },
            &mut expired,
        );
        returned |= catch_up.as_mut().poll(&mut cx).is_ready();
        assert!(
            !returned || woken.0.load(Ordering::SeqCst),
            "catch_up returned with a sleep due before the call unfired"
        );
        // The next turn reads the clock after the call: it fires the sleep and ends
        // the wait.
        let _ = shared.turn_to(shared.clock.step_end(3), &mut expired);
        assert!(woken.0.load(Ordering::SeqCst));
        assert!(catch_up.as_mut().poll(&mut cx).is_ready());
    }
}
