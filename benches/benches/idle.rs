//! *idle*: CPU time over 2 s of a process whose 1 ms-tick timer has nothing pending,
//! against the same runtime with no timer at all.
//!
//! `cargo bench -p wheel-timer-benches --bench idle`

use wheel_timer_benches::workloads::idle;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (base, _) = idle(false);
    let (ours, wakeups) = idle(true);
    println!("idle: CPU over 2 s, 2-worker runtime");
    println!("| setup                          | CPU ms | driver wakeups |");
    println!("|--------------------------------|--------|----------------|");
    println!("| runtime alone                  | {base:>6.3} |              - |");
    println!("| runtime + idle 1 ms-tick timer | {ours:>6.3} | {wakeups:>14} |");
}
