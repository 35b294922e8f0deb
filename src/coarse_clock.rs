//! [`CoarseBound`]: a bound on the real clock that is cheaper than reading it.
//!
//! Where the kernel keeps a coarse monotonic clock (Linux, Android: the same clock as
//! `Instant`'s, as of the kernel's last tick, read without the precise clock's
//! hardware counter), that reading plus a margin for its lag bounds the real clock
//! from above. A future about to return `Pending` on a real-clock driver asks whether
//! its deadline has passed ([`Shared::due`](crate::driver::Shared::due)); a deadline
//! after the bound has not, and only one within the margin of now pays for the precise
//! read.
//!
//! The bound only ever rules a deadline *out*. Were the coarse clock ever to lag by
//! more than the margin, a deadline that had just passed would be taken for one not
//! yet reached, and its timer would wait for the driver's next turn: late by less
//! than a tick and a millisecond, as a deadline that passes just after the precise
//! read is. Never early.
//!
//! Elsewhere, or where the kernel refuses the coarse clock (a sandbox's filter), there
//! is no bound, and the clock is read.

use std::sync::OnceLock;

use tokio::time::Instant;

use crate::clock::Clock;

/// How far the coarse clock may lag the precise one: it is updated on the kernel's
/// tick (1 to 10 ms, by the kernel's configuration), which a busy or virtualised host
/// can run late by more than one. Fixed rather than asked of the kernel, whose answer
/// (`clock_getres`) comes unchecked through rustix; a deadline this close to now pays
/// the precise read.
const MARGIN: i64 = 50_000_000;

/// An upper bound on the real clock, as an offset from a timer's origin (see
/// [`Clock::offset_of`]): the coarse clock's reading plus `base`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoarseBound {
    /// The coarse clock's nanoseconds to an offset from the origin, plus the margin.
    base: i64,
}

impl CoarseBound {
    /// The bound for offsets from `clock`'s origin, where the platform has one.
    pub(crate) fn new(clock: &Clock) -> Option<CoarseBound> {
        let calibration = calibration()?;
        Some(CoarseBound::from_calibration(clock, calibration))
    }

    fn from_calibration(clock: &Clock, calibration: &Calibration) -> CoarseBound {
        // `calibration.instant` is at or after the instant the raw reading names, so
        // a raw reading `x` names an instant at or before `instant + (x - raw)`.
        let at = clock.unclamped_offset_of(Instant::from_std(calibration.instant));
        CoarseBound {
            base: at
                .saturating_sub(calibration.raw)
                .saturating_add(calibration.margin),
        }
    }

    /// Whether the real clock is before the deadline `offset`: `false` when it cannot
    /// tell.
    #[inline]
    pub(crate) fn is_before(&self, offset: i64) -> bool {
        coarse_nanos().is_some_and(|coarse| self.bound_at(coarse) < offset)
    }

    /// The bound when the coarse clock reads `coarse` nanoseconds.
    #[inline]
    fn bound_at(&self, coarse: i64) -> i64 {
        coarse.saturating_add(self.base)
    }
}

/// The precise monotonic clock's reading, in nanoseconds, and an `Instant` read just
/// after it; the margin the coarse clock gets.
#[derive(Debug)]
struct Calibration {
    raw: i64,
    instant: std::time::Instant,
    margin: i64,
}

impl Calibration {
    /// Taken now, if the coarse clock can be read here.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn take() -> Option<Calibration> {
        // The coarse clock answers, or there is no bound.
        platform::coarse_nanos()?;
        // `Instant` is `CLOCK_MONOTONIC` here: the raw reading first, so that the
        // instant read after it is at or after the one the reading names.
        let raw = platform::monotonic_nanos()?;
        let instant = std::time::Instant::now();
        Some(Calibration {
            raw,
            instant,
            margin: MARGIN,
        })
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn take() -> Option<Calibration> {
        None
    }
}

/// Read once per process.
fn calibration() -> Option<&'static Calibration> {
    static CALIBRATION: OnceLock<Option<Calibration>> = OnceLock::new();
    CALIBRATION.get_or_init(Calibration::take).as_ref()
}

/// The coarse clock, in nanoseconds; `None` if the kernel refuses it.
#[inline]
fn coarse_nanos() -> Option<i64> {
    platform::coarse_nanos()
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod platform {
    use rustix::time::{clock_gettime_dynamic, ClockId, DynamicClockId, Timespec};

    // `tv_nsec` is a `c_long` on some 32-bit targets.
    #[allow(clippy::useless_conversion)]
    fn nanos(at: Timespec) -> i64 {
        at.tv_sec
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(at.tv_nsec))
    }

    /// A clock that says when it cannot be read, rather than panicking.
    #[inline]
    fn read(clock: ClockId) -> Option<i64> {
        clock_gettime_dynamic(DynamicClockId::Known(clock))
            .ok()
            .map(nanos)
    }

    #[inline]
    pub(super) fn coarse_nanos() -> Option<i64> {
        read(ClockId::MonotonicCoarse)
    }

    pub(super) fn monotonic_nanos() -> Option<i64> {
        read(ClockId::Monotonic)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod platform {
    /// Never called: without a calibration there is no bound to read.
    pub(super) fn coarse_nanos() -> Option<i64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn clock(origin: Instant) -> Clock {
        Clock::new(origin, Duration::from_millis(1), 4)
    }

    #[test]
    fn the_bound_is_the_calibrated_instant_moved_on_by_the_coarse_clock_plus_the_margin() {
        let origin = Instant::now();
        let calibration = Calibration {
            raw: 5_000_000_000,
            instant: (origin + Duration::from_millis(7)).into_std(),
            margin: 16_000_000,
        };
        let bound = CoarseBound::from_calibration(&clock(origin), &calibration);
        // At the calibration's raw reading: its instant (7 ms after the origin) plus
        // the margin.
        assert_eq!(bound.bound_at(5_000_000_000), 7_000_000 + 16_000_000);
        // A second of the coarse clock later, a second later.
        assert_eq!(bound.bound_at(6_000_000_000), 1_007_000_000 + 16_000_000);
        // An instant before the origin makes a negative offset, not a saturated one.
        let early = Calibration {
            instant: origin.into_std() - Duration::from_millis(3),
            ..calibration
        };
        let bound = CoarseBound::from_calibration(&clock(origin), &early);
        assert_eq!(bound.bound_at(5_000_000_000), -3_000_000 + 16_000_000);
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn on_this_kernel_the_bound_lies_within_a_second_of_the_clock() {
        // Tolerant (a loaded machine runs the kernel's tick late) but bounded both
        // ways: an error of sign or scale in the calibration is seconds or years.
        let origin = Instant::now() - Duration::from_secs(3);
        let clock = clock(origin);
        let bound = CoarseBound::new(&clock).expect("Linux has a coarse clock");
        for _ in 0..1000 {
            let now = clock.unclamped_offset_of(Instant::now());
            let upper = bound.bound_at(coarse_nanos().expect("read before"));
            assert!(upper >= now - 1_000_000_000, "{upper} far below {now}");
            assert!(upper <= now + 1_000_000_000, "{upper} far above {now}");
        }
        // Far from now either way, the answer needs no precise read.
        let now = clock.unclamped_offset_of(Instant::now());
        assert!(bound.is_before(now + 10_000_000_000));
        assert!(!bound.is_before(now - 10_000_000_000));
    }
}
