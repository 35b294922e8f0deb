//! Helpers shared by the behaviour tests: the tick and timers they use, an executor
//! that keeps its jobs, polling a `Sleep` by hand, the lateness bounds, runtimes, what
//! runs while Tokio holds its context borrowed, and re-running a test in a child
//! process (for a path that aborts).
#![allow(dead_code, unreachable_pub)] // each test file uses some

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio_wheel::{Executor, Sleep, Timer};

/// The tick of the tests' timers.
pub const TICK: Duration = Duration::from_millis(10);

/// How late a timer may fire: less than a tick and Tokio's millisecond (Tokio wakes
/// the driver on its whole milliseconds, where a step's end rarely falls; the driver
/// wakes at the end of each step, a quarter tick, so this bound is loose by design).
pub const LATE: Duration = Duration::from_millis(11);

/// How late a busy two-core machine may make a wakeup, beyond [`LATE`]: the bound of
/// the few real-clock tests.
pub const SLACK: Duration = Duration::from_millis(150);

/// A timer with a [`TICK`] tick, driven on the current runtime.
pub fn timer() -> Timer {
    Timer::builder().tick(TICK).build().unwrap()
}

/// A timer as [`timer`], running callbacks on `executor`.
pub fn timer_with(executor: Executor) -> Timer {
    Timer::builder()
        .tick(TICK)
        .executor(executor)
        .build()
        .unwrap()
}

/// The jobs an executor from [`keeping_executor`] was handed, unrun.
pub type Jobs = Arc<Mutex<Vec<Box<dyn FnOnce() + Send>>>>;

/// A `Custom` executor that keeps each job it is handed, unrun, in the returned list:
/// the test runs each, or drops it (which hands it back to the timer).
pub fn keeping_executor() -> (Jobs, Executor) {
    let jobs: Jobs = Default::default();
    let keep = jobs.clone();
    let executor = Executor::Custom(Arc::new(move |job| keep.lock().unwrap().push(job)));
    (jobs, executor)
}

/// Polls `sleep` once with `waker`.
pub fn poll(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(waker))
}

/// Asserts `took` is within `[requested, requested + TICK)`: never early, less than a
/// tick late (on the paused clock, where Tokio's wakeups fall on whole milliseconds,
/// a timer of whole-millisecond ticks is less than a step and a millisecond late).
#[track_caller]
pub fn assert_on_time(requested: Duration, took: Duration) {
    assert_within(requested, took, TICK);
}

/// Asserts `took` is within `[requested, requested + late)`.
#[track_caller]
pub fn assert_within(requested: Duration, took: Duration, late: Duration) {
    assert!(
        took >= requested,
        "early: asked {requested:?}, took {took:?}"
    );
    assert!(
        took < requested + late,
        "late: asked {requested:?}, took {took:?}"
    );
}

/// Asserts that `at` is within `[deadline, deadline + late)`: never early, and late by
/// less than `late` (on Tokio's clock, paused or not).
#[track_caller]
pub fn assert_at(at: tokio::time::Instant, deadline: tokio::time::Instant, late: Duration) {
    assert!(at >= deadline, "early by {:?}", deadline - at);
    assert!(at < deadline + late, "late by {:?}", at - deadline);
}

/// A current-thread runtime with its I/O and time drivers: it runs nothing (its
/// timers' drivers included) until `block_on`.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A timer with a [`TICK`] tick whose driver runs on `runtime`.
pub fn timer_on(runtime: &tokio::runtime::Handle) -> Timer {
    Timer::builder().tick(TICK).build_on(runtime).unwrap()
}

/// A current-thread runtime whose clock starts paused (time driver only).
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A future, ready at once, that runs its closure when dropped: what `tokio::spawn`
/// on a runtime that has shut down does with it runs inside Tokio, while Tokio holds
/// its context borrowed.
pub struct RunsWhenDropped<F: FnOnce() + Unpin>(Option<F>);

impl<F: FnOnce() + Unpin> Future for RunsWhenDropped<F> {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
}

impl<F: FnOnce() + Unpin> Drop for RunsWhenDropped<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Runs `f` inside `tokio::spawn` on a runtime (with its time driver) that has shut
/// down, which drops the future at once, Tokio's context borrowed; catches a panic.
/// Its answer, or "panicked".
pub fn answer_while_tokio_holds_its_context(
    f: impl FnOnce() -> String + Send + Unpin + 'static,
) -> String {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let closed = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let handle = closed.handle().clone();
    drop(closed);
    let (seen, said) = std::sync::mpsc::channel();
    {
        let _closed = handle.enter();
        drop(tokio::spawn(RunsWhenDropped(Some(move || {
            let answer = catch_unwind(AssertUnwindSafe(f));
            let _ = seen.send(answer.unwrap_or_else(|_| "panicked".into()));
        }))));
    }
    said.recv().unwrap()
}

/// Re-runs the test `name` of this test binary in a child process with the
/// environment variable `CHILD` set (the test then does its part and returns), and
/// returns what the child did: a path that aborts the process fails the parent
/// instead of killing the whole test run.
pub fn run_in_child(name: &str) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run the test binary again")
}

/// Set in the child process of [`run_in_child`].
pub const CHILD: &str = "TOKIO_WHEEL_TEST_CHILD";

/// Whether this is the child process of [`run_in_child`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Asserts that the child exited normally and printed `marker`.
pub fn assert_child_ok(output: &std::process::Output, marker: &str) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(marker),
        "child: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
}

/// A multi-thread runtime of `workers` workers with its I/O and time drivers.
pub fn multi_thread_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// A one-worker multi-thread runtime with its time driver.
pub fn runtime_with_time() -> tokio::runtime::Runtime {
    multi_thread_runtime(1)
}

/// A timer (10 ms tick) whose driver runs on a one-worker runtime of its own.
pub fn timer_on_its_own_runtime() -> (tokio::runtime::Runtime, Timer) {
    let runtime = runtime_with_time();
    let timer = timer_on(runtime.handle());
    (runtime, timer)
}

/// A timer ([`TICK`]) whose driver runs on a current-thread runtime of its own, with
/// its clock paused.
pub fn timer_on_a_paused_runtime() -> (tokio::runtime::Runtime, Timer) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let timer = timer_on(runtime.handle());
    (runtime, timer)
}

/// How many of this process's threads have the name `name` (Linux; names are cut to
/// 15 bytes, as the kernel keeps them).
#[cfg(target_os = "linux")]
pub fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == name)
        .count()
}
