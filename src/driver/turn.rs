//! One turn of the driver, in three steps: advance every shard to the clock, taking
//! out what is due under each shard's lock; fire it (wake the futures, dispatch the
//! callbacks) outside the locks; finish the turn (record it, then park: publish the
//! next wakeup and arm the alarm for it, or say to turn again, or exit).
//!
//! A turn is taken by the driver task, or by a pass of the alarm's waker, from Tokio's
//! own pass over its timers ([`Runner`]). Two may run at once: each advances a shard
//! only under its lock and only forward, and parks under the alarm's lock.

use std::fmt;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use tokio::time::Instant;

use super::parking::Parked;
use super::shared::{Shard, Shared, Wheels};
use crate::callback::Callback;
use crate::clock::Clock;
use crate::stats::{Lateness, LatenessCounts};
use crate::sync::lock;

/// How many entries one turn of the driver takes out of a shard before it releases the
/// lock, fires them and yields to the runtime (every drain loop is bounded).
const BATCH: usize = 4096;

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

/// What the driver does after a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// More is due right now: a shard stopped at its batch, or the next expiration
    /// ended while the turn ran. Yield, then turn again.
    Again,
    /// Caught up with the clock; the alarm is armed for the wheels' next expiration
    /// (`Some`), or nothing is pending.
    Parked { next: Option<u64> },
    /// The timer was shut down.
    Exit,
}

/// Who takes a turn, and so what it may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runner {
    /// The driver task: runs everything, callbacks on the `Inline` executor too.
    Task,
    /// The alarm's waker, inside Tokio's pass over its timers: wakes the futures and
    /// hands callbacks to their executor; but where callbacks run inline, it leaves
    /// the callbacks' wheels to the driver task, and wakes it when one is due.
    Alarm,
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

    /// Counts a future fired at `step`: inline, as it runs once per timer fired; the
    /// bucket is found once per step, out of line.
    #[inline]
    fn count(&mut self, step: u64) {
        let bucket = match self.step {
            Some((counted, bucket)) if counted == step => bucket,
            _ => self.step_bucket(step),
        };
        self.counts[bucket] += 1;
    }

    /// The bucket of `step`, found and kept as the step last counted.
    #[cold]
    #[inline(never)]
    fn step_bucket(&mut self, step: u64) -> usize {
        let bucket = Lateness::bucket(self.clock.lateness(step, self.now));
        self.step = Some((step, bucket));
        bucket
    }

    fn count_deadline(&mut self, deadline: i64) {
        let late = self
            .now_offset
            .saturating_sub(deadline)
            .max(0)
            .unsigned_abs();
        self.counts[Lateness::bucket(Duration::from_nanos(late))] += 1;
    }

    /// Adds the counts to the timer's totals, one addition per bucket that counted.
    /// `Stats::fired` is their sum: one count, so a snapshot never sees a timer fired
    /// but not yet in the histogram.
    fn add_to(&self, totals: &[StdAtomicU64]) {
        for (total, &count) in totals.iter().zip(&self.counts) {
            if count > 0 {
                total.fetch_add(count, Ordering::Relaxed);
            }
        }
    }
}

/// What advancing the shards found.
struct Advanced {
    /// Every shard processed every step up to the clock (none stopped at `BATCH`).
    complete: bool,
    /// A shard was found shut down; the shards after it were left as they were.
    shut_down: bool,
    /// A callbacks' wheel left to the driver task has a step that has ended.
    callbacks_due: bool,
}

/// What [`take_due`] took out of one shard.
struct Taken {
    /// Every wheel it advanced reached the step.
    done: bool,
    /// Callbacks taken out.
    callbacks: usize,
    /// The callbacks' wheel, left where it was, has a step that has ended.
    callbacks_due: bool,
}

/// Takes what is due by `step` out of one shard's wheels (`wheels`, under its lock),
/// at most [`BATCH`] entries from each, into `expired`, counting their lateness, and
/// mirrors the futures' processed step in the shard. The callbacks' wheel only if
/// `callbacks`: else it stays for the driver task, which runs them.
#[inline]
fn take_due(
    shard: &Shard,
    wheels: &mut Wheels,
    step: u64,
    callbacks: bool,
    lateness: &mut LatenessTally<'_>,
    expired: &mut Vec<Payload>,
) -> Taken {
    let mut fired_callbacks = 0;
    let futures_done = wheels.futures.advance(step, BATCH, |step, waker| {
        lateness.count(step);
        expired.push(Payload::Wake(waker));
    });
    let callbacks_done = !callbacks
        || wheels.callbacks.advance(step, BATCH, |_, callback| {
            lateness.count_deadline(callback.deadline());
            // Taken out under the lock: from here on `cancel` returns false and
            // `is_expired` true, with no moment in between.
            fired_callbacks += 1;
            expired.push(Payload::Callback(callback));
        });
    shard
        .processed
        .store(wheels.futures.processed(), Ordering::Release);
    debug_assert!(
        !(callbacks && futures_done && callbacks_done)
            || (wheels.futures.processed() == wheels.callbacks.processed()
                && shard.processed.load(Ordering::Relaxed) == wheels.futures.processed()),
        "after a shard's whole turn its two wheels and their mirror agree on the processed step"
    );
    Taken {
        done: futures_done && callbacks_done,
        callbacks: fired_callbacks,
        callbacks_due: !callbacks
            && wheels
                .callbacks
                .next_expiration()
                .is_some_and(|next| next <= step),
    }
}

impl Shared {
    /// One turn of the driver: processes every step the clock has passed (at most
    /// [`BATCH`] expirations per shard), then, outside the locks, wakes the futures and
    /// dispatches the callbacks that fired.
    ///
    /// Both runners read the driver's clock ([`Shared::now`]): on a real-clock driver
    /// that is the real clock even where the runtime's Tokio clock is paused (a test
    /// without the feature `test-util`), which would otherwise fire its timers early;
    /// for a suspend-aware timer, moved on by the time suspended.
    pub(super) fn turn(self: &Arc<Self>, runner: Runner, expired: &mut Vec<Payload>) -> Turn {
        self.turn_with(|| self.now(), || self.now(), runner, expired)
    }

    /// [`turn`](Shared::turn) as if the clock read `now`.
    #[cfg(any(test, loom))]
    pub(crate) fn turn_to(self: &Arc<Self>, now: Instant, expired: &mut Vec<Payload>) -> Turn {
        self.turn_with(|| now, || now, Runner::Task, expired)
    }

    /// [`turn`](Shared::turn), reading the clock with `clock` for the turn and with
    /// `park_clock` to arm the alarm once it is done.
    pub(super) fn turn_with(
        self: &Arc<Self>,
        clock: impl FnOnce() -> Instant,
        park_clock: impl FnOnce() -> Instant,
        runner: Runner,
        expired: &mut Vec<Payload>,
    ) -> Turn {
        if self.is_shutdown() {
            return Turn::Exit;
        }
        // Numbered before the clock is read (see `Progress::start_turn`).
        let turn = self.progress.start_turn();
        let now = clock();
        self.parking.busy();
        let callbacks = runner == Runner::Task || !self.executing.runs_inline();
        let advanced = self.advance_shards(now, callbacks, expired);
        self.fire(expired, runner);
        if advanced.callbacks_due {
            self.parking.wake_driver();
        }
        self.finish_turn(turn, advanced, callbacks, park_clock)
    }

    /// Advances every shard to `now`, each under its lock, taking out what is due
    /// into `expired` (from the callbacks' wheels only if `callbacks`), and counts it
    /// out (callbacks pending, lateness).
    fn advance_shards(
        &self,
        now: Instant,
        callbacks: bool,
        expired: &mut Vec<Payload>,
    ) -> Advanced {
        let step = self.clock.step_now(now);
        let mut lateness = LatenessTally::new(&self.clock, now);
        let mut advanced = Advanced {
            complete: true,
            shut_down: false,
            callbacks_due: false,
        };
        let mut fired_callbacks = 0;
        for shard in self.shards.iter() {
            let mut wheels = lock(&shard.wheels);
            if self.is_shutdown() {
                // Drained (or about to be) by shutdown: its steps stop where they
                // are. What earlier shards handed out is still fired.
                advanced.shut_down = true;
                break;
            }
            let taken = take_due(shard, &mut wheels, step, callbacks, &mut lateness, expired);
            advanced.complete &= taken.done;
            advanced.callbacks_due |= taken.callbacks_due;
            fired_callbacks += taken.callbacks;
            let released = (wheels.release_futures(), wheels.release_callbacks());
            drop(wheels);
            drop(released);
        }
        // Counted out before they run: an expiry frees capacity at once, so a callback
        // may re-arm itself under `max_pending(1)`.
        self.callbacks_left(fired_callbacks);
        lateness.add_to(&self.counters.lateness);
        advanced
    }

    /// Fires what the shards handed out, outside their locks: wakes the futures,
    /// dispatches the callbacks, then, on the driver task, runs the callbacks
    /// executors handed back (the alarm leaves those to the task, which a hand-back
    /// notifies).
    fn fire(self: &Arc<Self>, expired: &mut Vec<Payload>, runner: Runner) {
        for payload in expired.drain(..) {
            match payload {
                Payload::Wake(waker) => self.wake_caught(waker),
                Payload::Callback(callback) => {
                    self.executing
                        .dispatch(callback, self, self.runtime.handle())
                }
            }
        }
        if runner == Runner::Task {
            // Taken after dispatching, so that an executor that hands a job straight
            // back has it run in this turn: a detached callback's keep-alive is gone by
            // now, and this turn may be the timer's last.
            self.executing.run_handed_back(&**self);
        }
    }

    /// Records the turn (for `catch_up`), then parks (arming the alarm, reading the
    /// clock with `clock`) and says what the driver does next.
    /// A turn that left the callbacks' wheels to the driver task (`!callbacks`) arms
    /// the alarm for no callback already due: it woke the task for those.
    fn finish_turn(
        &self,
        turn: u64,
        advanced: Advanced,
        callbacks: bool,
        clock: impl FnOnce() -> Instant,
    ) -> Turn {
        self.progress.end_turn(turn, advanced.complete);
        if advanced.shut_down {
            return Turn::Exit;
        }
        if !advanced.complete {
            return Turn::Again;
        }
        // A turn that left the callbacks' wheels to the task also sees, as it parks,
        // a callback that came in meanwhile at a step already processed (registered
        // after this turn passed its shard, while `busy` kept it from arming): the
        // task is woken for it.
        let callback_due = std::cell::Cell::new(false);
        let parked = self.parking.park(&self.clock, clock, || {
            let (next, due) = self.next_expiration(callbacks);
            callback_due.set(callback_due.get() | due);
            next
        });
        if callback_due.get() {
            self.parking.wake_driver();
        }
        match parked {
            Parked::Idle => Turn::Parked { next: None },
            Parked::Until(step) => Turn::Parked { next: Some(step) },
            Parked::Due(_) => Turn::Again,
        }
    }

    /// The earliest step pending in any shard. Unless `callbacks`, a callback whose
    /// step has been processed in the futures' wheel is not counted, but said (the
    /// second value): the driver task, woken for it, takes it (and parks for it,
    /// should it stop at its batch).
    fn next_expiration(&self, callbacks: bool) -> (Option<u64>, bool) {
        let mut callback_due = false;
        let next = self
            .shards
            .iter()
            .filter_map(|s| {
                let wheels = lock(&s.wheels);
                if callbacks {
                    return wheels.next_expiration();
                }
                let processed = wheels.futures.processed();
                let callback = wheels.callbacks.next_expiration();
                callback_due |= callback.is_some_and(|step| step <= processed);
                let callback = callback.filter(|&step| step > processed);
                match (wheels.futures.next_expiration(), callback) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min();
        (next, callback_due)
    }

    #[cfg(loom)]
    pub(crate) fn parked_until(&self) -> u64 {
        self.parking.until()
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::atomic::AtomicBool;
    use std::task::{Context, Wake};

    use super::*;
    use crate::driver::futures::Registered;

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
        let mut config = crate::builder::Builder::default()
            .validate(1)
            .expect("defaults");
        config.shards = 1;
        let shared = Shared::new(config, None);
        let woken = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(woken.clone());
        // Due at step 2: after the driver's clock read (the end of step 1), before the
        // call (the caller's clock reads the end of step 3).
        let Registered::Pending(_) = shared.register(2, &waker, None, 0) else {
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
            || shared.clock.step_end(1),
            Runner::Task,
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

    /// Two runners may turn at once (the task, and the alarm on another worker): a
    /// turn that started after the call and completes first does not end the wait
    /// while an earlier turn still holds, unwoken, a sleep due before the call.
    #[test]
    fn catch_up_waits_for_a_concurrent_earlier_turn_to_wake_what_it_took() {
        type CatchUp = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
        let mut config = crate::builder::Builder::default()
            .validate(1)
            .expect("defaults");
        config.shards = 1;
        let shared = Shared::new(config, None);
        let woken_f = Arc::new(Flag(AtomicBool::new(false)));
        let catch_up: Arc<std::sync::Mutex<Option<CatchUp>>> = Default::default();
        struct Other {
            shared: Arc<Shared>,
            catch_up: Arc<std::sync::Mutex<Option<CatchUp>>>,
            f: Arc<Flag>,
            seen: std::sync::Mutex<Option<(bool, bool)>>,
        }
        impl Wake for Other {
            fn wake(self: Arc<Self>) {
                // The other runner's whole turn, started after the call.
                let mut expired = Vec::new();
                let _ = self
                    .shared
                    .turn_to(self.shared.clock.step_end(2), &mut expired);
                let mut cx = Context::from_waker(Waker::noop());
                let returned = self
                    .catch_up
                    .lock()
                    .unwrap()
                    .as_mut()
                    .unwrap()
                    .as_mut()
                    .poll(&mut cx)
                    .is_ready();
                *self.seen.lock().unwrap() = Some((returned, self.f.0.load(Ordering::SeqCst)));
            }
        }
        let other = Arc::new(Other {
            shared: shared.clone(),
            catch_up: catch_up.clone(),
            f: woken_f.clone(),
            seen: Default::default(),
        });
        let Registered::Pending(_) = shared.register(1, &Waker::from(other.clone()), None, 0)
        else {
            panic!("step 1 is pending");
        };
        let Registered::Pending(_) = shared.register(2, &Waker::from(woken_f.clone()), None, 0)
        else {
            panic!("step 2 is pending");
        };
        let mut expired = Vec::new();
        let _ = shared.turn_with(
            || {
                // `catch_up` is called right after this turn was numbered.
                let s = shared.clone();
                let mut fut: CatchUp = Box::pin(async move { s.catch_up().await });
                let mut cx = Context::from_waker(Waker::noop());
                assert!(fut.as_mut().poll(&mut cx).is_pending());
                *catch_up.lock().unwrap() = Some(fut);
                shared.clock.step_end(2)
            },
            || shared.clock.step_end(2),
            Runner::Task,
            &mut expired,
        );
        let seen = other.seen.lock().unwrap().expect("the other turn ran");
        assert!(
            !seen.0 || seen.1,
            "catch_up returned while a sleep due before the call was taken but not woken: {seen:?}"
        );
    }
}
