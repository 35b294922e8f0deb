//! The synchronisation primitives the timer's shared state uses, swapped for loom's
//! under `--cfg loom` (as tokio does) so that `tests/loom.rs` can explore every
//! interleaving of registration, cancel, reset, drop, shutdown and the driver's turn.
//!
//! `Arc` stays std's: loom's has no `Weak`, and the races worth modelling are all
//! decided under the wheel's `Mutex` and in the atomics, which loom does see.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, through poisoning: for locks under which nothing user-supplied runs
/// except what is done before any state changes (`Waker::clone`), so that a poisoned
/// lock still guards consistent state.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
