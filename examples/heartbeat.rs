//! Many heartbeat loops as async tasks, each driven by an `Interval` of one shared
//! `Timer`; prints a summary line per second.
//!
//! ```text
//! cargo run --release --example heartbeat [seconds] [connections]
//! ```
//!
//! Each connection sends a heartbeat every 250 ms (staggered starts). The summary shows
//! beats per second and how late they were against their scheduled instants: never
//! early, and late by less than one tick plus one millisecond, plus scheduling delay.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_wheel::{Instant, Timer};

const PERIOD: Duration = Duration::from_millis(250);

#[derive(Default)]
struct Totals {
    beats: AtomicU64,
    max_late_us: AtomicU64,
    early: AtomicU64,
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let connections: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .build()
        .expect("valid settings");
    let totals = Arc::new(Totals::default());
    let start = Instant::now();

    let mut loops = Vec::new();
    for id in 0..connections {
        let (timer, totals) = (timer.clone(), totals.clone());
        loops.push(tokio::spawn(async move {
            // Stagger the connections over one period, as real ones would be.
            let first = start + PERIOD * (id % 50) as u32 / 50;
            let mut heartbeat = timer.interval_at(first, PERIOD);
            loop {
                let scheduled = heartbeat.tick().await;
                let now = Instant::now();
                if now < scheduled {
                    totals.early.fetch_add(1, Ordering::Relaxed);
                }
                let late = now.saturating_duration_since(scheduled).as_micros() as u64;
                totals.max_late_us.fetch_max(late, Ordering::Relaxed);
                totals.beats.fetch_add(1, Ordering::Relaxed);
                // "Send" the heartbeat: here, nothing.
            }
        }));
    }

    println!(
        "{connections} connections, a heartbeat every {PERIOD:?}, timer tick {:?}",
        timer.tick()
    );
    let mut report = timer.interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
    for second in 1..=seconds {
        report.tick().await;
        let beats = totals.beats.swap(0, Ordering::Relaxed);
        let late = totals.max_late_us.swap(0, Ordering::Relaxed);
        println!(
            "t={second}s  beats {beats:>6}  max lateness {:>6.2} ms  pending {}  driver wakeups {}",
            late as f64 / 1000.0,
            timer.pending(),
            timer.stats().driver_wakeups,
        );
    }
    for l in &loops {
        l.abort();
    }
    for l in loops {
        let _ = l.await;
    }
    let early = totals.early.load(Ordering::Relaxed);
    println!("stopped; pending {}  early beats {early}", timer.pending());
    assert_eq!(early, 0, "a heartbeat fired early");
    assert_eq!(timer.pending(), 0);
}
