//! *expiry*: 200 000 sleeps with deadlines spread evenly over 1 s (timer tick 1 ms) on
//! a two-worker runtime with the I/O driver (`compare` has the time-only one too); lateness (wake instant minus deadline) for tokio-wheel and
//! tokio::time. A tokio-wheel sleep that wakes early fails the run.
//!
//! A criterion benchmark of a [`Reported`] figure, each run's p99 lateness in ms (the
//! target is "p99 no worse than tokio's"): each sample is one whole run (about 1.6 s),
//! ten samples each, so criterion warns that it cannot fit ten samples in its target
//! time; that is expected. Then it prints min/p50/p99/max over all the runs' sleeps
//! together and writes an SVG of both distributions to
//! `benches/results/expiry-lateness.svg`.
//!
//! `cargo bench -p tokio-wheel-benches --bench expiry`

mod reported;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use reported::Reported;
use tokio_wheel_benches::percentile;
use tokio_wheel_benches::workloads::{expiry, Peer};

const SLEEPS: u32 = 200_000;
const SPREAD: Duration = Duration::from_secs(1);

fn row(name: &str, l: &[Duration]) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "| {name:<12} | {:>7.3} | {:>7.3} | {:>7.3} | {:>7.3} |",
        ms(l[0]),
        ms(percentile(l, 0.5)),
        ms(percentile(l, 0.99)),
        ms(*l.last().unwrap())
    )
}

/// A small SVG: the cumulative distribution of lateness for both peers.
fn svg(ours: &[Duration], theirs: &[Duration]) -> String {
    let (w, h, pad) = (640.0, 360.0, 40.0);
    let max_ms = percentile(ours, 0.999)
        .max(percentile(theirs, 0.999))
        .as_secs_f64()
        * 1000.0;
    let max_ms = max_ms.max(1.0);
    let path = |l: &[Duration]| {
        let mut d = String::new();
        for k in 0..=200 {
            let p = k as f64 / 200.0;
            let x =
                pad + (percentile(l, p).as_secs_f64() * 1000.0 / max_ms).min(1.0) * (w - 2.0 * pad);
            let y = h - pad - p * (h - 2.0 * pad);
            d.push_str(&format!("{}{x:.1},{y:.1} ", if k == 0 { "M" } else { "L" }));
        }
        d
    };
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{pad}" y="20">Lateness CDF, {SLEEPS} sleeps a run over 1 s, every run of the bench (tick 1 ms); x: 0..{max_ms:.1} ms, y: 0..100%</text>
<line x1="{pad}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/><line x1="{pad}" y1="{pad}" x2="{pad}" y2="{b}" stroke="black"/>
<path d="{ours}" fill="none" stroke="#d62728" stroke-width="2"/><path d="{theirs}" fill="none" stroke="#1f77b4" stroke-width="2"/>
<text x="{lx}" y="{ly1}" fill="#d62728">tokio-wheel</text><text x="{lx}" y="{ly2}" fill="#1f77b4">tokio::time</text>
</svg>
"##,
        b = h - pad,
        r = w - pad,
        ours = path(ours),
        theirs = path(theirs),
        lx = w - 160.0,
        ly1 = h - 80.0,
        ly2 = h - 62.0,
    )
}

fn bench(c: &mut Criterion<Reported>) {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut group = c.benchmark_group("expiry p99");
    group.sampling_mode(SamplingMode::Flat);
    for (peer, all) in [(Peer::WheelIo, &mut ours), (Peer::TokioIo, &mut theirs)] {
        group.bench_function(peer.name(), |b| {
            b.iter_custom(|runs| {
                (0..runs)
                    .map(|_| {
                        let lateness = expiry(peer);
                        let p99 = percentile(&lateness, 0.99).as_secs_f64() * 1000.0;
                        all.extend(lateness);
                        p99
                    })
                    .sum()
            })
        });
    }
    group.finish();
    if ours.is_empty() || theirs.is_empty() {
        return; // one of them was filtered out
    }
    ours.sort();
    theirs.sort();
    let runs = ours.len() / SLEEPS as usize;
    println!("expiry: {SLEEPS} sleeps spread over {SPREAD:?}, lateness in ms, all {runs} runs' sleeps together");
    println!("| peer         |     min |     p50 |     p99 |     max |");
    println!("|--------------|---------|---------|---------|---------|");
    println!("{}", row("tokio-wheel", &ours));
    println!("{}", row("tokio::time", &theirs));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("expiry-lateness.svg"), svg(&ours, &theirs)).unwrap();
    println!("wrote {}", dir.join("expiry-lateness.svg").display());
}

criterion_group! {
    name = benches;
    config = Reported::criterion("ms p99", Duration::from_secs(10));
    targets = bench
}
criterion_main!(benches);
