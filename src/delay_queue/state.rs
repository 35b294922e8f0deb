//! The state of one shard of a [`DelayQueue`](crate::DelayQueue), under the shard's
//! lock: its values in a wheel of its own, by the step of their deadlines on the
//! timer's clock, and the one [`Sleep`] the shard keeps on the timer for the earliest
//! of them.
//!
//! Bookkeeping only: its methods wake nothing and drop no value; the queue wakes and
//! drops after the lock.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::PoisonError;
use std::task::{Context, Poll, Waker};

use super::expired::{Expired, Key};
use crate::clock::Clock;
use crate::sites::Tags;
use crate::sleep::Sleep;
use crate::sync::{Mutex, MutexGuard};
use crate::wheel::{self, Wheel};

/// Values a consumer's poll moves to the due list at most, beyond the step it is in,
/// before it takes one: the lock is held for a bounded time however long the backlog.
pub(super) const DUE_BATCH: usize = 1024;

/// `State::armed` while consumers wait on a queue with nothing pending: any value
/// inserted then is earlier than what the sleep waits for.
pub(super) const IDLE: u64 = u64::MAX;

/// A value in the queue's wheel.
pub(super) struct Item<T> {
    pub(super) value: T,
    /// The serial its [`Key`] carries: never reused, so a stale key is inert.
    pub(super) serial: u64,
    /// Its deadline, as an offset on the timer's clock ([`Clock::offset_of`]):
    /// saturated at the end of the wheel's range, as every timer's is, so that the
    /// deadline the queue reports is the one that times the value.
    pub(super) deadline: i64,
}

pub(super) struct State<T> {
    /// This shard's number among the queue's: the low bits of its keys' index.
    pub(super) shard: usize,
    /// Every value the shard holds, at the step of its deadline: pending in the
    /// levels; due in the due list once a consumer's poll found its deadline passed,
    /// until a consumer takes it (or `remove` does). The wheel's steps are the timer's.
    pub(super) wheel: Wheel<Item<T>>,
    /// Which line inserted each value of `wheel`, and its deadline, by storage index:
    /// `None` unless the timer tracks call sites. *Invariant:* when `Some`, every
    /// value present has its own tag (written at its insert, moved with a reset); a
    /// value that leaves leaves a stale tag that nothing reads.
    pub(super) tags: Option<Tags>,
    /// The timer's clock.
    pub(super) clock: Clock,
    /// The serial of the next value inserted here: not reused within 2^64 inserts, so
    /// stale keys stay inert; starting where no other queue's serials are.
    pub(super) next_serial: u64,
    /// The shard's sleep on the timer, registered with the waker that wakes every
    /// consumer waiting, at `armed`.
    pub(super) sleep: Option<Sleep>,
    /// While consumers wait: the step the sleep is registered for (at or before every
    /// value pending in this shard), or [`IDLE`] if nothing was pending. An insert or
    /// reset earlier than it sees to the sleep itself; `None` sees to nothing. `None`
    /// once the sleep woke (its wake took every consumer waiting, and each that waits
    /// again polls or aims it anew first), and in the first shard before any consumer
    /// waited (every consumer locks and aims that shard). `IDLE` in the others until a
    /// consumer aims them: a consumer may register without having seen such a shard,
    /// if an insert puts it in use meanwhile, and that insert must then see to it.
    pub(super) armed: Option<u64>,
    /// Whether the queue is closed: set in every shard at once, under all their locks.
    pub(super) closed: bool,
}

impl<T> Drop for State<T> {
    /// The queue's own sleep goes with it, not counted as a user's cancel.
    fn drop(&mut self) {
        if let Some(sleep) = self.sleep.take() {
            sleep.discard();
        }
    }
}

pub(super) fn lock<T>(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
    // No user code runs under the lock but `Waker::clone`, before any change.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What aiming the sleep found.
pub(super) enum Aimed {
    /// It waits; the consumers registered are woken when it fires.
    Waiting,
    /// Its step is processed already: the values there are due.
    Fired(u64),
}

impl<T> State<T> {
    /// The value `key` names, with the wheel's key and step for it.
    pub(super) fn get(&self, key: &Key) -> Option<(wheel::Key, u64, &Item<T>)> {
        self.wheel
            .at(key.slot())
            .filter(|(_, _, item)| item.serial == key.serial)
    }

    /// Moves the values due by `through` (a processed step of the timer's clock) and
    /// those of the step after it whose deadlines are at or before `now` (an offset on
    /// that clock) to the due list, at most a [`DUE_BATCH`] beyond one step's worth.
    pub(super) fn catch_up(&mut self, through: u64, now: i64) {
        if self.wheel.advance_due(through, DUE_BATCH) && !self.wheel.has_due() {
            // Due means ready: a deadline that has passed, in a step that has not.
            self.wheel.due_from_cursor(|item| item.deadline <= now);
        }
    }

    /// The step and deadline of the first due value, if any: consumers take the
    /// earliest of the shards' first. A value moved due from the step under way (its
    /// deadline passed) carries the step before; its deadline, later than any of that
    /// step's, orders it after them.
    pub(super) fn due_order(&self) -> Option<(u64, i64)> {
        if !self.wheel.has_due() {
            return None;
        }
        self.wheel
            .first()
            .map(|(_, step, item)| (step, item.deadline))
    }

    /// Takes the first due value.
    pub(super) fn pop(&mut self) -> Option<Expired<T>> {
        let (key, item) = self.wheel.pop_due()?;
        Some(Expired {
            value: item.value,
            key: Key::new(self.shard, key.index(), item.serial),
            deadline: self.clock.instant_at(item.deadline),
        })
    }

    /// Stands the sleep down if nothing is left to time: it would only wake the
    /// consumers for nothing, and holds an entry in the timer. Consumers still
    /// waiting then wait for an insert.
    pub(super) fn stand_down_if_empty(&mut self) -> Option<Sleep> {
        if self.wheel.len() != 0 || self.sleep.is_none() {
            return None;
        }
        self.armed = Some(IDLE);
        self.sleep.take()
    }

    /// Sees that the sleep waits, with `wake_all`, at the step of the earliest pending
    /// value (or where the wheel next moves values down a level): polls it if it is
    /// aimed there already (a sleep that fired says so; one a shutdown drained is
    /// registered with its fallback), and aims a fresh one otherwise. Nothing pending:
    /// no sleep. Returns the sleep it replaced, to drop after the lock.
    pub(super) fn aim(
        &mut self,
        sleep_until: impl FnOnce(tokio::time::Instant) -> Sleep,
        wake_all: &Waker,
    ) -> (Aimed, Option<Sleep>) {
        let Some(step) = self.wheel.next_expiration() else {
            self.armed = Some(IDLE);
            return (Aimed::Waiting, self.sleep.take());
        };
        match &mut self.sleep {
            Some(sleep) if self.armed == Some(step) => {
                let mut cx = Context::from_waker(wake_all);
                match Pin::new(sleep).poll(&mut cx) {
                    Poll::Pending => (Aimed::Waiting, None),
                    Poll::Ready(()) => {
                        self.armed = None;
                        (Aimed::Fired(step), self.sleep.take())
                    }
                }
            }
            _ => self.aim_at(step, sleep_until, wake_all),
        }
    }

    /// Registers a fresh sleep at `step`, with `wake_all`. Fresh rather than moved: a
    /// `Sleep` moved to a step the driver has processed wakes its waker on the spot,
    /// under this lock; a fresh one finds it due instead.
    pub(super) fn aim_at(
        &mut self,
        step: u64,
        sleep_until: impl FnOnce(tokio::time::Instant) -> Sleep,
        wake_all: &Waker,
    ) -> (Aimed, Option<Sleep>) {
        let mut sleep = sleep_until(self.clock.step_end(step));
        let ready = Pin::new(&mut sleep)
            .poll(&mut Context::from_waker(wake_all))
            .is_ready();
        if ready {
            self.armed = None;
            (Aimed::Fired(step), self.sleep.take())
        } else {
            self.armed = Some(step);
            (Aimed::Waiting, self.sleep.replace(sleep))
        }
    }
}
