//! [`NextExpired`]: a consumer's wait for the next expired value, and the
//! registration among the waiting that it takes with it when dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::expired::Expired;
use super::queue::Queue;

/// The future of [`DelayQueue::next_expired`](super::DelayQueue::next_expired): the
/// next value whose deadline has passed, or `None` once the queue is empty and closed,
/// or empty with no handle but the one it borrows.
///
/// # Cancellation
///
/// Dropped while it waits, it leaves nothing behind: its registration among the
/// consumers waiting goes with it.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct NextExpired<'a, T> {
    queue: &'a Queue<T>,
    /// Its registration among the consumers waiting, once it has waited.
    owner: Option<u64>,
}

impl<'a, T> NextExpired<'a, T> {
    pub(super) fn new(queue: &'a Queue<T>) -> NextExpired<'a, T> {
        NextExpired { queue, owner: None }
    }
}

impl<T> Future for NextExpired<'_, T> {
    type Output = Option<Expired<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let queue = this.queue;
        let owner = *this.owner.get_or_insert_with(|| queue.waiting.owner());
        let polled = queue.poll_expired(owner, cx);
        if polled.is_ready() {
            // Woken and taken, or never waited: nothing is left registered but, at
            // most, a waker of an earlier poll that was not woken.
            if let Some(owner) = this.owner.take() {
                queue.waiting.forget(owner);
            }
        }
        polled
    }
}

impl<T> Drop for NextExpired<'_, T> {
    fn drop(&mut self) {
        if let Some(owner) = self.owner {
            self.queue.waiting.forget(owner);
        }
    }
}

impl<T> fmt::Debug for NextExpired<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NextExpired")
            .field("waiting", &self.owner.is_some())
            .finish_non_exhaustive()
    }
}
