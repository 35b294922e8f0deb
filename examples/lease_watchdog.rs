//! The Redisson lock watchdog: while a lock guard lives, renew its lease every lease/3
//! with a callback that re-arms itself; dropping the guard cancels the pending renewal.
//!
//! ```text
//! cargo run --release --example lease_watchdog
//! ```
//!
//! Which executor: `Executor::Inline` (the default) runs a renewal on the driver task,
//! right for one that only updates memory, as here. A renewal that talks to a server
//! must not run inline, where a slow reply delays every timer (netty#11724): use
//! `Executor::Spawn`, or have the callback spawn the request and re-arm from its reply,
//! as Redisson does. `tests/lease_watchdog.rs` tests the pattern, drops racing
//! renewals on other threads included.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_wheel::{Instant, Scheduled, Timer};

/// Holds a lock; its watchdog keeps the lease alive until the guard is dropped.
struct LeaseGuard {
    watchdog: Arc<Watchdog>,
}

struct Watchdog {
    name: &'static str,
    lease: Duration,
    timer: Timer,
    started: Instant,
    /// When the lease runs out, as the lock server would keep it.
    expires_at: Mutex<Instant>,
    /// The next renewal's handle, `None` once stopped. A renewal runs with this lock
    /// held and `stop` takes it, so no renewal runs after `stop` has returned.
    next: Mutex<Option<Scheduled>>,
}

impl Watchdog {
    /// Schedules the next renewal in lease/3; `next` is the watchdog's locked handle.
    fn arm(self: &Arc<Self>, next: &mut Option<Scheduled>) {
        let this = Arc::clone(self);
        // If the timer refuses (shut down), the watchdog stops and the lease lapses.
        *next = self
            .timer
            .schedule(self.lease / 3, move || this.renew())
            .ok();
    }

    /// The callback: extend the lease and re-arm, unless stopped meanwhile.
    fn renew(self: &Arc<Self>) {
        let mut next = self.next.lock().unwrap();
        if next.is_none() {
            return; // stopped after this renewal had left the wheel
        }
        let now = Instant::now();
        *self.expires_at.lock().unwrap() = now + self.lease;
        println!(
            "[{:>4} ms] {}: lease renewed for {:?}",
            (now - self.started).as_millis(),
            self.name,
            self.lease
        );
        self.arm(&mut next);
    }
}

impl LeaseGuard {
    fn lock(timer: &Timer, name: &'static str, lease: Duration) -> LeaseGuard {
        let now = Instant::now();
        let watchdog = Arc::new(Watchdog {
            name,
            lease,
            timer: timer.clone(),
            started: now,
            expires_at: Mutex::new(now + lease),
            next: Mutex::new(None),
        });
        watchdog.arm(&mut watchdog.next.lock().unwrap());
        LeaseGuard { watchdog }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // Dropping the handle cancels the pending renewal, and with it the callback's
        // `Arc<Watchdog>`: the watchdog is freed with the guard.
        let next = self.watchdog.next.lock().unwrap().take();
        drop(next);
    }
}

#[tokio::main]
async fn main() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .expect("valid settings");
    let guard = LeaseGuard::lock(&timer, "orders", Duration::from_millis(300));
    let watchdog = Arc::downgrade(&guard.watchdog);

    tokio::time::sleep(Duration::from_secs(1)).await; // work while holding the lock
    println!(
        "pending() while held: {} (the next renewal)",
        timer.pending()
    );

    drop(guard);
    println!(
        "pending() after the drop: {}; watchdog freed: {}",
        timer.pending(),
        watchdog.strong_count() == 0
    );
    let fired = timer.stats().fired;
    tokio::time::sleep(Duration::from_millis(300)).await;
    println!(
        "renewals in the 300 ms after the drop: {}",
        timer.stats().fired - fired
    );
}
