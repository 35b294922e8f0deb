//! *callbacks*: schedule 1 000 000 callbacks spread over 1 s (tick 1 ms) and let them
//! all fire; CPU ns per callback (all threads, from scheduling to the last run),
//! against the usual Tokio idiom: a task per callback that sleeps, then runs it.
//!
//! `cargo bench -p wheel-timer-benches --bench callbacks`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use wheel_timer::Timer;
use wheel_timer_benches::{cpu_ns, multi_thread};

const N: usize = 1_000_000;
const SPREAD: Duration = Duration::from_secs(1);

fn ours() -> f64 {
    let rt = multi_thread();
    rt.block_on(async {
        let timer = Timer::builder()
            .tick(Duration::from_millis(1))
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let before = cpu_ns();
        let start = Instant::now();
        for i in 0..N {
            let ran = ran.clone();
            timer
                .schedule_at(start + SPREAD * i as u32 / N as u32, move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap()
                .detach();
        }
        while ran.load(Ordering::Relaxed) < N {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (cpu_ns() - before) as f64 / N as f64
    })
}

fn task_per_callback() -> f64 {
    let rt = multi_thread();
    rt.block_on(async {
        let ran = Arc::new(AtomicUsize::new(0));
        let before = cpu_ns();
        let start = Instant::now();
        for i in 0..N {
            let ran = ran.clone();
            let at = start + SPREAD * i as u32 / N as u32;
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                ran.fetch_add(1, Ordering::Relaxed);
            });
        }
        while ran.load(Ordering::Relaxed) < N {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (cpu_ns() - before) as f64 / N as f64
    })
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let ours = ours();
    let theirs = task_per_callback();
    println!("callbacks: {N} spread over {SPREAD:?}, CPU ns per callback (all threads)");
    println!("| peer                            | CPU ns/callback |");
    println!("|---------------------------------|-----------------|");
    println!("| wheel-timer schedule (inline)   | {ours:>15.0} |");
    println!("| tokio task + sleep per callback | {theirs:>15.0} |");
    println!("ratio: {:.1}x cheaper", theirs / ours);
}
