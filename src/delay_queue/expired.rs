//! The values a [`DelayQueue`](crate::DelayQueue) hands out: [`Key`]s naming the
//! values it holds, [`Expired`] values, and the [`TryInsertError`] of a refused insert.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

use crate::error::Error;

/// Names a value in the [`DelayQueue`](crate::DelayQueue) that returned it, until a
/// consumer takes the value or it is removed or cleared; then, and in every other
/// queue, it names nothing.
///
/// Its `Debug` reads `Key { queue: 3, shard: 1, insert: 17 }`: the 18th value inserted
/// into shard 1 of the 4th queue made in this process (all counted from 0). A queue
/// has a shard for each thread that inserts at once, up to the machine's parallelism;
/// the inserts of one thread at a time go to one shard.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// The shard's number in the low [`SHARD_BITS`], the value's index in the
    /// shard's storage above them.
    pub(super) index: usize,
    pub(super) serial: u64,
}

/// Bits of [`Key::index`] that name the shard. None where `usize` has no room beside
/// a storage index of 32 bits: such queues have one shard.
pub(super) const SHARD_BITS: u32 = if usize::BITS >= 64 { 3 } else { 0 };

/// Shards a queue has at most.
pub(super) const MAX_QUEUE_SHARDS: usize = 1 << SHARD_BITS;

impl Key {
    #[inline]
    pub(super) fn new(shard: usize, slot: usize, serial: u64) -> Key {
        debug_assert!(shard < MAX_QUEUE_SHARDS);
        Key {
            index: slot << SHARD_BITS | shard,
            serial,
        }
    }

    /// The shard that holds the value.
    #[inline]
    pub(super) fn shard(&self) -> usize {
        self.index & (MAX_QUEUE_SHARDS - 1)
    }

    /// The value's index in its shard's storage.
    #[inline]
    pub(super) fn slot(&self) -> usize {
        self.index >> SHARD_BITS
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The serial is the queue's number in its high half, its shard's count of
        // inserts in the low half (see `first_serial`).
        f.debug_struct("Key")
            .field("queue", &(self.serial >> 32))
            .field("shard", &self.shard())
            .field("insert", &(self.serial & u64::from(u32::MAX)))
            .finish()
    }
}

/// The serial of a new queue's first value in each of its shards: 2^32 past the
/// previous queue's, so that one queue's keys name nothing in another (until a shard
/// of one of them has taken 2^32 inserts, or 2^32 queues have been made). Each
/// shard's serials then count up, wrapping, so a shard hands each out once in 2^64
/// inserts (and a key names its shard besides).
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

    /// The deadline the value expired at (the last one a reset set; saturated as
    /// [`DelayQueue::deadline`](crate::DelayQueue::deadline) reports it).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// A value [`DelayQueue::try_insert`](crate::DelayQueue::try_insert) did not insert,
/// given back with the reason.
pub struct TryInsertError<T> {
    pub(super) error: Error,
    pub(super) value: T,
}

impl<T> TryInsertError<T> {
    /// Why: [`Error::Shutdown`], [`Error::AtCapacity`] or [`Error::OutOfRange`].
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
        write!(f, "the delay queue did not take the value: {}", self.error)
    }
}

impl<T> std::error::Error for TryInsertError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
