//! A [`DelayQueue`](super::DelayQueue) handle's hold on the queue: its place in the
//! count of handles, and the consumers it registered, both gone with it.
//!
//! The queue ends like a channel: once it is empty and no handle but the one polled is
//! left, nothing can insert any more, so its consumers get `None` (a queue with one
//! owner drains and ends, as tokio-util's does). The queue counts its handles itself,
//! not through the `Arc`'s strong count, which a tracking timer's `pending_by_site`
//! raises for a moment too; and the drop that leaves one handle wakes the consumers
//! waiting, so that those on an empty queue see the end.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::expired::Expired;
use super::queue::Queue;

/// One handle of a queue: what a `DelayQueue` is.
pub(super) struct Handle<T> {
    queue: Arc<Queue<T>>,
    /// The owner this handle registers its consumers under, when polled through
    /// `poll_expired` or as a `Stream`: every handle has its own.
    owner: u64,
    /// Whether it ever registered one, so that its drop must forget them.
    registered: AtomicBool,
}

impl<T> Handle<T> {
    /// A new handle of `queue`, counted among its handles.
    pub(super) fn new(queue: Arc<Queue<T>>) -> Handle<T> {
        // Relaxed: a handle is made from another (or with the queue), so the count is
        // at least one already for every reader that could tell.
        queue.handles.fetch_add(1, Ordering::Relaxed);
        Handle {
            owner: queue.waiting.owner(),
            queue,
            registered: AtomicBool::new(false),
        }
    }

    /// The queue's `poll_expired` for a consumer registered under this handle.
    pub(super) fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        let polled = self.queue.poll_expired(self.owner, cx);
        if polled.is_pending() && !self.registered.load(Ordering::Relaxed) {
            self.registered.store(true, Ordering::Relaxed);
        }
        polled
    }
}

impl<T> Deref for Handle<T> {
    type Target = Queue<T>;

    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        Handle::new(self.queue.clone())
    }
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        if *self.registered.get_mut() {
            self.queue.waiting.forget(self.owner);
        }
        let queue = &*self.queue;
        // Counted down before the waiting list is taken, under its lock; a consumer
        // registers under that lock before it reads the count: either its registration
        // comes first and is taken below, or the count it reads is this one.
        let before = queue.handles.fetch_sub(1, Ordering::SeqCst);
        if before == 2 {
            // One handle left: nothing but it can insert, so an empty queue has ended.
            // Every consumer waiting looks again (on a queue that holds values, they
            // wait again).
            queue.wake(queue.waiting.take());
        }
    }
}
