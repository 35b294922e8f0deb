//! A `DelayQueue`'s room for values, as tokio-util's queue has it (`capacity`,
//! `reserve`, `shrink_to_fit`): spread over the queue's shards, each with a wheel of
//! its own, where a thread's inserts go to its own shard.

use super::DelayQueue;
use crate::sync::lock;

impl<T> DelayQueue<T> {
    /// The room for values of all the queue's shards. A thread's inserts go to one
    /// shard, which allocates once its own room is used up (the room
    /// [`reserve`](DelayQueue::reserve) and
    /// [`with_capacity`](DelayQueue::with_capacity) make is the calling thread's
    /// shard's): with several threads inserting, an insert may allocate before `len`
    /// reaches `capacity`.
    pub fn capacity(&self) -> usize {
        self.queue
            .shards
            .iter()
            .map(|shard| lock(&shard.state).wheel.capacity())
            .sum()
    }

    /// Makes room for at least `additional` more values than the queue holds, where
    /// the calling thread's inserts go.
    ///
    /// # Panics
    ///
    /// If the room needed overflows `usize`, as a `Vec`'s `reserve` does.
    pub fn reserve(&self, additional: usize) {
        let home = self.queue.home();
        lock(&self.queue.shards[home].state)
            .wheel
            .reserve(additional);
    }

    /// Gives back the room past the last value held. Values never move (their keys
    /// stay valid), so room among them is kept, and taken by the next inserts.
    pub fn shrink_to_fit(&self) {
        for shard in self.queue.shards.iter() {
            let mut state = lock(&shard.state);
            state.wheel.shrink_to_fit();
            // An empty shard's tags are all stale: their room goes too.
            let tags = match (state.wheel.len(), &mut state.tags) {
                (0, Some(tags)) => tags.release(0),
                _ => None,
            };
            drop(state);
            drop(tags);
        }
    }
}
