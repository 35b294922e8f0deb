//! Shared helpers for the benchmarks: the workloads, CPU time of this process, runtimes.

use std::time::Duration;

pub mod workloads;

/// CPU time used by every thread of this process so far (from /proc, in ns).
///
/// Sums the first field of `/proc/self/task/*/schedstat` (time on CPU, ns), plus the
/// process's own `/proc/self/schedstat` is not used because it covers only the main
/// thread. Threads that have exited are not counted, so benchmarks keep their threads.
pub fn cpu_ns() -> u64 {
    let mut total = 0;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) {
                total += stat
                    .split_whitespace()
                    .next()
                    .and_then(|ns| ns.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

/// A multi-thread runtime with two workers (the machine has two cores).
pub fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A current-thread runtime.
pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Percentile of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}
