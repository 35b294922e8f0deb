//! [`Timeout`]: a future with a deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::error::Elapsed;
use crate::sleep::Sleep;

pin_project! {
    /// A future that runs `F` until it completes or its deadline passes, whichever is
    /// first.
    ///
    /// Made by [`Timer::timeout`](crate::Timer::timeout),
    /// [`Timer::timeout_at`](crate::Timer::timeout_at) or the free functions
    /// [`timeout`](crate::timeout) and [`timeout_at`](crate::timeout_at).
    ///
    /// The inner future is polled first, so one that is ready on the first poll
    /// completes `Ok` without the timer's wheel ever being touched; the deadline
    /// registers only once the inner future has returned `Pending`. This is what makes
    /// wrapping every request in a timeout cheap when most answer in time.
    ///
    /// `Timeout<F>` is `Unpin` when `F` is.
    ///
    /// # An answer just past the deadline
    ///
    /// On the real clock an answer that comes a little after the deadline can still
    /// win: a 101 ms answer under a 100 ms deadline may be `Ok`. The deadline fires
    /// less than a tick and a millisecond late (Tokio's timer, which wakes the driver,
    /// counts whole milliseconds), and the `Timeout` then polls its future before it
    /// looks at the deadline, as Tokio's `Timeout` does, so a future that is ready by
    /// that poll wins. Never the other way: nothing is cut off before its deadline.
    /// Where the deadline must be exact to the millisecond, give the timer a 1 ms
    /// [`tick`](crate::Builder::tick); where a late answer must count as failed,
    /// compare its arrival with the deadline yourself.
    ///
    /// # Shutdown
    ///
    /// After [`Timer::shutdown`](crate::Timer::shutdown), or the loss of the driver's
    /// runtime, the deadline is still never early (see [`Sleep`](crate::Sleep#shutdown)):
    /// the inner future keeps its full time.
    ///
    /// # Cancellation
    ///
    /// Dropping a `Timeout` drops the inner future and cancels the deadline in O(1).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::time::Duration;
    /// use tokio_wheel::Timer;
    ///
    /// let timer = Timer::new();
    /// let answer = timer.timeout(Duration::from_secs(1), async { 42 }).await;
    /// assert_eq!(answer, Ok(42));
    /// assert_eq!(timer.pending(), 0);
    ///
    /// let never = timer.timeout(Duration::from_secs(1), std::future::pending::<()>());
    /// assert!(never.await.is_err());
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        sleep: Sleep,
    }
}

impl<F> Timeout<F> {
    pub(crate) fn new(future: F, sleep: Sleep) -> Self {
        Timeout { future, sleep }
    }

    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The inner future, mutably.
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.future
    }

    /// Takes the inner future out, cancelling the deadline.
    pub fn into_inner(self) -> F {
        self.future
    }

    /// The deadline.
    pub fn deadline(&self) -> tokio::time::Instant {
        self.sleep.deadline()
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        Pin::new(this.sleep).poll(cx).map(|()| Err(Elapsed::new()))
    }
}
