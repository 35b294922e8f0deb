//! [`Clock`]: the arithmetic between instants and the wheel's steps, with no state
//! but the timer's origin and tick.
//!
//! The wheel counts *steps* of a quarter of the configured tick ([`STEPS_PER_TICK`](crate::config::STEPS_PER_TICK)),
//! numbered from the timer's origin: step `k` ends at `origin + k * tick / 4`. A
//! deadline goes to the first step that ends at or after it ([`Clock::step_at_offset`],
//! rounding up), and the driver processes step `k` only once the clock has passed its
//! end ([`Clock::step_now`], rounding down). That pair of roundings is the whole "never
//! early" argument; lateness is the rest of the step plus however late the runtime
//! woke the driver.
//!
//! Deadlines are kept as signed nanoseconds from the origin ([`Clock::offset_of`]),
//! eight bytes instead of an `Instant`'s sixteen; far ones saturate, never overflow.

use std::time::Duration;

use tokio::time::Instant;

use crate::wheel::MAX_STEP;

/// How far ahead saturating deadlines go: about 30 years, as tokio's do.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Maps instants to steps and back. Step `k` ends at `origin + k * tick /
/// steps_per_tick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    /// The configured tick, as [`Timer::tick`](crate::Timer::tick) reports it.
    tick: Duration,
    /// Steps per configured tick, as `Config::steps_per_tick` decides.
    steps_per_tick: u64,
    /// A step, in nanoseconds; at least 1.
    step_ns: u64,
    /// `u64::MAX / step_ns`: dividing by a step is a multiplication by it and a
    /// correction ([`Clock::div_step`]), not a 64-bit division, on every deadline
    /// placed.
    step_inverse: u64,
    /// The farthest offset kept: the end of step [`MAX_STEP`], or of the last step
    /// that ends within `i64::MAX` nanoseconds if that comes first. A later deadline
    /// saturates here, so that the deadline a timer reports is one its step can
    /// reach, and never lies after it. Positive: at least one step.
    max_offset: i64,
}

impl Clock {
    pub(crate) fn new(origin: Instant, tick: Duration, steps_per_tick: usize) -> Self {
        let steps_per_tick = u64::try_from(steps_per_tick.max(1)).unwrap_or(1);
        let step_ns = (nanos(tick) / steps_per_tick).max(1);
        // The end of a step, so that a deadline saturated here is never before the
        // start of the step the clock is in when it is refused no more.
        // (At least one step: a step longer than i64's 292 years ends past i64::MAX.)
        let steps = MAX_STEP.min((i64::MAX as u64 / step_ns).max(1));
        let max_offset = i64::try_from(steps.saturating_mul(step_ns)).unwrap_or(i64::MAX);
        Clock {
            origin,
            tick,
            steps_per_tick,
            step_ns,
            step_inverse: u64::MAX / step_ns,
            max_offset,
        }
    }

    /// The first step that ends at or after `deadline` (saturating). The code uses
    /// [`step_at_offset`](Clock::step_at_offset), on the offsets it stores instead.
    #[cfg(test)]
    pub(crate) fn step_at(&self, deadline: Instant) -> u64 {
        self.steps_rounding_up(nanos(deadline.saturating_duration_since(self.origin)))
    }

    /// The first step that ends at or after `ns` past the origin (saturating).
    fn steps_rounding_up(&self, ns: u64) -> u64 {
        let (steps, rest) = self.div_step(ns);
        (steps + u64::from(rest != 0)).min(MAX_STEP)
    }

    /// `deadline` as signed nanoseconds from the origin, saturating at the end of the
    /// wheel's range (139 years at a 1 ms tick; i64's 292 years from a 2.2 ms tick on)
    /// and 292 years back.
    pub(crate) fn offset_of(&self, deadline: Instant) -> i64 {
        self.unclamped_offset_of(deadline).min(self.max_offset)
    }

    /// `at` as signed nanoseconds from the origin, saturating only at i64's 292 years
    /// either way: for how late a timer is at `at`, which may lie beyond the wheel's
    /// range (the paused clock gets there).
    pub(crate) fn unclamped_offset_of(&self, at: Instant) -> i64 {
        if at >= self.origin {
            i64::try_from(nanos(at - self.origin)).unwrap_or(i64::MAX)
        } else {
            -i64::try_from(nanos(self.origin - at)).unwrap_or(i64::MAX)
        }
    }

    /// The instant `offset` nanoseconds from the origin.
    pub(crate) fn instant_at(&self, offset: i64) -> Instant {
        let d = Duration::from_nanos(offset.unsigned_abs());
        if offset >= 0 {
            self.origin
                .checked_add(d)
                .unwrap_or_else(|| far_future(self.origin))
        } else {
            self.origin.checked_sub(d).unwrap_or(self.origin)
        }
    }

    /// Whether the step of the deadline at `offset` is at or before `processed`, i.e.
    /// `step_at_offset(offset) <= processed`, with a multiplication instead of the
    /// division: a `Sleep` asks this on every poll and drop.
    pub(crate) fn is_processed(&self, offset: i64, processed: u64) -> bool {
        match u64::try_from(offset) {
            // ceil(ns / step) <= processed  <=>  ns <= processed * step
            Ok(ns) => processed >= MAX_STEP || ns <= processed.saturating_mul(self.step_ns),
            Err(_) => true,
        }
    }

    /// The first step that ends at or after the deadline `offset` (saturating).
    #[inline]
    pub(crate) fn step_at_offset(&self, offset: i64) -> u64 {
        u64::try_from(offset).map_or(0, |ns| self.steps_rounding_up(ns))
    }

    /// The offset of `duration` after `now`, with `duration` capped at about 30 years
    /// (as Tokio's `sleep` caps it, and as [`deadline_after`] caps it) and the sum at
    /// the end of the wheel's range.
    #[inline]
    pub(crate) fn offset_after(&self, now: Instant, duration: Duration) -> i64 {
        // The common case, every `sleep(d)`: `now` after the origin. In u128
        // nanoseconds neither term nor their sum can overflow (each below 2^94), and
        // `max_offset` is positive, so one comparison saturates.
        if let Some(since) = now.checked_duration_since(self.origin) {
            let ns = since.as_nanos() + duration.as_nanos().min(FAR_FUTURE.as_nanos());
            return ns.min(self.max_offset as u128) as i64;
        }
        let far = i64::try_from(FAR_FUTURE.as_nanos()).unwrap_or(i64::MAX);
        let duration = i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        self.offset_of(now)
            .saturating_add(duration.min(far))
            .min(self.max_offset)
    }

    /// `offset + by`, exactly, when `offset` is at or after the origin and the sum
    /// does not pass the end of the wheel's range; `None` otherwise, where
    /// `offset_of` of the instant meant would saturate.
    #[inline]
    pub(crate) fn offset_plus(&self, offset: i64, by: Duration) -> Option<i64> {
        let offset = u64::try_from(offset).ok()?;
        let by = u64::try_from(by.as_nanos()).ok()?;
        let sum = offset.checked_add(by)?;
        // `max_offset` is positive, so a sum within it fits an `i64`.
        (sum <= self.max_offset as u64).then_some(sum as i64)
    }

    /// The last step a deadline can name, and that `step_now` can reach: deadlines
    /// saturate at `max_offset` (the wheel's last step, or i64 nanoseconds, 292 years,
    /// from a tick of about 2.1 ms, a step of 2^19 ns, on), and steps are counted from `u64` nanoseconds, which
    /// saturate 584 years after the origin. Past it, a new deadline would saturate to
    /// a step already processed and fire at once, however far it was asked for.
    pub(crate) fn last_step(&self) -> u64 {
        (u64::MAX / self.step_ns)
            .min(MAX_STEP)
            .min(self.step_at_offset(self.max_offset))
    }

    /// The last step that has ended by `now`.
    pub(crate) fn step_now(&self, now: Instant) -> u64 {
        self.div_step(nanos(now.saturating_duration_since(self.origin)))
            .0
            .min(MAX_STEP)
    }

    /// When step `step` ends.
    pub(crate) fn step_end(&self, step: u64) -> Instant {
        let ns = step.saturating_mul(self.step_ns);
        self.origin
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or_else(|| far_future(self.origin))
    }

    /// How long before `now` step `step` started: an upper bound on how late a
    /// timer due in that step is at `now` (by less than a step).
    pub(crate) fn lateness(&self, step: u64, now: Instant) -> Duration {
        now.saturating_duration_since(self.step_end(step.saturating_sub(1)))
    }

    /// `(ns / step_ns, ns % step_ns)`, exactly, without a division. The high half of
    /// `ns * step_inverse` falls short of the quotient by at most one:
    /// `step_inverse`, `(2^64 - 1) / step_ns` rounded down, is at least
    /// `(2^64 - step_ns) / step_ns`, so `ns * step_inverse / 2^64` exceeds
    /// `ns / step_ns - ns / 2^64`, and `ns < 2^64`. The remainder, under two steps,
    /// says whether it did.
    #[inline]
    fn div_step(&self, ns: u64) -> (u64, u64) {
        let steps = ((u128::from(ns) * u128::from(self.step_inverse)) >> 64) as u64;
        let rest = ns - steps * self.step_ns;
        if rest >= self.step_ns {
            (steps + 1, rest - self.step_ns)
        } else {
            (steps, rest)
        }
    }

    /// The configured tick.
    pub(crate) fn tick(&self) -> Duration {
        self.tick
    }

    /// Steps per configured tick.
    pub(crate) fn steps_per_tick(&self) -> usize {
        self.steps_per_tick as usize
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Where saturating deadlines go: [`FAR_FUTURE`] after `from`.
pub(crate) fn far_future(from: Instant) -> Instant {
    from + FAR_FUTURE
}

/// `from + d`, with `d` capped at [`FAR_FUTURE`] (about 30 years, as Tokio's `sleep`
/// caps it): the one saturation rule of every entry point that takes a duration, as
/// [`Clock::offset_after`] keeps it for those that keep offsets.
pub(crate) fn deadline_after(from: Instant, d: Duration) -> Instant {
    from.checked_add(d.min(FAR_FUTURE))
        .unwrap_or_else(|| far_future(from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_deadlines_up_and_now_down() {
        let origin = Instant::now();
        let clock = Clock::new(origin, Duration::from_millis(10), 1);
        assert_eq!(clock.step_at(origin), 0);
        assert_eq!(clock.step_at(origin + Duration::from_millis(1)), 1);
        assert_eq!(clock.step_at(origin + Duration::from_millis(10)), 1);
        assert_eq!(clock.step_at(origin + Duration::from_millis(11)), 2);
        assert_eq!(clock.step_now(origin + Duration::from_millis(9)), 0);
        assert_eq!(clock.step_now(origin + Duration::from_millis(10)), 1);
        assert_eq!(clock.step_end(3), origin + Duration::from_millis(30));
    }

    #[test]
    fn steps_are_quarter_ticks() {
        let origin = Instant::now();
        let ms = |n: u64| origin + Duration::from_micros(n * 100); // tenths of a ms
        let clock = Clock::new(origin, Duration::from_millis(10), 4);
        assert_eq!(clock.tick(), Duration::from_millis(10));
        assert_eq!(clock.step_at(ms(10)), 1);
        assert_eq!(clock.step_at(ms(25)), 1);
        assert_eq!(clock.step_at(ms(26)), 2);
        assert_eq!(clock.step_now(ms(24)), 0);
        assert_eq!(clock.step_now(ms(99)), 3);
        assert_eq!(clock.step_end(1), ms(25));
        assert_eq!(clock.step_end(4), ms(100));
    }

    #[test]
    fn offsets_round_trip_and_round_like_instants() {
        let origin = Instant::now() + Duration::from_secs(10);
        let clock = Clock::new(origin, Duration::from_millis(10), 1);
        for ns in [0, 1, -1, 9_999_999, 10_000_000, 10_000_001, -5_000_000_000] {
            let instant = clock.instant_at(ns);
            assert_eq!(clock.offset_of(instant), ns);
            let tick = clock.step_at_offset(ns);
            assert_eq!(tick, clock.step_at(instant), "{ns}");
            for processed in [0, 1, 2, tick.saturating_sub(1), tick, tick + 1, u64::MAX] {
                assert_eq!(
                    clock.is_processed(ns, processed),
                    tick <= processed,
                    "{ns} {processed}"
                );
            }
        }
        // Past 292 years the offset saturates; the tick stays in range.
        let far = origin + Duration::from_secs(86_400 * 365 * 400);
        assert_eq!(clock.offset_of(far), i64::MAX / 10_000_000 * 10_000_000);
        assert!(clock.step_at_offset(i64::MAX) <= MAX_STEP);
        // A step longer than i64 nanoseconds: one step, deadlines saturate at i64::MAX.
        let huge = Clock::new(origin, Duration::from_secs(86_400 * 365 * 500), 1);
        assert_eq!(huge.offset_of(far), i64::MAX);
        assert_eq!(huge.step_at_offset(i64::MAX), 1);
        assert_eq!(huge.last_step(), 1);
        let tiny = Clock::new(origin, Duration::from_nanos(1), 1);
        assert_eq!(tiny.step_at_offset(i64::MAX), MAX_STEP);
        assert!(tiny.is_processed(i64::MAX, MAX_STEP));
        assert!(!tiny.is_processed(i64::MAX, MAX_STEP - 1));
        let after = clock.offset_after(origin, Duration::MAX);
        assert_eq!(clock.instant_at(after), far_future(origin));
    }

    #[test]
    fn offset_after_adds_exactly_and_saturates() {
        let origin = Instant::now();
        let reference = |clock: &Clock, since: Duration, d: Duration| -> i64 {
            let ns = since.as_nanos() + d.min(FAR_FUTURE).as_nanos();
            i64::try_from(ns).unwrap_or(i64::MAX).min(clock.max_offset)
        };
        let times = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::new(1, 999_999_999),
            Duration::new(86_400 * 365 * 100, 500_000_000),
            FAR_FUTURE,
            Duration::MAX,
        ];
        for tick in [Duration::from_nanos(1), Duration::from_millis(1)] {
            let clock = Clock::new(origin, tick, crate::config::STEPS_PER_TICK);
            for since in &times[..4] {
                for d in times {
                    let now = origin + *since;
                    assert_eq!(
                        clock.offset_after(now, d),
                        reference(&clock, *since, d),
                        "{tick:?} {since:?} {d:?}"
                    );
                }
            }
            // Before the origin (another runtime's clock): the slow path, same sum.
            let before = origin - Duration::from_millis(3);
            assert_eq!(
                clock.offset_after(before, Duration::from_millis(5)),
                2_000_000
            );
        }
    }

    /// `offset_plus` is `offset_of(instant_at(offset) + by)` wherever that does not
    /// saturate, and refuses exactly where it would.
    #[test]
    fn offset_plus_is_the_instants_sum_short_of_saturation() {
        let origin = Instant::now();
        for tick in [Duration::from_nanos(1), Duration::from_millis(1)] {
            let clock = Clock::new(origin, tick, crate::config::STEPS_PER_TICK);
            let max = clock.max_offset;
            let bys = [
                Duration::ZERO,
                Duration::from_nanos(1),
                Duration::from_millis(100),
                Duration::new(86_400 * 365 * 100, 500_000_000),
                Duration::MAX,
            ];
            for offset in [0, 1, 123_456_789, max - 1, max] {
                for by in bys {
                    let via_instants = clock
                        .instant_at(offset)
                        .checked_add(by)
                        .map(|at| clock.unclamped_offset_of(at));
                    match clock.offset_plus(offset, by) {
                        Some(sum) => assert_eq!(Some(sum), via_instants, "{offset} {by:?}"),
                        None => assert!(
                            via_instants.is_none_or(|sum| sum > max),
                            "{tick:?} {offset} {by:?}: refused, yet {via_instants:?} fits"
                        ),
                    }
                }
            }
            assert_eq!(
                clock.offset_plus(max - 1, Duration::from_nanos(1)),
                Some(max)
            );
            assert_eq!(clock.offset_plus(max, Duration::from_nanos(1)), None);
            // Before the origin: left to the instants' path.
            assert_eq!(clock.offset_plus(-1, Duration::from_millis(1)), None);
        }
    }

    /// `div_step` is the division it replaces, for steps from a nanosecond to centuries
    /// and numerators up to `u64::MAX`.
    #[test]
    fn dividing_by_a_step_is_exact() {
        let origin = Instant::now();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            // xorshift64*: reproducible, no dependency.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mut steps = vec![1, 2, 3, 7, 250_000, 2_500_000, 999_999_999, u64::MAX / 3];
        steps.extend((0..200).map(|_| next() >> (next() % 64)).filter(|&d| d > 0));
        for step_ns in steps {
            let clock = Clock::new(origin, Duration::from_nanos(step_ns), 1);
            assert_eq!(clock.step_ns, step_ns);
            let mut ns = vec![
                0,
                1,
                step_ns - 1,
                step_ns,
                step_ns + 1,
                u64::MAX,
                u64::MAX - 1,
            ];
            ns.extend((0..200).map(|_| next() >> (next() % 64)));
            ns.extend((0..50).map(|_| (next() % 1000).saturating_mul(step_ns)));
            for n in ns {
                assert_eq!(
                    clock.div_step(n),
                    (n / step_ns, n % step_ns),
                    "{n} / {step_ns}"
                );
            }
        }
    }

    #[test]
    fn far_deadlines_saturate() {
        let origin = Instant::now();
        // The finest tick the builder allows: 30 years fit in the wheel's range.
        let clock = Clock::new(
            origin,
            crate::config::MIN_TICK,
            crate::config::STEPS_PER_TICK,
        );
        let far = deadline_after(origin, Duration::MAX);
        assert_eq!(far, far_future(origin));
        assert!(clock.step_at(far) < MAX_STEP);
        assert!(clock.step_end(MAX_STEP) > origin);
        let coarse = Clock::new(origin, Duration::MAX, 1);
        assert_eq!(coarse.step_at(far), 1);
    }
}
