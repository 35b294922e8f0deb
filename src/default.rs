//! The process-wide [default timer](crate#default-timer) and the free functions on it.

use std::future::IntoFuture;
use std::sync::OnceLock;
use std::time::Duration;

use crate::{Instant, Interval, Sleep, Timeout, Timer};

/// The process-wide timer behind the free functions; see [the crate docs](crate#default-timer).
pub(crate) fn default_timer() -> &'static Timer {
    static DEFAULT: OnceLock<Timer> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        // Its runtime is built, run and kept on its own thread: nothing here enters
        // Tokio's context or drops a runtime, so a first use where Tokio holds its
        // context borrowed works, and a failure panics (documented) without aborting
        // and leaves the next call to try again.
        let runtime = crate::background::runtime()
            .expect("tokio-wheel: cannot start the default timer's thread and runtime");
        Timer::builder()
            .real_clock()
            .build_on(runtime)
            .expect("tokio-wheel: cannot start the default timer's driver")
    })
}

/// Sleeps for `duration` on the [default timer](crate#default-timer); see
/// [`Timer::sleep`].
///
/// # Panics
///
/// The first call panics if the default timer's thread or runtime cannot be created.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
///
/// tokio_wheel::sleep(Duration::from_millis(20)).await;
/// # }
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    default_timer().sleep(duration)
}

/// Sleeps until `deadline` on the [default timer](crate#default-timer); see
/// [`Timer::sleep_until`].
///
/// # Panics
///
/// As [`sleep`].
pub fn sleep_until(deadline: Instant) -> Sleep {
    default_timer().sleep_until(deadline)
}

/// Runs `future` with a deadline `duration` from now on the
/// [default timer](crate#default-timer); see [`Timeout`].
///
/// # Panics
///
/// As [`sleep`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
///
/// let slow = tokio_wheel::timeout(Duration::from_millis(20), std::future::pending::<()>());
/// assert!(slow.await.is_err());
/// # }
/// ```
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    default_timer().timeout(duration, future)
}

/// Runs `future` with a deadline at `deadline` on the
/// [default timer](crate#default-timer); see [`Timeout`].
///
/// # Panics
///
/// As [`sleep`].
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    default_timer().timeout_at(deadline, future)
}

/// An [`Interval`] on the [default timer](crate#default-timer); see
/// [`Timer::interval`].
///
/// # Panics
///
/// As [`sleep`].
pub fn interval(period: Duration) -> Interval {
    default_timer().interval(period)
}
