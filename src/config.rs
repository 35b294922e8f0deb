//! Settings after validation, and the limits they are checked against: what the
//! driver is built from. [`Builder`](crate::Builder) fills them in; [`Executor`], the
//! one public setting with a type of its own, lives here so that the driver can see it
//! without depending on the builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The largest wheel: 2^20 slots (4 MiB of list heads), and so the most ticks one
/// revolution may cover.
pub(crate) const MAX_WHEEL_SIZE: usize = 1 << 20;

/// The finest tick: finer ones are raised to it. Tokio's timer, which wakes the
/// driver, has 1 ms resolution anyway, and the wheel counts steps of a quarter tick in 44
/// bits (to keep entries at 32 bytes), which at 1 ms span 139 years.
pub(crate) const MIN_TICK: Duration = Duration::from_millis(1);

/// The tick of a timer whose tick is not set: 10 ms; with the feature `test-util`,
/// 1 ms, Tokio's own resolution, so that a paused test asserting whole milliseconds
/// after a sleep sees what it would see on Tokio's timer. Production builds keep the
/// coarser tick, which costs fewer driver wakeups.
pub(crate) const DEFAULT_TICK: Duration = if cfg!(feature = "test-util") {
    MIN_TICK
} else {
    Duration::from_millis(10)
};

/// The most shards a timer has; it has one per core (or per worker of its runtime,
/// if more) up to this ([`Config::shards_for`]).
pub(crate) const MAX_SHARDS: usize = 64;

/// Steps per configured tick (fewer only when the wheel would otherwise exceed 2^20
/// slots: [`Config::steps_per_tick`]).
///
/// The driver wakes at the end of the step that holds its next timer (at Tokio's
/// millisecond at or after it), not at the end of the tick. One pass wakes what it
/// fires onto the worker running Tokio's timer: on a multi-thread runtime with a full
/// run queue, the back half of that worker's local queue overflows to the global
/// queue, where a task waits behind every worker's backlog, and a tick's worth of
/// wakeups in one pass sends twice the share of them there that Tokio's own sleeps,
/// spread over the tick's milliseconds, meet (docs/BENCHMARKS.md, "overload"). A
/// step's worth meets Tokio's share. The cost is about one wakeup per step that holds
/// a timer instead of one per tick (a second where Tokio's millisecond before the
/// step's end comes and goes first: see `driver::parking::wake_at`), none while idle,
/// and four list heads per tick of `wheel_size` in each wheel.
pub(crate) const STEPS_PER_TICK: usize = 4;

/// Where expired callbacks of [`Timer::schedule`](crate::Timer::schedule) run.
///
/// Whatever the executor, a panicking callback is caught: the timer goes on, later
/// callbacks still run, and the panic is counted in
/// [`Stats::callback_panics`](crate::Stats::callback_panics) (the process's panic hook
/// has already reported it, on stderr by default).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tokio_wheel::Error> {
/// use std::sync::Arc;
/// use tokio_wheel::{Executor, Timer};
///
/// // Run callbacks on a pool of our own (here simply a new thread each).
/// let custom = Executor::Custom(Arc::new(|job: Box<dyn FnOnce() + Send>| {
///     std::thread::spawn(job);
/// }));
/// let timer = Timer::builder().executor(custom).build()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Executor {
    /// On the driver task itself, one after another: the cheapest, for callbacks that
    /// only flip a flag, send on a channel or spawn a task.
    ///
    /// A slow callback delays every timer behind it, as in Netty
    /// ([netty#11724](https://github.com/netty/netty/issues/11724)); use
    /// [`Spawn`](Executor::Spawn) or [`Blocking`](Executor::Blocking) for anything
    /// that may take time.
    #[default]
    Inline,
    /// Each expired callback becomes a Tokio task on the driver's runtime.
    Spawn,
    /// Each expired callback runs via `spawn_blocking` on the driver's runtime, for
    /// callbacks that block.
    Blocking,
    /// Each expired callback is handed to this function, which must run it (now or
    /// later, on any thread).
    ///
    /// Nothing is lost silently: if the function panics, or drops the job without
    /// running it, the job notices (it is dropped unrun) and runs on the driver task
    /// instead, as with [`Inline`](Executor::Inline), and is counted in
    /// [`Stats::executor_rejections`](crate::Stats::executor_rejections). If the timer
    /// is gone by then, it runs where it was dropped; if the timer's last reference goes
    /// before the driver's next turn, it runs in a task on the timer's runtime.
    // Spelled out rather than aliased: this exact type is the documented contract.
    #[allow(clippy::type_complexity)]
    Custom(Arc<dyn Fn(Box<dyn FnOnce() + Send>) + Send + Sync>),
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Executor::Inline => "Inline",
            Executor::Spawn => "Spawn",
            Executor::Blocking => "Blocking",
            Executor::Custom(_) => "Custom(..)",
        })
    }
}

/// Validated settings, handed to the driver.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) tick: Duration,
    pub(crate) wheel_size: usize,
    /// Independent wheels, each with its own lock: [`Config::shards_for`] the driver's
    /// runtime, decided once when the settings are validated for it.
    pub(crate) shards: usize,
    pub(crate) max_pending: usize,
    pub(crate) executor: Executor,
    /// The driver's runtime is one whose clock nobody can pause (the default timer's):
    /// "now" for a deadline is then the real clock, whatever the caller's runtime.
    pub(crate) real_clock: bool,
    /// Keep the line that made each pending timer (`Builder::track_call_sites`).
    pub(crate) track_call_sites: bool,
    /// Count time the machine spends suspended (`Builder::suspend_aware`).
    pub(crate) suspend_aware: bool,
}

impl Config {
    /// The shard count for a runtime with `workers` workers: a shard per thread that
    /// registers at once, that is per core, or per worker if the runtime has more
    /// workers than cores (where a worker preempted while holding a shared shard's lock
    /// would stall the others on it); at most [`MAX_SHARDS`].
    pub(crate) fn shards_for(workers: usize) -> usize {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .max(workers)
            .min(MAX_SHARDS)
    }

    /// Steps per configured tick: [`STEPS_PER_TICK`], or fewer where `wheel_size` of
    /// them would take more than [`MAX_WHEEL_SIZE`] slots. The wheels' slots and the
    /// clock's steps both follow this.
    pub(crate) fn steps_per_tick(&self) -> usize {
        STEPS_PER_TICK.min(MAX_WHEEL_SIZE / self.wheel_size)
    }
}
