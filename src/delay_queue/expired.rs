//! The values a [`DelayQueue`](crate::DelayQueue) hands out: [`Key`]s naming pending
//! values, [`Expired`] values, the [`TryInsertError`] of a refused insert, and the
//! heap order of expired values waiting for a consumer.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

use crate::Error;

/// Names a value in the [`DelayQueue`](crate::DelayQueue) that returned it; inert once the value has
/// expired, been removed or been cleared, and in every other queue.
///
/// Its `Debug` reads `Key { queue: 3, insert: 17 }`: the 18th value inserted into the
/// 4th queue made in this process (both counted from 0).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub(super) index: usize,
    pub(super) serial: u64,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The serial is the queue's number in its high half, its count of inserts in
        // the low half (see `first_serial`).
        f.debug_struct("Key")
            .field("queue", &(self.serial >> 32))
            .field("insert", &(self.serial & u64::from(u32::MAX)))
            .finish()
    }
}

/// The serial of a new queue's first value: 2^32 past the previous queue's, so that
/// one queue's keys name nothing in another (until one of them has taken 2^32
/// inserts, or 2^32 queues have been made). Serials then count up, wrapping, so a
/// queue hands each out once in 2^64 inserts.
pub(super) fn first_serial() -> u64 {
    static QUEUES: AtomicU64 = AtomicU64::new(0);
    QUEUES.fetch_add(1, Ordering::Relaxed) << 32
}

/// A value whose deadline passed, taken from a [`DelayQueue`](crate::DelayQueue).
#[derive(Debug)]
pub struct Expired<T> {
    pub(super) value: T,
    pub(super) key: Key,
    pub(super) deadline: Instant,
}

impl<T> Expired<T> {
    /// The value.
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// The value, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The value, taken out.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The key the value was inserted under (it names nothing in the queue any more).
    pub fn key(&self) -> Key {
        self.key
    }

    /// The deadline the value expired at (the last one a reset set).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// A value [`DelayQueue::try_insert`](crate::DelayQueue::try_insert) could not insert, given back with the reason.
pub struct TryInsertError<T> {
    pub(super) error: Error,
    pub(super) value: T,
}

impl<T> TryInsertError<T> {
    /// Why the timer refused it: [`Error::Shutdown`], [`Error::AtCapacity`] or
    /// [`Error::OutOfRange`].
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The value, given back.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> fmt::Debug for TryInsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryInsertError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for TryInsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the delay queue's timer refused the value: {}",
            self.error
        )
    }
}

impl<T> std::error::Error for TryInsertError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// An expired value in the heap, ordered so that the earliest deadline (then the
/// lowest serial: the first inserted, but across a wrap of the serials) comes out first.
pub(super) struct Due<T>(pub(super) Expired<T>);

impl<T> Due<T> {
    fn order(&self) -> (Instant, u64) {
        (self.0.deadline, self.0.key.serial)
    }
}

impl<T> PartialEq for Due<T> {
    fn eq(&self, other: &Self) -> bool {
        self.order() == other.order()
    }
}

impl<T> Eq for Due<T> {}

impl<T> PartialOrd for Due<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Due<T> {
    /// Reversed: `BinaryHeap` pops the greatest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.order().cmp(&self.order())
    }
}
