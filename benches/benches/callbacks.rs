//! *callbacks*: schedule 1 000 000 callbacks spread over 1 s (tick 1 ms) and let them
//! all fire; CPU ns per callback (all threads, from scheduling to the last run),
//! against the usual Tokio idiom: a task per callback that sleeps, then runs it. Ours
//! twice: with no handle (`schedule_detached_at`, the match for a spawned task whose
//! `JoinHandle` is dropped) and through a `Scheduled` handle that is then detached.
//!
//! `cargo bench -p wheel-timer-benches --bench callbacks`

use wheel_timer_benches::workloads::{callbacks, Callbacks};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let detached = callbacks(Callbacks::Detached);
    let handles = callbacks(Callbacks::Handles);
    let theirs = callbacks(Callbacks::TokioTasks);
    println!("callbacks: 1000000 spread over 1 s, CPU ns per callback (all threads)");
    println!("| peer                            | CPU ns/callback |");
    println!("|---------------------------------|-----------------|");
    println!("| wheel-timer schedule_detached   | {detached:>15.0} |");
    println!("| wheel-timer schedule + detach() | {handles:>15.0} |");
    println!("| tokio task + sleep per callback | {theirs:>15.0} |");
    println!(
        "ratio: {:.1}x cheaper detached, {:.1}x with handles",
        theirs / detached,
        theirs / handles
    );
}
