//! The process-wide [default timer](crate#default-timer) and the free functions on it.

use std::future::IntoFuture;
use std::sync::OnceLock;
use std::time::Duration;

use crate::{Instant, Interval, Sleep, Timeout, Timer};

/// The process-wide timer behind the free functions; see [the crate docs](crate#default-timer).
pub(crate) fn default_timer() -> &'static Timer {
    static DEFAULT: OnceLock<Timer> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("tokio-wheel: cannot create the default timer's runtime");
        let timer = Timer::builder()
            .real_clock()
            .build_on(runtime.handle())
            .expect("tokio-wheel: the default settings are valid");
        std::thread::Builder::new()
            .name("tokio-wheel".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("tokio-wheel: cannot spawn the default timer's thread");
        timer
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
