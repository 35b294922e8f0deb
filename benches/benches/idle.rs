//! *idle*: CPU time over 2 s of a process whose 1 ms-tick timer has nothing pending,
//! against the same runtime with no timer at all; and the driver's wakeups meanwhile.
//!
//! A criterion benchmark of a [`Reported`] figure (CPU ms per 2 s): each sample is one
//! whole run (about 2.1 s), ten samples each, so criterion warns that it cannot fit ten
//! samples in its target time; that is expected. Run it as a process of its own: other
//! benchmarks' threads would add their own idle CPU.
//!
//! `cargo bench -p tokio-wheel-benches --bench idle`

mod reported;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use reported::Reported;
use tokio_wheel_benches::workloads::idle;
use tokio_wheel_benches::Means;

const ALONE: &str = "runtime alone";
const WITH_TIMER: &str = "runtime + idle 1 ms-tick timer";

fn bench(c: &mut Criterion<Reported>) {
    let mut means = Means::default();
    let mut wakeups = 0;
    let mut group = c.benchmark_group("idle");
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function(ALONE, |b| {
        b.iter_custom(|runs| means.add(ALONE, (0..runs).map(|_| idle(false).0)))
    });
    group.bench_function(WITH_TIMER, |b| {
        b.iter_custom(|runs| {
            let figures = (0..runs).map(|_| {
                let (cpu_ms, driver_wakeups) = idle(true);
                wakeups += driver_wakeups;
                cpu_ms
            });
            means.add(WITH_TIMER, figures)
        })
    });
    group.finish();
    if let (Some(alone), Some(ours)) = (means.get(ALONE), means.get(WITH_TIMER)) {
        println!(
            "idle, CPU ms over 2 s, mean of every run above: runtime alone {alone:.3}, with an \
             idle timer {ours:.3}; driver wakeups in all those runs: {wakeups}"
        );
    }
}

criterion_group! {
    name = benches;
    config = Reported::criterion("ms CPU", Duration::from_secs(20));
    targets = bench
}
criterion_main!(benches);
