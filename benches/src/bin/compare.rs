//! Every workload of the benches, quickly, in one table with ratios against
//! tokio::time: `cargo run --release -p tokio-wheel-benches --bin compare` (about 20
//! seconds on two cores; `compare churn-mt` or `compare idle` prints that row alone,
//! and the idle row always runs in a process of its own). The criterion benches
//! (`cargo bench -p tokio-wheel-benches`) measure the same workloads with more care.

use std::time::Instant;

use tokio_wheel_benches::percentile;
use tokio_wheel_benches::workloads::{
    callbacks, callbacks_floor, churn, churn_floor, churn_mt, expiry, idle, memory, Callbacks,
    Counting, Peer,
};

#[global_allocator]
static ALLOC: Counting = Counting;

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let started = Instant::now();
    println!("| workload | tokio-wheel | tokio::time | others | tokio ÷ ours |");
    println!("|---|---|---|---|---|");
    match std::env::args().nth(1).as_deref() {
        Some("churn-mt") => return churn_mt_row(),
        Some("idle") => return idle_row(),
        _ => {}
    }

    const ITERS: u32 = 2_000_000;
    let ours = churn(Peer::Wheel, ITERS, 0);
    let tokio = churn(Peer::Tokio, ITERS, 0);
    let pingora = churn(Peer::Pingora, ITERS, 0);
    let queue = churn(Peer::DelayQueue, ITERS, 0);
    println!(
        "| churn (ns/op) | {ours:.0} | {tokio:.0} | pingora {pingora:.0}, DelayQueue {queue:.0} | {:.1}× |",
        tokio / ours
    );
    let floor = churn_floor(ITERS * 5);
    println!(
        "| churn floor: 1 clock read + 2 lock round trips | {:.0} ({:.0} + 2 × {:.0}) | | 15× tokio = {:.0} | {:.1}× |",
        floor.total_ns(),
        floor.clock_ns,
        floor.lock_ns,
        tokio / 15.0,
        tokio / floor.total_ns()
    );

    churn_mt_row();

    let small = churn(Peer::Wheel, ITERS, 1_000);
    let large = churn(Peer::Wheel, ITERS, 10_000_000);
    println!(
        "| scale: churn at 10M pending ÷ at 1k | {:.2}× ({small:.0} → {large:.0} ns) | | | |",
        large / small
    );

    let ours = expiry(Peer::Wheel);
    let tokio = expiry(Peer::Tokio);
    let row = |l: &[std::time::Duration]| {
        format!(
            "{:.2} / {:.2} / {:.2} / {:.2} ms",
            ms(l[0]),
            ms(percentile(l, 0.5)),
            ms(percentile(l, 0.99)),
            ms(*l.last().unwrap())
        )
    };
    println!(
        "| expiry lateness min / p50 / p99 / max | {} | {} | | p99 {:.1}× |",
        row(&ours),
        row(&tokio),
        percentile(&tokio, 0.99).as_secs_f64() / percentile(&ours, 0.99).as_secs_f64()
    );

    let ours = memory(Peer::Wheel);
    let tokio = memory(Peer::Tokio);
    println!(
        "| memory per pending sleep at 1M (B) | {:.0} ({} + {:.0}) | {:.0} | | {:.1}× |",
        ours.total,
        ours.size_of,
        ours.heap,
        tokio.total,
        tokio.total / ours.total
    );

    let detached = callbacks(Callbacks::Detached);
    let handles = callbacks(Callbacks::Handles);
    let tokio = callbacks(Callbacks::TokioTasks);
    println!(
        "| callbacks, CPU ns each: schedule_detached (schedule + handle) | {detached:.0} ({handles:.0}) | {tokio:.0} (task + sleep each) | | {:.1}× ({:.1}×) |",
        tokio / detached,
        tokio / handles
    );

    let floor = callbacks_floor();
    println!(
        "| callbacks floor: harness + 64 B of new memory + 1 ms wakeups + lock & count + deadline | {:.0} ({:.0} + {:.0} + {:.0} + {:.0} + {:.0}) | | 14× tokio = {:.0} | {:.1}× |",
        floor.total_ns(),
        floor.harness_ns,
        floor.memory_ns,
        floor.wakeups_ns,
        floor.sync_ns,
        floor.deadline_ns,
        tokio / 14.0,
        tokio / floor.total_ns()
    );

    // In a process of its own: the workloads above leave threads behind that use CPU
    // while idle (pingora-timeout's clock thread ticks every millisecond for good).
    let exe = std::env::current_exe().expect("the path of this binary");
    let out = std::process::Command::new(exe)
        .arg("idle")
        .output()
        .expect("compare idle runs");
    assert!(out.status.success(), "compare idle failed: {out:?}");
    let out = String::from_utf8_lossy(&out.stdout);
    print!(
        "{}",
        out.lines()
            .last()
            .map(|row| format!("{row}\n"))
            .unwrap_or_default()
    );
    println!(
        "\n(all in one run, {:.0} s)",
        started.elapsed().as_secs_f64()
    );
}

/// The idle row: CPU over 2 s of a runtime with an idle timer, and of one without.
/// Meant for a process that has run nothing else (`compare idle`).
fn idle_row() {
    let (alone, _) = idle(false);
    let (ours, wakeups) = idle(true);
    println!(
        "| idle: CPU ms over 2 s, nothing pending (a process of its own) | {ours:.2} ({wakeups} driver wakeups) | runtime alone {alone:.2} | | |"
    );
}

/// The churn-mt row. Alone (`compare churn-mt`) it runs in a process that has run
/// nothing else, where its figures are lower than after the one-thread workloads.
fn churn_mt_row() {
    // Two workers on a 2-core VM: one run of each is noisy (the baseline alone moves
    // by half), so the peers take turns for several rounds, each against the baseline
    // of its own round, and the medians are reported with their spread.
    const ROUNDS: usize = 7;
    let (mut base, mut ours, mut tokio, mut pingora) = (vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let b = churn_mt(None, 300);
        base.push(b);
        ours.push(churn_mt(Some(Peer::Wheel), 300) - b);
        tokio.push(churn_mt(Some(Peer::Tokio), 300) - b);
        pingora.push(churn_mt(Some(Peer::Pingora), 300) - b);
    }
    let mut ratios: Vec<f64> = tokio.iter().zip(&ours).map(|(t, o)| t / o).collect();
    println!(
        "| churn-mt overhead over yield_now ({:.0} ns), median (min–max) of {ROUNDS} rounds | {} | {} | pingora {} | {} |",
        median(&mut base),
        spread(&mut ours, ""),
        spread(&mut tokio, ""),
        spread(&mut pingora, ""),
        spread(&mut ratios, "×"),
    );
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// "median (min–max)", one decimal place for ratios.
fn spread(xs: &mut [f64], unit: &str) -> String {
    let m = median(xs);
    let (lo, hi) = (xs[0], xs[xs.len() - 1]);
    if unit.is_empty() {
        format!("{m:.0} ({lo:.0}–{hi:.0})")
    } else {
        format!("{m:.1}{unit} ({lo:.1}–{hi:.1})")
    }
}
