//! Many heartbeat loops as async tasks, each driven by a jittered `Interval` of one
//! shared `Timer`; prints a summary line per second.
//!
//! ```text
//! cargo run --release --example heartbeat [seconds] [connections] [jitter %]
//! ```
//!
//! The connections all start in the same tick, as after a reconnect storm, and each
//! sends a heartbeat every 250 ms, delayed by a random amount below `jitter %` of the
//! period (10% by default; `0` turns jitter off and shows the heartbeats in lockstep).
//! Per second, the summary shows the beats, the largest burst (beats taken in one tick
//! of the timer, as the tasks see the clock; the first beats, all at once, are left
//! out) and how late the beats were against the instants they were due at: never
//! early, and late by less than one tick plus one millisecond, plus scheduling delay.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_wheel::{Instant, Timer};

const PERIOD: Duration = Duration::from_millis(250);

struct Totals {
    beats: AtomicU64,
    max_late_us: AtomicU64,
    early: AtomicU64,
    /// Beats by the tick of the timer they were taken in, from the start.
    by_tick: Vec<AtomicU64>,
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let connections: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let percent: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let jitter = PERIOD * percent / 100;
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .build()
        .expect("valid settings");
    let ticks_per_second = Duration::from_secs(1).as_nanos() / timer.tick().as_nanos();
    let totals = Arc::new(Totals {
        beats: AtomicU64::new(0),
        max_late_us: AtomicU64::new(0),
        early: AtomicU64::new(0),
        by_tick: (0..(seconds + 1) as u128 * ticks_per_second)
            .map(|_| AtomicU64::new(0))
            .collect(),
    });
    let start = Instant::now();

    let mut loops = Vec::new();
    for _ in 0..connections {
        let (timer, totals) = (timer.clone(), totals.clone());
        loops.push(tokio::spawn(async move {
            let mut heartbeat = timer.interval_at(start, PERIOD);
            heartbeat.set_jitter(jitter);
            heartbeat.tick().await; // the first, at once
            for n in 1.. {
                let due = heartbeat.tick().await;
                let now = Instant::now();
                if now < due || now < start + PERIOD * n {
                    totals.early.fetch_add(1, Ordering::Relaxed);
                }
                let late = now.saturating_duration_since(due).as_micros() as u64;
                totals.max_late_us.fetch_max(late, Ordering::Relaxed);
                totals.beats.fetch_add(1, Ordering::Relaxed);
                let tick = (now - start).as_nanos() / timer.tick().as_nanos();
                if let Some(count) = totals.by_tick.get(tick as usize) {
                    count.fetch_add(1, Ordering::Relaxed);
                }
                // "Send" the heartbeat: here, nothing.
            }
        }));
    }

    println!(
        "{connections} connections started together, a heartbeat every {PERIOD:?} \
         with jitter {jitter:?}, timer tick {:?}",
        timer.tick()
    );
    let mut report = timer.interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
    let mut largest = 0;
    for second in 1..=seconds {
        report.tick().await;
        let beats = totals.beats.swap(0, Ordering::Relaxed);
        let late = totals.max_late_us.swap(0, Ordering::Relaxed);
        let ticks = (second - 1) as u128 * ticks_per_second..second as u128 * ticks_per_second;
        let burst = totals.by_tick[ticks.start as usize..ticks.end as usize]
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        largest = largest.max(burst);
        println!(
            "t={second}s  beats {beats:>6}  largest burst {burst:>5} per tick  \
             max lateness {:>6.2} ms  pending {}  driver wakeups {}",
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
    println!(
        "stopped; largest burst {largest} per tick  pending {}  early beats {early}",
        timer.pending()
    );
    assert_eq!(early, 0, "a heartbeat fired early");
    assert_eq!(timer.pending(), 0);
}
