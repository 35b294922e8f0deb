//! [`Suspended`]: how long the machine has been suspended since a timer's origin, the
//! offset between Tokio's clock and a suspend-aware timer's.
//!
//! Tokio's clock (`Instant`, `CLOCK_MONOTONIC` on Linux) stops while the machine is
//! suspended; `CLOCK_BOOTTIME` runs on. Their difference grows by exactly the time
//! spent suspended, so a suspend-aware timer keeps the wheel, its steps and Tokio's
//! instants, and reads "now" as Tokio's now plus the growth of that difference since
//! its origin (plus, with `test-util`, the suspends a test simulated). Only that one
//! offset differs from an ordinary timer: a deadline given as a duration is now plus
//! the duration on this clock, one given as a Tokio `Instant` is moved by the offset
//! when given.
//!
//! Never early: the difference at the origin is read so as to err large (Tokio's clock
//! first), later ones so as to err small (the boot clock first), and the offset never
//! goes back (the largest one seen is kept), so the offset is at most the time really
//! suspended, by a few nanoseconds of reading.
//!
//! Where there is no boot clock to read (every platform but Linux and Android), only
//! simulated suspends count: see docs/GUIDE.md for what each platform's clock does.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::sync::AtomicU64;

/// The time suspended since a timer's origin, as its clock counts it.
#[derive(Debug)]
pub(crate) struct Suspended {
    /// `CLOCK_BOOTTIME - CLOCK_MONOTONIC` at the origin, in nanoseconds, read large.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    base: Option<i128>,
    /// The largest offset handed out, in nanoseconds: the offset never goes back, so
    /// neither does the timer's clock.
    seen: AtomicU64,
    /// The total of the suspends simulated ([`Suspended::simulate`]), in nanoseconds.
    #[cfg(feature = "test-util")]
    simulated: AtomicU64,
}

impl Suspended {
    /// Counting from now.
    pub(crate) fn new() -> Suspended {
        Suspended {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            base: platform::boot_minus_monotonic(platform::Err::Large),
            seen: AtomicU64::new(0),
            #[cfg(feature = "test-util")]
            simulated: AtomicU64::new(0),
        }
    }

    /// The time suspended since the origin, as of now: never less than an earlier
    /// answer, never more than the time really (or in simulation) suspended.
    #[inline]
    pub(crate) fn since_origin(&self) -> Duration {
        #[allow(unused_mut)]
        let mut ns = self.measured();
        #[cfg(feature = "test-util")]
        {
            ns = ns.saturating_add(self.simulated.load(Ordering::SeqCst));
        }
        // A read-modify-write only when the offset moved on: most reads share the line.
        let mut seen = self.seen.load(Ordering::SeqCst);
        if ns > seen {
            seen = self.seen.fetch_max(ns, Ordering::SeqCst);
        }
        Duration::from_nanos(seen.max(ns))
    }

    /// The growth of the boot clock's lead over Tokio's since the origin, read small.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn measured(&self) -> u64 {
        let (Some(base), Some(now)) = (
            self.base,
            platform::boot_minus_monotonic(platform::Err::Small),
        ) else {
            return 0;
        };
        u64::try_from(now - base).unwrap_or(0)
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn measured(&self) -> u64 {
        0
    }

    /// As if the machine had been suspended for `duration` just now.
    #[cfg(feature = "test-util")]
    pub(crate) fn simulate(&self, duration: Duration) {
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .simulated
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |total| {
                Some(total.saturating_add(ns))
            });
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod platform {
    use rustix::time::{clock_gettime, ClockId, Timespec};

    /// Which way a reading of two clocks, one after the other, errs.
    #[derive(Clone, Copy)]
    pub(super) enum Err {
        /// Monotonic first: the boot clock, read after it, has moved on.
        Large,
        /// Boot clock first: the monotonic clock, read after it, has moved on.
        Small,
    }

    fn nanos(t: Timespec) -> i128 {
        i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
    }

    /// `CLOCK_BOOTTIME - CLOCK_MONOTONIC`, in nanoseconds; `None` where the kernel
    /// refuses the boot clock (older than 2.6.39, or a sandbox's filter).
    pub(super) fn boot_minus_monotonic(err: Err) -> Option<i128> {
        // `clock_gettime` panics on a refused clock: asked once, the answer kept.
        static BOOT_CLOCK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let works = *BOOT_CLOCK.get_or_init(|| {
            rustix::time::clock_gettime_dynamic(rustix::time::DynamicClockId::Boottime).is_ok()
        });
        if !works {
            return None;
        }
        Some(match err {
            Err::Large => {
                let mono = nanos(clock_gettime(ClockId::Monotonic));
                nanos(clock_gettime(ClockId::Boottime)) - mono
            }
            Err::Small => {
                let boot = nanos(clock_gettime(ClockId::Boottime));
                boot - nanos(clock_gettime(ClockId::Monotonic))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_starts_near_zero_and_never_goes_back() {
        let suspended = Suspended::new();
        let first = suspended.since_origin();
        // No test machine suspends within a test; a millisecond is room for the reads.
        assert!(first < Duration::from_millis(1), "{first:?}");
        assert!(suspended.since_origin() >= first);
    }

    #[cfg(feature = "test-util")]
    #[test]
    fn simulated_suspends_add_up_and_saturate() {
        let suspended = Suspended::new();
        suspended.simulate(Duration::from_secs(3));
        suspended.simulate(Duration::from_secs(4));
        let total = suspended.since_origin();
        assert!(total >= Duration::from_secs(7), "{total:?}");
        assert!(total < Duration::from_secs(7) + Duration::from_millis(1));
        suspended.simulate(Duration::MAX);
        assert!(suspended.since_origin() >= Duration::from_nanos(u64::MAX));
    }
}
