//! One direction's timeout (the read timeout, or the write timeout) of a
//! `TimeoutStream`, and what counts as progress.
//!
//! A direction's timeout times one wait: it starts when an operation first finds
//! nothing to do and ends when bytes move. "Bytes move" is the whole definition of
//! progress, for this timeout and for the connection's idle timeout alike
//! ([`Outcome`]): an operation that returns at once having moved nothing (a flush with
//! nothing to flush, an empty write, end of file, an error) neither starts nor ends a
//! wait, so a loop that also does such things (a heartbeat's flush in `select!`)
//! cannot keep a stuck write alive.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::clock::deadline_after;
use crate::sleep::Sleep;
use crate::timer::Timer;

/// A direction of a stream, as an index into per-direction state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    Read = 0,
    Write = 1,
}

impl Dir {
    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// The other direction's index.
    pub(super) fn other(self) -> usize {
        1 - self.index()
    }
}

/// What one poll of the wrapped stream did, as the timeouts see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Bytes moved: a read filled some, a write accepted some, or a flush or shutdown
    /// that had to wait completed (so it moved bytes a write had buffered).
    Progress,
    /// `Pending`: the operation waits.
    Waiting,
    /// Ready having moved nothing: an empty read or write, end of file, an error, or a
    /// flush or shutdown that completed at once (it had nothing to move, or moved what
    /// a write, already counted, had just buffered).
    Nothing,
}

impl Outcome {
    /// A read that returned `poll`, its buffer's room having gone from `before` to
    /// `after` bytes (room, not the filled part: no slicing on the hot path).
    #[inline]
    pub(super) fn of_read(poll: &Poll<io::Result<()>>, before: usize, after: usize) -> Outcome {
        match poll {
            Poll::Pending => Outcome::Waiting,
            Poll::Ready(Ok(())) if after < before => Outcome::Progress,
            Poll::Ready(_) => Outcome::Nothing,
        }
    }

    /// A write (vectored or not) that returned `poll`.
    #[inline]
    pub(super) fn of_write(poll: &Poll<io::Result<usize>>) -> Outcome {
        match poll {
            Poll::Pending => Outcome::Waiting,
            Poll::Ready(Ok(n)) if *n > 0 => Outcome::Progress,
            Poll::Ready(_) => Outcome::Nothing,
        }
    }

    /// A flush or shutdown that returned `poll`; `waited` records whether one has
    /// returned `Pending` since the last one completed. Only a flush that had to wait
    /// is progress when it completes: it moved buffered bytes out over that time, where
    /// one that completes at once moved nothing, or only what a write just counted.
    #[inline]
    pub(super) fn of_flush(poll: &Poll<io::Result<()>>, waited: &mut bool) -> Outcome {
        match poll {
            Poll::Pending => {
                *waited = true;
                Outcome::Waiting
            }
            Poll::Ready(Ok(())) if std::mem::take(waited) => Outcome::Progress,
            Poll::Ready(_) => {
                *waited = false;
                Outcome::Nothing
            }
        }
    }
}

/// One direction's timeout: how long an operation may wait with no bytes moving.
#[derive(Debug)]
pub(super) struct DirectionTimeout {
    timeout: Option<Duration>,
    /// Made on the first wait; then moved, never replaced.
    sleep: Option<Sleep>,
    /// Whether `sleep` times the current wait (else it is left over from an earlier
    /// one, and may fire: a spurious wakeup, never an error).
    armed: bool,
}

impl DirectionTimeout {
    pub(super) const OFF: DirectionTimeout = DirectionTimeout {
        timeout: None,
        sleep: None,
        armed: false,
    };

    pub(super) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Sets the timeout; the next wait is a full one.
    pub(super) fn set(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
        self.armed = false;
    }

    /// Bytes moved: the wait, if any, is over. Touches no shared state.
    #[inline]
    pub(super) fn progress(&mut self) {
        self.armed = false;
    }

    /// After the operation returned `Pending`: arms the timeout if no wait is under
    /// way (moving the `Sleep` to now plus the timeout, in place once it is
    /// registered) and polls it. `Err` once the wait has lasted the timeout; the next
    /// wait is then a full one.
    pub(super) fn poll_wait(
        &mut self,
        timer: &Timer,
        cx: &mut Context<'_>,
        what: &str,
    ) -> io::Result<()> {
        let Some(timeout) = self.timeout else {
            return Ok(());
        };
        if !self.armed {
            let deadline = deadline_after(timer.shared().now(), timeout);
            match &mut self.sleep {
                Some(sleep) => sleep.reset_on_clock(deadline),
                None => self.sleep = Some(timer.sleep_until_on_clock(deadline)),
            }
            self.armed = true;
        }
        let sleep = self.sleep.as_mut().expect("armed above");
        match Pin::new(sleep).poll(cx) {
            Poll::Ready(()) => {
                self.armed = false;
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{what} moved no byte for longer than its timeout of {timeout:?}"),
                ))
            }
            Poll::Pending => Ok(()),
        }
    }
}
