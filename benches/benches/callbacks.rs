//! *callbacks*: schedule 1 000 000 callbacks spread over 1 s (tick 1 ms) on a runtime
//! with the I/O driver and let them all fire; CPU ns per callback (all threads, from scheduling to the last run),
//! against the usual Tokio idiom: a task per callback that sleeps, then runs it. Ours
//! twice: with no handle (`schedule_detached_at`, the match for a spawned task whose
//! `JoinHandle` is dropped) and through a `Scheduled` handle that is then detached;
//! Tokio's on a time-only runtime too.
//! And the floor: what this design pays per callback before any wheel work, each part
//! measured alone (see `workloads::CallbacksFloor`).
//!
//! A criterion benchmark of a [`Reported`] figure: each sample is one whole run (about
//! 1.3 s), ten samples per peer, so criterion warns that it cannot fit ten samples in
//! its target time; that is expected. The ratios are printed at the end.
//!
//! `cargo bench -p tokio-wheel-benches --bench callbacks`

mod reported;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use reported::Reported;
use tokio_wheel_benches::runtimes::Flavor;
use tokio_wheel_benches::workloads::{callbacks, callbacks_floor, Callbacks};
use tokio_wheel_benches::Means;

/// The Tokio idiom on a time-only runtime; every other row runs with the I/O driver.
const TOKIO_TIME_ONLY: &str = "tokio task + sleep each, time-only runtime";

/// The parts of a run this design cannot avoid (`workloads::CallbacksFloor`).
const FLOOR: &str = "floor: harness + new memory + wakeups + lock + deadline";

fn bench(c: &mut Criterion<Reported>) {
    let mut means = Means::default();
    let mut group = c.benchmark_group("callbacks");
    group.sampling_mode(SamplingMode::Flat);
    for (name, how, runtime) in [
        (
            "tokio-wheel schedule_detached",
            Callbacks::Detached,
            Flavor::Io,
        ),
        (
            "tokio-wheel schedule + detach",
            Callbacks::Handles,
            Flavor::Io,
        ),
        ("tokio task + sleep each", Callbacks::TokioTasks, Flavor::Io),
        (TOKIO_TIME_ONLY, Callbacks::TokioTasks, Flavor::TimeOnly),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|runs| means.add(name, (0..runs).map(|_| callbacks(how, runtime))))
        });
    }
    group.bench_function(FLOOR, |b| {
        b.iter_custom(|runs| {
            means.add(
                FLOOR,
                (0..runs).map(|_| callbacks_floor(Flavor::Io).total_ns()),
            )
        })
    });
    group.finish();
    if let Some(floor) = means.get(FLOOR) {
        println!(
            "callbacks floor (the workload's own loop, 64 B of new memory per callback, a \
             second of 1 ms wakeups, a lock round trip and an atomic add, a deadline's \
             conversion), mean: {floor:.0} CPU ns"
        );
    }
    if let (Some(detached), Some(handles), Some(theirs)) = (
        means.get("tokio-wheel schedule_detached"),
        means.get("tokio-wheel schedule + detach"),
        means.get("tokio task + sleep each"),
    ) {
        println!(
            "callbacks, CPU ns each, mean of every run above: detached {detached:.0}, with \
             handles {handles:.0}, tokio {theirs:.0}; tokio ÷ ours: {:.1}× detached, {:.1}× \
             with handles",
            theirs / detached,
            theirs / handles
        );
    }
}

criterion_group! {
    name = benches;
    config = Reported::criterion("ns CPU", Duration::from_secs(10));
    targets = bench
}
criterion_main!(benches);
