//! Shared helpers for the benchmarks: the workloads, the runtime configurations, CPU
//! time of this process.

use std::time::Duration;

pub mod alt_timer;
pub mod runtimes;
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

/// Percentile of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Median of some figures (the upper one of an even count); sorts them.
///
/// # Panics
///
/// If `xs` is empty.
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Figures of several interleaved rounds: their median and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The least.
    pub min: f64,
    /// The greatest.
    pub max: f64,
}

impl Spread {
    /// Of `xs`, which must not be empty.
    pub fn of(xs: &[f64]) -> Spread {
        let mut xs = xs.to_vec();
        let median = median(&mut xs);
        Spread {
            median,
            min: xs[0],
            max: xs[xs.len() - 1],
        }
    }

    /// Whether the two ranges are apart: every figure of one below every one of the other.
    pub fn apart_from(&self, other: &Spread) -> bool {
        self.max < other.min || other.max < self.min
    }
}

/// A 95% confidence interval for the median of the population `xs` were drawn from,
/// distribution-free: two order statistics of `xs` (the usual normal approximation to
/// the binomial; for few figures it widens to their whole range).
///
/// # Panics
///
/// If `xs` is empty.
pub fn median_interval(xs: &[f64]) -> (f64, f64) {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    let half_width = 1.96 * n.sqrt();
    // 1-based ranks j and k, clamped to the figures there are.
    let j = (((n - half_width) / 2.0).floor() as usize).max(1);
    let k = ((1.0 + (n + half_width) / 2.0).ceil() as usize).min(xs.len());
    (xs[j - 1], xs[k - 1])
}

impl std::fmt::Display for Spread {
    /// "median (min–max)", to `precision` decimal places (none by default).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = f.precision().unwrap_or(0);
        write!(f, "{:.p$} ({:.p$}–{:.p$})", self.median, self.min, self.max)
    }
}

/// Every figure the runs of `Reported` benchmarks produced, by benchmark, for the
/// summary printed after criterion's report (criterion does not compare one benchmark
/// with another, and the targets are ratios).
#[derive(Debug, Default)]
pub struct Means {
    runs: std::collections::HashMap<&'static str, Vec<f64>>,
}

impl Means {
    /// Records the figures of some runs of `name`; returns their sum, which is what
    /// `iter_custom` returns for that many iterations.
    pub fn add(&mut self, name: &'static str, figures: impl IntoIterator<Item = f64>) -> f64 {
        let runs = self.runs.entry(name).or_default();
        let before = runs.len();
        runs.extend(figures);
        runs[before..].iter().sum()
    }

    /// The mean figure of `name`'s runs; `None` if it did not run (filtered out).
    pub fn get(&self, name: &str) -> Option<f64> {
        let runs = self.runs.get(name).filter(|runs| !runs.is_empty())?;
        Some(runs.iter().sum::<f64>() / runs.len() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_sum_each_batch_and_average_all_runs() {
        let mut means = Means::default();
        assert_eq!(means.add("a", [1.0, 2.0]), 3.0);
        assert_eq!(means.add("a", [6.0]), 6.0);
        assert_eq!(means.get("a"), Some(3.0));
        assert_eq!(means.get("b"), None);
    }

    #[test]
    fn spreads_give_the_median_and_range_and_tell_apart_ranges() {
        let a = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((a.median, a.min, a.max), (2.0, 1.0, 3.0));
        assert_eq!(format!("{a}"), "2 (1–3)");
        assert_eq!(format!("{a:.1}"), "2.0 (1.0–3.0)");
        assert!(a.apart_from(&Spread::of(&[3.5, 4.0])));
        assert!(Spread::of(&[3.5, 4.0]).apart_from(&a));
        assert!(!a.apart_from(&Spread::of(&[3.0, 4.0])));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 3.0);
    }

    #[test]
    fn median_intervals_narrow_with_more_figures_and_hold_the_median() {
        let few: Vec<f64> = (1..=5).map(f64::from).collect();
        assert_eq!(median_interval(&few), (1.0, 5.0));
        let many: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        // Ranks 40 and 61 of 100: n/2 ± 1.96·√n/2, rounded outwards.
        assert_eq!(median_interval(&many), (40.0, 61.0));
    }

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let ms = |n| Duration::from_millis(n);
        let sorted: Vec<_> = (0..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 0.0), ms(0));
        assert_eq!(percentile(&sorted, 0.99), ms(99));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }
}
