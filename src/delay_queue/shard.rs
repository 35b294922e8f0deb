//! A `DelayQueue`'s shards: each one's lock, alone on its cache lines, and the first
//! shards of a queue locked in order, the one order all who hold several take them in.
//!
//! A consumer holds every shard in use at once, so that no insert slips between its
//! look at one shard and its registration; most queues have one shard in use, whose
//! consumers lock it alone, at no allocation.

use super::state::{lock, State};
use crate::sync::{Mutex, MutexGuard};

/// One shard's lock and state, alone on its cache lines: threads working in
/// neighbouring shards pass no line to each other.
#[repr(align(128))]
pub(super) struct Shard<T> {
    pub(super) state: Mutex<State<T>>,
}

/// The first shards of a queue, locked, in order: the first one alone (its consumers
/// lock no more, until a second thread inserts at once) costs no allocation.
pub(super) struct Locked<'a, T> {
    first: MutexGuard<'a, State<T>>,
    rest: Vec<MutexGuard<'a, State<T>>>,
}

impl<'a, T> Locked<'a, T> {
    /// Locks the first `count` of `shards` (at least one), in order.
    #[inline]
    pub(super) fn new(shards: &'a [Shard<T>], count: usize) -> Self {
        let mut locked = Locked {
            first: lock(&shards[0].state),
            rest: Vec::new(),
        };
        locked.extend(shards, count);
        locked
    }

    /// How many shards are locked.
    #[inline]
    pub(super) fn len(&self) -> usize {
        1 + self.rest.len()
    }

    /// Locks the shards after those locked, up to `count`, in order.
    #[inline]
    pub(super) fn extend(&mut self, shards: &'a [Shard<T>], count: usize) {
        if count > self.len() {
            self.extend_more(shards, count);
        }
    }

    #[inline(never)]
    fn extend_more(&mut self, shards: &'a [Shard<T>], count: usize) {
        for shard in shards.iter().take(count).skip(self.len()) {
            self.rest.push(lock(&shard.state));
        }
    }

    /// The first shard's state: its `closed` is every shard's.
    #[inline]
    pub(super) fn first(&self) -> &State<T> {
        &self.first
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &State<T>> {
        std::iter::once(&*self.first).chain(self.rest.iter().map(|guard| &**guard))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut State<T>> + use<'_, 'a, T> {
        std::iter::once(&mut *self.first).chain(self.rest.iter_mut().map(|guard| &mut **guard))
    }

    /// Shard `shard`'s state; `shard` is one of those locked.
    #[inline]
    pub(super) fn get_mut(&mut self, shard: usize) -> &mut State<T> {
        match shard {
            0 => &mut self.first,
            _ => &mut self.rest[shard - 1],
        }
    }
}
