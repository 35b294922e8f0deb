//! The fallbacks `Sleep`s own once their wheel no longer turns (how they time is
//! `fallback.rs`): each a Tokio sleep and the clock it is timed on, kept in the timer,
//! by a key the one `Sleep` that owns it keeps in its state. A `Sleep` (24 bytes) has
//! no room for one, and what it holds the timer by is shared with other `Sleep`s.

use std::pin::Pin;

use slab::Slab;

use crate::sync::{lock, Mutex};

/// The fallbacks of a timer's `Sleep`s, each owned by the one `Sleep` that holds its
/// key: only that `Sleep` polls, resets or removes it.
pub(crate) struct Fallbacks(Mutex<Slab<Fallback>>);

impl Fallbacks {
    pub(super) fn new() -> Fallbacks {
        Fallbacks(Mutex::new(Slab::new()))
    }

    /// Takes out the fallback `key` names (for its owner to poll outside the lock, or
    /// to drop).
    pub(super) fn take(&self, key: FallbackKey) -> Option<Fallback> {
        lock(&self.0).try_remove(key.0)
    }

    /// Puts a fallback in, and returns the key its owner keeps.
    pub(super) fn put(&self, fallback: Fallback) -> FallbackKey {
        FallbackKey(lock(&self.0).insert(fallback))
    }

    /// How many `Sleep`s hold a fallback.
    #[cfg(all(test, feature = "test-util"))]
    pub(super) fn len(&self) -> usize {
        lock(&self.0).len()
    }
}

/// A `Sleep`'s fallback in its timer's [`Fallbacks`], held by that `Sleep` alone from
/// its first fallback poll until it completes or drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FallbackKey(usize);

impl FallbackKey {
    /// The key in the bits above a `Sleep`'s tag bits, nonzero: 62 bits hold any slab
    /// index.
    pub(crate) fn to_bits(self) -> u64 {
        self.0 as u64 + 1
    }

    /// The key [`to_bits`](FallbackKey::to_bits) gave `bits` for; `None` for `0`.
    pub(crate) fn from_bits(bits: u64) -> Option<FallbackKey> {
        bits.checked_sub(1).map(|index| FallbackKey(index as usize))
    }
}

/// A fallback sleep and the clock it is timed on.
pub(super) struct Fallback {
    pub(super) sleep: Pin<Box<tokio::time::Sleep>>,
    pub(super) on: Source,
}

impl std::fmt::Debug for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fallback")
            .field("deadline", &self.sleep.deadline())
            .field("on", &self.on)
            .finish()
    }
}

/// Which runtime's clock a [`Fallback`] is timed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The driver's runtime, which the polling task runs on.
    Driver,
    /// The background runtime: the real clock.
    Background,
}
