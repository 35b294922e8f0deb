//! The Redisson lock watchdog: while a lock guard is alive, renew its lease every
//! lease/3 with a self-re-arming callback; a failed renewal stops the watchdog; dropping
//! the guard stops it at once.
//!
//! ```text
//! cargo run --release --example lease_watchdog
//! ```
//!
//! The lock store is simulated in-process (a map of lease expiries). Callbacks run on
//! `Executor::Inline`: a renewal here only touches a map, so a task per renewal would
//! cost more than the renewal itself. A renewal that talks to a real server should use
//! `Executor::Spawn` (or hand the work to a task) so that a slow server cannot delay
//! every other timer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wheel_timer::{Executor, Instant, Scheduled, Timer};

/// A stand-in for Redis: lock name -> lease expiry. `fail` makes renewals fail.
#[derive(Default)]
struct LockStore {
    leases: Mutex<HashMap<String, Instant>>,
    fail: AtomicBool,
}

impl LockStore {
    fn acquire(&self, name: &str, lease: Duration) {
        self.leases
            .lock()
            .unwrap()
            .insert(name.to_string(), Instant::now() + lease);
    }

    /// Extends the lease; fails if told to, or if the lease already ran out.
    fn renew(&self, name: &str, lease: Duration) -> bool {
        if self.fail.load(Ordering::SeqCst) {
            return false;
        }
        let mut leases = self.leases.lock().unwrap();
        match leases.get_mut(name) {
            Some(expiry) if *expiry > Instant::now() => {
                *expiry = Instant::now() + lease;
                true
            }
            _ => false,
        }
    }
}

/// Holds a lock and keeps its lease alive until dropped.
struct LeaseGuard {
    watchdog: Arc<Watchdog>,
}

struct Watchdog {
    name: String,
    lease: Duration,
    timer: Timer,
    store: Arc<LockStore>,
    renewals: AtomicUsize,
    /// The pending renewal. Replaced by each renewal; taken (and so cancelled) by drop.
    next: Mutex<Option<Scheduled>>,
    stopped: AtomicBool,
}

impl Watchdog {
    /// Schedules the next renewal in lease/3, unless stopped.
    fn arm(self: &Arc<Self>) {
        let this = self.clone();
        let mut next = self.next.lock().unwrap();
        // Checked under the same lock `Drop` takes: no renewal is armed after a stop.
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        match self.timer.schedule(self.lease / 3, move || this.renew()) {
            Ok(handle) => *next = Some(handle),
            Err(e) => eprintln!("{}: cannot schedule renewal: {e}", self.name),
        }
    }

    fn renew(self: &Arc<Self>) {
        if self.store.renew(&self.name, self.lease) {
            let n = self.renewals.fetch_add(1, Ordering::SeqCst) + 1;
            println!("  {}: lease renewed (#{n})", self.name);
            self.arm();
        } else {
            println!("  {}: renewal failed, watchdog stops", self.name);
            self.stopped.store(true, Ordering::SeqCst);
        }
    }
}

impl LeaseGuard {
    fn lock(timer: &Timer, store: &Arc<LockStore>, name: &str, lease: Duration) -> LeaseGuard {
        store.acquire(name, lease);
        let watchdog = Arc::new(Watchdog {
            name: name.to_string(),
            lease,
            timer: timer.clone(),
            store: store.clone(),
            renewals: AtomicUsize::new(0),
            next: Mutex::new(None),
            stopped: AtomicBool::new(false),
        });
        watchdog.arm();
        LeaseGuard { watchdog }
    }

    fn renewals(&self) -> usize {
        self.watchdog.renewals.load(Ordering::SeqCst)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.watchdog.stopped.store(true, Ordering::SeqCst);
        // Dropping the handle cancels the pending renewal at once. Taken out of the
        // mutex first: the callback may be running and waiting for the mutex to re-arm.
        let pending = self.watchdog.next.lock().unwrap().take();
        drop(pending);
    }
}

#[tokio::main]
async fn main() {
    let lease = Duration::from_millis(300);
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .executor(Executor::Inline)
        .build()
        .expect("valid settings");
    let store = Arc::new(LockStore::default());

    println!(
        "1. a guard held for 1 s renews its {lease:?} lease every {:?}",
        lease / 3
    );
    let guard = LeaseGuard::lock(&timer, &store, "orders", lease);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let held = guard.renewals();
    println!("   {held} renewals; the lease never lapsed while held");
    assert!(
        (8..=11).contains(&held),
        "expected ~10 renewals, got {held}"
    );
    assert!(store.leases.lock().unwrap()["orders"] > Instant::now());

    println!("2. dropping the guard stops renewing at once");
    drop(guard);
    println!("   pending() right after drop: {}", timer.pending());
    assert_eq!(
        timer.pending(),
        0,
        "the pending renewal was cancelled by the drop"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        store.leases.lock().unwrap()["orders"] <= Instant::now(),
        "nothing renewed it after the drop, so it lapsed"
    );
    println!("   the lease lapsed {lease:?} later, as it should");

    println!("3. a failed renewal stops the watchdog");
    let guard = LeaseGuard::lock(&timer, &store, "payments", lease);
    tokio::time::sleep(Duration::from_millis(350)).await;
    store.fail.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after_failure = guard.renewals();
    store.fail.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    println!(
        "   {after_failure} renewals before the failure; pending() now {}",
        timer.pending()
    );
    assert!(after_failure >= 2);
    assert_eq!(
        guard.renewals(),
        after_failure,
        "no renewal after the failure"
    );
    assert_eq!(timer.pending(), 0);
    drop(guard);
    println!("done");
}
