//! The connection's idle timeout (Netty's `allIdleTime`) of a `TimeoutStream`: a
//! waiting read or write fails once neither direction has moved a byte for it.
//!
//! A server keeps a read pending while it writes a long response; a read timeout
//! would cut that response, where this timeout counts the writes as life. It costs
//! one wheel entry per connection, moved lazily, and nothing per byte.
//!
//! # Implementation
//!
//! The connection is idle while an operation waits on it and no bytes move. The
//! stretch begins at the first wait after the last progress, or at the progress
//! itself when an operation in the other direction was waiting then; `since` records
//! it, read from the timer's clock only at those two moments, so a stream whose
//! operations never wait never reads the clock here or touches the wheel. One
//! [`Sleep`] times the stretch lazily: it is moved only when it fires before
//! `since + timeout` (the stretch was renewed since it was set), so a busy connection
//! moves it about once a timeout, whatever its traffic. *Invariant:* while `armed` is
//! set, the `Sleep`'s deadline is no later than `since + timeout`, so it never fires
//! late; it cuts only once its deadline is exactly that, so never early.
//!
//! Through `tokio::io::split` the two directions may wait in two tasks, and a `Sleep`
//! wakes one waker. While both wait in different tasks the `Sleep` holds a waker that
//! wakes both ([`Wakers`]); when it fires, the task that sees it first cuts its
//! operation and marks the other direction's wait as cut, which the other task's
//! operation then reports.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;

use super::direction::Dir;
use crate::clock::deadline_after;
use crate::sleep::Sleep;
use crate::timer::Timer;
use crate::wake::wake_all;

/// The connection's idle timeout.
#[derive(Debug)]
pub(super) struct IdleTimeout {
    timeout: Option<Duration>,
    /// Made on the first wait; then moved, never replaced.
    sleep: Option<Sleep>,
    /// The deadline `sleep` was last moved to; `None` when that may be later than the
    /// stretch's (after [`set`](IdleTimeout::set), or after it fired early), so it
    /// must be moved before it is polled.
    armed: Option<Instant>,
    /// When the current idle stretch began: `Some` exactly while an operation waits
    /// (`waiting` has a `true`).
    since: Option<Instant>,
    /// Per direction: an operation returned `Pending`, and that direction has moved
    /// no byte since. A wait whose future was dropped still counts, as a direction's
    /// timeout's does: a read restarted by `select!` is the same wait.
    waiting: [bool; 2],
    /// Per direction: waiting when the timeout cut the connection, and not yet told;
    /// its next wait fails at once. *Invariant:* no byte has moved either way since
    /// the cut (progress clears both).
    cut: [bool; 2],
    wakers: Wakers,
}

impl IdleTimeout {
    pub(super) const OFF: IdleTimeout = IdleTimeout {
        timeout: None,
        sleep: None,
        armed: None,
        since: None,
        waiting: [false; 2],
        cut: [false; 2],
        wakers: Wakers::NONE,
    };

    pub(super) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Whether the timeout is set: the callers' test, inlined, before they call in.
    #[inline]
    pub(super) fn is_set(&self) -> bool {
        self.timeout.is_some()
    }

    /// Sets the timeout; the next wait starts a full one, and no earlier wait counts.
    pub(super) fn set(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
        self.armed = None;
        self.since = None;
        self.waiting = [false; 2];
        self.cut = [false; 2];
    }

    /// Bytes moved in `dir`: its wait is over, and the stretch starts again now if the
    /// other direction still waits (else at the next wait). Reads the clock only then.
    /// The connection is not idle: a cut not yet told to either direction is void, so
    /// the next wait either way starts a full timeout.
    #[inline]
    pub(super) fn progress(&mut self, timer: &Timer, dir: Dir) {
        if self.timeout.is_none() {
            return;
        }
        self.waiting[dir.index()] = false;
        self.cut = [false; 2];
        self.since = if self.waiting[dir.other()] {
            Some(timer.shared().now())
        } else {
            None
        };
    }

    /// After an operation in `dir` returned `Pending`: joins or starts the idle
    /// stretch and polls its `Sleep`. `Err` once the stretch has lasted the timeout,
    /// or if the timeout cut this direction's wait while another task saw it fire.
    pub(super) fn poll_wait(
        &mut self,
        timer: &Timer,
        cx: &mut Context<'_>,
        dir: Dir,
    ) -> io::Result<()> {
        let Some(timeout) = self.timeout else {
            return Ok(());
        };
        if std::mem::take(&mut self.cut[dir.index()]) {
            return Err(idle_error(timeout));
        }
        let since = *self.since.get_or_insert_with(|| timer.shared().now());
        self.waiting[dir.index()] = true;
        let due = deadline_after(since, timeout);
        let other_waits = self.waiting[dir.other()];
        let waker = self.wakers.for_wait(dir, cx.waker(), other_waits);
        let mut cx = Context::from_waker(waker);
        if poll_until(&mut self.sleep, &mut self.armed, timer, due, &mut cx).is_pending() {
            return Ok(());
        }
        // Cut: this operation fails, and so does the other direction's wait, if any.
        self.cut[dir.other()] = other_waits;
        // The sleep, found due by this poll, may not have fired: the waker it held for
        // both directions was not woken, so the other direction's task is woken here.
        if other_waits {
            if let Some(other) = &self.wakers.latest[dir.other()] {
                other.wake_by_ref();
            }
        }
        self.waiting = [false; 2];
        self.since = None;
        Err(idle_error(timeout))
    }
}

/// Polls the idle `sleep` for the stretch ending at `due`, moving it there first if it
/// is set later (or not at all); one set earlier, before the stretch was renewed, that
/// has completed is moved on to `due`. `Ready` once `due` itself has passed.
fn poll_until(
    sleep: &mut Option<Sleep>,
    armed: &mut Option<Instant>,
    timer: &Timer,
    due: Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    loop {
        let sleep = match sleep {
            Some(sleep) => {
                if armed.is_none_or(|at| at > due) {
                    sleep.reset_on_clock(due);
                    *armed = Some(due);
                }
                sleep
            }
            None => {
                *armed = Some(due);
                sleep.insert(timer.sleep_until_on_clock(due))
            }
        };
        match Pin::new(sleep).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(()) if *armed == Some(due) => return Poll::Ready(()),
            // Set before the stretch was renewed: move it to the stretch's end.
            Poll::Ready(()) => *armed = None,
        }
    }
}

fn idle_error(timeout: Duration) -> io::Error {
    let message = format!(
        "connection idle (no byte read or written) for longer than its idle timeout of \
         {timeout:?}"
    );
    io::Error::new(io::ErrorKind::TimedOut, message)
}

/// The waker the idle `Sleep` is polled with: the waiting task's own, or, while the
/// two directions wait in tasks that are not the same, one that wakes both.
#[derive(Debug)]
struct Wakers {
    /// The waker of each direction's latest wait.
    latest: [Option<Waker>; 2],
    /// Wakes both of `latest`'s tasks; made the first time they differ.
    both: Option<(Arc<BothWakers>, Waker)>,
    /// `latest` has changed since `both` last copied it.
    changed: bool,
}

impl Wakers {
    const NONE: Wakers = Wakers {
        latest: [None, None],
        both: None,
        changed: false,
    };

    /// Records `waker` as `dir`'s, and returns the waker that wakes every waiting
    /// task: `waker` itself unless the other direction waits in another task.
    fn for_wait<'a>(&'a mut self, dir: Dir, waker: &'a Waker, other_waits: bool) -> &'a Waker {
        let mine = &mut self.latest[dir.index()];
        if !mine.as_ref().is_some_and(|latest| latest.will_wake(waker)) {
            *mine = Some(waker.clone());
            self.changed = true;
        }
        let apart = other_waits
            && self.latest[dir.other()]
                .as_ref()
                .is_some_and(|other| !other.will_wake(waker));
        if !apart {
            return waker;
        }
        match &mut self.both {
            Some((shared, _)) => {
                if std::mem::take(&mut self.changed) {
                    *shared.0.lock().unwrap_or_else(PoisonError::into_inner) = self.latest.clone();
                }
            }
            None => {
                let shared = Arc::new(BothWakers(Mutex::new(self.latest.clone())));
                let both = Waker::from(Arc::clone(&shared));
                self.both = Some((shared, both));
                self.changed = false;
            }
        }
        &self.both.as_ref().expect("made above").1
    }
}

/// The two directions' wakers, woken together. A std `Mutex`, which loom does not
/// model: it guards two wakers copied in and out whole, and no race here decides
/// anything but which of two wakeups comes first.
#[derive(Debug)]
struct BothWakers(Mutex<[Option<Waker>; 2]>);

impl Wake for BothWakers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// Both tasks are woken, whichever waker panics; then the first panic goes on to
    /// the caller, to whom this is one waker that panicked (the driver counts it).
    fn wake_by_ref(self: &Arc<Self>) {
        // Woken outside the lock: a waker runs its executor's code.
        let wakers = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Err(panicked) = wake_all(wakers.into_iter().flatten()) {
            panicked.resume();
        }
    }
}
