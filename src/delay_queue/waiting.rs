//! The consumers waiting on a [`DelayQueue`](crate::DelayQueue), and the waker of the
//! queue's sleep, which wakes them all.
//!
//! Each waiting consumer is registered under an *owner*: a `next_expired` future, or a
//! handle polled through `poll_expired` or as a `Stream`. An owner that goes away (the
//! future dropped, by a `timeout` or a `select!`; the handle dropped) takes its
//! registration with it, so consumers that give up leave nothing behind. A wake takes
//! every registration: the woken poll again, and register again if they still wait.
//!
//! This lock is taken alone, or after shards' locks, never before them: the sleeps'
//! waker, which the driver calls, takes it alone, and a consumer registers while it
//! holds the locks of the shards in use, so that an insert (under one of them) sees it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Wake, Waker};

use crate::sync::{lock, AtomicUsize, Mutex};
use crate::wake::wake_all;

pub(super) struct Waiting {
    /// `(owner, waker)`: at most one waker per owner and task.
    wakers: Mutex<Vec<(u64, Waker)>>,
    /// `wakers.len()`, readable without the lock: whether an insert must see to the
    /// sleep (it holds its shard's lock, under which, with the others in use, every
    /// registration is made).
    len: AtomicUsize,
    /// The next owner handed out; owners are never reused.
    next_owner: std::sync::atomic::AtomicU64,
}

impl Waiting {
    pub(super) fn new() -> Waiting {
        Waiting {
            wakers: Mutex::new(Vec::new()),
            len: AtomicUsize::new(0),
            next_owner: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// An owner of registrations no other one has.
    pub(super) fn owner(&self) -> u64 {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers `waker` under `owner`, unless that owner has one that wakes the same
    /// task; then, under the same lock, runs `then`, which so sees whatever an
    /// [`exclusive`](Waiting::exclusive) before it did.
    pub(super) fn register<R>(&self, owner: u64, waker: &Waker, then: impl FnOnce() -> R) -> R {
        let mut wakers = lock(&self.wakers);
        if !wakers
            .iter()
            .any(|(o, w)| *o == owner && w.will_wake(waker))
        {
            wakers.push((owner, waker.clone()));
            self.len.store(wakers.len(), Ordering::SeqCst);
        }
        then()
    }

    /// Runs `f` under this lock: what it does is seen by a later registration's
    /// `then`, and it sees (as does every read of [`any`](Waiting::any) after it) every
    /// registration before it.
    pub(super) fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _wakers = lock(&self.wakers);
        f()
    }

    /// Drops `owner`'s registration of `waker`'s task, if any: that task polls, and
    /// registers again if it still waits.
    pub(super) fn unregister(&self, owner: u64, waker: &Waker) {
        let mut wakers = lock(&self.wakers);
        let found = wakers
            .iter()
            .position(|(o, w)| *o == owner && w.will_wake(waker));
        let gone = found.map(|i| wakers.swap_remove(i).1);
        self.len.store(wakers.len(), Ordering::SeqCst);
        drop(wakers);
        drop(gone);
    }

    /// Drops `owner`'s registrations (it no longer waits). The wakers are dropped after
    /// the lock.
    pub(super) fn forget(&self, owner: u64) {
        let mut wakers = lock(&self.wakers);
        let mut gone = Vec::new();
        let mut i = 0;
        while i < wakers.len() {
            if wakers[i].0 == owner {
                gone.push(wakers.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        self.len.store(wakers.len(), Ordering::SeqCst);
        drop(wakers);
        drop(gone);
    }

    /// Takes every registration: the wakers to wake once the caller's locks are
    /// released.
    pub(super) fn take(&self) -> Vec<Waker> {
        let mut wakers = lock(&self.wakers);
        if wakers.is_empty() {
            return Vec::new();
        }
        self.len.store(0, Ordering::SeqCst);
        std::mem::take(&mut *wakers)
            .into_iter()
            .map(|(_, waker)| waker)
            .collect()
    }

    /// Whether any consumer is registered.
    #[inline]
    pub(super) fn any(&self) -> bool {
        self.len.load(Ordering::SeqCst) > 0
    }

    /// How many registrations there are.
    pub(super) fn count(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }
}

/// The waker of the queue's sleeps: wakes every consumer waiting, so that no wakeup is
/// lost with a consumer that was dropped before it polled again.
impl Wake for Waiting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// Every consumer is woken, whichever of their wakers panics; then the first panic
    /// goes on to the caller, to whom this is one waker that panicked: the driver,
    /// which counts it.
    fn wake_by_ref(self: &Arc<Self>) {
        if let Err(panicked) = wake_all(self.take()) {
            panicked.resume();
        }
    }
}
