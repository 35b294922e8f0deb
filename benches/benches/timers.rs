//! Register-then-cancel costs, side by side, each peer in the runtime configurations it
//! is used in: *churn* (one thread; also through the free function), *churn-later*
//! (each new deadline later than one already pending, 1 and 100 000 pending), *scale*
//! (churn with many long timers already pending), *churn-mt* (1000 tasks on 2 and on 8
//! workers) and *heartbeat* (CPU per tick of 100 000 intervals on 2 workers).
//!
//! `cargo bench -p tokio-wheel-benches --bench timers`

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::task::Context;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use futures::task::noop_waker_ref;
use tokio_util::time::DelayQueue;
use tokio_wheel::Timer;
use tokio_wheel_benches::runtimes::{current_thread, multi_thread, Flavor, ALT_TIMER_AVAILABLE};
use tokio_wheel_benches::workloads::{churn_later, heartbeat, Peer};

const SECOND: Duration = Duration::from_secs(1);

/// Create a 1 s sleep, poll it once so it registers, drop it: ours and Tokio's on a
/// current-thread runtime of each configuration (entered, not running); pingora-timeout
/// and `DelayQueue` on the I/O one.
fn churn(c: &mut Criterion) {
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut group = c.benchmark_group("churn");
    for flavor in [Flavor::Io, Flavor::TimeOnly] {
        let rt = current_thread(flavor);
        let _enter = rt.enter();
        let timer = rt.block_on(async { Timer::new() });
        group.bench_function(BenchmarkId::new("tokio-wheel", flavor.name()), |b| {
            b.iter(|| {
                let mut sleep = timer.sleep(SECOND);
                let _ = Pin::new(&mut sleep).poll(&mut cx);
            })
        });
        group.bench_function(BenchmarkId::new("tokio::time", flavor.name()), |b| {
            b.iter(|| {
                let mut sleep = pin!(tokio::time::sleep(SECOND));
                let _ = sleep.as_mut().poll(&mut cx);
            })
        });
    }
    let rt = current_thread(Flavor::Io);
    let _enter = rt.enter();
    group.bench_function(
        BenchmarkId::new("pingora-timeout", Flavor::Io.name()),
        |b| {
            b.iter(|| {
                let mut sleep = pin!(pingora_timeout::sleep(SECOND));
                let _ = sleep.as_mut().poll(&mut cx);
            })
        },
    );
    let mut queue = DelayQueue::new();
    group.bench_function(BenchmarkId::new("DelayQueue", Flavor::Io.name()), |b| {
        b.iter(|| {
            let key = queue.insert((), SECOND);
            queue.remove(&key);
        })
    });
    // The floor under every row above: what one clock read and one lock round trip
    // cost alone (a churn op needs a read and two round trips; see docs/BENCHMARKS.md).
    group.bench_function("floor: Instant::now", |b| {
        b.iter(|| black_box(tokio::time::Instant::now()))
    });
    let lock = std::sync::Mutex::new(0u64);
    group.bench_function("floor: Mutex lock+unlock", |b| {
        b.iter(|| *black_box(&lock).lock().unwrap() += 1)
    });
    group.finish();
}

/// Churn through the free function `tokio_wheel::sleep` (the default timer, its driver
/// on its own thread), called from a time-only current-thread runtime, entered.
fn churn_free(c: &mut Criterion) {
    let rt = current_thread(Flavor::TimeOnly);
    let _enter = rt.enter();
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut group = c.benchmark_group("churn");
    group.bench_function(
        BenchmarkId::new("tokio_wheel::sleep", Flavor::TimeOnly.name()),
        |b| {
            b.iter(|| {
                let mut sleep = tokio_wheel::sleep(SECOND);
                let _ = Pin::new(&mut sleep).poll(&mut cx);
            })
        },
    );
    group.finish();
}

/// *churn-later* (`workloads::churn_later`), I/O runtime, with 1 and 100 000 pending:
/// each sample is one run of the workload, timed by it.
fn churn_later_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("churn-later");
    group.sample_size(20);
    for pending in [1usize, 100_000] {
        for peer in [Peer::WheelIo, Peer::TokioIo] {
            group.bench_with_input(BenchmarkId::new(peer.name(), pending), &pending, |b, &n| {
                b.iter_custom(|iters| {
                    let iters = u32::try_from(iters).unwrap_or(u32::MAX).max(1);
                    let ns = churn_later(peer, iters, n) * f64::from(iters);
                    Duration::from_nanos(ns as u64)
                })
            });
        }
    }
    group.finish();
}

/// *heartbeat* (`workloads::heartbeat`): CPU per tick of 100 000 `Interval`s of 100 ms
/// on 2 workers, I/O runtime. A run's CPU per tick is scaled to the iterations asked
/// for: one iteration is one tick.
fn heartbeat_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("heartbeat");
    group.sample_size(10);
    for peer in [Peer::WheelIo, Peer::TokioIo] {
        group.bench_function(peer.name(), |b| {
            b.iter_custom(|iters| {
                let per_tick = heartbeat(peer, 100_000, Duration::from_millis(100), 5, 2);
                Duration::from_nanos((per_tick * iters as f64) as u64)
            })
        });
    }
    group.finish();
}

/// Churn with `n` one-hour sleeps already pending in the same timer.
fn scale(c: &mut Criterion) {
    let rt = current_thread(Flavor::Io);
    let _enter = rt.enter();
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut group = c.benchmark_group("scale");
    group.sample_size(20);
    for &n in &[1_000usize, 100_000, 1_000_000, 10_000_000] {
        let timer = rt.block_on(async { Timer::new() });
        let mut held: Vec<_> = (0..n)
            .map(|_| timer.sleep(Duration::from_secs(3600)))
            .collect();
        for s in &mut held {
            let _ = Pin::new(s).poll(&mut cx);
        }
        assert_eq!(timer.pending(), n);
        group.bench_with_input(BenchmarkId::new("tokio-wheel", n), &n, |b, _| {
            b.iter(|| {
                let mut sleep = timer.sleep(SECOND);
                let _ = Pin::new(&mut sleep).poll(&mut cx);
            })
        });
        drop(held);
    }
    for &n in &[1_000usize, 1_000_000] {
        let mut held: Vec<_> = (0..n)
            .map(|_| Box::pin(tokio::time::sleep(Duration::from_secs(3600))))
            .collect();
        for s in &mut held {
            let _ = s.as_mut().poll(&mut cx);
        }
        group.bench_with_input(BenchmarkId::new("tokio::time", n), &n, |b, _| {
            b.iter(|| {
                let mut sleep = pin!(tokio::time::sleep(SECOND));
                let _ = sleep.as_mut().poll(&mut cx);
            })
        });
        drop(held);
    }
    group.finish();
}

const TASKS: u64 = 1000;

/// 1000 tasks looping `timeout(1 s, yield_now())`, on 2 and on 8 workers of each
/// runtime configuration; ns per op, wall clock. `yield_now` alone on the same runtime
/// is the baseline: the difference is the timer's cost. Tokio's alt timer appears in
/// `--cfg tokio_unstable` builds only (`RUSTFLAGS="--cfg tokio_unstable" cargo bench`).
fn churn_mt(c: &mut Criterion) {
    let mut group = c.benchmark_group("churn-mt");
    group.sample_size(20);
    let mut flavors = vec![Flavor::Io, Flavor::TimeOnly];
    if ALT_TIMER_AVAILABLE {
        flavors.push(Flavor::AltTimer);
    }
    for workers in [2, 8] {
        for &flavor in &flavors {
            let rt = multi_thread(flavor, workers);
            let timer = rt.block_on(async { Timer::new() });
            let run = |iters: u64, op: Op| {
                let per_task = iters.div_ceil(TASKS);
                rt.block_on(async {
                    let start = Instant::now();
                    let mut tasks = tokio::task::JoinSet::new();
                    for _ in 0..TASKS {
                        let timer = timer.clone();
                        tasks.spawn(async move {
                            for _ in 0..per_task {
                                op(&timer).await;
                            }
                        });
                    }
                    while tasks.join_next().await.is_some() {}
                    start.elapsed() * iters as u32 / (per_task * TASKS) as u32
                })
            };
            let id = |name: &str| BenchmarkId::new(format!("{name}, {}", flavor.name()), workers);
            group.bench_function(id("yield_now alone"), |b| {
                b.iter_custom(|iters| run(iters, |_| Box::pin(tokio::task::yield_now())))
            });
            // Ours does not use Tokio's timer flavour; on the alt-timer runtime it is
            // measured all the same, for a ratio within one runtime.
            group.bench_function(id("tokio-wheel"), |b| {
                b.iter_custom(|iters| {
                    run(iters, |timer| {
                        Box::pin(async move {
                            let _ = timer.timeout(SECOND, tokio::task::yield_now()).await;
                        })
                    })
                })
            });
            group.bench_function(id("tokio::time"), |b| {
                b.iter_custom(|iters| {
                    run(iters, |_| {
                        Box::pin(async {
                            let _ = tokio::time::timeout(SECOND, tokio::task::yield_now()).await;
                        })
                    })
                })
            });
            if flavor == Flavor::Io {
                group.bench_function(id("pingora-timeout"), |b| {
                    b.iter_custom(|iters| {
                        run(iters, |_| {
                            Box::pin(async {
                                let _ = pingora_timeout::timeout(SECOND, tokio::task::yield_now())
                                    .await;
                            })
                        })
                    })
                });
            }
        }
    }
    group.finish();
}

/// One op of a churn-mt task.
type Op = fn(&Timer) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = churn, churn_free, churn_later_bench, scale, churn_mt, heartbeat_bench
}
criterion_main!(benches);
