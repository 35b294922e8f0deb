//! *memory*: bytes per pending, registered sleep at 1 000 000 pending: the future itself
//! plus what the timer allocates for it (counted by a wrapping global allocator), for
//! tokio-wheel and tokio::time.
//!
//! A criterion benchmark of a [`Reported`] figure (bytes per sleep), ten samples each; the
//! figure does not vary from run to run, so criterion's interval is a point. The split
//! into the future's size and the timer's heap is printed at the end.
//!
//! `cargo bench -p tokio-wheel-benches --bench memory`

mod reported;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use reported::Reported;
use tokio_wheel_benches::workloads::{memory, Counting, Memory, Peer};

#[global_allocator]
static ALLOC: Counting = Counting;

fn bench(c: &mut Criterion<Reported>) {
    let mut last: Vec<(Peer, Memory)> = Vec::new();
    let mut group = c.benchmark_group("memory");
    group.sampling_mode(SamplingMode::Flat);
    for peer in [Peer::WheelIo, Peer::TokioIo] {
        group.bench_function(peer.name(), |b| {
            b.iter_custom(|runs| {
                (0..runs)
                    .map(|_| {
                        let m = memory(peer);
                        last.push((peer, m));
                        m.total
                    })
                    .sum()
            })
        });
    }
    group.finish();
    println!("| peer | size_of future | timer heap per sleep | total per sleep |");
    println!("|---|---|---|---|");
    for peer in [Peer::WheelIo, Peer::TokioIo] {
        if let Some((_, m)) = last.iter().rev().find(|(p, _)| *p == peer) {
            println!(
                "| {} | {} | {:.1} | {:.1} |",
                peer.name(),
                m.size_of,
                m.heap,
                m.total
            );
        }
    }
    println!(
        "(totals: ours held by value in a Vec, so size_of + heap; tokio's boxed to pin them, \
         so the Vec's pointer + the box + heap)"
    );
}

criterion_group! {
    name = benches;
    config = Reported::criterion("B/sleep", Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
