//! Handing expired callbacks to their [`Executor`], and the callbacks an executor hands
//! back unrun: the one home of both.
//!
//! The driver hands each expired callback to [`Executing::dispatch`]. On any executor
//! but the driver task itself it travels as a [`Job`], which, dropped unrun (the
//! executor panicked, shut down, or dropped it), goes back to its timer
//! ([`HandsBack::hand_back`]) and into [`Executing::hand_back`]'s list. A callback
//! handed back leaves that list by exactly one of three ways, all here: the driver's
//! next turn runs it inline ([`Executing::run_handed_back`]); shutdown or the
//! driver's loss takes it ([`Executing::take_handed_back`]); or, the timer's last
//! reference gone first, it runs on the driver's runtime
//! ([`Executing::release_handed_back`]). Nothing is lost silently.
//!
//! Below [`Shared`](super::Shared) in the driver's order, this file knows the timer
//! only through [`HandsBack`], what a job needs of it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};

use tokio::runtime::Handle;

use crate::callback::{run_caught, Callback};
use crate::config::Executor;
use crate::sync::{lock, Mutex};

/// What a [`Job`] needs of the timer it came from.
pub(super) trait HandsBack: Send + Sync + 'static {
    /// Takes back an expired callback its executor dropped without running it.
    fn hand_back(&self, callback: Callback);
    /// Counts a callback that panicked.
    fn count_panic(&self);
}

/// Runs an expired callback here, catching a panic and counting it in `timer`.
#[inline]
pub(super) fn run_inline(callback: Callback, timer: &impl HandsBack) {
    if !run_caught(callback) {
        timer.count_panic();
    }
}

/// An expired callback on its way to an executor other than the driver task. If it is
/// dropped without having run (the executor panicked, shut down, or dropped it), it
/// goes back to the timer to run on the driver task; nothing is lost silently.
pub(super) struct Job<T: HandsBack> {
    callback: Option<Callback>,
    timer: Weak<T>,
}

impl<T: HandsBack> Job<T> {
    fn new(callback: Callback, timer: &Arc<T>) -> Job<T> {
        Job {
            callback: Some(callback),
            timer: Arc::downgrade(timer),
        }
    }

    /// Runs the callback here, catching and counting a panic.
    fn run(mut self) {
        if let Some(callback) = self.callback.take() {
            if !run_caught(callback) {
                if let Some(timer) = self.timer.upgrade() {
                    timer.count_panic();
                }
            }
        }
    }
}

impl<T: HandsBack> Drop for Job<T> {
    fn drop(&mut self) {
        if let Some(callback) = self.callback.take() {
            match self.timer.upgrade() {
                Some(timer) => timer.hand_back(callback),
                // The timer is gone: this is the last place the callback can run.
                None => {
                    run_caught(callback);
                }
            }
        }
    }
}

/// The timer's executor and the callbacks it handed back, not yet run.
pub(super) struct Executing {
    executor: Executor,
    /// Expired callbacks an executor dropped unrun; the driver runs them inline.
    handed_back: Mutex<Vec<Callback>>,
}

impl Executing {
    pub(super) fn new(executor: Executor) -> Executing {
        Executing {
            executor,
            handed_back: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn executor(&self) -> &Executor {
        &self.executor
    }

    /// Whether callbacks run on the driver task itself (`Executor::Inline`).
    pub(super) fn runs_inline(&self) -> bool {
        matches!(self.executor, Executor::Inline)
    }

    /// Hands an expired callback of `timer` to the configured executor; `runtime` is
    /// the driver's, if it is still there (without it, `Spawn` and `Blocking` run the
    /// callback here).
    #[inline]
    pub(super) fn dispatch<T: HandsBack>(
        &self,
        callback: Callback,
        timer: &Arc<T>,
        runtime: Option<&Handle>,
    ) {
        match (&self.executor, runtime) {
            (Executor::Inline, _) | (Executor::Spawn | Executor::Blocking, None) => {
                run_inline(callback, &**timer)
            }
            (Executor::Spawn, Some(runtime)) => {
                let job = Job::new(callback, timer);
                drop(runtime.spawn(async move {
                    // Spawned from the driver's worker, this task lands in that worker's
                    // LIFO slot, which wakes no idle worker; if the callback then blocks,
                    // nobody drives tokio's timer and every timer stalls behind it.
                    // Yielding once moves it to the stealable run queue and wakes an
                    // idle worker first.
                    tokio::task::yield_now().await;
                    job.run()
                }));
            }
            (Executor::Blocking, Some(runtime)) => {
                let job = Job::new(callback, timer);
                drop(runtime.spawn_blocking(move || job.run()));
            }
            (Executor::Custom(execute), _) => {
                let job = Job::new(callback, timer);
                // A panicking executor drops the job while unwinding; the job then comes
                // back through `hand_back`.
                let _ = catch_unwind(AssertUnwindSafe(|| execute(Box::new(move || job.run()))));
            }
        }
    }

    /// Keeps a callback an executor handed back for the driver's next turn, unless
    /// `shut_down()`, read under the list's lock, says the timer is shut down: then it
    /// is given back to be run by the caller. Shutdown sets its flag before it takes
    /// the list under that lock, so a callback is either kept and taken by it, or
    /// given back.
    pub(super) fn hand_back(
        &self,
        callback: Callback,
        shut_down: impl FnOnce() -> bool,
    ) -> Result<(), Callback> {
        let mut handed_back = lock(&self.handed_back);
        if shut_down() {
            return Err(callback);
        }
        handed_back.push(callback);
        Ok(())
    }

    /// Runs inline, on the driver's turn, every callback handed back so far.
    #[inline]
    pub(super) fn run_handed_back(&self, timer: &impl HandsBack) {
        let handed_back = std::mem::take(&mut *lock(&self.handed_back));
        for callback in handed_back {
            run_inline(callback, timer);
        }
    }

    /// Takes every callback handed back so far, for shutdown to return or the
    /// driver's loss to drop.
    pub(super) fn take_handed_back(&self) -> Vec<Callback> {
        std::mem::take(&mut *lock(&self.handed_back))
    }

    /// The timer's last reference went with callbacks handed back and no turn left to
    /// run them: they run on the driver's `runtime`, as the driver would have run them,
    /// not inside whatever drop (under whatever lock of the user's) let the last
    /// reference go; or here, without a runtime. Not called once shut down: then
    /// shutdown took them, or the driver was lost and they were counted as stranded.
    pub(super) fn release_handed_back(&self, runtime: Option<&Handle>) {
        let handed_back = RunOnDrop(std::mem::take(&mut *lock(&self.handed_back)));
        match runtime {
            Some(runtime) if !handed_back.0.is_empty() => {
                drop(runtime.spawn(async move { drop(handed_back) }));
            }
            _ => drop(handed_back),
        }
    }
}

/// Callbacks that run when this is dropped: in the task `release_handed_back` spawns,
/// or where a runtime that has shut down drops that task unrun. Never lost.
struct RunOnDrop(Vec<Callback>);

impl Drop for RunOnDrop {
    fn drop(&mut self) {
        for callback in self.0.drain(..) {
            run_caught(callback);
        }
    }
}
