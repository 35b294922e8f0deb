//! Callbacks, the Netty-style side of the timer: [`Scheduled`] handles and the
//! [`Unfired`] callbacks [`Timer::shutdown`](crate::Timer::shutdown) returns.
//!
//! # Implementation
//!
//! A callback lives in one allocation, a `Task` holding its closure and its state,
//! shared between the wheel entry and the [`Scheduled`] handle. The state moves out of
//! `SCHEDULED` exactly once, and only by whoever takes the entry out of the wheel under
//! the wheel's lock: the driver (`EXPIRED`, then the closure runs), [`Scheduled::cancel`]
//! (`CANCELLED`), or shutdown (`UNFIRED`). That lock is why "cancel returned `true`" and
//! "the callback ran" can never both happen, nor neither.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};

use tokio::time::Instant;

use crate::driver::{Anchor, Registration, Shared};
use crate::sync::{AtomicU8, Mutex};

const SCHEDULED: u8 = 0;
const EXPIRED: u8 = 1;
const CANCELLED: u8 = 2;
const UNFIRED: u8 = 3;

/// A callback and its state, behind one `Arc` (no separate box for the closure).
pub(crate) trait Callback: Send + Sync {
    fn state(&self) -> &AtomicU8;
    fn deadline(&self) -> Instant;
    /// Runs the closure unless it has run already.
    fn call(&self);
}

struct Task<F> {
    state: AtomicU8,
    deadline: Instant,
    f: Mutex<Option<F>>,
}

impl<F: FnOnce() + Send> Callback for Task<F> {
    fn state(&self) -> &AtomicU8 {
        &self.state
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn call(&self) {
        let f = self.f.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(f) = f {
            f();
        }
    }
}

impl fmt::Debug for dyn Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback")
            .field("deadline", &self.deadline())
            .finish_non_exhaustive()
    }
}

/// A shared reference to a callback.
pub(crate) type TaskRef = Arc<dyn Callback>;

pub(crate) fn task<F: FnOnce() + Send + 'static>(deadline: Instant, f: F) -> TaskRef {
    Arc::new(Task {
        state: AtomicU8::new(SCHEDULED),
        deadline,
        f: Mutex::new(Some(f)),
    })
}

/// State changes, made only under the wheel's lock by whoever took the entry out.
pub(crate) fn mark_expired(task: &TaskRef) {
    task.state().store(EXPIRED, Ordering::Release);
}

pub(crate) fn mark_cancelled(task: &TaskRef) {
    task.state().store(CANCELLED, Ordering::Release);
}

pub(crate) fn mark_unfired(task: &TaskRef) {
    task.state().store(UNFIRED, Ordering::Release);
}

/// Runs a callback, catching a panic. Returns `false` if it panicked.
pub(crate) fn run_caught(task: &TaskRef) -> bool {
    catch_unwind(AssertUnwindSafe(|| task.call())).is_ok()
}

/// An expired callback on its way to an executor other than the tick task. If it is
/// dropped without having run (the executor panicked, shut down, or dropped it), it
/// goes back to the timer to run on the tick task; nothing is lost silently.
pub(crate) struct Job {
    task: Option<TaskRef>,
    timer: Weak<Shared>,
}

impl Job {
    pub(crate) fn new(task: TaskRef, timer: &Arc<Shared>) -> Job {
        Job {
            task: Some(task),
            timer: Arc::downgrade(timer),
        }
    }

    /// Runs the callback here, catching and counting a panic.
    pub(crate) fn run(mut self) {
        if let Some(task) = self.task.take() {
            if !run_caught(&task) {
                if let Some(timer) = self.timer.upgrade() {
                    timer.count_panic();
                }
            }
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            match self.timer.upgrade() {
                Some(timer) => timer.reject(task),
                // The timer is gone: this is the last place the callback can run.
                None => {
                    run_caught(&task);
                }
            }
        }
    }
}

/// The handle of a callback registered with [`Timer::schedule`](crate::Timer::schedule).
///
/// # Cancellation
///
/// Dropping a `Scheduled` cancels its callback, unless [`detach`](Scheduled::detach)
/// was called. [`cancel`](Scheduled::cancel) says whether it stopped the callback: when
/// a cancel races the callback's expiry on another thread, exactly one of "`cancel`
/// returned `true`" and "the callback ran" happens.
///
/// A cancelled callback is removed from the wheel, and dropped, at once.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), wheel_timer::Error> {
/// use std::time::Duration;
/// use wheel_timer::Timer;
///
/// let timer = Timer::new();
/// let retry = timer.schedule(Duration::from_secs(5), || println!("retrying"))?;
/// // The request succeeded after all.
/// assert!(retry.cancel());
/// assert!(retry.is_cancelled());
/// assert!(!retry.cancel(), "only the first cancel stops it");
/// # Ok(())
/// # }
/// ```
#[must_use = "dropping a Scheduled cancels its callback; call .detach() to let it run"]
pub struct Scheduled {
    /// `None` only transiently, in `detach`.
    inner: Option<Handle>,
}

struct Handle {
    anchor: Arc<Anchor>,
    reg: Registration,
    task: TaskRef,
}

impl Scheduled {
    pub(crate) fn new(anchor: Arc<Anchor>, reg: Registration, task: TaskRef) -> Scheduled {
        Scheduled {
            inner: Some(Handle { anchor, reg, task }),
        }
    }

    fn handle(&self) -> &Handle {
        self.inner
            .as_ref()
            .expect("a Scheduled has its handle until dropped")
    }

    /// Stops the callback from running. Returns `true` iff this call stopped it: `false`
    /// if it has already run (or is running), was cancelled before, or was returned by
    /// [`Timer::shutdown`](crate::Timer::shutdown).
    pub fn cancel(&self) -> bool {
        let handle = self.handle();
        handle
            .anchor
            .shared
            .cancel_callback(handle.reg, &handle.task)
    }

    /// Lets the callback run even though this handle is dropped. The timer's driver
    /// stays alive until it has run, even if every [`Timer`](crate::Timer) clone is gone.
    pub fn detach(mut self) {
        if let Some(handle) = self.inner.take() {
            handle.anchor.shared.detach();
        }
    }

    /// Whether the callback was cancelled (by [`cancel`](Scheduled::cancel)).
    pub fn is_cancelled(&self) -> bool {
        self.handle().task.state().load(Ordering::Acquire) == CANCELLED
    }

    /// Whether the deadline passed and the timer handed the callback to its executor:
    /// it has run, or is about to.
    pub fn is_expired(&self) -> bool {
        self.handle().task.state().load(Ordering::Acquire) == EXPIRED
    }

    /// When the callback is due (it runs at most one tick later).
    pub fn deadline(&self) -> Instant {
        self.handle().task.deadline()
    }
}

impl Drop for Scheduled {
    fn drop(&mut self) {
        if let Some(handle) = &self.inner {
            handle
                .anchor
                .shared
                .cancel_callback(handle.reg, &handle.task);
        }
    }
}

impl fmt::Debug for Scheduled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Scheduled");
        if let Some(handle) = &self.inner {
            s.field("deadline", &handle.task.deadline()).field(
                "state",
                &match handle.task.state().load(Ordering::Acquire) {
                    SCHEDULED => "scheduled",
                    EXPIRED => "expired",
                    CANCELLED => "cancelled",
                    _ => "unfired",
                },
            );
        }
        s.finish()
    }
}

/// A callback that never ran, returned by [`Timer::shutdown`](crate::Timer::shutdown).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), wheel_timer::Error> {
/// use std::time::Duration;
/// use wheel_timer::Timer;
///
/// let timer = Timer::new();
/// timer.schedule(Duration::from_secs(60), || println!("flush"))?.detach();
/// for unfired in timer.shutdown().await {
///     // Run what must not be skipped, now.
///     unfired.run();
/// }
/// # Ok(())
/// # }
/// ```
pub struct Unfired {
    task: TaskRef,
}

impl Unfired {
    pub(crate) fn new(task: TaskRef) -> Unfired {
        Unfired { task }
    }

    /// Runs the callback here and now. A panic in it propagates to the caller.
    pub fn run(self) {
        self.task.call();
    }

    /// When the callback was due.
    pub fn deadline(&self) -> Instant {
        self.task.deadline()
    }
}

impl fmt::Debug for Unfired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unfired")
            .field("deadline", &self.deadline())
            .finish()
    }
}
