//! A token refresher that stays right across a laptop's suspend: it fetches a token,
//! sleeps until a margin before it expires, and fetches the next.
//!
//! ```text
//! cargo run --example token_refresher
//! ```
//!
//! The token's lifetime runs on the server's clock, which does not stop while this
//! machine sleeps. With Tokio's clock (or an ordinary `Timer`), a `sleep(55 min)`
//! begun before a 50-minute suspend still waits 55 minutes after the resume, with an
//! expired token for 50 of them. On a `suspend_aware` timer the sleep counts the
//! suspend (Linux: `CLOCK_BOOTTIME`), so the refresh happens at resume if it fell due
//! meanwhile. `tests/suspend.rs` tests this loop with `Timer::simulate_suspend`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_wheel::Timer;

/// The refresh loop's task, and how many tokens it has fetched.
pub struct Refresher {
    fetched: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Refresher {
    /// Fetches a token now, then again `margin` before each one expires: `fetch`
    /// returns the new token's lifetime.
    pub fn spawn(
        timer: Timer,
        margin: Duration,
        fetch: impl Fn() -> Duration + Send + 'static,
    ) -> Refresher {
        let fetched = Arc::new(AtomicU64::new(0));
        let count = fetched.clone();
        let task = tokio::spawn(async move {
            loop {
                let lifetime = fetch();
                count.fetch_add(1, Ordering::SeqCst);
                timer.sleep(lifetime.saturating_sub(margin)).await;
            }
        });
        Refresher { fetched, task }
    }

    /// How many tokens it has fetched.
    pub fn fetched(&self) -> u64 {
        self.fetched.load(Ordering::SeqCst)
    }
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .suspend_aware(true)
        .build()
        .expect("a runtime with time enabled");
    // Seconds here instead of an hour: a token valid 300 ms, refreshed 100 ms early.
    let refresher = Refresher::spawn(timer, Duration::from_millis(100), || {
        Duration::from_millis(300)
    });
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        println!("tokens fetched: {}", refresher.fetched());
    }
}
