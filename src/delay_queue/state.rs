//! The state of a [`DelayQueue`](crate::DelayQueue) under its lock: the pending
//! values and what times each (the wheel, or the queue's fallback), the expired ones,
//! the consumers waiting, and what the queue's sleep waits for.
//!
//! Bookkeeping only: its methods wake nothing and drop no callback, but return the
//! wakers to wake and the handles to drop once the lock is released.

use std::collections::{BTreeSet, BinaryHeap};
use std::sync::PoisonError;
use std::task::Waker;

use slab::Slab;
use tokio::time::Instant;

use super::expired::{Due, Expired, Key};
use crate::sync::{Mutex, MutexGuard};
use crate::Scheduled;

pub(super) struct State<T> {
    /// Values whose deadlines have not passed, each with what times it.
    pub(super) pending: Slab<Item<T>>,
    /// The values of `pending` the wheel cannot time (refused by the timer, their
    /// callback dropped unrun, or their timer shut down or lost), by deadline, then
    /// serial: `(deadline, serial, index)`. The queue's sleep times the first.
    pub(super) fallback: BTreeSet<(Instant, u64, usize)>,
    /// The serial of the next value inserted: not reused within 2^64 inserts, so stale
    /// keys stay inert; starting where no other queue's serials are.
    pub(super) next_serial: u64,
    /// Values whose deadlines passed, earliest deadline first (then first inserted),
    /// waiting for a consumer. A heap, not a list: callbacks of different shards, or
    /// a value reset into the past, expire out of deadline order, and a sorted insert
    /// into a long backlog would scan it under the lock.
    pub(super) expired: BinaryHeap<Due<T>>,
    /// Consumers waiting for a value (or for the close), one waker per task.
    pub(super) waiting: Vec<Waker>,
    /// What the queue's sleep is registered for, with `wake_all`, and has not woken
    /// since: consumers that would aim it there have nothing to do.
    pub(super) armed: Option<Aim>,
    pub(super) closed: bool,
}

/// What the queue's sleep waits for, while a consumer waits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Aim {
    /// The timer's shutdown or loss: a far deadline, which the timer wakes early when
    /// it drains its futures, so that consumers move the values its wheel no longer
    /// times to the fallback.
    Stop,
    /// The first deadline of the fallback.
    Due(Instant),
}

pub(super) struct Item<T> {
    pub(super) value: T,
    pub(super) serial: u64,
    pub(super) timing: Timing,
}

/// What times a pending value.
pub(super) enum Timing {
    /// Its callback on the timer's wheel; the handle cancels it when dropped (always
    /// after the queue's lock).
    Wheel(Scheduled),
    /// The queue's sleep, in `State::fallback` at this deadline.
    Fallback(Instant),
}

impl Timing {
    pub(super) fn deadline(&self) -> Instant {
        match self {
            Timing::Wheel(timer) => timer.deadline(),
            Timing::Fallback(deadline) => *deadline,
        }
    }
}

pub(super) fn lock<T>(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
    // No user code runs under the lock but `Waker::clone`, before any change.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The item `key` names in `pending`, if it is still there.
pub(super) fn slot<'a, T>(pending: &'a mut Slab<Item<T>>, key: &Key) -> Option<&'a mut Item<T>> {
    pending
        .get_mut(key.index)
        .filter(|item| item.serial == key.serial)
}

impl<T> State<T> {
    pub(super) fn get(&self, key: &Key) -> Option<&Item<T>> {
        self.pending
            .get(key.index)
            .filter(|item| item.serial == key.serial)
    }

    pub(super) fn take(&mut self, key: &Key) -> Option<Item<T>> {
        let item = self.get(key)?;
        if let Timing::Fallback(deadline) = item.timing {
            self.fallback.remove(&(deadline, key.serial, key.index));
        }
        Some(self.pending.remove(key.index))
    }

    /// Whether consumers get `None`: closed, and nothing left to take or to expire.
    pub(super) fn is_ended(&self) -> bool {
        self.closed && self.pending.is_empty() && self.expired.is_empty()
    }

    /// The consumers to wake because a removal just ended the queue (they wait for a
    /// value that will now never come, and must see the end).
    pub(super) fn if_ended(&mut self) -> Vec<Waker> {
        if self.is_ended() {
            std::mem::take(&mut self.waiting)
        } else {
            Vec::new()
        }
    }

    /// Adds an expired value; returns the consumers to wake.
    pub(super) fn push_expired(&mut self, expired: Expired<T>) -> Vec<Waker> {
        self.expired.push(Due(expired));
        std::mem::take(&mut self.waiting)
    }

    /// Whether the fallback's first deadline comes before the first expired value's:
    /// it may have passed too, unseen while no consumer polled the queue's sleep, and
    /// then comes out first (the sleep says).
    pub(super) fn fallback_may_come_first(&self) -> bool {
        match (self.fallback.first(), self.expired.peek()) {
            (Some(&(deadline, ..)), Some(Due(first))) => deadline < first.deadline,
            _ => false,
        }
    }

    /// What the queue's sleep must wait for while consumers wait: the fallback's
    /// first deadline; else, while the wheel times values, the timer's shutdown or
    /// loss; else nothing.
    pub(super) fn aim(&self, shut: bool) -> Option<Aim> {
        if let Some(&(deadline, ..)) = self.fallback.first() {
            Some(Aim::Due(deadline))
        } else if !shut && !self.pending.is_empty() {
            Some(Aim::Stop)
        } else {
            None
        }
    }

    /// The consumers to wake because what the queue's sleep must wait for changed:
    /// woken, one of them aims it again.
    pub(super) fn rearm(&mut self, shut: bool) -> Vec<Waker> {
        if self.waiting.is_empty() || self.armed == self.aim(shut) {
            Vec::new()
        } else {
            std::mem::take(&mut self.waiting)
        }
    }

    /// The timer is shut down or lost: moves the values its wheel held to the
    /// fallback, but for those whose callback has run or is about to (it takes them
    /// out, or, returned unrun by `shutdown`, moves them when dropped). Returns their
    /// callbacks' handles, to drop after the lock.
    #[cold]
    pub(super) fn stop_wheel(&mut self) -> Vec<Scheduled> {
        let mut stopped = Vec::new();
        if self.pending.len() == self.fallback.len() {
            return stopped;
        }
        for (index, item) in self.pending.iter_mut() {
            let Timing::Wheel(timer) = &item.timing else {
                continue;
            };
            if timer.is_expired() {
                continue;
            }
            let deadline = timer.deadline();
            self.fallback.insert((deadline, item.serial, index));
            if let Timing::Wheel(timer) =
                std::mem::replace(&mut item.timing, Timing::Fallback(deadline))
            {
                stopped.push(timer);
            }
        }
        stopped
    }

    /// Moves the values of the fallback due `through` to the expired ones; returns the
    /// consumers to wake, if it moved any.
    pub(super) fn expire_fallback(&mut self, through: Instant) -> Vec<Waker> {
        let mut moved = false;
        while let Some(&(deadline, serial, index)) = self.fallback.first() {
            if deadline > through {
                break;
            }
            self.fallback.pop_first();
            let item = self.pending.remove(index);
            debug_assert_eq!(item.serial, serial, "the fallback names pending values");
            self.expired.push(Due(Expired {
                value: item.value,
                key: Key { index, serial },
                deadline,
            }));
            moved = true;
        }
        if moved {
            std::mem::take(&mut self.waiting)
        } else {
            Vec::new()
        }
    }
}
