//! `Interval` with the paused clock, compared with `tokio::time::Interval` in the same
//! runtime: same ticks, to within one wheel tick; and its jitter, against the schedule.

use std::future::Future;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_wheel::{Interval, MissedTickBehavior, Timer};

mod common;
use common::{assert_at, timer, LATE, TICK};

const PERIOD: Duration = Duration::from_millis(100);

#[tokio::test(start_paused = true)]
async fn first_tick_at_once_then_every_period() {
    let timer = timer();
    let start = Instant::now();
    let mut interval = timer.interval(PERIOD);
    assert_eq!(interval.period(), PERIOD);
    assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Burst);
    for k in 0..20u32 {
        let scheduled = interval.tick().await;
        assert_eq!(scheduled, start + PERIOD * k);
        let now = Instant::now();
        assert!(
            now >= scheduled && now < scheduled + TICK,
            "tick {k} at {:?}",
            now - start
        );
    }
}

#[tokio::test(start_paused = true)]
async fn interval_at_starts_at_start() {
    let timer = timer();
    let start = Instant::now() + Duration::from_millis(250);
    let mut interval = timer.interval_at(start, PERIOD);
    assert_eq!(interval.tick().await, start);
    assert!(Instant::now() >= start && Instant::now() < start + TICK);
    assert_eq!(interval.tick().await, start + PERIOD);
}

/// Runs both intervals through the same stall and returns (ours, tokio's) ticks, as
/// offsets from `start`.
async fn after_stall(behavior: MissedTickBehavior) -> (Vec<Duration>, Vec<Duration>) {
    let timer = timer();
    let start = Instant::now();
    let ours = tokio::spawn({
        let timer = timer.clone();
        async move {
            let mut interval = timer.interval_at(start, PERIOD);
            interval.set_missed_tick_behavior(behavior);
            let mut ticks = vec![interval.tick().await - start];
            // The task stalls for 350 ms (paused clock: a tokio sleep).
            tokio::time::sleep(Duration::from_millis(350)).await;
            for _ in 0..6 {
                ticks.push(interval.tick().await - start);
            }
            ticks
        }
    });
    let theirs = tokio::spawn(async move {
        let mut interval = tokio::time::interval_at(start, PERIOD);
        interval.set_missed_tick_behavior(behavior);
        let mut ticks = vec![interval.tick().await - start];
        tokio::time::sleep(Duration::from_millis(350)).await;
        for _ in 0..6 {
            ticks.push(interval.tick().await - start);
        }
        ticks
    });
    (ours.await.unwrap(), theirs.await.unwrap())
}

#[tokio::test(start_paused = true)]
async fn missed_ticks_behave_as_tokio_does() {
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        let (ours, theirs) = after_stall(behavior).await;
        assert_eq!(ours.len(), theirs.len());
        for (o, t) in ours.iter().zip(&theirs) {
            let diff = o.max(t).saturating_sub(*o.min(t));
            assert!(diff < TICK, "{behavior:?}: ours {ours:?} tokio {theirs:?}");
        }
    }
    // And they differ from each other, so the comparison means something.
    let (burst, _) = after_stall(MissedTickBehavior::Burst).await;
    let (delay, _) = after_stall(MissedTickBehavior::Delay).await;
    let (skip, _) = after_stall(MissedTickBehavior::Skip).await;
    assert_ne!(burst, delay);
    assert_ne!(delay, skip);
    assert_ne!(burst, skip);
}

#[tokio::test(start_paused = true)]
async fn reset_moves_the_next_tick() {
    let timer = timer();
    let mut interval = timer.interval(PERIOD);
    interval.tick().await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let reset_at = Instant::now();
    interval.reset();
    let next = interval.tick().await;
    assert_eq!(next, reset_at + PERIOD);
    interval.reset_immediately();
    let before = Instant::now();
    assert_eq!(interval.tick().await, before);
    interval.reset_after(Duration::from_millis(250));
    assert_eq!(interval.tick().await, before + Duration::from_millis(250));
}

#[tokio::test(start_paused = true)]
async fn poll_tick_and_stream() {
    let timer = timer();
    let start = Instant::now();
    let mut interval = timer.interval(PERIOD);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert_eq!(interval.poll_tick(&mut cx), std::task::Poll::Ready(start));
    assert!(interval.poll_tick(&mut cx).is_pending());
    let ticks: Vec<_> = (&mut interval).take(3).collect().await;
    assert_eq!(
        ticks,
        vec![start + PERIOD, start + PERIOD * 2, start + PERIOD * 3]
    );
}

#[tokio::test(start_paused = true)]
async fn zero_period_is_one_tick_not_a_panic() {
    let timer = timer();
    let mut interval = timer.interval(Duration::ZERO);
    assert_eq!(interval.period(), TICK);
    let a = interval.tick().await;
    let b = interval.tick().await;
    assert_eq!(b - a, TICK);
}

/// A tick taken within the timer's lateness bound (less than a tick and a millisecond)
/// is on time, not missed: `Delay` keeps the schedule, as tokio's does with its 5 ms.
/// Off Tokio's millisecond grid (the clock's phase moved after `build`, as in
/// tests/driver.rs) a timer can fire more than a tick late: a 10 ms tick of one step
/// 10.79 ms, a 1 ms tick 1.04 ms. Such a tick counted as missed (more than a tick late),
/// and `Delay` moved every later one by that much.
#[tokio::test(start_paused = true)]
async fn a_tick_within_the_lateness_bound_is_not_missed() {
    let ms = Duration::from_millis(1);
    for (tick, wheel_size) in [(ms * 10, 1 << 20), (ms, 1024)] {
        tokio::time::advance(Duration::from_micros(300)).await;
        let timer = Timer::builder()
            .tick(tick)
            .wheel_size(wheel_size)
            .build()
            .unwrap();
        tokio::time::advance(Duration::from_micros(800)).await;
        for i in 0..(tick.as_micros() / 37) as u32 {
            let start = Instant::now() + Duration::from_micros(37) * i;
            let mut interval = timer.interval_at(start, PERIOD);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            for k in 0..3u32 {
                let scheduled = interval.tick().await;
                let late = Instant::now() - scheduled;
                assert_eq!(
                    scheduled - start,
                    PERIOD * k,
                    "{tick:?}/{wheel_size}, start +{i}×37 µs: tick {k} moved ({late:?} late)"
                );
                assert!(late < tick + ms, "{tick:?}/{wheel_size}: {late:?} late");
            }
        }
    }
}

/// The methods a swapped caller uses, on ours and on tokio's, so that one script runs
/// on both.
trait Ticker {
    fn tick(&mut self) -> impl Future<Output = Instant> + '_;
    fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant>;
    fn reset(&mut self);
    fn reset_immediately(&mut self);
    fn reset_after(&mut self, after: Duration);
    fn reset_at(&mut self, deadline: Instant);
}

macro_rules! ticker {
    ($t:ty) => {
        impl Ticker for $t {
            fn tick(&mut self) -> impl Future<Output = Instant> + '_ {
                <$t>::tick(self)
            }
            fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
                <$t>::poll_tick(self, cx)
            }
            fn reset(&mut self) {
                <$t>::reset(self)
            }
            fn reset_immediately(&mut self) {
                <$t>::reset_immediately(self)
            }
            fn reset_after(&mut self, after: Duration) {
                <$t>::reset_after(self, after)
            }
            fn reset_at(&mut self, deadline: Instant) {
                <$t>::reset_at(self, deadline)
            }
        }
    };
}
ticker!(Interval);
ticker!(tokio::time::Interval);

/// Ours has tokio's signatures, so a caller swapped from `tokio::time` compiles: each
/// method of both coerces to the same function pointer type (`tick` is async: the
/// `Ticker` impls above call it alike), and both are `Send`, `Sync`, `Unpin`, `Debug`.
#[test]
fn signatures_are_tokios() {
    macro_rules! same {
        ($method:ident: $fn:ty) => {{
            let _: $fn = Interval::$method;
            let _: $fn = tokio::time::Interval::$method;
        }};
    }
    same!(poll_tick: for<'a, 'b> fn(&'a mut _, &'b mut Context<'_>) -> Poll<Instant>);
    same!(reset: fn(&mut _));
    same!(reset_immediately: fn(&mut _));
    same!(reset_after: fn(&mut _, Duration));
    same!(reset_at: fn(&mut _, Instant));
    same!(period: fn(&_) -> Duration);
    same!(missed_tick_behavior: fn(&_) -> MissedTickBehavior);
    same!(set_missed_tick_behavior: fn(&mut _, MissedTickBehavior));
    fn traits<T: Send + Sync + Unpin + std::fmt::Debug>() {}
    traits::<Interval>();
    traits::<tokio::time::Interval>();
}

/// Every reset, on an interval started at `start`: (instant returned, instant taken) of
/// each tick, from `start`. The resets happen at whole instants after `start` (a tokio
/// sleep's end), so that ours and tokio's reset at the same instant.
async fn resets<T: Ticker>(mut interval: T, start: Instant) -> Vec<(Duration, Duration)> {
    let mut ticks = Vec::new();
    macro_rules! tick {
        () => {{
            let due = interval.tick().await;
            ticks.push((due - start, Instant::now() - start));
        }};
    }
    let at = |ms| tokio::time::sleep_until(start + Duration::from_millis(ms));
    tick!(); // 0
    at(30).await;
    interval.reset();
    tick!(); // 130: a period from the reset
    tick!(); // 230
    at(260).await;
    interval.reset_immediately();
    tick!(); // 260, at once
    tick!(); // 360
    at(370).await;
    interval.reset_after(Duration::from_millis(250));
    tick!(); // 620
    tick!(); // 720
    at(730).await;
    interval.reset_at(start + Duration::from_millis(790));
    tick!(); // 790
    tick!(); // 890
             // A tick registered, then passed unseen: the reset moves it all the same.
    let waker = futures::task::noop_waker();
    assert!(interval
        .poll_tick(&mut Context::from_waker(&waker))
        .is_pending());
    at(1000).await;
    interval.reset_after(Duration::from_millis(50));
    tick!(); // 1050
             // A deadline passed long ago: that tick at once, then the missed-tick behaviour.
    at(1100).await;
    interval.reset_at(start + Duration::from_millis(820));
    for _ in 0..5 {
        tick!();
    }
    ticks
}

#[tokio::test(start_paused = true)]
async fn resets_tick_as_tokio_does() {
    let mut by_behavior = Vec::new();
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        let timer = timer();
        let start = Instant::now();
        let mut ours = timer.interval_at(start, PERIOD);
        ours.set_missed_tick_behavior(behavior);
        let mut theirs = tokio::time::interval_at(start, PERIOD);
        theirs.set_missed_tick_behavior(behavior);
        let (ours, theirs) = tokio::join!(resets(ours, start,), resets(theirs, start));
        let due = |ticks: &[(Duration, Duration)]| ticks.iter().map(|t| t.0).collect::<Vec<_>>();
        assert_eq!(due(&ours), due(&theirs), "{behavior:?}");
        for (&(due, taken), &(_, tokio_taken)) in ours.iter().zip(&theirs) {
            // Never before the tick was due; late by less than a tick and a millisecond
            // after tokio took it (at once when it was due, else within its 1 ms).
            assert!(taken >= due, "{behavior:?}: {due:?} taken at {taken:?}");
            assert!(
                taken < tokio_taken.max(due) + LATE,
                "{behavior:?}: {due:?} taken at {taken:?}, by tokio at {tokio_taken:?}"
            );
        }
        by_behavior.push(due(&ours));
    }
    let ms = |ms: &[u64]| {
        ms.iter()
            .map(|&m| Duration::from_millis(m))
            .collect::<Vec<_>>()
    };
    let common = [0, 130, 230, 260, 360, 620, 720, 790, 890, 1050, 820];
    let expected = [
        [920, 1020, 1120, 1220],  // Burst: the schedule, caught up at once
        [1200, 1300, 1400, 1500], // Delay: a period after the late tick
        [1120, 1220, 1320, 1420], // Skip: the schedule's next tick after now
    ];
    for (ticks, tail) in by_behavior.iter().zip(expected) {
        assert_eq!(ticks, &ms(&[&common[..], &tail[..]].concat()));
    }
}

const JITTER: Duration = Duration::from_millis(30);

/// Asserts that tick `n` of an interval started at `start`, returned as `due` and taken
/// at `Instant::now()`, was due within `[scheduled, scheduled + jitter)`, and taken no
/// earlier than that and less than a tick and a millisecond later; returns its draw.
#[track_caller]
fn assert_jittered(start: Instant, n: u32, due: Instant, jitter: Duration) -> Duration {
    let scheduled = start + PERIOD * n;
    assert!(
        due >= scheduled && due < scheduled + jitter,
        "tick {n} due {:?} after its schedule",
        due.saturating_duration_since(scheduled)
    );
    assert_at(Instant::now(), due, LATE);
    due - scheduled
}

#[tokio::test(start_paused = true)]
async fn jittered_ticks_stay_between_their_schedule_and_the_jitter() {
    let timer = timer();
    let start = Instant::now();
    let mut interval = timer.interval(PERIOD);
    assert_eq!(interval.jitter(), Duration::ZERO);
    interval.set_jitter(JITTER);
    assert_eq!(interval.jitter(), JITTER);
    // The first tick is not jittered.
    assert_eq!(interval.tick().await, start);
    assert_eq!(Instant::now(), start);
    for n in 1..=300 {
        let due = interval.tick().await;
        assert_jittered(start, n, due, JITTER);
        // The bound users are promised, in one: [schedule, schedule + jitter + late).
        let taken = Instant::now() - (start + PERIOD * n);
        assert!(
            taken < JITTER + LATE,
            "tick {n} taken {taken:?} after its schedule"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn jitter_draws_vary_over_their_range_and_between_intervals() {
    let timer = timer();
    let start = Instant::now();
    let mut a = timer.interval(PERIOD);
    let mut b = timer.interval(PERIOD);
    for interval in [&mut a, &mut b] {
        interval.set_jitter(JITTER);
        interval.tick().await;
    }
    let (mut draws_a, mut draws_b) = (Vec::new(), Vec::new());
    for n in 1..=400 {
        let due = a.tick().await;
        draws_a.push(assert_jittered(start, n, due, JITTER));
        // `b`'s tick is due no later than this tick's end (its draw is below a
        // period); it may have been due before `a`'s, which is then its lateness.
        let due = b.tick().await;
        let scheduled = start + PERIOD * n;
        assert!(due >= scheduled && due < scheduled + JITTER);
        assert!(Instant::now() >= due && Instant::now() < due.max(scheduled + JITTER) + LATE);
        draws_b.push(due - scheduled);
    }
    let distinct: std::collections::BTreeSet<_> = draws_a.iter().collect();
    assert!(
        distinct.len() > 390,
        "{} distinct draws of 400",
        distinct.len()
    );
    // Over the range: some in its first eighth, some in its last ((7/8)^400 < 1e-23
    // that a uniform draw misses either), and the mean near the middle (seven standard
    // deviations either way).
    let min = *draws_a.iter().min().unwrap();
    let max = *draws_a.iter().max().unwrap();
    assert!(
        min < JITTER / 8 && max > JITTER * 7 / 8,
        "draws in {min:?}..={max:?}"
    );
    let mean = draws_a.iter().sum::<Duration>() / 400;
    assert!(
        mean > JITTER * 4 / 10 && mean < JITTER * 6 / 10,
        "mean draw {mean:?}"
    );
    // Two intervals made together draw apart.
    let same = draws_a.iter().zip(&draws_b).filter(|(a, b)| a == b).count();
    assert!(
        same < 5,
        "{same} of 400 ticks with the same draw in both intervals"
    );
}

#[tokio::test(start_paused = true)]
async fn the_schedule_does_not_drift_under_jitter() {
    let timer = timer();
    let start = Instant::now();
    let mut interval = timer.interval(PERIOD);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The largest jitter there is: draws anywhere in a period.
    interval.set_jitter(Duration::MAX);
    assert_eq!(interval.jitter(), PERIOD);
    interval.tick().await;
    for n in 1..=3000 {
        let due = interval.tick().await;
        assert_jittered(start, n, due, PERIOD);
    }
}

/// The ticks `n` of sixteen jittered intervals with `behavior` when their task stalls
/// 350 ms after the first: (n, instant due, instant taken) from `start`.
async fn jittered_after_stall(behavior: MissedTickBehavior) -> Vec<(u32, Duration, Duration)> {
    let timer = timer();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let timer = timer.clone();
        tasks.push(tokio::spawn(async move {
            let mut interval = timer.interval_at(start, PERIOD);
            interval.set_missed_tick_behavior(behavior);
            interval.set_jitter(Duration::from_millis(20));
            assert_eq!(interval.tick().await, start);
            tokio::time::sleep(Duration::from_millis(350)).await;
            let mut ticks = Vec::new();
            for n in 1..=6 {
                let due = interval.tick().await;
                ticks.push((n, due - start, Instant::now() - start));
            }
            ticks
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

#[tokio::test(start_paused = true)]
async fn missed_ticks_behave_on_the_schedule_under_jitter() {
    let ms = Duration::from_millis;
    let stall = ms(350);
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        for (n, due, taken) in jittered_after_stall(behavior).await {
            // Tick 1 (scheduled at 100 ms) is missed in every case; what follows:
            let scheduled = match (behavior, n) {
                // Burst: the schedule, ticks 2 and 3 made up at once.
                (MissedTickBehavior::Burst, _) => PERIOD * n,
                (_, 1) => PERIOD,
                // Delay: a period after tick 1 was taken, and on from there.
                (MissedTickBehavior::Delay, _) => stall + PERIOD * (n - 1),
                // Skip: the schedule's next tick after the stall, 400 ms.
                _ => PERIOD * (n + 2),
            };
            let what = format!("{behavior:?}: tick {n} due {due:?} taken {taken:?}");
            assert!(due >= scheduled && due < scheduled + ms(20), "{what}");
            assert!(taken >= due && taken >= stall, "{what}");
            assert!(taken < due.max(stall) + LATE, "{what}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn resets_are_exact_under_jitter_and_jitter_changes_apply_to_the_pending_tick() {
    let timer = timer();
    let start = Instant::now();
    let mut interval = timer.interval(PERIOD);
    interval.set_jitter(JITTER);
    interval.tick().await;
    let mut n = 1;
    // A smaller bound draws the pending tick again within it.
    for _ in 0..20 {
        interval.set_jitter(JITTER);
        interval.set_jitter(JITTER / 10);
        let due = interval.tick().await;
        assert_jittered(start, n, due, JITTER / 10);
        n += 1;
    }
    // Turned off, the pending tick is on its schedule again, and so are the later ones.
    interval.set_jitter(JITTER);
    interval.set_jitter(Duration::ZERO);
    assert_eq!(interval.jitter(), Duration::ZERO);
    for _ in 0..5 {
        assert_eq!(interval.tick().await, start + PERIOD * n);
        assert_at(Instant::now(), start + PERIOD * n, LATE);
        n += 1;
    }
    // A reset's tick is at the instant asked for; the ones after it are jittered.
    interval.set_jitter(JITTER);
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(7)).await;
        let now = Instant::now();
        interval.reset_immediately();
        assert_eq!(interval.tick().await, now);
        assert_eq!(Instant::now(), now);
        let due = interval.tick().await;
        assert_jittered(now, 1, due, JITTER);
        let now = Instant::now();
        interval.reset_after(Duration::from_millis(55));
        assert_eq!(interval.tick().await, now + Duration::from_millis(55));
        assert_at(Instant::now(), now + Duration::from_millis(55), LATE);
        let due = interval.tick().await;
        assert_jittered(now + Duration::from_millis(55), 1, due, JITTER);
        let at = Instant::now() + Duration::from_millis(33);
        interval.reset_at(at);
        assert_eq!(interval.tick().await, at);
        assert_at(Instant::now(), at, LATE);
        interval.reset();
        let now = Instant::now();
        assert_eq!(interval.tick().await, now + PERIOD);
    }
}

/// A jittered tick due beyond the wheel's range (139 years at a 1 ms tick) saturates
/// there, as a `Sleep` does, and keeps no draw: no later change of the jitter can then
/// bring it before its schedule.
#[tokio::test(start_paused = true)]
async fn a_draw_beyond_the_wheels_range_never_brings_a_tick_early() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let year = Duration::from_secs(365 * 86_400);
    let start = Instant::now();
    let mut intervals = Vec::new();
    for _ in 0..20 {
        let mut interval = timer.interval_at(start, year * 100);
        interval.set_jitter(year * 100);
        assert_eq!(interval.tick().await, start);
        // The pending tick, scheduled at 100 years, is due below 200, often past 139.
        interval.set_jitter(Duration::from_millis(1));
        intervals.push(interval);
    }
    for mut interval in intervals {
        let due = interval.tick().await;
        assert!(
            due >= start + year * 100,
            "due {:?} early",
            start + year * 100 - due
        );
        assert!(due < start + year * 100 + year * 40);
        assert!(Instant::now() >= due);
    }
}

/// A fine tick keeps Tokio's 5 ms threshold for a missed tick: a `Delay` tick taken
/// 3 ms late (beyond a 1 ms tick and a millisecond) is on time for Tokio, and for the
/// wheel, so the next stays on the schedule.
#[tokio::test(start_paused = true)]
async fn with_a_fine_tick_a_tick_3_ms_late_keeps_tokios_schedule() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    let start = Instant::now();
    let mut theirs = tokio::time::interval(ms(10));
    theirs.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut ours = timer.interval(ms(10));
    ours.set_missed_tick_behavior(MissedTickBehavior::Delay);
    assert_eq!(theirs.tick().await, start);
    assert_eq!(ours.tick().await, start);
    tokio::time::advance(ms(13)).await;
    assert_eq!(theirs.tick().await, start + ms(10));
    assert_eq!(ours.tick().await, start + ms(10));
    assert_eq!(theirs.tick().await - start, ms(20));
    assert_eq!(ours.tick().await - start, ms(20), "Tokio's schedule");
    // 6 ms late is missed for both: the next is a period after it was taken.
    tokio::time::advance(ms(16)).await;
    assert_eq!(theirs.tick().await - start, ms(30));
    assert_eq!(ours.tick().await - start, ms(30));
    assert_eq!(theirs.tick().await - start, ms(46));
    assert_eq!(ours.tick().await - start, ms(46));
}
