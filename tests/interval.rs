//! `Interval` with the paused clock, compared with `tokio::time::Interval` in the same
//! runtime: same ticks, to within one wheel tick.

use std::task::Context;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_wheel::{MissedTickBehavior, Timer};

mod common;
use common::{timer, TICK};

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
