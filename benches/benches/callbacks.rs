//! *callbacks*: schedule 1 000 000 callbacks spread over 1 s (tick 1 ms) and let them
//! all fire; CPU ns per callback (all threads, from scheduling to the last run),
//! against the usual Tokio idiom: a task per callback that sleeps, then runs it.
//!
//! `cargo bench -p wheel-timer-benches --bench callbacks`

use wheel_timer_benches::workloads::{callbacks, Peer};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let ours = callbacks(Peer::Wheel);
    let theirs = callbacks(Peer::Tokio);
    println!("callbacks: 1000000 spread over 1 s, CPU ns per callback (all threads)");
    println!("| peer                            | CPU ns/callback |");
    println!("|---------------------------------|-----------------|");
    println!("| wheel-timer schedule (inline)   | {ours:>15.0} |");
    println!("| tokio task + sleep per callback | {theirs:>15.0} |");
    println!("ratio: {:.1}x cheaper", theirs / ours);
}
