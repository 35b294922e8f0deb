//! The tick task, and the one lock every timer of a [`Timer`](crate::Timer) shares.
//!
//! Everything that knows about time, locking or waking lives here; the
//! [`wheel`](crate::wheel) it drives knows none of it. Futures reach the wheel only
//! through [`Shared`]'s methods, which keep the lock short and never wake a waker,
//! or drop one, while holding it.
//!
//! # Implementation
//!
//! Time is cut into ticks counted from the timer's `origin`: tick `k` ends at
//! `origin + k * tick`. A deadline goes to the first tick that ends at or after it
//! ([`Clock::tick_at`], rounding up), and the driver processes tick `k` only once the
//! clock has passed its end ([`Clock::tick_now`], rounding down). That pair of roundings
//! is the whole "never early" argument; lateness is the rest of the tick plus however
//! late the runtime woke us.
//!
//! The driver task awaits a `tokio::time::Interval` of one tick with
//! [`MissedTickBehavior::Skip`]: when the runtime wakes us late, each turn processes
//! every tick up to the clock anyway, so `Burst`'s make-up ticks would find nothing to
//! do, and `Delay` would drift off the `origin + k * tick` grid that deadlines were
//! rounded onto. While the next occupied slot is the next tick the interval simply
//! ticks; when it is further away, the interval is reset to that slot's tick, and with
//! nothing pending the driver waits on a [`Notify`] alone: no wakeups while idle.
//!
//! A registration wakes the driver only if it is due before the tick the driver is
//! parked until (`State::parked_until`), so the common case of a deadline later than
//! ones already pending costs no wakeup at all.
//!
//! The driver holds only a `Weak` to [`Shared`] while it waits, so when the last
//! `Timer` clone and the last future holding one are dropped, `Shared` drops,
//! notifies the driver, and the driver ends.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Poll, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::wheel::{InsertError, Key, Wheel, MAX_TICK};
use crate::Error;

/// How many timers one turn of the driver expires before it releases the lock, wakes
/// them and yields to the runtime (style rule 6: bound every drain loop).
const BATCH: usize = 4096;

/// Maps instants to ticks and back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    tick: Duration,
    tick_ns: u64,
}

impl Clock {
    fn new(origin: Instant, tick: Duration) -> Self {
        let tick_ns = u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX).max(1);
        Clock {
            origin,
            tick,
            tick_ns,
        }
    }

    /// The first tick that ends at or after `deadline` (saturating).
    pub(crate) fn tick_at(&self, deadline: Instant) -> u64 {
        let ns = nanos(deadline.saturating_duration_since(self.origin));
        (ns / self.tick_ns + u64::from(ns % self.tick_ns != 0)).min(MAX_TICK)
    }

    /// The last tick that has ended by `now`.
    fn tick_now(&self, now: Instant) -> u64 {
        (nanos(now.saturating_duration_since(self.origin)) / self.tick_ns).min(MAX_TICK)
    }

    /// When tick `tick` ends.
    fn instant_of(&self, tick: u64) -> Instant {
        let ns = tick.saturating_mul(self.tick_ns);
        self.origin
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or_else(|| far_future(self.origin))
    }

    pub(crate) fn tick(&self) -> Duration {
        self.tick
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Where saturating deadlines go: about 30 years ahead, as tokio does.
pub(crate) fn far_future(from: Instant) -> Instant {
    from + Duration::from_secs(86_400 * 365 * 30)
}

/// `from + d`, saturating to [`far_future`] instead of overflowing.
pub(crate) fn deadline_after(from: Instant, d: Duration) -> Instant {
    from.checked_add(d).unwrap_or_else(|| far_future(from))
}

/// What a wheel entry does when it fires.
#[derive(Debug)]
pub(crate) enum Payload {
    /// A future's task to wake.
    Wake(Waker),
}

/// The lock-protected part of [`Shared`].
#[derive(Debug)]
struct State {
    wheel: Wheel<Payload>,
    /// The tick the driver will next process unprompted: `u64::MAX` when it waits for
    /// a registration, `0` while it is busy (so nobody notifies it). A registration due
    /// before it must notify the driver.
    parked_until: u64,
    /// Set by shutdown or when the driver's runtime drops it; from then on nothing
    /// registers and every future completes at once.
    shutdown: bool,
}

/// Statistics the driver keeps, for tests and benchmarks.
#[derive(Debug, Default)]
struct Counters {
    wakeups: AtomicU64,
    fired: AtomicU64,
}

/// What every handle of one timer shares: the wheel under its lock, the clock, and
/// the way to wake the driver.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// `wheel.elapsed()`, mirrored after every change under the lock, so a future can
    /// learn it has fired without taking the lock; `u64::MAX` once shut down.
    elapsed: AtomicU64,
    pub(crate) clock: Clock,
    notify: Arc<Notify>,
    counters: Counters,
}

/// Outcome of a registration attempt.
pub(crate) enum Registered {
    /// In the wheel under this key.
    Pending(Key),
    /// Due already (or the timer is shut down): complete now.
    Due,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing user-supplied runs under the lock except `Waker::clone`, done before
        // any state changes, so a poisoned lock still guards consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether everything due by `tick` has been fired (lock-free).
    pub(crate) fn has_fired(&self, tick: u64) -> bool {
        tick <= self.elapsed.load(Ordering::Acquire)
    }

    /// Registers a future's waker for `tick`.
    pub(crate) fn register(&self, tick: u64, waker: &Waker) -> Registered {
        let mut state = self.lock();
        if state.shutdown {
            return Registered::Due;
        }
        match state.wheel.insert(tick, Payload::Wake(waker.clone())) {
            Ok(key) => {
                let notify = self.note_earlier(&mut state, tick);
                drop(state);
                if notify {
                    self.notify.notify_one();
                }
                Registered::Pending(key)
            }
            // Entries are ~40 bytes and the wheel holds 2^32 - 1 of them; a futures
            // registration that would overflow it completes instead of panicking.
            Err((_, InsertError::Elapsed | InsertError::Full)) => Registered::Due,
        }
    }

    /// Replaces the waker of `key` unless it would wake the same task. Returns `false`
    /// if the entry has fired.
    pub(crate) fn update_waker(&self, key: Key, waker: &Waker) -> bool {
        let mut state = self.lock();
        match state.wheel.get_mut(key) {
            Some(Payload::Wake(stored)) => {
                if !stored.will_wake(waker) {
                    let old = std::mem::replace(stored, waker.clone());
                    drop(state);
                    drop(old);
                }
                true
            }
            None => false,
        }
    }

    /// Removes `key` if it is still pending. Returns whether it was.
    pub(crate) fn cancel(&self, key: Key) -> bool {
        let removed = self.lock().wheel.remove(key);
        // Dropped here, after the lock: dropping a waker can run arbitrary code.
        removed.is_some()
    }

    /// Whether `key` is still in the wheel.
    pub(crate) fn is_pending(&self, key: Key) -> bool {
        self.lock().wheel.contains(key)
    }

    /// Moves `key` to `tick`. Returns `false` (and wakes the entry's task) when the
    /// entry has already fired or `tick` has already been processed.
    pub(crate) fn reschedule(&self, key: Key, tick: u64) -> bool {
        let mut state = self.lock();
        match state.wheel.reschedule(key, tick) {
            Ok(()) => {
                let notify = self.note_earlier(&mut state, tick);
                drop(state);
                if notify {
                    self.notify.notify_one();
                }
                true
            }
            Err(fired) => {
                drop(state);
                if let Some(Payload::Wake(waker)) = fired {
                    waker.wake();
                }
                false
            }
        }
    }

    /// Number of entries in the wheel.
    pub(crate) fn pending(&self) -> usize {
        self.lock().wheel.len()
    }

    pub(crate) fn wheel_size(&self) -> usize {
        self.lock().wheel.slots()
    }

    pub(crate) fn wakeups(&self) -> u64 {
        self.counters.wakeups.load(Ordering::Relaxed)
    }

    pub(crate) fn fired(&self) -> u64 {
        self.counters.fired.load(Ordering::Relaxed)
    }

    /// Records that something is due at `tick`; returns whether the driver must be
    /// notified because it is parked until later.
    fn note_earlier(&self, state: &mut State, tick: u64) -> bool {
        if tick < state.parked_until {
            state.parked_until = tick;
            true
        } else {
            false
        }
    }

    /// Stops the timer: nothing registers any more, and every pending future wakes
    /// and completes. Idempotent.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.shutdown = true;
        let wakers: Vec<Payload> = state.wheel.drain().collect();
        self.elapsed.store(u64::MAX, Ordering::Release);
        drop(state);
        self.notify.notify_one();
        for Payload::Wake(waker) in wakers {
            waker.wake();
        }
    }

    /// One turn of the driver: processes every tick the clock has passed (at most
    /// [`BATCH`] expirations), then wakes what fired outside the lock.
    fn turn(&self, expired: &mut Vec<Payload>) -> Turn {
        let now = self.clock.tick_now(Instant::now());
        let mut state = self.lock();
        if state.shutdown {
            return Turn::Exit;
        }
        let done = state
            .wheel
            .advance(now, BATCH, |payload| expired.push(payload));
        self.elapsed.store(state.wheel.elapsed(), Ordering::Release);
        let turn = if done {
            let next = state.wheel.next_expiration();
            state.parked_until = next.unwrap_or(u64::MAX);
            Turn::Park { now, next }
        } else {
            state.parked_until = 0;
            Turn::Again
        };
        drop(state);
        self.counters
            .fired
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        for payload in expired.drain(..) {
            match payload {
                Payload::Wake(waker) => waker.wake(),
            }
        }
        turn
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last handle is gone: let the driver see that and end.
        self.notify.notify_one();
    }
}

enum Turn {
    /// More is due right now: yield, then turn again.
    Again,
    /// Caught up to tick `now`; `next` is the next occupied tick, if any.
    Park { now: u64, next: Option<u64> },
    /// The timer was shut down.
    Exit,
}

/// Creates the shared state and spawns its driver on `runtime`.
pub(crate) fn start(
    tick: Duration,
    wheel_size: usize,
    runtime: &tokio::runtime::Handle,
) -> Result<Arc<Shared>, Error> {
    let interval = {
        let _enter = runtime.enter();
        // tokio panics when the runtime was built without its time driver; turn that
        // into an error here rather than a panic in the tick task later.
        std::panic::catch_unwind(|| {
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
            interval
        })
        .map_err(|_| {
            Error::InvalidConfig(
                "the Tokio runtime has no time driver: build it with enable_time() or enable_all()"
                    .into(),
            )
        })?
    };
    let notify = Arc::new(Notify::new());
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            wheel: Wheel::new(wheel_size),
            parked_until: u64::MAX,
            shutdown: false,
        }),
        elapsed: AtomicU64::new(0),
        clock: Clock::new(Instant::now(), tick),
        notify: notify.clone(),
        counters: Counters::default(),
    });
    runtime.spawn(run(Arc::downgrade(&shared), notify, interval));
    Ok(shared)
}

/// Completes every pending future if the driver task is dropped before it ends by
/// itself (its runtime shut down), so that no task elsewhere waits forever.
struct DriverGuard {
    shared: Weak<Shared>,
}

impl Drop for DriverGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.close();
        }
    }
}

/// The driver task.
async fn run(weak: Weak<Shared>, notify: Arc<Notify>, mut interval: Interval) {
    let _guard = DriverGuard {
        shared: weak.clone(),
    };
    let mut expired = Vec::new();
    // Whether the interval's last firing woke us: then its next firing is at the next
    // tick (or earlier, if we ran late), and needs no reset to get there.
    let mut in_step = false;
    loop {
        let (clock, turn) = {
            let Some(shared) = weak.upgrade() else { return };
            shared.counters.wakeups.fetch_add(1, Ordering::Relaxed);
            (shared.clock, shared.turn(&mut expired))
        };
        let next = match turn {
            Turn::Exit => return,
            Turn::Again => {
                tokio::task::yield_now().await;
                continue;
            }
            Turn::Park { now, next } => next.map(|next| (now, next)),
        };
        let notified = pin!(notify.notified());
        match next {
            None => {
                notified.await;
                in_step = false;
            }
            Some((now, next)) => {
                if !(in_step && next == now + 1) {
                    interval.reset_at(clock.instant_of(next));
                }
                in_step = wait(notified, &mut interval).await;
            }
        }
    }
}

/// Waits for a notification or the interval's next tick; returns `true` for the tick.
async fn wait(
    mut notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    interval: &mut Interval,
) -> bool {
    std::future::poll_fn(|cx| {
        if notified.as_mut().poll(cx).is_ready() {
            return Poll::Ready(false);
        }
        interval.poll_tick(cx).map(|_| true)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_deadlines_up_and_now_down() {
        let origin = Instant::now();
        let clock = Clock::new(origin, Duration::from_millis(10));
        assert_eq!(clock.tick_at(origin), 0);
        assert_eq!(clock.tick_at(origin + Duration::from_millis(1)), 1);
        assert_eq!(clock.tick_at(origin + Duration::from_millis(10)), 1);
        assert_eq!(clock.tick_at(origin + Duration::from_millis(11)), 2);
        assert_eq!(clock.tick_now(origin + Duration::from_millis(9)), 0);
        assert_eq!(clock.tick_now(origin + Duration::from_millis(10)), 1);
        assert_eq!(clock.instant_of(3), origin + Duration::from_millis(30));
    }

    #[test]
    fn far_deadlines_saturate() {
        let origin = Instant::now();
        let clock = Clock::new(origin, Duration::from_nanos(1));
        let far = deadline_after(origin, Duration::MAX);
        assert_eq!(far, far_future(origin));
        assert!(clock.tick_at(far) <= MAX_TICK);
        assert!(clock.instant_of(MAX_TICK) > origin);
        let coarse = Clock::new(origin, Duration::MAX);
        assert_eq!(coarse.tick_at(far), 1);
    }
}
