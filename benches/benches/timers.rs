//! Register-then-cancel costs, side by side: *churn* (one thread), *scale* (churn with
//! many long timers already pending) and *churn-mt* (1000 tasks on two workers).
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
use tokio_wheel_benches::{current_thread, multi_thread};

const SECOND: Duration = Duration::from_secs(1);

/// Create a 1 s sleep, poll it once so it registers, drop it.
fn churn(c: &mut Criterion) {
    let rt = current_thread();
    let _enter = rt.enter();
    let timer = rt.block_on(async { Timer::new() });
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut group = c.benchmark_group("churn");
    group.bench_function("tokio-wheel", |b| {
        b.iter(|| {
            let mut sleep = timer.sleep(SECOND);
            let _ = Pin::new(&mut sleep).poll(&mut cx);
        })
    });
    group.bench_function("tokio::time", |b| {
        b.iter(|| {
            let mut sleep = pin!(tokio::time::sleep(SECOND));
            let _ = sleep.as_mut().poll(&mut cx);
        })
    });
    group.bench_function("pingora-timeout", |b| {
        b.iter(|| {
            let mut sleep = pin!(pingora_timeout::sleep(SECOND));
            let _ = sleep.as_mut().poll(&mut cx);
        })
    });
    let mut queue = DelayQueue::new();
    group.bench_function("DelayQueue", |b| {
        b.iter(|| {
            let key = queue.insert((), SECOND);
            queue.remove(&key);
        })
    });
    // The floor under every row above: what one clock read and one lock round trip
    // cost alone (a churn op needs a read and two round trips; see the README).
    group.bench_function("floor: Instant::now", |b| {
        b.iter(|| black_box(tokio::time::Instant::now()))
    });
    let lock = std::sync::Mutex::new(0u64);
    group.bench_function("floor: Mutex lock+unlock", |b| {
        b.iter(|| *black_box(&lock).lock().unwrap() += 1)
    });
    group.finish();
}

/// Churn with `n` one-hour sleeps already pending in the same timer.
fn scale(c: &mut Criterion) {
    let rt = current_thread();
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

/// 1000 tasks on two workers, each looping `timeout(1 s, yield_now())`; ns per op,
/// wall clock. `yield_now` alone is the baseline: the difference is the timer's cost.
fn churn_mt(c: &mut Criterion) {
    let rt = multi_thread();
    let timer = rt.block_on(async { Timer::new() });
    let mut group = c.benchmark_group("churn-mt");
    group.sample_size(20);
    let run = |iters: u64, op: fn(&Timer) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>| {
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
    group.bench_function("yield_now alone", |b| {
        b.iter_custom(|iters| run(iters, |_| Box::pin(tokio::task::yield_now())))
    });
    group.bench_function("tokio-wheel", |b| {
        b.iter_custom(|iters| {
            run(iters, |timer| {
                Box::pin(async move {
                    let _ = timer.timeout(SECOND, tokio::task::yield_now()).await;
                })
            })
        })
    });
    group.bench_function("tokio::time", |b| {
        b.iter_custom(|iters| {
            run(iters, |_| {
                Box::pin(async {
                    let _ = tokio::time::timeout(SECOND, tokio::task::yield_now()).await;
                })
            })
        })
    });
    group.bench_function("pingora-timeout", |b| {
        b.iter_custom(|iters| {
            run(iters, |_| {
                Box::pin(async {
                    let _ = pingora_timeout::timeout(SECOND, tokio::task::yield_now()).await;
                })
            })
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = churn, scale, churn_mt
}
criterion_main!(benches);
