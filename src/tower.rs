//! A drop-in for [`tower::timeout`][tower-timeout] on the wheel (feature `tower`).
//!
//! Swap the import and keep the rest: the layer's error is a [`tower::BoxError`]
//! holding [`tower::timeout::error::Elapsed`] on expiry, exactly as tower's own, so
//! `err.is::<Elapsed>()` checks and axum's `HandleErrorLayer` recipes work unchanged.
//! It is tower's `Elapsed`, not this crate's [`Elapsed`](crate::Elapsed) (which is
//! what a bare [`Timeout`](crate::Timeout) future gives): import it from tower.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use tower::{service_fn, BoxError, Service, ServiceBuilder, ServiceExt};
//! use tower::timeout::error::Elapsed;
//! use tokio_wheel::tower::TimeoutLayer; // was: tower::timeout::TimeoutLayer
//!
//! let mut slow = ServiceBuilder::new()
//!     .layer(TimeoutLayer::new(Duration::from_millis(50)))
//!     .service(service_fn(|_: ()| std::future::pending::<Result<(), BoxError>>()));
//! let err = slow.ready().await.unwrap().call(()).await.unwrap_err();
//! assert!(err.is::<Elapsed>()); // tower's Elapsed...
//! assert!(!err.is::<tokio_wheel::Elapsed>()); // ...not this crate's
//! # }
//! ```
//!
//! [tower-timeout]: https://docs.rs/tower/0.5/tower/timeout/index.html
//! [`tower::BoxError`]: https://docs.rs/tower/0.5/tower/type.BoxError.html
//! [`tower::timeout::error::Elapsed`]: https://docs.rs/tower/0.5/tower/timeout/error/struct.Elapsed.html

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use ::tower::timeout::error::Elapsed;
use ::tower::{BoxError, Layer, Service};
use pin_project_lite::pin_project;

use crate::default::with_default;
use crate::timer::Timer;

/// Applies a [`Timeout`] to every request of the services it wraps.
///
/// [`new`](TimeoutLayer::new) uses the [default timer](crate#default-timer) (the
/// process-wide one; with the feature `test-util`, the caller's runtime's),
/// [`with_timer`](TimeoutLayer::with_timer) an explicit [`Timer`] (whose tick bounds
/// how late a request is cut off, and which follows Tokio's paused clock in tests).
#[derive(Clone, Debug)]
pub struct TimeoutLayer {
    /// `None`: the default timer, looked up when a request is made, so that `new` is a
    /// `const fn` as tower's is.
    timer: Option<Timer>,
    timeout: Duration,
}

impl TimeoutLayer {
    /// Requests time out `timeout` after the call, on the default timer.
    ///
    /// A `const fn`, as tower's: the default timer is created by the first request.
    ///
    /// # Panics
    ///
    /// The first request panics as [`sleep`](crate::sleep) does if the default timer
    /// cannot be created.
    pub const fn new(timeout: Duration) -> Self {
        TimeoutLayer {
            timer: None,
            timeout,
        }
    }

    /// Requests time out `timeout` after the call, on `timer`.
    pub fn with_timer(timer: Timer, timeout: Duration) -> Self {
        TimeoutLayer {
            timer: Some(timer),
            timeout,
        }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timer: self.timer.clone(),
            timeout: self.timeout,
        }
    }
}

/// A service whose requests fail with tower's [`Elapsed`][elapsed] (boxed) if the inner
/// service has not answered `timeout` after the call.
///
/// The error is tower's `tower::timeout::error::Elapsed`, as from tower's own layer,
/// **not** [`tokio_wheel::Elapsed`](crate::Elapsed): `err.is::<tokio_wheel::Elapsed>()`
/// is always false.
///
/// [elapsed]: https://docs.rs/tower/0.5/tower/timeout/error/struct.Elapsed.html
///
/// The deadline starts at `call`, not at `poll_ready`: like tower's, it bounds the
/// request, not the wait for capacity (put a timeout around readiness yourself, or a
/// load-shed layer, if that can stall). The inner future is polled before the
/// deadline is checked, so an answer that is ready when the deadline passes wins.
#[derive(Clone, Debug)]
pub struct Timeout<S> {
    inner: S,
    /// `None`: the default timer (see `TimeoutLayer`'s).
    timer: Option<Timer>,
    timeout: Duration,
}

impl<S> Timeout<S> {
    /// `inner` with a deadline of `timeout` per request, on the default timer.
    ///
    /// A `const fn`, as tower's: the default timer is created by the first request.
    ///
    /// # Panics
    ///
    /// The first request panics as [`sleep`](crate::sleep) does if the default timer
    /// cannot be created.
    pub const fn new(inner: S, timeout: Duration) -> Self {
        Timeout {
            inner,
            timer: None,
            timeout,
        }
    }

    /// `inner` with a deadline of `timeout` per request, on `timer`.
    pub fn with_timer(inner: S, timer: Timer, timeout: Duration) -> Self {
        Timeout {
            inner,
            timer: Some(timer),
            timeout,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, Request> Service<Request> for Timeout<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        let response = self.inner.call(request);
        let inner = match &self.timer {
            Some(timer) => timer.timeout(self.timeout, response),
            None => with_default(|timer| timer.timeout(self.timeout, response)),
        };
        ResponseFuture { inner }
    }
}

pin_project! {
    /// The future of a [`Timeout`] service's response.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: crate::timeout::Timeout<F>,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().inner.poll(cx)) {
            Ok(answer) => answer.map_err(Into::into),
            Err(_) => Err(Box::new(Elapsed::new())),
        })
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("deadline", &self.inner.deadline())
            .finish_non_exhaustive()
    }
}
