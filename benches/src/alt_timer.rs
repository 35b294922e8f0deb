//! The alt-timer copy of `compare`: built with `--cfg tokio_unstable` in a target
//! directory of its own, run for its churn-mt rounds, its rows parsed back.
//!
//! Tokio's alternative timer exists only in builds with `RUSTFLAGS="--cfg
//! tokio_unstable"`, and that flag changes every crate of the build, so it cannot share
//! a target directory (or a process) with the ordinary build. `compare` builds the copy
//! once (`cargo build` is a no-op after that), runs it, and reads lines of the form
//! [`Round::line`] from its output. Within the copy, every round measures this crate on
//! the same build next to Tokio's alt timer, so their ratio is taken within one process.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The argument that makes `compare` print alt-timer rounds instead of its table.
pub const ROUNDS_ARG: &str = "alt-timer-rounds";

/// One churn-mt round of the alt-timer copy, ns per op.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// Worker threads.
    pub workers: usize,
    /// This crate's overhead over `yield_now` alone, on the I/O runtime.
    pub wheel_ns: f64,
    /// `tokio::time`'s overhead with the alt timer, over `yield_now` alone on the same
    /// alt-timer runtime.
    pub alt_ns: f64,
    /// `yield_now` alone on the alt-timer runtime.
    pub base_ns: f64,
}

impl Round {
    const TAG: &'static str = "alt-round";

    /// The line the copy prints for this round.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {} {}",
            Self::TAG,
            self.workers,
            self.wheel_ns,
            self.alt_ns,
            self.base_ns
        )
    }

    /// The rounds in `output`; other lines are ignored.
    pub fn parse_all(output: &str) -> Vec<Round> {
        output
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                if fields.next()? != Self::TAG {
                    return None;
                }
                let workers = fields.next()?.parse().ok()?;
                let mut ns = || fields.next()?.parse::<f64>().ok();
                Some(Round {
                    workers,
                    wheel_ns: ns()?,
                    alt_ns: ns()?,
                    base_ns: ns()?,
                })
            })
            .collect()
    }
}

/// The workspace this package was built in (its parent directory).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the benches package lives in the workspace")
        .to_path_buf()
}

/// Builds the alt-timer copy of `compare` in `target/alt-timer` of the workspace if it
/// is not up to date (cargo's output shows on stderr), and returns its path.
pub fn build() -> Result<PathBuf, String> {
    let workspace = workspace();
    let target = workspace.join("target").join("alt-timer");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "compare: building the alt-timer copy (RUSTFLAGS=\"--cfg tokio_unstable\") in {}",
        target.display()
    );
    let status = Command::new(cargo)
        .current_dir(&workspace)
        .args(["build", "--release", "--quiet", "-p", "tokio-wheel-benches"])
        .args(["--bin", "compare", "--target-dir"])
        .arg(&target)
        // `cargo run` passes its own flags down through this variable, which would
        // override RUSTFLAGS.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("RUSTFLAGS", "--cfg tokio_unstable")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo build of the alt-timer copy failed: {status}"
        ));
    }
    Ok(target.join("release").join("compare"))
}

/// Runs the copy at `exe` for `rounds` churn-mt rounds at each of `workers`.
pub fn run(exe: &Path, rounds: usize, workers: &[usize]) -> Result<Vec<Round>, String> {
    let out = Command::new(exe)
        .arg(ROUNDS_ARG)
        .arg(rounds.to_string())
        .args(workers.iter().map(usize::to_string))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "the alt-timer copy failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(Round::parse_all(&String::from_utf8_lossy(&out.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_survive_their_line_and_other_lines_are_skipped() {
        let a = Round {
            workers: 2,
            wheel_ns: 44.5,
            alt_ns: 88.25,
            base_ns: 70.0,
        };
        let b = Round { workers: 8, ..a };
        let out = format!("noise\n{}\nalt-round 2 x 1 1\n{}\n", a.line(), b.line());
        assert_eq!(Round::parse_all(&out), vec![a, b]);
    }
}
