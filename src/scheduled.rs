//! Callbacks, the Netty-style side of the timer: [`Scheduled`] handles and the
//! [`Unfired`] callbacks [`Timer::shutdown`](crate::Timer::shutdown) returns.
//!
//! # Implementation
//!
//! A callback is a `Task` holding its closure (in place, with no allocation, when it
//! fits in three words: see `inline_fn`) and its deadline, owned by its wheel
//! entry and moved out of it exactly once, under the wheel's lock: by the driver (the
//! closure then runs), by [`Scheduled::cancel`] (it is dropped), or by shutdown (it
//! becomes an [`Unfired`]). That lock is why "cancel returned `true`" and "the
//! callback ran" can never both happen, nor neither.
//!
//! The [`Scheduled`] handle shares nothing with the entry: it names it by its
//! registration and the tick it is due at (which, unlike the key's generation, no
//! later entry can share with it: see [`wheel`](crate::wheel)), and learns the
//! callback's state from the wheel, under the same lock.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::time::Instant;

use crate::driver::{Anchor, CallbackState, Registration, Shared};
use crate::inline_fn::InlineFn;
use crate::sync::AtomicBool;

/// A callback in the wheel: its closure and deadline, with the closure in place
/// when it fits in three words (see [`InlineFn`]).
pub(crate) struct Task {
    /// The deadline, as an offset from the timer's origin (`Clock::offset_of`).
    deadline: i64,
    f: InlineFn,
}

impl Task {
    /// The deadline, as an offset from the timer's origin (`Clock::offset_of`).
    pub(crate) fn deadline(&self) -> i64 {
        self.deadline
    }

    /// Runs the closure.
    pub(crate) fn call(self) {
        self.f.call();
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// A callback due at the deadline `offset` (see `Clock::offset_of`).
pub(crate) fn task<F: FnOnce() + Send + 'static>(offset: i64, f: F) -> Task {
    Task {
        deadline: offset,
        f: InlineFn::new(f),
    }
}

/// Runs a callback, catching a panic. Returns `false` if it panicked.
pub(crate) fn run_caught(task: Task) -> bool {
    catch_unwind(AssertUnwindSafe(move || task.call())).is_ok()
}

/// An expired callback on its way to an executor other than the tick task. If it is
/// dropped without having run (the executor panicked, shut down, or dropped it), it
/// goes back to the timer to run on the tick task; nothing is lost silently.
pub(crate) struct Job {
    task: Option<Task>,
    timer: Weak<Shared>,
}

impl Job {
    pub(crate) fn new(task: Task, timer: &Arc<Shared>) -> Job {
        Job {
            task: Some(task),
            timer: Arc::downgrade(timer),
        }
    }

    /// Runs the callback here, catching and counting a panic.
    pub(crate) fn run(mut self) {
        if let Some(task) = self.task.take() {
            if !run_caught(task) {
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
                    run_caught(task);
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
    /// The tick the entry is due at: with `reg`, what names it.
    tick: u64,
    /// As in the task (see `Clock::offset_of`): 8 bytes rather than an `Instant`'s 16.
    deadline: i64,
    /// Set, under the shard's lock, by the `cancel` that took the entry out.
    cancelled: AtomicBool,
}

impl Scheduled {
    pub(crate) fn new(
        anchor: Arc<Anchor>,
        reg: Registration,
        tick: u64,
        deadline: i64,
    ) -> Scheduled {
        Scheduled {
            inner: Some(Handle {
                anchor,
                reg,
                tick,
                deadline,
                cancelled: AtomicBool::new(false),
            }),
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
        self.handle().cancel()
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
        self.handle().cancelled.load(Ordering::Acquire)
    }

    /// Whether the deadline passed and the timer handed the callback to its executor:
    /// it has run, or is about to.
    ///
    /// Takes the lock of the callback's shard, briefly.
    pub fn is_expired(&self) -> bool {
        self.handle().state() == CallbackState::Expired
    }

    /// When the callback is due (it runs at most one tick later).
    pub fn deadline(&self) -> Instant {
        self.handle().deadline()
    }
}

impl Handle {
    fn deadline(&self) -> Instant {
        self.anchor.shared.clock.instant_at(self.deadline)
    }

    fn cancel(&self) -> bool {
        self.anchor
            .shared
            .cancel_callback(self.reg, self.tick, &self.cancelled)
    }

    fn state(&self) -> CallbackState {
        self.anchor
            .shared
            .callback_state(self.reg, self.tick, &self.cancelled)
    }
}

impl Drop for Scheduled {
    fn drop(&mut self) {
        if let Some(handle) = &self.inner {
            handle.cancel();
        }
    }
}

impl fmt::Debug for Scheduled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Scheduled");
        if let Some(handle) = &self.inner {
            s.field("deadline", &handle.deadline())
                .field("state", &handle.state());
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
    deadline: Instant,
    /// In a lock only so that `Unfired` stays `Sync`, as a closure need not be; it is
    /// never contended (`run` takes `self`).
    task: Mutex<Task>,
}

impl Unfired {
    pub(crate) fn new(task: Task, deadline: Instant) -> Unfired {
        Unfired {
            deadline,
            task: Mutex::new(task),
        }
    }

    /// Runs the callback here and now. A panic in it propagates to the caller.
    pub fn run(self) {
        self.task
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .call();
    }

    /// When the callback was due.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl fmt::Debug for Unfired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unfired")
            .field("deadline", &self.deadline)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callback_is_small_in_its_entry_and_in_its_handle() {
        // Closure (up to three words in place), deadline and the closure's vtable.
        assert_eq!(std::mem::size_of::<Task>(), 40);
        // With the wheel's links and tick: what a pending callback costs, with no
        // heap allocation for a closure of up to three words.
        assert_eq!(std::mem::size_of::<crate::wheel::Entry<Task>>(), 56);
        assert_eq!(std::mem::size_of::<Scheduled>(), 40);
    }
}
