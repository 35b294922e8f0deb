//! The Redisson lock watchdog: while a lock guard is alive, renew the lock's lease every
//! lease/3 with a callback that re-arms itself through a `Timer` clone; a failed
//! renewal stops the watchdog; dropping the guard stops it at once.
//!
//! ```text
//! cargo run --release --example lease_watchdog            # callbacks on Executor::Inline
//! cargo run --release --example lease_watchdog -- spawn   # the same on Executor::Spawn
//! ```
//!
//! The lock store (Redis, for Redisson) is simulated in-process: a map from lock name to
//! lease expiry, which counts renewals and failed renewals and can "lose" a lock (as a
//! Redis failover can) so that the next renewal fails. The example runs four scenes in
//! about 2.5 s of real time, and asserts what it prints:
//!
//! 1. a guard held for 1 s renews its 300 ms lease about every 100 ms;
//! 2. dropping it cancels the pending renewal at once (`timer.pending()` goes 1 -> 0)
//!    and no renewal is attempted afterwards;
//! 3. a renewal that fails (the lock was lost) stops the watchdog for good;
//! 4. a thousand guards dropped on other worker threads, half of them in the very tick
//!    their renewal fires: no deadlock, no renewal after any drop, nothing left pending,
//!    every watchdog freed.
//!
//! # Which executor
//!
//! `Executor::Inline` by default: a renewal here updates a map under a mutex, a few
//! microseconds, so running it on the tick task is cheaper than spawning a task per
//! renewal. A renewal that talks to a real server must not run inline: a slow reply
//! would delay every timer on the wheel (netty#11724). Use `Executor::Spawn` then, or
//! have the callback spawn the request and re-arm from its reply, as Redisson does
//! (`renewExpirationAsync(...).onComplete(...)`). This example holds a mutex across the
//! renewal (see `Watchdog::renew`), which is what makes "nothing after drop" exact; with
//! an async renewal you would instead ignore a reply that lands after the stop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use wheel_timer::{Executor, Instant, Scheduled, Timer};

/// A stand-in for Redis: lock name -> lease, with counters the example asserts on.
struct LockStore {
    leases: Mutex<HashMap<String, Lease>>,
    started: Instant,
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
            started: Instant::now(),
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

    fn ms(&self) -> u128 {
        self.started.elapsed().as_millis()
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
    verbose: bool,
    /// Every renewal runs with this lock held, and `stop` takes it: so once `stop` has
    /// returned, no renewal is running and none will start.
    state: Mutex<State>,
    /// How often the races of scene 4 happened.
    races: Arc<Races>,
    /// Makes the next renewal slow (a slow store reply), to widen a race in scene 4.
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
            Err(e) => {
                // The lease will lapse; a real lock would tell its holder.
                eprintln!("{}: cannot schedule the next renewal: {e}", self.name);
                state.stopped = true;
                state.next = None;
            }
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
            // Blocks the tick task on `Inline`, which is what the module docs warn
            // against; tolerable for the few hundred microseconds scene 4 does it.
            std::thread::sleep(Duration::from_micros(300));
        }
        if self.store.renew(&self.name, self.lease) {
            if self.verbose {
                let lease = self.store.lease(&self.name);
                println!(
                    "  [{:>4} ms] {}: renewed (#{})",
                    self.store.ms(),
                    self.name,
                    lease.renewals
                );
            }
            self.arm(&mut state);
        } else {
            println!(
                "  [{:>4} ms] {}: renewal FAILED (lock lost), watchdog stops",
                self.store.ms(),
                self.name
            );
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
        verbose: bool,
        races: &Arc<Races>,
    ) -> LeaseGuard {
        store.acquire(name, lease);
        let watchdog = Arc::new(Watchdog {
            name: name.to_string(),
            lease,
            timer: timer.clone(),
            store: store.clone(),
            verbose,
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

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let executor = match std::env::args().nth(1).as_deref() {
        None | Some("inline") => Executor::Inline,
        Some("spawn") => Executor::Spawn,
        Some(other) => panic!("unknown executor {other:?}: use `inline` or `spawn`"),
    };
    let lease = Duration::from_millis(300);
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .wheel_size(256)
        .executor(executor.clone())
        .build()
        .expect("valid settings");
    let store = Arc::new(LockStore::new());
    let races = Arc::new(Races::default());
    println!("executor {executor:?}, tick {:?}", timer.tick());

    println!(
        "1. a guard held for 1 s renews its {lease:?} lease every {:?}",
        lease / 3
    );
    let guard = LeaseGuard::lock(&timer, &store, "orders", lease, true, &races);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let held = store.lease("orders");
    println!(
        "   {} renewals, {} failed",
        held.renewals, held.failed_renewals
    );
    assert!(
        (8..=10).contains(&held.renewals),
        "expected about 10 renewals in 1 s, got {}",
        held.renewals
    );
    assert_eq!(held.failed_renewals, 0, "the lease never lapsed while held");
    assert!(held.expires_at.unwrap() > Instant::now());

    println!("2. dropping the guard stops renewing at once");
    // Drop it between two renewals, so that one is certainly pending.
    let last = wait_for_renewal(&store, "orders").await;
    tokio::time::sleep(Duration::from_millis(40)).await;
    let before = timer.pending();
    let watchdog = Arc::downgrade(&guard.watchdog);
    drop(guard);
    let after = timer.pending();
    println!("   pending(): {before} before the drop, {after} right after it");
    assert_eq!(
        watchdog.strong_count(),
        0,
        "the cancelled callback, and with it the watchdog, was freed"
    );
    assert_eq!(
        (before, after),
        (1, 0),
        "the drop cancelled the pending renewal"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let dropped = store.lease("orders");
    println!(
        "   400 ms later: still {} renewals, {} failed; no attempt after the drop",
        dropped.renewals, dropped.failed_renewals
    );
    assert_eq!(
        (dropped.renewals, dropped.failed_renewals),
        (last.renewals, 0),
        "no renewal was attempted after the drop"
    );

    println!("3. a failed renewal stops the watchdog");
    let guard = LeaseGuard::lock(&timer, &store, "payments", lease, true, &races);
    tokio::time::sleep(Duration::from_millis(260)).await;
    println!(
        "  [{:>4} ms] payments: the store loses the lock",
        store.ms()
    );
    store.lose("payments");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let failed = store.lease("payments");
    println!(
        "   {} renewals, then {} failed; pending() {} with the guard still alive",
        failed.renewals,
        failed.failed_renewals,
        timer.pending()
    );
    assert!(failed.renewals >= 2, "renewed before the loss");
    assert_eq!(
        failed.failed_renewals, 1,
        "one failure, then no more attempts"
    );
    assert!(!guard.is_renewing());
    assert_eq!(timer.pending(), 0);
    drop(guard);

    println!("4. 1000 guards (60 ms leases) dropped on other threads, racing their renewals");
    let mut tasks = tokio::task::JoinSet::new();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..1000 {
        let hold = Duration::from_micros(xorshift(&mut seed) % 200_000);
        let (timer, store, races) = (timer.clone(), store.clone(), races.clone());
        tasks.spawn(async move {
            let name = format!("job-{i}");
            let guard = LeaseGuard::lock(&timer, &store, &name, lease / 5, false, &races);
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
    let failures: u32 = at_drop.iter().map(|(_, l, _)| l.failed_renewals).sum();
    let late = at_drop
        .iter()
        .filter(|(name, lease, _)| store.lease(name) != *lease)
        .count();
    let alive = at_drop
        .iter()
        .filter(|(_, _, w)| w.strong_count() > 0)
        .count();
    println!(
        "   {renewals} renewals, {failures} failed (a renewal over 40 ms late lets a lease lapse)"
    );
    println!(
        "   races: {} drops waited for a running renewal, {} renewals ran after their drop \
         and did nothing",
        races.waited.load(Ordering::Relaxed),
        races.stale.load(Ordering::Relaxed)
    );
    println!(
        "   renewals after a drop: {late}; pending() {}; watchdogs not freed: {alive}",
        timer.pending()
    );
    assert_eq!(late, 0, "no renewal after any drop");
    assert_eq!(alive, 0, "every watchdog was freed");
    assert_eq!(timer.pending(), 0, "every pending renewal was cancelled");
    assert!(renewals > 1000, "the guards did renew while held");

    let stats = timer.stats();
    assert_eq!(stats.callback_panics, 0);
    println!(
        "ok: {} timers fired in all, no callback panicked",
        stats.fired
    );
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
