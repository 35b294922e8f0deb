//! *idle*: CPU time over 2 s of a process whose 1 ms-tick timer has nothing pending,
//! against the same runtime with no timer at all.
//!
//! `cargo bench -p wheel-timer-benches --bench idle`

use std::time::Duration;

use wheel_timer::Timer;
use wheel_timer_benches::{cpu_ns, multi_thread};

const WINDOW: Duration = Duration::from_secs(2);

fn measure(with_timer: bool) -> (f64, u64) {
    let rt = multi_thread();
    let timer = with_timer.then(|| {
        rt.block_on(async {
            let timer = Timer::builder()
                .tick(Duration::from_millis(1))
                .build()
                .unwrap();
            // Use it once, so the driver has ticked and gone idle.
            timer.sleep(Duration::from_millis(5)).await;
            timer
        })
    });
    std::thread::sleep(Duration::from_millis(100));
    let wakeups_before = timer.as_ref().map_or(0, |t| t.stats().driver_wakeups);
    let before = cpu_ns();
    std::thread::sleep(WINDOW);
    let cpu = (cpu_ns() - before) as f64 / 1e6;
    let wakeups = timer.as_ref().map_or(0, |t| t.stats().driver_wakeups) - wakeups_before;
    drop(timer);
    drop(rt);
    (cpu, wakeups)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (base, _) = measure(false);
    let (ours, wakeups) = measure(true);
    println!("idle: CPU over {WINDOW:?}, 2-worker runtime");
    println!("| setup                          | CPU ms | driver wakeups |");
    println!("|--------------------------------|--------|----------------|");
    println!("| runtime alone                  | {base:>6.3} |              - |");
    println!("| runtime + idle 1 ms-tick timer | {ours:>6.3} | {wakeups:>14} |");
}
