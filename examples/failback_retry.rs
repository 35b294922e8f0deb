//! Failback retries (Dubbo's `FailbackClusterInvoker`, seed 004): a call that fails is
//! answered at once and queued to be retried later, with a growing delay, by a pool of
//! retry workers; a caller that gives up removes it from the queue.
//!
//! ```text
//! cargo run --example failback_retry
//! ```
//!
//! One [`DelayQueue`] is shared by the callers (who insert and remove) and two retry
//! workers (who take what is due); each retry is taken by exactly one worker. Stops by
//! itself once every call has succeeded, been abandoned or run out of attempts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_wheel::{DelayQueue, Instant, Timer};

const CALLS: u32 = 200;
const MAX_ATTEMPTS: u32 = 4;

/// A failed call waiting for its retry.
#[derive(Debug)]
struct Retry {
    call: u32,
    attempt: u32,
    due: Instant,
}

/// A flaky service: fails most first attempts, fewer later ones, and some calls
/// always (deterministic).
fn invoke(call: u32, attempt: u32) -> Result<(), &'static str> {
    if call % 17 == 3 {
        Err("host down")
    } else if (call * 7 + attempt * 3) % 10 < 6 / (attempt + 1) {
        Err("connection refused")
    } else {
        Ok(())
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50 << attempt)
}

#[tokio::main]
async fn main() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .expect("valid settings");
    let retries: DelayQueue<Retry> = DelayQueue::with_timer(&timer);
    let succeeded = Arc::new(AtomicUsize::new(0));
    let gave_up = Arc::new(AtomicUsize::new(0));
    let early = Arc::new(AtomicUsize::new(0));

    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (retries, succeeded, gave_up, early) = (
                retries.clone(),
                succeeded.clone(),
                gave_up.clone(),
                early.clone(),
            );
            tokio::spawn(async move {
                let mut done = 0;
                while let Some(expired) = retries.next_expired().await {
                    let Retry { call, attempt, due } = expired.into_inner();
                    if Instant::now() < due {
                        early.fetch_add(1, Ordering::Relaxed);
                    }
                    done += 1;
                    match invoke(call, attempt) {
                        Ok(()) => {
                            succeeded.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) if attempt + 1 >= MAX_ATTEMPTS => {
                            gave_up.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            let delay = backoff(attempt);
                            let next = Retry {
                                call,
                                attempt: attempt + 1,
                                due: Instant::now() + delay,
                            };
                            retries.insert(next, delay);
                        }
                    }
                }
                done
            })
        })
        .collect();

    // The callers: each call is tried once at once; a failure is queued for failback.
    let mut abandoned = 0;
    for call in 0..CALLS {
        match invoke(call, 0) {
            Ok(()) => {
                succeeded.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                let delay = backoff(0);
                let key = retries.insert(
                    Retry {
                        call,
                        attempt: 1,
                        due: Instant::now() + delay,
                    },
                    delay,
                );
                // Every tenth caller is shut down before its retry: it takes it back.
                if call % 10 == 0 && retries.remove(&key).is_some() {
                    abandoned += 1;
                }
            }
        }
        if call % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    // Wait until nothing is pending or waiting, then let the workers finish.
    while !retries.is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    retries.close();
    let mut per_worker = Vec::new();
    for worker in workers {
        per_worker.push(worker.await.expect("worker"));
    }

    let (succeeded, gave_up) = (
        succeeded.load(Ordering::Relaxed),
        gave_up.load(Ordering::Relaxed),
    );
    println!("calls:              {CALLS}");
    println!("succeeded:          {succeeded}");
    println!("gave up:            {gave_up} (after {MAX_ATTEMPTS} attempts)");
    println!("abandoned by caller: {abandoned}");
    println!("retries per worker: {per_worker:?}");
    assert_eq!(
        succeeded + gave_up + abandoned,
        CALLS as usize,
        "a call was lost"
    );
    assert_eq!(early.load(Ordering::Relaxed), 0, "a retry ran early");
    assert_eq!(timer.pending(), 0);
}
