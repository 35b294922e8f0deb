//! The keep-alive of detached callbacks: the timer holding a strong reference to
//! itself while a callback no handle owns may be pending, since nothing else keeps
//! the timer, and so the driver that must run it, alive.
//!
//! *Invariant:* kept alive iff a keep-alive is held: [`KeepAlive::is_held`]'s flag
//! equals "the reference is held" whenever the lock is free (checked with
//! `debug_assert!` at every release of the lock). The flag lets
//! [`hold`](KeepAlive::hold) skip the lock when the timer already keeps itself alive.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::sync::{lock, AtomicBool, Mutex, MutexGuard};

/// A strong reference a value may hold to itself, and whether it holds it.
pub(super) struct KeepAlive<T> {
    held: Mutex<Option<Arc<T>>>,
    /// Whether `held` is `Some`; written only under its lock, read without it by
    /// `hold`'s fast path.
    is_held: AtomicBool,
}

impl<T> std::fmt::Debug for KeepAlive<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeepAlive")
            .field("is_held", &self.is_held.load(Ordering::Relaxed))
            .finish()
    }
}

impl<T> KeepAlive<T> {
    pub(super) fn new() -> KeepAlive<T> {
        KeepAlive {
            held: Mutex::new(None),
            is_held: AtomicBool::new(false),
        }
    }

    /// Holds `this` if it is not held and `wanted()`, read under the lock, says so.
    ///
    /// Lock-free when already held: [`release_unless`](KeepAlive::release_unless)
    /// clears the flag before it asks whether the hold is still wanted, so a caller
    /// that sees the flag set has its reason seen there.
    #[inline]
    pub(super) fn hold(&self, this: &Arc<T>, wanted: impl FnOnce() -> bool) {
        if self.is_held.load(Ordering::SeqCst) {
            return;
        }
        self.hold_locked(this, wanted);
    }

    /// [`hold`](KeepAlive::hold) past its fast path, under the lock: taken once per
    /// time the timer goes from no detached callback pending to one, kept out of line
    /// so that the fast path, taken by every other detached callback, is a load and a
    /// branch in its caller.
    #[cold]
    #[inline(never)]
    fn hold_locked(&self, this: &Arc<T>, wanted: impl FnOnce() -> bool) {
        let mut held = lock(&self.held);
        if wanted() && held.is_none() {
            *held = Some(this.clone());
            self.is_held.store(true, Ordering::SeqCst);
        }
        self.check(&held);
    }

    /// Releases the hold unless `still_wanted()`, read under the lock after the flag
    /// is cleared, says otherwise. The reference is returned, for the caller to drop
    /// after every lock it holds: it may be the last one.
    #[must_use = "dropping it may drop the timer: do so after every lock"]
    pub(super) fn release_unless(&self, still_wanted: impl FnOnce() -> bool) -> Option<Arc<T>> {
        let mut held = lock(&self.held);
        // Cleared before the re-check: a `hold` that saw the flag still set relies on
        // this hold, and its reason (counted before it read the flag) is seen below.
        self.is_held.store(false, Ordering::SeqCst);
        let release = if still_wanted() {
            self.is_held.store(held.is_some(), Ordering::SeqCst);
            None
        } else {
            held.take()
        };
        self.check(&held);
        release
    }

    /// Releases the hold, whatever holds it; returned as by
    /// [`release_unless`](KeepAlive::release_unless).
    #[must_use = "dropping it may drop the timer: do so after every lock"]
    pub(super) fn release(&self) -> Option<Arc<T>> {
        self.release_unless(|| false)
    }

    /// Whether the reference is held (under the lock).
    #[cfg(loom)]
    pub(super) fn is_held(&self) -> bool {
        lock(&self.held).is_some()
    }

    fn check(&self, held: &MutexGuard<'_, Option<Arc<T>>>) {
        debug_assert_eq!(
            self.is_held.load(Ordering::SeqCst),
            held.is_some(),
            "kept alive iff a keep-alive is held"
        );
    }
}
