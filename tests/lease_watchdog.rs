//! The Redisson lock watchdog as tests: while a lock guard lives, a callback renews the
//! lease every lease/3 and re-arms itself through a `Timer` clone; a failed renewal
//! stops it; dropping the guard stops it at once, even when the drop races the renewal
//! on another thread. (`examples/lease_watchdog.rs` shows the pattern alone.)
//!
//! The lock store (Redis, for Redisson) is simulated in-process: lock name -> lease,
//! counting renewals and failed renewals, and able to "lose" a lock as a failover can.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use tokio_wheel::{Executor, Instant, Scheduled, Timer};

/// A stand-in for Redis: lock name -> lease, with counters the example asserts on.
struct LockStore {
    leases: Mutex<HashMap<String, Lease>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Lease {
    /// `None`: not held (released, or lost).
    expires_at: Option<Instant>,
    renewals: u32,
    failed_renewals: u32,
}

impl LockStore {
    fn new() -> LockStore {
        LockStore {
            leases: Mutex::new(HashMap::new()),
        }
    }

    fn acquire(&self, name: &str, lease: Duration) {
        let now = Instant::now();
        let mut leases = self.leases.lock().unwrap();
        let entry = leases.entry(name.to_string()).or_default();
        assert!(
            entry.expires_at.is_none_or(|t| t <= now),
            "{name} is held by someone else"
        );
        entry.expires_at = Some(now + lease);
    }

    /// Redisson's renewal script: extend the lease if the lock is still held, else fail.
    fn renew(&self, name: &str, lease: Duration) -> bool {
        let now = Instant::now();
        let mut leases = self.leases.lock().unwrap();
        let entry = leases.get_mut(name).expect("acquired first");
        match entry.expires_at {
            Some(t) if t > now => {
                entry.expires_at = Some(now + lease);
                entry.renewals += 1;
                true
            }
            _ => {
                entry.failed_renewals += 1;
                false
            }
        }
    }

    fn release(&self, name: &str) {
        if let Some(entry) = self.leases.lock().unwrap().get_mut(name) {
            entry.expires_at = None;
        }
    }

    /// Simulates the server losing the lock (a failover, an eviction).
    fn lose(&self, name: &str) {
        self.release(name);
    }

    fn lease(&self, name: &str) -> Lease {
        self.leases.lock().unwrap()[name]
    }
}

/// Holds a lock, and keeps its lease alive until dropped.
struct LeaseGuard {
    watchdog: Arc<Watchdog>,
}

struct Watchdog {
    name: String,
    lease: Duration,
    timer: Timer,
    store: Arc<LockStore>,
    /// Every renewal runs with this lock held, and `stop` takes it: so once `stop` has
    /// returned, no renewal is running and none will start.
    state: Mutex<State>,
    /// How often the races of the cross-thread test happened.
    races: Arc<Races>,
    /// Makes the next renewal slow (a slow store reply), to widen a race.
    slow_next: AtomicBool,
}

/// The two ways a drop can race a renewal; both must end with no renewal after the drop.
#[derive(Default)]
struct Races {
    /// The drop found the renewal running, and waited for it to finish.
    waited: AtomicUsize,
    /// The renewal had already left the wheel (so the drop could not cancel it) but ran
    /// after the drop: it found the watchdog stopped and did nothing.
    stale: AtomicUsize,
}

struct State {
    stopped: bool,
    /// The handle of the next renewal. It must be *dropped* (not only cancelled) when
    /// the watchdog stops: the callback it holds owns an `Arc<Watchdog>`, and the
    /// watchdog owns this handle, a cycle until the handle goes.
    next: Option<Scheduled>,
}

impl Watchdog {
    /// Schedules the next renewal in lease/3. Called with `state` locked.
    fn arm(self: &Arc<Self>, state: &mut State) {
        let this = Arc::clone(self);
        match self.timer.schedule(self.lease / 3, move || this.renew()) {
            // Replaces the handle of the renewal that is running now (if any); dropping
            // that one is a no-op, its callback has already been taken out of the wheel.
            Ok(handle) => state.next = Some(handle),
            Err(e) => panic!("{}: cannot schedule the next renewal: {e}", self.name),
        }
    }

    /// The callback: renew, then re-arm, unless stopped meanwhile.
    fn renew(self: &Arc<Self>) {
        let mut state = self.state.lock().unwrap();
        if state.stopped {
            // Stopped after this callback had left the wheel, too late to cancel it.
            self.races.stale.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.slow_next.swap(false, Ordering::Relaxed) {
            // Blocks the driver task on `Inline`, which a real watchdog must not do;
            // tolerable for the few hundred microseconds the race test does it.
            std::thread::sleep(Duration::from_micros(300));
        }
        if self.store.renew(&self.name, self.lease) {
            self.arm(&mut state);
        } else {
            state.stopped = true;
            state.next = None;
        }
    }

    /// Stops renewing. Returns the pending renewal's handle, to be dropped (which
    /// cancels it) after the lock is released.
    fn stop(&self) -> Option<Scheduled> {
        let mut state = match self.state.try_lock() {
            Ok(state) => state,
            Err(TryLockError::WouldBlock) => {
                self.races.waited.fetch_add(1, Ordering::Relaxed);
                self.state.lock().unwrap()
            }
            Err(TryLockError::Poisoned(e)) => panic!("{e}"),
        };
        state.stopped = true;
        state.next.take()
    }
}

impl LeaseGuard {
    fn lock(
        timer: &Timer,
        store: &Arc<LockStore>,
        name: &str,
        lease: Duration,
        races: &Arc<Races>,
    ) -> LeaseGuard {
        store.acquire(name, lease);
        let watchdog = Arc::new(Watchdog {
            name: name.to_string(),
            lease,
            timer: timer.clone(),
            store: store.clone(),
            state: Mutex::new(State {
                stopped: false,
                next: None,
            }),
            races: races.clone(),
            slow_next: AtomicBool::new(false),
        });
        watchdog.arm(&mut watchdog.state.lock().unwrap());
        LeaseGuard { watchdog }
    }

    fn is_renewing(&self) -> bool {
        !self.watchdog.state.lock().unwrap().stopped
    }

    /// When the next renewal is due, if one is pending.
    fn next_renewal(&self) -> Option<Instant> {
        let state = self.watchdog.state.lock().unwrap();
        state.next.as_ref().map(Scheduled::deadline)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // Cancels the pending renewal. Dropped outside the state lock, though dropping
        // it inside would be fine too: the renewal callback takes the state lock and
        // then the wheel's, never the other way round.
        drop(self.watchdog.stop());
        self.watchdog.store.release(&self.watchdog.name);
    }
}

fn timer(executor: Executor) -> Timer {
    Timer::builder()
        .tick(Duration::from_millis(10))
        .wheel_size(256)
        .executor(executor)
        .build()
        .expect("valid settings")
}

const LEASE: Duration = Duration::from_millis(300);

/// A guard held for 1 s renews its 300 ms lease every 100 ms; dropping it cancels the
/// pending renewal at once (`pending()` 1 -> 0), frees the watchdog, and no renewal is
/// attempted afterwards.
#[tokio::test(start_paused = true)]
async fn a_held_guard_renews_and_a_dropped_one_stops_at_once() {
    for executor in [Executor::Inline, Executor::Spawn] {
        let timer = timer(executor.clone());
        let store = Arc::new(LockStore::new());
        let races = Arc::new(Races::default());
        let guard = LeaseGuard::lock(&timer, &store, "orders", LEASE, &races);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let held = store.lease("orders");
        assert!(
            (9..=10).contains(&held.renewals),
            "{executor:?}: {} renewals in 1 s",
            held.renewals
        );
        assert_eq!(held.failed_renewals, 0, "the lease never lapsed while held");
        assert!(held.expires_at.unwrap() > Instant::now());

        // Drop it between two renewals, so that one is certainly pending.
        let last = wait_for_renewal(&store, "orders").await;
        tokio::time::sleep(Duration::from_millis(40)).await;
        let before = timer.pending();
        let watchdog = Arc::downgrade(&guard.watchdog);
        drop(guard);
        assert_eq!((before, timer.pending()), (1, 0), "{executor:?}");
        assert_eq!(watchdog.strong_count(), 0, "the watchdog was freed");
        tokio::time::sleep(Duration::from_millis(400)).await;
        let dropped = store.lease("orders");
        assert_eq!(
            (dropped.renewals, dropped.failed_renewals),
            (last.renewals, 0),
            "{executor:?}: a renewal was attempted after the drop"
        );
    }
}

/// A renewal that fails (the store lost the lock) stops the watchdog for good, though
/// the guard still lives.
#[tokio::test(start_paused = true)]
async fn a_failed_renewal_stops_the_watchdog() {
    let timer = timer(Executor::Inline);
    let store = Arc::new(LockStore::new());
    let races = Arc::new(Races::default());
    let guard = LeaseGuard::lock(&timer, &store, "payments", LEASE, &races);
    tokio::time::sleep(Duration::from_millis(260)).await;
    store.lose("payments");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let failed = store.lease("payments");
    assert_eq!(
        failed.renewals, 2,
        "renewed at 100 and 200 ms, before the loss"
    );
    assert_eq!(
        failed.failed_renewals, 1,
        "one failure, then no more attempts"
    );
    assert!(!guard.is_renewing());
    assert_eq!(timer.pending(), 0);
}

/// A thousand guards (60 ms leases) dropped on two worker threads, half of them in the
/// very tick their renewal fires: no deadlock, no renewal after any drop, nothing left
/// pending, every watchdog freed. Real clock, for real threads; nothing here depends on
/// timing but the count of races, which is only reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_dropped_on_other_threads_while_their_renewals_fire() {
    let timer = timer(Executor::Inline);
    let store = Arc::new(LockStore::new());
    let races = Arc::new(Races::default());
    let mut tasks = tokio::task::JoinSet::new();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..1000 {
        let hold = Duration::from_micros(xorshift(&mut seed) % 200_000);
        let (timer, store, races) = (timer.clone(), store.clone(), races.clone());
        tasks.spawn(async move {
            let name = format!("job-{i}");
            let guard = LeaseGuard::lock(&timer, &store, &name, LEASE / 5, &races);
            tokio::time::sleep(hold).await;
            // Half the guards are dropped at a random moment; the other half in the very
            // tick their next renewal fires (a wheel sleep due then wakes this task in
            // the same driver turn), to make the drop and the renewal collide.
            if i % 2 == 1 {
                // One in eight of those gets a slow reply, so its drop may find the
                // renewal running and wait for it.
                if i % 16 == 1 {
                    guard.watchdog.slow_next.store(true, Ordering::Relaxed);
                }
                if let Some(due) = guard.next_renewal() {
                    timer.sleep_until(due).await;
                }
            }
            let watchdog = Arc::downgrade(&guard.watchdog);
            drop(guard);
            let at_drop = store.lease(&name);
            (name, at_drop, watchdog)
        });
    }
    let at_drop = tasks.join_all().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let renewals: u32 = at_drop.iter().map(|(_, l, _)| l.renewals).sum();
    let late = at_drop
        .iter()
        .filter(|(name, lease, _)| store.lease(name) != *lease)
        .count();
    let alive = at_drop
        .iter()
        .filter(|(_, _, w)| w.strong_count() > 0)
        .count();
    eprintln!(
        "races: {} drops waited for a running renewal, {} renewals ran after their drop \
         and did nothing",
        races.waited.load(Ordering::Relaxed),
        races.stale.load(Ordering::Relaxed)
    );
    assert_eq!(late, 0, "no renewal after any drop");
    assert_eq!(alive, 0, "every watchdog was freed");
    assert_eq!(timer.pending(), 0, "every pending renewal was cancelled");
    assert!(
        renewals > 1000,
        "the guards did renew while held: {renewals}"
    );
    assert_eq!(timer.stats().callback_panics, 0);
}

/// Waits until the watchdog of `name` has renewed once more; returns the lease then.
async fn wait_for_renewal(store: &LockStore, name: &str) -> Lease {
    let seen = store.lease(name).renewals;
    loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let lease = store.lease(name);
        if lease.renewals > seen {
            return lease;
        }
    }
}

/// A tiny PRNG (xorshift64), so the example needs no extra dependency.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
