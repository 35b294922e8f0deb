//! [`Stats`]: counters of what a timer has done, for monitoring and tests.

/// A snapshot of what a [`Timer`](crate::Timer) has done, from [`Timer::stats`](crate::Timer::stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Timers registered, not yet fired and not cancelled (as [`Timer::pending`](crate::Timer::pending)).
    pub pending: usize,
    /// How many times the driver task has woken up. With nothing pending it does not
    /// wake at all; with timers pending, about once per tick that has one due.
    pub driver_wakeups: u64,
    /// Timers (futures and callbacks) fired since the timer was built.
    pub fired: u64,
    /// Callbacks that panicked; each was caught and the timer went on.
    pub callback_panics: u64,
    /// Expired callbacks an [`Executor::Custom`](crate::Executor::Custom) (or a
    /// runtime shutting down under `Spawn`/`Blocking`) dropped without running; each
    /// ran on the driver task instead.
    pub executor_rejections: u64,
    /// Callbacks that were pending when the driver's runtime shut down under the
    /// timer. Nothing can run them any more: [`Timer::shutdown`](crate::Timer::shutdown) returns them (to run
    /// or drop), and if every handle is dropped first they are dropped unrun.
    pub stranded_callbacks: u64,
}
