//! *rpc*: a TCP echo over 127.0.0.1 with 200 connections on a two-worker runtime with
//! the I/O driver, each request's read on the server bounded by a 1 s timeout: ours
//! (a `Timer` on the server's runtime, and the default timer), Tokio's, and none; wall
//! ns per request. The differences against "no timeout" are the timers' share; `compare`
//! reports CPU per request too, with the kinds interleaved.
//!
//! `cargo bench -p tokio-wheel-benches --bench rpc`

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tokio_wheel_benches::workloads::rpc::{Echo, ReadTimeout, CONNECTIONS};

fn bench(c: &mut Criterion) {
    let mut echo = Echo::new();
    let mut group = c.benchmark_group("rpc");
    group.sample_size(20);
    for timeout in ReadTimeout::ALL {
        group.bench_function(timeout.name(), |b| {
            b.iter_custom(|iters| {
                // Every connection sends at least one request; the time is scaled to
                // `iters` requests.
                let per_connection = iters.div_ceil(CONNECTIONS as u64).max(1);
                let ns = echo.phase(timeout, per_connection as u32).wall_ns;
                Duration::from_nanos((ns * iters as f64) as u64)
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
