//! [`Sleep`]: the future every other future here is built on.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::Instant;

use crate::driver::{Registered, Registration};
use crate::Timer;

/// A future that completes at its deadline, at most one tick late.
///
/// Made by [`Timer::sleep`], [`Timer::sleep_until`] or the free functions
/// [`sleep`](crate::sleep) and [`sleep_until`](crate::sleep_until).
///
/// * **Lazy.** Creating a `Sleep` touches no shared state: it registers in the wheel on
///   its first poll, so a `Sleep` that is never polled costs nothing but its memory.
/// * **Cheap to poll again.** A registered `Sleep` learns it has fired from an atomic,
///   and replaces its waker only when the new one would not wake the same task.
/// * **Unpin.** No `Box::pin` or `pin!` needed; `reset` takes `&mut self`.
///
/// # Cancellation
///
/// Dropping a `Sleep` removes it from the wheel in O(1) and frees its slot at once
/// ([`Timer::pending`] drops by one). Nothing is retained until the deadline, unlike
/// Netty's lazily purged cancellation queue.
///
/// # Shutdown
///
/// If the driver's runtime shuts down, every pending `Sleep` of that timer completes
/// (early) rather than hanging, and later ones complete on first poll.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use wheel_timer::Timer;
///
/// let timer = Timer::new();
/// let mut sleep = timer.sleep(Duration::from_secs(1));
/// // Push it back before it fires, without allocating.
/// sleep.reset(tokio::time::Instant::now() + Duration::from_secs(2));
/// (&mut sleep).await;
/// assert!(sleep.is_elapsed());
/// # }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    timer: Timer,
    deadline: Instant,
    state: State,
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Not in the wheel: never polled, or reset after firing.
    Idle,
    /// In the wheel at `reg`, due at `tick`.
    Registered { reg: Registration, tick: u64 },
    /// Fired.
    Elapsed,
}

impl Sleep {
    pub(crate) fn new(timer: Timer, deadline: Instant) -> Sleep {
        Sleep {
            timer,
            deadline,
            state: State::Idle,
        }
    }

    /// The instant this `Sleep` completes at (at most one tick after it).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether this `Sleep` has fired (so polling it returns `Ready`).
    ///
    /// A `Sleep` that was never polled has not registered, so reports `false` even
    /// past its deadline, as tokio's does.
    pub fn is_elapsed(&self) -> bool {
        match self.state {
            State::Idle => false,
            State::Elapsed => true,
            State::Registered { reg, tick } => {
                self.timer.shared.has_fired(reg, tick) || !self.timer.shared.is_pending(reg)
            }
        }
    }

    /// Moves the deadline, earlier or later, whether or not this `Sleep` has fired.
    ///
    /// A registered `Sleep` keeps its place in the wheel's storage and its waker (no
    /// allocation); one that had fired becomes pending again. A deadline that has
    /// already passed completes it on the next poll, at the latest on the next tick.
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        let tick = self.timer.shared.clock.tick_at(deadline);
        self.state = match self.state {
            State::Idle | State::Elapsed => State::Idle,
            State::Registered { reg, .. } => {
                if self.timer.shared.reschedule(reg, tick) {
                    State::Registered { reg, tick }
                } else {
                    // Fired already, or the new deadline has passed: register afresh on
                    // the next poll (the waker, if any, was woken to bring that poll).
                    State::Idle
                }
            }
        };
    }

    /// The timer this `Sleep` belongs to.
    pub(crate) fn timer(&self) -> &Timer {
        &self.timer
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = &this.timer.shared;
        match this.state {
            State::Elapsed => return Poll::Ready(()),
            State::Idle => {
                let tick = shared.clock.tick_at(this.deadline);
                match shared.register(tick, cx.waker()) {
                    Registered::Pending(reg) => this.state = State::Registered { reg, tick },
                    Registered::Due => this.state = State::Elapsed,
                }
            }
            State::Registered { reg, tick } => {
                if shared.has_fired(reg, tick) || !shared.update_waker(reg, cx.waker()) {
                    this.state = State::Elapsed;
                }
            }
        }
        match this.state {
            State::Elapsed => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let State::Registered { reg, tick } = self.state {
            if !self.timer.shared.has_fired(reg, tick) {
                self.timer.shared.cancel(reg);
            }
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("state", &self.state)
            .finish()
    }
}
