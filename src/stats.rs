//! [`Stats`]: counters of what a timer has done, for monitoring and tests, and the
//! [`Lateness`] histogram among them.

use std::fmt;
use std::time::Duration;

/// A snapshot of what a [`Timer`](crate::Timer) has done, from [`Timer::stats`](crate::Timer::stats).
///
/// Every counter runs from the timer's creation and only grows (but `pending`); take
/// two snapshots and subtract for a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Timers registered, not yet fired and not cancelled (as [`Timer::pending`](crate::Timer::pending)).
    pub pending: usize,
    /// How many turns the driver has taken: its task's, and its alarm's passes from
    /// Tokio's timer. With nothing pending it does not wake at all; with timers
    /// pending, about once per step (a quarter tick) that holds one, twice where
    /// Tokio's millisecond before the step's end comes first and finds it not yet
    /// ended, or where a callback runs on the `Inline` executor (the alarm's pass, then
    /// the task's turn).
    pub driver_wakeups: u64,
    /// Timers (futures and callbacks) the driver fired since the timer was built, and
    /// registered futures found due when polled before the driver's turn (they
    /// complete as if fired): the total of [`lateness`](Stats::lateness), so the two
    /// always agree.
    pub fired: u64,
    /// Timers removed from the wheel before they fired: a pending [`Sleep`](crate::Sleep)
    /// (or the [`Timeout`](crate::Timeout) or [`Interval`](crate::Interval) around it)
    /// dropped, a pending callback [cancelled](crate::Scheduled::cancel) or its handle
    /// dropped. Not counted: a [`DelayQueue`](crate::DelayQueue)'s own sleep, re-aimed
    /// or let go of as its values come and go; a `Sleep` dropped before its first poll (it never
    /// registered; nor does a `Timeout` whose future is ready on its first poll), and
    /// timers that [`Timer::shutdown`](crate::Timer::shutdown) or the loss of the
    /// driver's runtime took out of the wheel.
    ///
    /// For request deadlines, `fired` is at least the requests that timed out (a
    /// `Timeout` whose answer is ready when its deadline fires still returns the
    /// answer), and `cancelled` the ones answered in time after waiting.
    pub cancelled: u64,
    /// Pending timers moved to a new deadline by [`Sleep::reset`](crate::Sleep::reset)
    /// (also through [`Interval`](crate::Interval)'s resets and hyper's
    /// `Timer::reset`): in place, or, for a deadline that has already passed, out of the
    /// wheel to complete on the next poll. Resetting a `Sleep` that had fired or
    /// was never polled registers it afresh on its next poll, and is not counted here.
    pub reset: u64,
    /// How late the driver fired timers, counted in log-scale buckets; see [`Lateness`].
    pub lateness: Lateness,
    /// Callbacks that panicked, and wakers that panicked when the driver woke a
    /// future's task or a [`DelayQueue`](crate::DelayQueue) on this timer woke its
    /// waiting consumers (a waker runs its executor's code); each was caught and the
    /// timer (or the queue) went on, waking the rest.
    pub callback_panics: u64,
    /// Expired callbacks an [`Executor::Custom`](crate::Executor::Custom) (or a
    /// runtime shutting down under `Spawn`/`Blocking`) dropped without running; each
    /// ran on the driver task instead. Also counted: a callback
    /// [reset](crate::Scheduled::reset) to the very last step the wheel can name,
    /// which the driver runs on its next turn the same way.
    pub executor_rejections: u64,
    /// Callbacks that were pending when the driver's runtime shut down under the
    /// timer. Nothing can run them any more: those with a [`Scheduled`](crate::Scheduled)
    /// handle stay for [`Timer::shutdown`](crate::Timer::shutdown) to return (to run or
    /// drop), or for the handle's drop to cancel; detached ones, and ones an executor
    /// handed back, are dropped unrun then, as Tokio drops a spawned task with its
    /// runtime.
    pub stranded_callbacks: u64,
}

/// How late fired timers were: a count of timers per bucket of lateness, the buckets
/// bounded by [`Lateness::BOUNDS`] (1 ms, 4 ms, 16 ms, ... 1.024 s, then the rest).
///
/// A timer's lateness is how long after its deadline the driver fired it (woke its
/// task, or handed its callback to the executor); the task then runs when its runtime
/// schedules it. A callback's is exact, and so is that of a future found due when
/// polled before the driver's turn (it completes then, counted as fired). A future the
/// driver fires is measured from the start of the step of the wheel its deadline lies
/// in, so it reads up to one step *more* than the exact figure, never less: a step is a quarter tick, half a tick for wheels of more
/// than 2^18 slots, a whole tick at 2^20. With the driver on time, every timer lands
/// below one tick plus Tokio's millisecond (plus that step, for futures); counts beyond
/// that mean the driver ran late (a busy runtime, a blocked worker, a burst of more
/// than 4096 timers due at once), which is what the histogram is for.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::Timer;
///
/// let timer = Timer::builder().tick(Duration::from_millis(1)).build().unwrap();
/// timer.sleep(Duration::from_millis(10)).await;
/// let lateness = timer.stats().lateness;
/// assert_eq!(lateness.total(), 1);
/// assert_eq!(lateness.at_most(Duration::from_millis(4)), 1);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lateness {
    counts: [u64; BUCKETS],
}

/// Buckets in a [`Lateness`] histogram: one below each bound and one above the last.
const BUCKETS: usize = 7;

impl Lateness {
    /// The buckets' exclusive upper bounds, powers of four from 1 ms. Bucket `i` counts
    /// lateness in `BOUNDS[i - 1]..BOUNDS[i]` (from zero for the first); the last
    /// bucket, `BOUNDS[5]` and more.
    pub const BOUNDS: [Duration; BUCKETS - 1] = [
        Duration::from_millis(1),
        Duration::from_millis(4),
        Duration::from_millis(16),
        Duration::from_millis(64),
        Duration::from_millis(256),
        Duration::from_millis(1024),
    ];

    /// The count in each bucket, earliest first.
    pub fn counts(&self) -> [u64; BUCKETS] {
        self.counts
    }

    /// Timers counted: every fired timer.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Timers in the buckets whose upper bound is at most `bound` (so, fired less than
    /// that late). Between two bounds, rounds down to the lower one.
    pub fn at_most(&self, bound: Duration) -> u64 {
        // The buckets below `bound`'s own.
        self.counts[..Self::bucket(bound)].iter().sum()
    }

    /// The bucket that `late` falls in.
    pub(crate) fn bucket(late: Duration) -> usize {
        Self::BOUNDS.iter().take_while(|&&b| b <= late).count()
    }

    pub(crate) fn from_counts(counts: [u64; BUCKETS]) -> Lateness {
        Lateness { counts }
    }
}

/// One item per non-empty bucket, as in `<1ms: 3, 1-4ms: 10, >=1024ms: 1`.
impl fmt::Display for Lateness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (i, &count) in self.counts.iter().enumerate().filter(|(_, &c)| c > 0) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            let ms = |d: Duration| d.as_millis();
            match i {
                0 => write!(f, "<{}ms: {count}", ms(Self::BOUNDS[0]))?,
                _ if i == BUCKETS - 1 => write!(f, ">={}ms: {count}", ms(Self::BOUNDS[i - 1]))?,
                _ => write!(
                    f,
                    "{}-{}ms: {count}",
                    ms(Self::BOUNDS[i - 1]),
                    ms(Self::BOUNDS[i])
                )?,
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// Lateness counts a turn of the driver gathers before adding them to the shared ones.
pub(crate) type LatenessCounts = [u64; BUCKETS];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_falls_in_the_bucket_below_its_bound() {
        let ms = Duration::from_millis;
        assert_eq!(Lateness::bucket(Duration::ZERO), 0);
        assert_eq!(Lateness::bucket(ms(1) - Duration::from_nanos(1)), 0);
        assert_eq!(Lateness::bucket(ms(1)), 1);
        assert_eq!(Lateness::bucket(ms(5)), 2);
        assert_eq!(Lateness::bucket(ms(1023)), 5);
        assert_eq!(Lateness::bucket(ms(1024)), 6);
        assert_eq!(Lateness::bucket(Duration::MAX), 6);
        let l = Lateness::from_counts([1, 2, 0, 0, 0, 0, 3]);
        assert_eq!((l.total(), l.at_most(ms(4)), l.at_most(ms(3))), (6, 3, 1));
        assert_eq!(l.to_string(), "<1ms: 1, 1-4ms: 2, >=1024ms: 3");
        assert_eq!(Lateness::default().to_string(), "none");
    }
}
