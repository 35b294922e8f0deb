//! The queue every handle of one `DelayQueue` shares, and what its operations do under
//! its lock: insert, reset, a consumer's poll (due means ready), waking the waiting.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use super::expired::{Expired, Key, TryInsertError};
use super::state::{lock, Aimed, Item, State};
use super::waiting::Waiting;
use crate::error::Error;
use crate::sites::{Site, SiteSource, Tag, Tally};
use crate::sleep::Sleep;
use crate::sync::Mutex;
use crate::timer::Timer;
use crate::wheel::InsertError;

/// The queue all handles share.
pub(super) struct Queue<T> {
    pub(super) timer: Timer,
    pub(super) state: Mutex<State<T>>,
    /// The consumers waiting. Its lock is taken after `state`'s, or alone.
    pub(super) waiting: Arc<Waiting>,
    /// `waiting` as a waker: the queue's sleep is registered with it.
    pub(super) wake_all: Waker,
}

impl<T> Queue<T> {
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
    pub(super) fn insert(
        &self,
        value: T,
        offset: i64,
        now: Option<Instant>,
        site: Site,
    ) -> Result<Key, TryInsertError<T>> {
        let step = self.timer.shared().clock.step_at_offset(offset);
        let mut state = lock(&self.state);
        let serial = state.next_serial;
        let item = Item {
            value,
            serial,
            deadline: offset,
        };
        let (key, due) = match state.wheel.insert_or_due(step, item) {
            Ok(inserted) => inserted,
            Err((item, InsertError::Full | InsertError::Elapsed)) => {
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
        drop(state);
        discard(replaced);
        wake.into_iter().for_each(Waker::wake);
        Ok(Key {
            index: key.index(),
            serial,
        })
    }

    pub(super) fn reset(&self, key: &Key, offset: i64, now: Option<Instant>) -> bool {
        let to = self.timer.shared().clock.step_at_offset(offset);
        let mut state = lock(&self.state);
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
        wake.into_iter().for_each(Waker::wake);
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
        match state.aim_at(step, |at| timer.sleep_until(at), &self.wake_all) {
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
        let (mut woken, mut stale) = (Vec::new(), Vec::new());
        let polled = self.poll_expired_inner(owner, cx, &mut woken, &mut stale);
        // After the queue's lock: the consumers to wake, and the sleeps let go of.
        woken.into_iter().for_each(Waker::wake);
        stale.into_iter().for_each(|sleep| discard(Some(sleep)));
        polled
    }

    fn poll_expired_inner(
        &self,
        owner: u64,
        cx: &mut Context<'_>,
        woken: &mut Vec<Waker>,
        stale: &mut Vec<Sleep>,
    ) -> Poll<Option<Expired<T>>> {
        let mut state = lock(&self.state);
        if let Some(expired) = state.pop() {
            return self.taken(state, expired);
        }
        let shared = self.timer.shared();
        let timer = &self.timer;
        let mut fired = None;
        // Bounded: each round moves the wheel on, or ends `Pending`; a far value takes
        // a round for each level it moves down through when the driver is ahead.
        for _ in 0..8 {
            let now = shared.now();
            let through = shared.clock.step_now(now).max(fired.unwrap_or(0));
            state.catch_up(through, shared.clock.unclamped_offset_of(now));
            if let Some(expired) = state.pop() {
                return self.taken(state, expired);
            }
            if state.is_ended() {
                return Poll::Ready(None);
            }
            self.waiting.register(owner, cx.waker());
            let (aimed, replaced) = state.aim(|at| timer.sleep_until(at), &self.wake_all);
            match aimed {
                Aimed::Waiting => {
                    drop(state);
                    discard(replaced);
                    return Poll::Pending;
                }
                Aimed::Fired(step) => {
                    // Not waiting after all: the next round takes what is due, or
                    // registers again.
                    self.waiting.unregister(owner, cx.waker());
                    stale.extend(replaced);
                    // The sleep completed in this poll, found due, not fired by the
                    // driver: its waker never ran, so the others waiting are woken
                    // here, as its firing would have.
                    woken.extend(self.waiting.take());
                    fired = Some(step);
                }
            }
        }
        drop(state);
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// A consumer took `expired`: the sleep stands down if nothing is left to time.
    pub(super) fn taken(
        &self,
        mut state: crate::sync::MutexGuard<'_, State<T>>,
        expired: Expired<T>,
    ) -> Poll<Option<Expired<T>>> {
        let idle = state.stand_down_if_empty();
        drop(state);
        discard(idle);
        Poll::Ready(Some(expired))
    }
}

/// Lets go of the queue's own sleep, after the queue's lock: not a cancel a user made,
/// so not counted as one.
pub(super) fn discard(sleep: Option<Sleep>) {
    if let Some(sleep) = sleep {
        sleep.discard();
    }
}

impl<T: Send> SiteSource for Queue<T> {
    /// The tags of the values held, pending or due and not yet taken.
    fn tally(&self, tally: &mut Tally) {
        let state = lock(&self.state);
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
