//! The queue every handle of one `DelayQueue` shares, and what its operations do under
//! its shards' locks: insert, reset, a consumer's poll (due means ready), waking the
//! waiting.
//!
//! The values are spread over shards, each a wheel under a lock of its own, so that
//! threads inserting and removing at once each work in a shard of their own rather
//! than pass one lock and one wheel back and forth. A queue starts with one shard in
//! use; an insert that finds its thread's shard locked by another thread moves on to
//! the next shard free (putting it in use), and its thread stays there for this
//! queue (other queues it inserts into start at their first shard). A key names its
//! shard. A consumer locks every shard in use, in order, and takes the earliest
//! due value of all; a queue only ever filled from one thread at a time keeps one
//! shard, and its consumers one lock.

#[cfg(not(loom))]
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use super::expired::{Expired, Key, TryInsertError, MAX_QUEUE_SHARDS};
use super::shard::{Locked, Shard};
use super::state::{lock, Aimed, Item, State};
use super::waiting::Waiting;
use crate::error::Error;
use crate::sites::{Site, SiteSource, Tag, Tally};
use crate::sleep::Sleep;
use crate::sync::{AtomicUsize, MutexGuard};
use crate::timer::Timer;
use crate::wake::wake_all;
use crate::wheel::InsertError;

/// How many shards a new queue can put in use: one per thread that can run at once,
/// at most [`MAX_QUEUE_SHARDS`]; at least two under `cfg(test)` and loom, whose tests and
/// models then reach the paths between shards on any machine.
pub(super) fn shard_count() -> usize {
    let parallel = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let least = if cfg!(any(test, loom)) { 2 } else { 1 };
    parallel.max(least).min(MAX_QUEUE_SHARDS)
}

#[cfg(not(loom))]
std::thread_local! {
    /// The queue (its number) this thread last moved to another shard in, and the
    /// shard (modulo its count): the one it last found free there.
    static HINT: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
}

/// The shard the calling thread's inserts into the queue numbered `queue` go to: the first
/// unless this thread moved on in that queue, the last it did.
#[inline]
fn hint(queue: u64) -> usize {
    // Under loom every model thread shares the OS thread's locals, which outlive a
    // model's iteration: the hint stays 0 there, so each iteration runs alike.
    #[cfg(not(loom))]
    return HINT.with(|hint| match hint.get() {
        (at, shard) if at == queue => shard,
        _ => 0,
    });
    #[cfg(loom)]
    return {
        let _ = queue;
        0
    };
}

/// Sends the calling thread's inserts into `queue` to `shard` from now on.
pub(super) fn set_hint<T>(queue: &Queue<T>, shard: usize) {
    #[cfg(not(loom))]
    HINT.with(|hint| hint.set((queue.id, shard)));
    #[cfg(loom)]
    let _ = (queue, shard);
}

/// The queue all handles share.
pub(super) struct Queue<T> {
    pub(super) timer: Timer,
    /// At least one; a key's shard number indexes it.
    pub(super) shards: Box<[Shard<T>]>,
    /// How many shards, from the first, are in use: only they hold values. Grows
    /// (never shrinks) before an insert into a shard past it. *Invariant:* it grows
    /// under the waiting list's lock, before the insert looks for consumers waiting,
    /// and a consumer reads it again under that lock as it registers, so one of the two
    /// sees the other.
    pub(super) in_use: AtomicUsize,
    /// How many `DelayQueue` handles there are: with one left, nothing but it can
    /// insert, so an empty queue has ended. *Invariant:* the drop that leaves one
    /// counts down, then takes the waiting list; a consumer registers there, then
    /// reads the count: one waiting on an empty queue either sees the second-to-last
    /// handle gone or is taken, and woken, by its drop.
    pub(super) handles: AtomicUsize,
    /// The consumers waiting. Its lock is taken after shards' locks, or alone.
    pub(super) waiting: Arc<Waiting>,
    /// `waiting` as a waker: the shards' sleeps are registered with it.
    pub(super) wake_all: Waker,
    /// What names this queue in a thread's hint: its number, never another queue's
    /// (see `expired::first_serial`).
    pub(super) id: u64,
}

impl<T> Queue<T> {
    /// The shard the calling thread's inserts go to (and its `reserve`s).
    #[inline]
    pub(super) fn home(&self) -> usize {
        let (hint, count) = (hint(self.id), self.shards.len());
        if hint < count {
            hint
        } else {
            hint % count
        }
    }

    /// Locks the shard for an insert: the calling thread's if it is free, else the
    /// next one free (which becomes the thread's), else, all being locked, its own.
    /// The shard is in use before the lock is let go.
    #[inline]
    fn lock_for_insert(&self) -> MutexGuard<'_, State<T>> {
        let home = self.home();
        match self.shards[home].state.try_lock() {
            Ok(locked) => {
                self.use_shard(home);
                locked
            }
            Err(_) => self.lock_elsewhere(home),
        }
    }

    /// [`lock_for_insert`](Queue::lock_for_insert) when the thread's own shard is
    /// locked (or poisoned).
    #[cold]
    #[inline(never)]
    fn lock_elsewhere(&self, home: usize) -> MutexGuard<'_, State<T>> {
        let count = self.shards.len();
        for i in 1..count {
            let shard = (home + i) % count;
            let locked = match self.shards[shard].state.try_lock() {
                Ok(guard) => guard,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => continue,
            };
            set_hint(self, shard);
            self.use_shard(shard);
            return locked;
        }
        let locked = lock(&self.shards[home].state);
        self.use_shard(home);
        locked
    }

    /// Puts `shard` (and those before it) in use, before a value goes in.
    #[inline]
    fn use_shard(&self, shard: usize) {
        if shard >= self.in_use.load(Ordering::Acquire) {
            self.use_more(shard);
        }
    }

    /// Puts `shard` in use under the waiting list's lock, which a consumer reads
    /// `in_use` under as it registers: either the consumer counts the shard, or the
    /// insert sees the consumer registered.
    #[cold]
    fn use_more(&self, shard: usize) {
        self.waiting.exclusive(|| {
            self.in_use.fetch_max(shard + 1, Ordering::AcqRel);
        });
    }

    /// Wakes `consumers`, after the shards' locks, every one of them whichever panics.
    /// A panic of one of their wakers is that consumer's executor's, not the caller's
    /// (an insert, a remove, another consumer's poll): it is counted in the timer's
    /// `Stats::callback_panics`, as the driver counts the panics of the wakers it
    /// wakes, so the caller does not fail, or drop a value it took, for it, whoever
    /// gets to wake them first.
    #[inline]
    pub(super) fn wake(&self, consumers: Vec<Waker>) {
        if let Err(panicked) = wake_all(consumers) {
            let shared = self.timer.shared();
            (0..panicked.count()).for_each(|_| shared.count_panic());
        }
    }

    /// Whether no handle but the caller's is left: nothing else can insert.
    #[inline]
    pub(super) fn is_sole(&self) -> bool {
        self.handles.load(Ordering::SeqCst) <= 1
    }

    /// Whether consumers get `None`: nothing is left in any shard of `states`, and
    /// nothing can come (the queue is closed, or no handle but the caller's is left).
    pub(super) fn is_ended(&self, states: &Locked<'_, T>) -> bool {
        states.iter().all(|state| state.wheel.len() == 0)
            && (states.first().closed || self.is_sole())
    }

    /// Locks the shard `key` names, if the queue has it.
    pub(super) fn lock_key(&self, key: &Key) -> Option<MutexGuard<'_, State<T>>> {
        self.shards.get(key.shard()).map(|shard| lock(&shard.state))
    }

    /// Locks every shard, in order (the one order all who hold several take them in).
    pub(super) fn lock_all(&self) -> Locked<'_, T> {
        Locked::new(&self.shards, self.shards.len())
    }

    /// Locks the shards in use, in order.
    fn lock_in_use(&self) -> Locked<'_, T> {
        Locked::new(&self.shards, self.in_use.load(Ordering::Acquire))
    }

    /// The consumers to wake if the queue is ended (nothing left, and closed or with
    /// one handle), checked under every shard's lock: for an operation that emptied a
    /// shard of a queue so.
    pub(super) fn wake_if_ended(&self) -> Vec<Waker> {
        let mut woken = Vec::new();
        self.wake_if_ended_holding(&mut self.lock_all(), &mut woken);
        woken
    }

    pub(super) fn try_insert(
        &self,
        value: T,
        offset: i64,
        now: Instant,
        site: Site,
    ) -> Result<Key, TryInsertError<T>> {
        let error = if self.timer.is_shutdown() {
            Some(Error::Shutdown)
        } else {
            let clock = &self.timer.shared().clock;
            (clock.step_now(now) >= clock.last_step()).then_some(Error::OutOfRange)
        };
        match error {
            Some(error) => Err(TryInsertError { error, value }),
            None => self.insert(value, offset, Some(now), site),
        }
    }

    /// Inserts `value` due at `offset` on the timer's clock (`now` there, if the
    /// caller has read it), inserted by the line `site`.
    #[inline]
    pub(super) fn insert(
        &self,
        value: T,
        offset: i64,
        now: Option<Instant>,
        site: Site,
    ) -> Result<Key, TryInsertError<T>> {
        let step = self.timer.shared().clock.step_at_offset(offset);
        let mut state = self.lock_for_insert();
        let serial = state.next_serial;
        let item = Item {
            value,
            serial,
            deadline: offset,
        };
        let (key, due) = match state.wheel.insert_or_due(step, item) {
            Ok(inserted) => inserted,
            Err((item, InsertError::Full | InsertError::Processed)) => {
                return Err(TryInsertError {
                    error: Error::AtCapacity {
                        max: crate::wheel::MAX_ENTRIES,
                    },
                    value: item.value,
                });
            }
        };
        state.next_serial = serial.wrapping_add(1);
        if let Some(tags) = &mut state.tags {
            let deadline = offset;
            tags.set(key.index(), Tag { site, deadline });
        }
        let (wake, replaced) = self.see_to_consumers(&mut state, step, offset, due, now);
        let key = Key::new(state.shard, key.index(), serial);
        drop(state);
        discard(replaced);
        self.wake(wake);
        Ok(key)
    }

    pub(super) fn reset(&self, key: &Key, offset: i64, now: Option<Instant>) -> bool {
        let to = self.timer.shared().clock.step_at_offset(offset);
        let Some(mut state) = self.lock_key(key) else {
            return false;
        };
        let Some((wheel_key, step, _)) = state.get(key) else {
            return false;
        };
        let Some(due) = state.wheel.move_any(wheel_key, step, to) else {
            return false;
        };
        if let Some(item) = state.wheel.get_mut(wheel_key, to) {
            item.deadline = offset;
        }
        if let Some(tags) = &mut state.tags {
            tags.moved(wheel_key.index(), offset);
        }
        let (wake, replaced) = self.see_to_consumers(&mut state, to, offset, due, now);
        drop(state);
        discard(replaced);
        self.wake(wake);
        true
    }

    /// A value was just inserted, or moved, to `step` (`deadline` on the timer's
    /// clock, read at `now` if the caller did), `due` if the wheel has processed that
    /// step. Consumers waiting for that step or a later one are woken if the value is
    /// due, by the wheel or by the clock; otherwise, if they wait for a later step, the
    /// sleep moves to it. Returns the consumers to wake and the sleep replaced, for
    /// after the lock.
    #[inline]
    pub(super) fn see_to_consumers(
        &self,
        state: &mut State<T>,
        step: u64,
        deadline: i64,
        due: bool,
        now: Option<Instant>,
    ) -> (Vec<Waker>, Option<Sleep>) {
        let Some(armed) = state.armed.filter(|&armed| step <= armed) else {
            return (Vec::new(), None);
        };
        if !self.waiting.any() {
            return (Vec::new(), None);
        }
        self.wake_or_aim(state, step, armed, deadline, due, now)
    }

    /// [`see_to_consumers`](Queue::see_to_consumers) once consumers wait for `armed`,
    /// at or after `step`: out of line, so that inserts with no consumer to see to stay
    /// short.
    #[inline(never)]
    fn wake_or_aim(
        &self,
        state: &mut State<T>,
        step: u64,
        armed: u64,
        deadline: i64,
        due: bool,
        now: Option<Instant>,
    ) -> (Vec<Waker>, Option<Sleep>) {
        let shared = self.timer.shared();
        if due
            || deadline
                <= shared
                    .clock
                    .unclamped_offset_of(now.unwrap_or_else(|| shared.now()))
        {
            return (self.waiting.take(), None);
        }
        if step == armed {
            return (Vec::new(), None);
        }
        let timer = &self.timer;
        match state.aim_at(step, |at| timer.sleep_until_on_clock(at), &self.wake_all) {
            (Aimed::Waiting, replaced) => (Vec::new(), replaced),
            (Aimed::Fired(_), replaced) => (self.waiting.take(), replaced),
        }
    }

    /// Takes the next due value, or registers `cx`'s waker under `owner`.
    pub(super) fn poll_expired(
        &self,
        owner: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Expired<T>>> {
        self.poll_expired_from(self.lock_in_use(), owner, cx)
    }

    /// [`poll_expired`](Queue::poll_expired) from `states`, the shards counted in use
    /// and locked (more may have been put in use since the count).
    pub(super) fn poll_expired_from<'a>(
        &'a self,
        states: Locked<'a, T>,
        owner: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Expired<T>>> {
        let (mut woken, mut stale) = (Vec::new(), Vec::new());
        let polled = self.poll_expired_inner(states, owner, cx, &mut woken, &mut stale);
        // After the shards' locks: the consumers to wake, and the sleeps let go of.
        self.wake(woken);
        stale.into_iter().for_each(|sleep| discard(Some(sleep)));
        // Its deadline as the caller's clock names it (see `Shared::reported`).
        polled.map(|expired| {
            expired.map(|mut expired| {
                expired.deadline = self.timer.shared().reported(expired.deadline);
                expired
            })
        })
    }

    /// Every shard in use is held, so that no insert slips between the look at one
    /// shard and the registration: an insert after it sees the consumer waiting. A
    /// consumer that takes a value stands its shard's sleep down if nothing is left
    /// there to time. The sleeps let go of (`stale`) and the wakers to wake (`woken`)
    /// wait for the locks to go.
    fn poll_expired_inner<'a>(
        &'a self,
        mut states: Locked<'a, T>,
        owner: u64,
        cx: &mut Context<'_>,
        woken: &mut Vec<Waker>,
        stale: &mut Vec<Sleep>,
    ) -> Poll<Option<Expired<T>>> {
        if let Some(expired) = self.take(&mut states, woken, stale) {
            return Poll::Ready(Some(expired));
        }
        let mut fired = None;
        // Bounded: each round moves the wheels on, or ends `Pending`; a far value takes
        // a round for each level it moves down through when the driver is ahead.
        for _ in 0..8 {
            self.catch_up(&mut states, fired);
            if let Some(expired) = self.take(&mut states, woken, stale) {
                return Poll::Ready(Some(expired));
            }
            if self.is_ended(&states) {
                // Ended only if no shard was put in use since the count.
                if self.holds_all(&mut states, self.in_use.load(Ordering::Acquire)) {
                    return Poll::Ready(None);
                }
                continue;
            }
            // An insert into a shard put in use after this count sees the consumer
            // registered.
            let in_use = self
                .waiting
                .register(owner, cx.waker(), || self.in_use.load(Ordering::Acquire));
            if !self.holds_all(&mut states, in_use) {
                // Look at those shards first; registered again if still waiting.
                self.waiting.unregister(owner, cx.waker());
                continue;
            }
            // The handle count read after the registration: a drop that left one
            // handle before it is seen here, one after it wakes this consumer. Ended
            // only if no shard was put in use since `in_use` was read (the next
            // round's check reads it after the count).
            if self.is_ended(&states) {
                self.waiting.unregister(owner, cx.waker());
                continue;
            }
            let (fired_at, replaced) = self.aim(&mut states);
            stale.extend(replaced);
            let Some(step) = fired_at else {
                return Poll::Pending;
            };
            // Not waiting after all: the next round takes what is due, or registers
            // again. A sleep completed in this poll, found due, not fired by the
            // driver: its waker never ran, so the others waiting are woken here, as its
            // firing would have. (A step the driver processed has ended, in every
            // shard.)
            self.waiting.unregister(owner, cx.waker());
            woken.extend(self.waiting.take());
            fired = Some(step);
        }
        woken.push(cx.waker().clone());
        Poll::Pending
    }

    /// The queue's earliest due value, if any, out of its shard, which stands its
    /// sleep down (into `stale`) if nothing is left there to time; if that ended the
    /// queue, the other consumers waiting (into `woken`) see the end, which nothing
    /// else would bring them.
    fn take<'a>(
        &'a self,
        states: &mut Locked<'a, T>,
        woken: &mut Vec<Waker>,
        stale: &mut Vec<Sleep>,
    ) -> Option<Expired<T>> {
        let (shard, expired) = pop_earliest(states)?;
        stale.extend(states.get_mut(shard).stand_down_if_empty());
        self.wake_if_ended_holding(states, woken);
        Some(expired)
    }

    /// Whether `states` holds every shard of the first `in_use` (a count read since
    /// they were locked); if not, those put in use since are locked too, in order, for
    /// the caller to look again.
    fn holds_all<'a>(&'a self, states: &mut Locked<'a, T>, in_use: usize) -> bool {
        if in_use <= states.len() {
            return true;
        }
        states.extend(&self.shards, in_use);
        false
    }

    /// The consumers waiting, into `woken`, if the queue is ended (every shard in use
    /// empty, those put in use since `states` were counted included).
    fn wake_if_ended_holding<'a>(&'a self, states: &mut Locked<'a, T>, woken: &mut Vec<Waker>) {
        if !self.is_ended(states) {
            return;
        }
        states.extend(&self.shards, self.in_use.load(Ordering::Acquire));
        if self.is_ended(states) {
            woken.extend(self.waiting.take());
        }
    }

    /// Moves every shard's wheel on to now on the timer's clock, and at least to the
    /// step `fired` (one a sleep of this poll found due).
    fn catch_up(&self, states: &mut Locked<'_, T>, fired: Option<u64>) {
        let shared = self.timer.shared();
        let now = shared.now();
        let through = shared.clock.step_now(now).max(fired.unwrap_or(0));
        let offset = shared.clock.unclamped_offset_of(now);
        for state in states.iter_mut() {
            state.catch_up(through, offset);
        }
    }

    /// Aims every shard's sleep at its earliest value: the latest step among those a
    /// sleep found due when aimed (`None`: every one is pending), and the sleeps the
    /// aiming replaced, to let go of after the locks.
    fn aim(&self, states: &mut Locked<'_, T>) -> (Option<u64>, Vec<Sleep>) {
        let (mut fired_at, mut replaced) = (None, Vec::new());
        for state in states.iter_mut() {
            let (aimed, old) = state.aim(|at| self.timer.sleep_until_on_clock(at), &self.wake_all);
            replaced.extend(old);
            if let Aimed::Fired(step) = aimed {
                fired_at = Some(fired_at.map_or(step, |at: u64| at.max(step)));
            }
        }
        (fired_at, replaced)
    }
}

/// Takes the first due value of the shard whose first is earliest, with that shard's
/// number. Every shard is caught up to the same step, so each one's first due value
/// is its earliest, and the earliest of those the queue's.
#[inline]
fn pop_earliest<T>(states: &mut Locked<'_, T>) -> Option<(usize, Expired<T>)> {
    let shard = if states.len() == 1 {
        0
    } else {
        let ((step, _), shard) = states
            .iter()
            .filter_map(|state| Some((state.due_order()?, state.shard)))
            .min()?;
        // A shard not caught up as far may hold an earlier value, pending still.
        if states.iter().any(|state| {
            state
                .wheel
                .next_expiration()
                .is_some_and(|next| next <= step)
        }) {
            return None;
        }
        shard
    };
    Some((shard, states.get_mut(shard).pop()?))
}

/// Lets go of a shard's own sleep, after the shards' locks: not a cancel a user made,
/// so not counted as one.
#[inline]
pub(super) fn discard(sleep: Option<Sleep>) {
    if let Some(sleep) = sleep {
        sleep.discard();
    }
}

impl<T: Send> SiteSource for Queue<T> {
    /// The tags of the values held, pending or due and not yet taken.
    fn tally(&self, tally: &mut Tally) {
        for shard in self.shards.iter() {
            let state = lock(&shard.state);
            let Some(tags) = &state.tags else {
                return;
            };
            for index in state.wheel.indices() {
                let tag = tags.get(index);
                debug_assert!(tag.is_some(), "every value of a tracking queue has its tag");
                if let Some(tag) = tag {
                    tally.add(tag);
                }
            }
        }
    }
}
