//! How far the driver has got, for those who wait on it: the turns it has started and
//! completed (what `catch_up` waits on) and whether it has stopped for good (what
//! `shutdown` waits on).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;

use tokio::sync::{watch, Notify};

/// The driver's turns and its stop, as waiters see them.
#[derive(Debug)]
pub(super) struct Progress {
    /// Turns started, numbering them from 1.
    started: AtomicU64,
    /// The number of the latest turn that completed (processed every shard up to its
    /// clock).
    completed: AtomicU64,
    /// Turns started and not yet ended (the driver task's and the alarm's may run at
    /// once): one that started before a `catch_up` may still hold timers due before
    /// it, taken out and not yet woken, when a later turn completes.
    active: AtomicU64,
    /// Notified after every turn and when the driver stops.
    turned: Notify,
    /// Becomes `true` when the driver has stopped turning for good (shut down, or its
    /// task dropped).
    stopped: watch::Sender<bool>,
}

impl Progress {
    pub(super) fn new() -> Progress {
        Progress {
            started: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            active: AtomicU64::new(0),
            turned: Notify::new(),
            stopped: watch::Sender::new(false),
        }
    }

    /// Numbers a turn that is starting. Called before the turn reads the clock: a
    /// `catch_up` that has not seen this number was called before the read, so the
    /// turn processes all that was due by then. (The other way round, a `catch_up`
    /// called between the two would count this turn, which stops short of the call,
    /// as one that started after it.)
    pub(super) fn start_turn(&self) -> u64 {
        self.active.fetch_add(1, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The turn `turn` has ended, having processed every step its clock had reached if
    /// `complete`.
    pub(super) fn end_turn(&self, turn: u64, complete: bool) {
        if complete {
            self.completed.fetch_max(turn, Ordering::SeqCst);
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.turned.notify_waiters();
    }

    /// The driver has stopped turning for good.
    pub(super) fn stop(&self) {
        self.stopped.send_replace(true);
        self.turned.notify_waiters();
    }

    /// Waits until a turn that started after this call has completed and no turn is
    /// under way (one that started before may still be waking what it took out),
    /// calling `ask_for_a_turn` while it waits; or until `is_shutdown()`.
    pub(super) async fn catch_up(&self, is_shutdown: impl Fn() -> bool, ask_for_a_turn: impl Fn()) {
        let called = self.started.load(Ordering::SeqCst);
        loop {
            let mut turned = pin!(self.turned.notified());
            // Registered before the check, so a turn that ends in between is not missed.
            turned.as_mut().enable();
            if is_shutdown()
                || (self.completed.load(Ordering::SeqCst) > called
                    && self.active.load(Ordering::SeqCst) == 0)
            {
                return;
            }
            ask_for_a_turn();
            with_caught_waker(turned).await;
        }
    }

    /// Waits until the driver has stopped turning for good.
    pub(super) async fn stopped(&self) {
        let mut stopped = self.stopped.subscribe();
        // An error means the sender is gone, i.e. so is the driver.
        let _ = with_caught_waker(stopped.wait_for(|stopped| *stopped)).await;
    }
}

/// A caller's waker, wrapped so that waking it cannot unwind into whoever wakes it: a
/// `Notify` or `watch` (tokio's) wakes its waiters in batches, and one that panics
/// leaves the rest of its batch unwoken.
struct CaughtWaker(Waker);

impl std::task::Wake for CaughtWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let _ = catch_unwind(AssertUnwindSafe(|| self.0.wake_by_ref()));
    }
}

/// Awaits `future`, handing it the caller's waker wrapped in a [`CaughtWaker`].
async fn with_caught_waker<F: std::future::Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut wrapped: Option<(Waker, Waker)> = None;
    std::future::poll_fn(|cx| {
        if !matches!(&wrapped, Some((caller, _)) if caller.will_wake(cx.waker())) {
            let caught = Waker::from(Arc::new(CaughtWaker(cx.waker().clone())));
            wrapped = Some((cx.waker().clone(), caught));
        }
        let caught = &wrapped.as_ref().expect("set above").1;
        future
            .as_mut()
            .poll(&mut std::task::Context::from_waker(caught))
    })
    .await
}
