//! *memory*: bytes per pending, registered sleep at 1 000 000 pending: the future itself
//! plus what the timer allocates for it (counted by a wrapping global allocator), for
//! wheel-timer and tokio::time.
//!
//! `cargo bench -p wheel-timer-benches --bench memory`

use wheel_timer_benches::workloads::{memory, Counting, Peer};

#[global_allocator]
static ALLOC: Counting = Counting;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and `cargo test --benches` probe bench binaries
    }
    println!("memory: bytes per pending registered sleep at 1000000 pending");
    println!("| peer        | size_of future | timer heap per sleep | total per sleep |");
    println!("|-------------|----------------|----------------------|-----------------|");
    for peer in [Peer::Wheel, Peer::Tokio] {
        let m = memory(peer);
        println!(
            "| {:<11} | {:>14} | {:>20.1} | {:>15.1} |",
            peer.name(),
            m.size_of,
            m.heap,
            m.total
        );
    }
    println!(
        "(totals: ours held by value in a Vec, so size_of + heap; tokio's boxed to pin them, \
         so the Vec's pointer + the box + heap)"
    );
}
