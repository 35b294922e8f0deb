//! Thousands of concurrent requests, each wrapped in a `timeout`: most are answered in
//! time, so their deadline is cancelled when the `Timeout` drops; the rest time out.
//!
//! ```text
//! cargo run --release --example request_deadlines [requests]
//! ```
//!
//! Prints how many were answered and how many timed out, checks that no request timed
//! out before its deadline, and shows `pending()` back at 0.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_wheel::Timer;

/// The deadline every request gets.
const DEADLINE: Duration = Duration::from_millis(200);

/// A tiny xorshift generator, so the example needs no dependency.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::main]
async fn main() {
    let requests: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .build()
        .expect("valid settings");

    let answered = Arc::new(AtomicUsize::new(0));
    let timed_out = Arc::new(AtomicUsize::new(0));
    let worst_early_ns = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..requests {
        // 90% of the services answer within 0..150 ms; 10% take 300..600 ms.
        let r = xorshift(&mut seed);
        let latency = if r % 10 == 0 {
            Duration::from_millis(300 + r % 300)
        } else {
            Duration::from_millis(r % 150)
        };
        let (timer, answered, timed_out, worst_early_ns) = (
            timer.clone(),
            answered.clone(),
            timed_out.clone(),
            worst_early_ns.clone(),
        );
        tasks.spawn(async move {
            let sent = Instant::now();
            // The simulated service: answers after `latency`.
            let service = tokio::time::sleep(latency);
            match timer.timeout(DEADLINE, service).await {
                Ok(()) => {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                Err(_elapsed) => {
                    timed_out.fetch_add(1, Ordering::Relaxed);
                    let waited = sent.elapsed();
                    if waited < DEADLINE {
                        let early = (DEADLINE - waited).as_nanos() as u64;
                        worst_early_ns.fetch_max(early, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    let mut peak = 0;
    while !tasks.is_empty() {
        peak = peak.max(timer.pending());
        tokio::select! {
            Some(done) = tasks.join_next() => done.expect("request task"),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }

    let answered = answered.load(Ordering::Relaxed);
    let timed_out = timed_out.load(Ordering::Relaxed);
    println!("requests:        {requests}");
    println!("answered:        {answered} (deadline cancelled when the Timeout dropped)");
    println!(
        "timed out:       {timed_out} (deadline {DEADLINE:?}, tick {:?})",
        timer.tick()
    );
    println!("peak pending():  {peak}");
    println!("pending() now:   {}", timer.pending());
    println!("wall time:       {:?}", started.elapsed());
    // What a metrics exporter would read: `fired` is at least the requests that timed
    // out (an answer ready when its deadline fires still wins), `cancelled` the ones
    // answered in time after waiting.
    let stats = timer.stats();
    println!("stats.fired:     {} (timers that expired)", stats.fired);
    println!(
        "stats.cancelled: {} (removed before firing)",
        stats.cancelled
    );
    println!("stats.reset:     {} (moved in place)", stats.reset);
    println!(
        "stats.lateness:  {} (driver's lateness, by bucket)",
        stats.lateness
    );
    println!("driver wakeups:  {}", stats.driver_wakeups);
    assert_eq!(answered + timed_out, requests as usize);
    assert_eq!(
        worst_early_ns.load(Ordering::Relaxed),
        0,
        "a request timed out before its deadline"
    );
    assert_eq!(timer.pending(), 0);
    assert!(stats.fired >= timed_out as u64);
    assert_eq!(stats.lateness.total(), stats.fired);
    println!("no request timed out early");
}
