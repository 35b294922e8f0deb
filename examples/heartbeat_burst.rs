//! How many heartbeats fire in one tick when many start in the same tick (a reconnect
//! storm), without jitter and with: `tokio::time::interval`, then `Interval`s of one
//! `Timer`, then the same with `Interval::set_jitter`.
//!
//! ```text
//! cargo run --release --features test-util --example heartbeat_burst [heartbeats] [jitter %] [tick ms] [periods]
//! ```
//!
//! Defaults: 100 000 heartbeats of 1 s, jitter 10% of the period, the default 10 ms
//! tick, 10 periods. It runs on Tokio's paused clock, so the count is exact and the
//! machine's speed does not enter it: the clock moves only when every task is idle, so
//! the heartbeats that one turn of the driver fires are all seen at one instant, and
//! the largest number seen at one instant is the largest burst. The first tick of each
//! heartbeat, at once and so all in one tick, is not counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_wheel::{Instant, Timer};

const PERIOD: Duration = Duration::from_secs(1);

/// What the heartbeats of one kind are made by.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Tokio,
    Wheel { jitter: Duration },
}

/// The largest number of heartbeats taken at one instant over `periods` periods, the
/// number of instants they were taken at, and whether any came before its schedule.
async fn run(kind: Kind, heartbeats: u32, tick: Duration, periods: u32) -> (u64, usize, bool) {
    let timer = Timer::builder().tick(tick).build().expect("valid settings");
    let taken: Arc<Mutex<BTreeMap<Instant, u64>>> = Arc::default();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..heartbeats {
        let (timer, taken) = (timer.clone(), taken.clone());
        tasks.push(tokio::spawn(async move {
            let mut early = false;
            let mut beat = |n: u32, now: Instant| {
                early |= now < start + PERIOD * n;
                *taken.lock().unwrap().entry(now).or_default() += 1;
            };
            match kind {
                Kind::Tokio => {
                    let mut heartbeat = tokio::time::interval_at(start, PERIOD);
                    heartbeat.tick().await;
                    for n in 1..=periods {
                        heartbeat.tick().await;
                        beat(n, Instant::now());
                    }
                }
                Kind::Wheel { jitter } => {
                    let mut heartbeat = timer.interval_at(start, PERIOD);
                    heartbeat.set_jitter(jitter);
                    heartbeat.tick().await;
                    for n in 1..=periods {
                        heartbeat.tick().await;
                        beat(n, Instant::now());
                    }
                }
            }
            early
        }));
    }
    let mut early = false;
    for task in tasks {
        early |= task.await.expect("a heartbeat task");
    }
    let taken = taken.lock().unwrap();
    let largest = taken.values().copied().max().unwrap_or(0);
    (largest, taken.len(), early)
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: u32| args.next().and_then(|s| s.parse().ok()).unwrap_or(default);
    let heartbeats = arg(100_000);
    let percent = arg(10);
    let tick = Duration::from_millis(arg(10).into());
    let periods = arg(10);
    let jitter = PERIOD * percent / 100;
    println!(
        "{heartbeats} heartbeats of {PERIOD:?} started in one tick, {periods} periods, \
         timer tick {tick:?}; heartbeats taken at one instant (one turn of a driver):"
    );
    for (name, kind) in [
        ("tokio::time::interval", Kind::Tokio),
        (
            "Timer::interval",
            Kind::Wheel {
                jitter: Duration::ZERO,
            },
        ),
        ("Timer::interval, set_jitter", Kind::Wheel { jitter }),
    ] {
        let (largest, instants, early) = run(kind, heartbeats, tick, periods).await;
        let jitter = match kind {
            Kind::Wheel { jitter } if !jitter.is_zero() => format!(" {jitter:?}"),
            _ => String::new(),
        };
        println!("  {name}{jitter}: largest burst {largest}, over {instants} instants");
        assert!(!early, "{name}: a heartbeat came before its schedule");
    }
}
