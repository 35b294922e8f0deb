//! hyper 1.x's runtime timer (feature `hyper`): `impl hyper::rt::Timer for Timer`, so
//! that `http1::Builder::new().timer(timer.clone())` runs hyper's header-read
//! timeouts, keep-alive and HTTP/2 pings on the wheel.
//!
//! hyper speaks `std::time::Instant`; the wheel, Tokio's. The two are the same clock
//! except under Tokio's paused clock, where only Tokio's is paused: `now()` therefore
//! reads the timer's own clock (Tokio's, with the feature `test-util`), so that the
//! deadlines hyper computes from it agree with the wheel in paused-clock tests too.

use std::pin::Pin;
use std::time::{Duration, Instant as StdInstant};

use ::hyper::rt;
use tokio::time::Instant;

use crate::sleep::Sleep;
use crate::timer::Timer;

/// hyper's timer on this wheel. Sleeps are boxed [`Sleep`]s, and [`reset`]
/// (`rt::Timer::reset`) moves one in place: no new box, no new wheel entry.
///
/// [`reset`]: rt::Timer::reset
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
impl rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(Timer::sleep(self, duration))
    }

    /// Never panics: an instant before the timer's creation (or Tokio's paused
    /// clock's start) is in the past, and the sleep completes on its first poll.
    fn sleep_until(&self, deadline: StdInstant) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(Timer::sleep_until(self, Instant::from_std(deadline)))
    }

    /// The clock this timer measures durations from: with the feature `test-util`,
    /// Tokio's, paused when Tokio's is; the real clock without it, or when its
    /// driver's runtime cannot be paused.
    fn now(&self) -> StdInstant {
        // Tokio's clock, which the deadlines hyper gives back are moved from.
        let shared = self.shared();
        shared.reported(shared.now()).into_std()
    }

    /// Moves a [`Sleep`] this timer made in place; any other sleep (another
    /// implementation's, or another `Timer`'s, whose clock may not be this one's) is
    /// replaced by a new one from this timer, since `new_deadline` is an instant of
    /// this timer's [`now`](rt::Timer::now).
    fn reset(&self, sleep: &mut Pin<Box<dyn rt::Sleep>>, new_deadline: StdInstant) {
        match sleep.as_mut().downcast_mut_pin::<Sleep>() {
            Some(ours) if std::ptr::eq(ours.shared(), &**self.shared()) => {
                ours.reset(Instant::from_std(new_deadline))
            }
            _ => *sleep = rt::Timer::sleep_until(self, new_deadline),
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
impl rt::Sleep for Sleep {}
