//! `Stats`' counters of cancelled and reset timers, and the lateness histogram, with
//! the paused clock.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Lateness, Timer};

mod common;
use common::poll;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn cancelled_counts_timers_removed_before_they_fired_and_nothing_else() {
    let timer = Timer::builder().tick(ms(10)).build().unwrap();

    // Pending, then dropped: cancelled.
    let mut pending = timer.sleep(ms(100));
    assert!(poll(&mut pending, Waker::noop()).is_pending());
    drop(pending);
    // Never polled, so never in the wheel: not cancelled.
    drop(timer.sleep(ms(100)));
    // A timeout whose future answered after waiting once: cancelled. (One that
    // answers on its first poll never registers its sleep.)
    let answer = async {
        tokio::task::yield_now().await;
        7
    };
    assert_eq!(timer.timeout(ms(100), answer).await, Ok(7));
    assert_eq!(timer.timeout(ms(100), async { 8 }).await, Ok(8));
    // Fired, then dropped: not cancelled.
    let mut fired = timer.sleep(ms(20));
    (&mut fired).await;
    drop(fired);
    // A callback cancelled while pending: cancelled; once more: no longer pending.
    let scheduled = timer.schedule(ms(100), || {}).unwrap();
    assert!(scheduled.cancel());
    assert!(!scheduled.cancel());

    let stats = timer.stats();
    assert_eq!(
        (stats.cancelled, stats.fired, stats.pending),
        (3, 1, 0),
        "{stats:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn reset_counts_pending_timers_moved_in_place() {
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let mut sleep = timer.sleep(ms(100));
    // Not registered yet: registers on its next poll instead of moving.
    Pin::new(&mut sleep).reset(Instant::now() + ms(200));
    assert_eq!(timer.stats().reset, 0);
    assert!(poll(&mut sleep, Waker::noop()).is_pending());
    Pin::new(&mut sleep).reset(Instant::now() + ms(300));
    Pin::new(&mut sleep).reset(Instant::now() + ms(50));
    assert_eq!(timer.stats().reset, 2);
    let start = Instant::now();
    (&mut sleep).await;
    assert!(start.elapsed() >= ms(50) && start.elapsed() < ms(60));
    // Fired: a reset re-registers on the next poll rather than moving an entry.
    Pin::new(&mut sleep).reset(Instant::now() + ms(10));
    let stats = timer.stats();
    assert_eq!(
        (stats.reset, stats.cancelled, stats.fired),
        (2, 0, 1),
        "{stats:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lateness_counts_every_fired_timer_in_its_bucket() {
    // A 4 ms tick has 1 ms steps.
    let timer = Timer::builder().tick(ms(4)).build().unwrap();
    let on_time: Vec<_> = (1..=20).map(|n| timer.sleep(ms(n))).collect();
    futures::future::join_all(on_time).await;
    let lateness = timer.stats().lateness;
    // The driver wakes at tick ends: at most 4 ms after a step's start.
    assert_eq!(lateness.total(), 20, "{lateness}");
    assert_eq!(
        lateness.at_most(ms(4)) + lateness.counts()[2],
        20,
        "{lateness}"
    );

    // Due in the step [14 ms, 15 ms) from now; the driver does not run before 18 ms.
    let start = Instant::now();
    let mut late = timer.sleep(ms(15));
    assert!(poll(&mut late, Waker::noop()).is_pending());
    tokio::time::advance(ms(18)).await;
    late.await;
    assert_eq!(start.elapsed(), ms(18));
    // 3 ms late, reported from the step's start as 4 ms: the [4 ms, 16 ms) bucket.
    let after = timer.stats().lateness;
    let added: Vec<u64> = (0..7)
        .map(|i| after.counts()[i] - lateness.counts()[i])
        .collect();
    assert_eq!(added, [0, 0, 1, 0, 0, 0, 0], "{after}");
    assert_eq!(Lateness::BOUNDS[1], ms(4));
    assert_eq!(timer.stats().fired, after.total());
}

#[tokio::test(start_paused = true)]
async fn lateness_sees_a_driver_that_ran_late() {
    let timer = Timer::builder().tick(ms(1)).build().unwrap();
    let mut sleep = timer.sleep(ms(10));
    assert!(poll(&mut sleep, Waker::noop()).is_pending());
    // The runtime is blocked for 300 ms past the deadline: the driver cannot run.
    tokio::time::advance(ms(310)).await;
    sleep.await;
    let lateness = timer.stats().lateness;
    assert_eq!(lateness.counts(), [0, 0, 0, 0, 0, 1, 0], "{lateness}");
}

#[tokio::test(start_paused = true)]
async fn a_callbacks_lateness_is_from_its_deadline_even_one_in_the_past() {
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    tokio::time::advance(Duration::from_secs(2)).await;
    timer.catch_up().await;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    // Due 1.9 s ago: placed in the next open step, but late by 1.9 s.
    let _handle = timer
        .schedule_at(start + ms(100), move || flag.store(true, Ordering::SeqCst))
        .unwrap();
    tokio::time::sleep(ms(20)).await;
    timer.catch_up().await;
    assert!(ran.load(Ordering::SeqCst));
    let lateness = timer.stats().lateness;
    assert_eq!(lateness.counts(), [0, 0, 0, 0, 0, 0, 1], "{lateness}");
}

#[tokio::test(start_paused = true)]
async fn a_callback_saturated_at_the_wheels_range_counts_its_lateness_past_it() {
    // 200 years saturate at the end of the wheel's range (about 139 years at a 1 ms
    // tick); the clock then passes that end by 5 s, and the callback is 5 s late.
    let timer = Timer::builder().tick(ms(1)).build().unwrap();
    let start = Instant::now();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let handle = timer
        .schedule_at(start + Duration::from_secs(86_400 * 365 * 200), move || {
            flag.store(true, Ordering::SeqCst)
        })
        .unwrap();
    let deadline = handle.deadline();
    assert!(deadline < start + Duration::from_secs(86_400 * 365 * 140));
    tokio::time::advance(deadline - start + Duration::from_secs(5)).await;
    timer.catch_up().await;
    assert!(ran.load(Ordering::SeqCst));
    let lateness = timer.stats().lateness;
    assert_eq!(lateness.counts(), [0, 0, 0, 0, 0, 0, 1], "{lateness}");
}

#[tokio::test(start_paused = true)]
async fn a_futures_lateness_reads_at_most_one_step_more_even_for_the_biggest_wheel() {
    // At 2^20 slots a step is a whole tick.
    let timer = Timer::builder()
        .tick(ms(8))
        .wheel_size(1 << 20)
        .build()
        .unwrap();
    let start = Instant::now();
    let mut sleep = timer.sleep_until(start + Duration::from_micros(7_900));
    assert!(poll(&mut sleep, Waker::noop()).is_pending());
    (&mut sleep).await;
    assert_eq!(start.elapsed(), ms(8));
    // 0.1 ms late, read from the step's start as 8 ms: the [4 ms, 16 ms) bucket.
    let lateness = timer.stats().lateness;
    assert_eq!(lateness.counts(), [0, 0, 1, 0, 0, 0, 0], "{lateness}");
}

#[tokio::test(start_paused = true)]
async fn a_pending_sleep_reset_into_the_past_counts_as_reset() {
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let mut sleep = timer.sleep(ms(100));
    assert!(poll(&mut sleep, Waker::noop()).is_pending());
    tokio::time::advance(ms(50)).await;
    timer.catch_up().await;
    // A deadline whose step the driver has processed: out of the wheel at once.
    Pin::new(&mut sleep).reset(Instant::now() - ms(30));
    assert_eq!(timer.pending(), 0);
    assert!(poll(&mut sleep, Waker::noop()).is_ready());
    let stats = timer.stats();
    assert_eq!(
        (stats.reset, stats.cancelled, stats.fired),
        (1, 0, 0),
        "{stats:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_ready_when_its_deadline_fires_wins_and_its_timer_counts_as_fired() {
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    // Ready from 100 ms on, but only the timeout's sleep wakes the task.
    let answer = std::future::poll_fn(move |_| match start.elapsed() >= ms(100) {
        true => Poll::Ready("answer"),
        false => Poll::Pending,
    });
    assert_eq!(timer.timeout(ms(100), answer).await, Ok("answer"));
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.cancelled), (1, 0), "{stats:?}");
}

/// Real clock, two workers: snapshots taken while the driver fires never disagree.
#[test]
fn a_stats_snapshot_has_fired_equal_to_the_lateness_total() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let timer = runtime.block_on(async { Timer::builder().tick(ms(1)).build().unwrap() });
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..200 {
        let (timer, stop) = (timer.clone(), stop.clone());
        runtime.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                timer.sleep(ms(1)).await;
            }
        });
    }
    let until = std::time::Instant::now() + Duration::from_secs(1);
    let mut snapshots = 0u64;
    while std::time::Instant::now() < until {
        let stats = timer.stats();
        assert_eq!(stats.fired, stats.lateness.total(), "{stats:?}");
        snapshots += 1;
    }
    stop.store(true, Ordering::Relaxed);
    drop(runtime);
    assert!(snapshots > 100 && timer.stats().fired > 0);
}

/// A timeout found elapsed when polled, before the driver's turn, counts as fired, with
/// its lateness: `fired` is at least the requests that timed out.
#[tokio::test(start_paused = true)]
async fn a_timeout_found_elapsed_before_the_drivers_turn_counts_as_fired() {
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let deadline = Duration::from_micros(13_370);
    let mut timeout =
        tokio_test::task::spawn(timer.timeout(deadline, std::future::pending::<()>()));
    assert!(timeout.poll().is_pending());
    tokio::time::advance(deadline).await;
    assert!(matches!(timeout.poll(), Poll::Ready(Err(_))));
    drop(timeout);
    timer.catch_up().await;
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.fired, stats.cancelled),
        (0, 1, 0),
        "{stats:?}"
    );
    // On time to the nanosecond: the first bucket.
    assert_eq!(stats.lateness.counts()[0], 1, "{stats:?}");
}

/// The same on the real clock: a sleep completed by its poll between its deadline and
/// the driver's turn is counted once, as fired.
#[test]
fn on_the_real_clock_a_sleep_completed_by_its_poll_counts_as_fired() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let timer = Timer::builder()
        .tick(ms(10))
        .build_on(runtime.handle())
        .unwrap();
    runtime.block_on(async {
        let mut due = tokio_test::task::spawn(timer.sleep(ms(5)));
        assert!(due.poll().is_pending());
        std::thread::sleep(ms(10));
        assert!(due.poll().is_ready());
    });
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.fired, stats.cancelled, stats.reset),
        (0, 1, 0, 0),
        "{stats:?}"
    );
}

/// The free `stats()` reads the timer the free functions use from here: with
/// `test-util`, the caller's runtime's own, so a sleep on it counts there, and not
/// on another runtime's.
#[test]
fn the_free_stats_read_the_callers_default_timer() {
    let paused = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let (here, elsewhere) = (paused(), paused());
    let other = elsewhere.block_on(async { tokio_wheel::stats() });
    here.block_on(async {
        let before = tokio_wheel::stats();
        let start = Instant::now();
        tokio_wheel::sleep(ms(25)).await;
        let took = start.elapsed();
        assert!(took >= ms(25) && took < ms(26), "{took:?}");
        let after = tokio_wheel::stats();
        assert_eq!(after.fired, before.fired + 1, "{after:?}");
    });
    let other_after = elsewhere.block_on(async { tokio_wheel::stats() });
    assert_eq!(other_after.fired, other.fired, "{other_after:?}");
}
