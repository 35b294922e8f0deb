//! Idle-connection management (the long-poll server of seed 003): thousands of
//! connections, each with an idle deadline pushed back on every activity, closed when
//! the deadline passes.
//!
//! ```text
//! cargo run --release --example idle_connections [connections]
//! ```
//!
//! Each connection task owns one `Sleep` and calls `reset` on activity: the entry keeps
//! its place in the timer's slab (no allocation, no re-registration). Some connections
//! go quiet and are closed; busy ones never are. Prints how many were closed, checks
//! none was closed early, and measures a rough single-thread cost per `reset`.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_wheel::{Instant, Timer};

const IDLE: Duration = Duration::from_millis(300);

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::main]
async fn main() {
    let connections: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .expect("valid settings");
    let closed = Arc::new(AtomicUsize::new(0));
    let closed_early = Arc::new(AtomicUsize::new(0));
    let resets = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();

    for id in 0..connections {
        let (timer, closed, closed_early, resets) = (
            timer.clone(),
            closed.clone(),
            closed_early.clone(),
            resets.clone(),
        );
        tasks.spawn(async move {
            let mut seed = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            // A third of the connections go quiet after a while; the rest stay busy.
            let quiet_after = if id % 3 == 0 {
                Duration::from_millis(100 + xorshift(&mut seed) % 400)
            } else {
                Duration::MAX
            };
            let opened = Instant::now();
            let mut last_activity = opened;
            let mut idle = timer.sleep(IDLE);
            loop {
                let gap = Duration::from_millis(20 + xorshift(&mut seed) % 200);
                tokio::select! {
                    _ = &mut idle => {
                        closed.fetch_add(1, Ordering::Relaxed);
                        if Instant::now() < last_activity + IDLE {
                            closed_early.fetch_add(1, Ordering::Relaxed);
                        }
                        return;
                    }
                    _ = tokio::time::sleep(gap), if opened.elapsed() < quiet_after => {
                        // Activity: push the idle deadline back.
                        last_activity = Instant::now();
                        Pin::new(&mut idle).reset(last_activity + IDLE);
                        resets.fetch_add(1, Ordering::Relaxed);
                        if opened.elapsed() > Duration::from_secs(2) {
                            return; // the demo is over for busy connections
                        }
                    }
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("connection task");
    }

    let closed = closed.load(Ordering::Relaxed);
    println!("connections:        {connections}");
    println!(
        "closed when idle:   {closed} (idle timeout {IDLE:?}, tick {:?})",
        timer.tick()
    );
    println!("activity resets:    {}", resets.load(Ordering::Relaxed));
    println!(
        "closed early:       {}",
        closed_early.load(Ordering::Relaxed)
    );
    println!("pending() at end:   {}", timer.pending());
    assert_eq!(closed_early.load(Ordering::Relaxed), 0);
    assert!(
        closed >= connections as usize / 3,
        "the quiet third was closed"
    );
    assert_eq!(timer.pending(), 0);

    // A rough single-thread measurement of one reset on a registered Sleep (not a
    // benchmark: see benches/ for those, side by side with tokio::time).
    let mut sleep = timer.sleep(IDLE);
    assert!(
        futures::poll!(&mut sleep).is_pending(),
        "registered on first poll"
    );
    let n = 1_000_000u32;
    let base = Instant::now();
    let started = std::time::Instant::now();
    for i in 0..n {
        Pin::new(&mut sleep).reset(base + IDLE + Duration::from_micros(u64::from(i % 1000)));
    }
    let per_reset = started.elapsed() / n;
    println!("cost per reset:     ~{per_reset:?} (rough, one thread, {n} resets of one Sleep)");
}
