//! A timer leak, and the line that causes it, found with `Timer::pending_by_site`.
//!
//! ```text
//! cargo run --release --features test-util --example timer_leak [requests]
//! ```
//!
//! A service keeps each request's deadline (a callback that would report it timed
//! out after ten minutes) in a map by request id, and drops it from the map when the
//! request is answered. One path, answering from a cache, forgets to: its deadlines
//! stay in the map, which nothing ever clears, and stay pending for their ten
//! minutes. Each request also runs in a `timeout`, which is cancelled when answered,
//! and a heartbeat ticks all along: timers that come and go, or stay for good reason.
//!
//! `pending()` says only that timers pile up; the timer was built with
//! `track_call_sites(true)`, so `pending_by_site()` says where: the `schedule` in
//! `handle`, most pending first, its count the cached answers. The example checks that
//! and prints the sites. (A program that uses only the free functions gets the same
//! from `tokio_wheel::pending_by_site()`, run with `TOKIO_WHEEL_TRACK_CALL_SITES=1`.)
//!
//! It runs on Tokio's paused clock: the simulated services take their time without
//! the example waiting for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_wheel::{Scheduled, Timer};

/// How long a request may take before its deadline reports it.
const DEADLINE: Duration = Duration::from_secs(600);

/// One request in this many is answered from the cache.
const CACHED_EVERY: u64 = 8;

struct Service {
    timer: Timer,
    /// The deadline of every request in flight. Nothing clears it: an entry leaves when
    /// its request is answered, or it never does.
    deadlines: Mutex<HashMap<u64, Scheduled>>,
}

/// The line of the leaking `schedule`, as `handle` records it on its first call.
static LEAK_LINE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

impl Service {
    async fn handle(&self, id: u64) {
        let deadline = self.timer.schedule(DEADLINE, timed_out(id));
        LEAK_LINE.get_or_init(|| line!() - 1);
        let deadline = deadline.expect("the timer runs");
        self.deadlines.lock().unwrap().insert(id, deadline);
        if id % CACHED_EVERY == 0 {
            // Answered from the cache... and the deadline is never removed: the leak.
            return;
        }
        // The service itself, in a timeout of its own: cancelled when it answers.
        let work = tokio::time::sleep(Duration::from_millis(id % 50));
        let answered = self.timer.timeout(Duration::from_secs(1), work).await;
        assert!(answered.is_ok());
        // Answered: the deadline leaves the map, and its drop cancels it.
        self.deadlines.lock().unwrap().remove(&id);
    }
}

/// What a request's deadline does if it fires.
fn timed_out(id: u64) -> impl FnOnce() + Send + 'static {
    move || eprintln!("request {id} timed out")
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let requests: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let timer = Timer::builder()
        .track_call_sites(true)
        .build()
        .expect("valid settings");
    let service = Arc::new(Service {
        timer: timer.clone(),
        deadlines: Mutex::new(HashMap::new()),
    });

    // A heartbeat: one timer, pending for good reason.
    let heartbeat = tokio::spawn({
        let timer = timer.clone();
        async move {
            let mut beat = timer.interval(Duration::from_secs(1));
            loop {
                beat.tick().await;
            }
        }
    });

    let mut tasks = tokio::task::JoinSet::new();
    for id in 1..=requests {
        let service = service.clone();
        tasks.spawn(async move { service.handle(id).await });
        if id % 100 == 0 {
            // Requests arrive over time: 100 a second.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("request task");
    }

    // Every request has been answered, yet timers are pending.
    let leaked = (requests / CACHED_EVERY) as usize;
    println!("requests answered: {requests}");
    println!("pending():         {}", timer.pending());
    println!("pending by site, most first:");
    let sites = timer.pending_by_site();
    let now = tokio::time::Instant::now();
    for site in &sites {
        let due = site
            .earliest_deadline()
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(now));
        println!("  {site} (the first due in {due:?})");
    }
    let worst = &sites[0];
    assert_eq!(worst.location().file(), file!());
    assert_eq!(Some(&worst.location().line()), LEAK_LINE.get());
    assert_eq!(worst.pending(), leaked, "the cached answers' deadlines");
    assert_eq!(service.deadlines.lock().unwrap().len(), leaked);
    println!(
        "the leak: {} ({} deadlines kept in a map nothing clears)",
        worst.location(),
        worst.pending()
    );
    heartbeat.abort();
}
