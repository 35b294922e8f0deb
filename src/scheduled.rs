//! Callbacks, the Netty-style side of the timer: [`Scheduled`] handles and the
//! [`Unfired`] callbacks [`Timer::shutdown`](crate::Timer::shutdown) returns.
//!
//! # Implementation
//!
//! A callback is a `Callback` holding its closure (in place, with no allocation, when it
//! fits in three words: see `inline_fn`) and its deadline, owned by its wheel
//! entry and moved out of it exactly once, under the wheel's lock: by the driver (the
//! closure then runs), by [`Scheduled::cancel`] (it is dropped), or by shutdown (it
//! becomes an [`Unfired`]). That lock is why "cancel returned `true`" and "the
//! callback ran" can never both happen, nor neither.
//!
//! The [`Scheduled`] handle shares nothing with the entry: it names it by its
//! registration and the step it is due at (which, unlike the key's generation, no
//! later entry can share with it: see [`wheel`](crate::wheel)), and learns the
//! callback's state from the wheel, under the same lock. A [`reset`](Scheduled::reset)
//! moves the entry and rewrites that step under the lock too (the handle's `Place`),
//! so a cancel, a state query or another reset racing it reads the step the entry is
//! at, never one it has left.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::callback::Callback;
use crate::driver::{Anchor, CallbackState, Place, Registration};

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
/// If the driver's runtime shuts down first, a callback with a handle stays pending
/// for [`Timer::shutdown`](crate::Timer::shutdown) to return, until the handle is
/// dropped or detached (a detached callback is dropped then). So a callback that
/// holds its own handle (in a slot it clears when it runs, say) holds its timer as an
/// `Arc` cycle would, until the slot is cleared: clear it, or cancel, when you stop
/// using the timer, as a guard's `Drop` does.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), tokio_wheel::Error> {
/// # if cfg!(not(feature = "test-util")) { return Ok(()); } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::Timer;
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
#[must_use = "dropping a Scheduled cancels its callback, so `let _ =` cancels it at once; call .detach() to let it run"]
pub struct Scheduled {
    /// `None` only transiently, in `detach`.
    inner: Option<EntryRef>,
}

/// What names a callback's entry in the wheel: the timer (through its shard's anchor),
/// the registration, and where the entry is now.
struct EntryRef {
    anchor: Arc<Anchor>,
    reg: Registration,
    /// The step the entry is due at (with `reg`, what names it), its deadline, and
    /// whether a `cancel` took it out: changed only under the shard's lock.
    place: Place,
}

impl Scheduled {
    pub(crate) fn new(
        anchor: Arc<Anchor>,
        reg: Registration,
        step: u64,
        deadline: i64,
    ) -> Scheduled {
        Scheduled {
            inner: Some(EntryRef {
                anchor,
                reg,
                place: Place::new(step, deadline),
            }),
        }
    }

    fn entry(&self) -> &EntryRef {
        self.inner
            .as_ref()
            .expect("a Scheduled names its entry until dropped")
    }

    /// Stops the callback from running. Returns `true` iff this call stopped it: `false`
    /// if it has already run (or is running), was cancelled before, or was returned by
    /// [`Timer::shutdown`](crate::Timer::shutdown).
    pub fn cancel(&self) -> bool {
        self.entry().cancel()
    }

    /// Lets the callback run even though this handle is dropped. The timer's driver
    /// stays alive until it has run, even if every [`Timer`](crate::Timer) clone is gone.
    pub fn detach(mut self) {
        if let Some(handle) = self.inner.take() {
            let shared = &handle.anchor.shared;
            shared.disown(handle.reg, &handle.place);
            shared.keep_alive_while_pending();
        }
    }

    /// Whether the callback was cancelled (by [`cancel`](Scheduled::cancel)).
    pub fn is_cancelled(&self) -> bool {
        self.entry().place.is_cancelled()
    }

    /// Whether the deadline passed and the timer handed the callback to its executor:
    /// it has run, or is about to. (One that the executor dropped unrun goes back to
    /// the driver task to run there; `shutdown` returns it as [`Unfired`] if it is
    /// still waiting there, while this still says `true`, and one handed back after
    /// `shutdown` runs at once, where it was handed back.)
    ///
    /// Takes the lock of the callback's shard, briefly.
    pub fn is_expired(&self) -> bool {
        self.entry().state() == CallbackState::Expired
    }

    /// When the callback is due (it runs less than a tick and a millisecond later):
    /// the deadline it was scheduled at, or the latest [`reset`](Scheduled::reset)
    /// that moved it.
    pub fn deadline(&self) -> Instant {
        self.entry().deadline()
    }

    /// Moves a pending callback to `delay` from now, earlier or later, in place: the
    /// same entry, closure and handle, no allocation. Returns whether it was still
    /// pending (and so moved): `false` if it has run (or is running), was cancelled,
    /// or was returned by [`Timer::shutdown`](crate::Timer::shutdown); nothing changes
    /// then.
    ///
    /// Exactly once still holds: when a reset races the callback's expiry or a
    /// [`cancel`](Scheduled::cancel) on another thread, either the reset returns `true`
    /// and the callback runs once, at its new deadline (or is cancelled later), or it
    /// returns `false` and the callback ran, or was cancelled, as it would have anyway.
    ///
    /// Once the driver's runtime is gone, a callback with a handle stays pending, unrun
    /// (see [Cancellation](Scheduled#cancellation)): a reset still moves it and returns
    /// `true`, and [`Timer::shutdown`](crate::Timer::shutdown) returns it at its new
    /// deadline.
    ///
    /// A deadline already past (`Duration::ZERO`) runs the callback on the driver's
    /// next step, less than a tick later, never on the caller's stack, as
    /// [`Timer::schedule`](crate::Timer::schedule) does with one. Far deadlines
    /// saturate as `schedule`'s do.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tokio_wheel::Error> {
    /// # if cfg!(not(feature = "test-util")) { return Ok(()); } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// let timer = Timer::new();
    /// // Renew a lease 10 s before it ends; each renewal pushes the check back.
    /// let check = timer.schedule(Duration::from_secs(20), || println!("lease lost"))?;
    /// assert!(check.reset(Duration::from_secs(30)));
    /// assert!(check.cancel());
    /// assert!(!check.reset(Duration::from_secs(30)), "a cancelled callback stays put");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use = "`false` means the callback did not move: it has run, or is running, or was cancelled"]
    pub fn reset(&self, delay: Duration) -> bool {
        let entry = self.entry();
        let shared = &entry.anchor.shared;
        let offset = shared.clock.offset_after(shared.now(), delay);
        shared.reset_callback(entry.reg, &entry.place, offset)
    }

    /// Moves a pending callback to `deadline`, in place; see
    /// [`reset`](Scheduled::reset).
    #[must_use = "`false` means the callback did not move: it has run, or is running, or was cancelled"]
    pub fn reset_at(&self, deadline: Instant) -> bool {
        let entry = self.entry();
        let shared = &entry.anchor.shared;
        let offset = shared.clock.offset_of(shared.given(deadline));
        shared.reset_callback(entry.reg, &entry.place, offset)
    }
}

impl EntryRef {
    fn deadline(&self) -> Instant {
        let shared = &self.anchor.shared;
        shared.reported(shared.clock.instant_at(self.place.deadline()))
    }

    fn cancel(&self) -> bool {
        self.anchor.shared.cancel_callback(self.reg, &self.place)
    }

    fn state(&self) -> CallbackState {
        self.anchor.shared.callback_state(self.reg, &self.place)
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
/// # async fn main() -> Result<(), tokio_wheel::Error> {
/// # if cfg!(not(feature = "test-util")) { return Ok(()); } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::Timer;
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
    /// In a lock so that `Unfired` is `Sync` while the closure is only `Send`: the lock
    /// is the safe way to share it, and is never contended (`run` takes `self`).
    callback: Mutex<Callback>,
}

impl Unfired {
    pub(crate) fn new(deadline: Instant, callback: Callback) -> Unfired {
        Unfired {
            deadline,
            callback: Mutex::new(callback),
        }
    }

    /// Runs the callback here and now. A panic in it propagates to the caller.
    pub fn run(self) {
        self.callback
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
        assert_eq!(std::mem::size_of::<Callback>(), 40);
        // With the wheel's links and step: what a pending callback costs, with no
        // heap allocation for a closure of up to three words.
        assert_eq!(std::mem::size_of::<crate::wheel::Entry<Callback>>(), 56);
        assert_eq!(std::mem::size_of::<Scheduled>(), 40);
    }
}
