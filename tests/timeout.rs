//! `Timeout` with the paused clock.

use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Elapsed, Timeout};

mod common;
use common::{timer, TICK};

#[test]
fn timeout_is_unpin_when_its_future_is() {
    fn unpin<T: Unpin + Send>() {}
    unpin::<Timeout<std::future::Ready<()>>>();
}

#[tokio::test(start_paused = true)]
async fn ok_when_the_future_finishes_first() {
    let timer = timer();
    let start = Instant::now();
    let answer = timer
        .timeout(Duration::from_secs(1), async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            7
        })
        .await;
    assert_eq!(answer, Ok(7));
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert_eq!(timer.pending(), 0, "the deadline was cancelled");
}

#[tokio::test(start_paused = true)]
async fn elapsed_when_the_deadline_comes_first() {
    let timer = timer();
    for ms in [1u64, 10, 250, 5001] {
        let requested = Duration::from_millis(ms);
        let start = Instant::now();
        let result = timer.timeout(requested, std::future::pending::<()>()).await;
        let took = start.elapsed();
        assert_eq!(result, Err(Elapsed::new()));
        assert!(
            took >= requested && took < requested + TICK,
            "{ms} ms took {took:?}"
        );
    }
    let start = Instant::now();
    let deadline = start + Duration::from_millis(75);
    let result = timer
        .timeout_at(deadline, std::future::pending::<()>())
        .await;
    assert!(result.is_err());
    assert!(Instant::now() >= deadline && Instant::now() < deadline + TICK);
    assert_eq!(Elapsed::new().to_string(), "deadline has elapsed");
}

#[tokio::test(start_paused = true)]
async fn a_future_ready_at_once_never_touches_the_wheel() {
    let timer = timer();
    timer.catch_up().await; // the driver's first turn is behind us
    let before = timer.stats();
    for i in 0..1000 {
        assert_eq!(
            timer
                .timeout(Duration::from_secs(1), async move { i })
                .await,
            Ok(i)
        );
    }
    let after = timer.stats();
    assert_eq!(after.pending, 0);
    assert_eq!(
        after.driver_wakeups, before.driver_wakeups,
        "no registration woke the driver"
    );
    assert_eq!(after.fired, before.fired);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_pending_timeout_cancels_it() {
    let timer = timer();
    let mut timeouts: Vec<_> = (0..100)
        .map(|_| Box::pin(timer.timeout(Duration::from_secs(60), std::future::pending::<()>())))
        .collect();
    for t in &mut timeouts {
        assert!(futures::poll!(t.as_mut()).is_pending());
    }
    assert_eq!(timer.pending(), 100);
    drop(timeouts);
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn inner_future_accessors() {
    let timer = timer();
    let mut t = timer.timeout(Duration::from_secs(1), std::future::ready(5));
    assert_eq!(t.get_ref().clone().await, 5);
    assert_eq!(t.get_mut().clone().await, 5);
    let start = Instant::now();
    assert_eq!(t.deadline(), start + Duration::from_secs(1));
    assert_eq!(t.into_inner().await, 5);
    assert_eq!(timer.pending(), 0);
}

/// A service on `Timer::new()`, whose tick is not set, tested with the paused clock:
/// its 25 ms deadline fires at exactly 25 ms, as on Tokio's timer, since a timer
/// whose tick is not set has Tokio's millisecond under `test-util` (the 10 ms
/// production tick would make it 30). A tick set explicitly is kept.
#[tokio::test(start_paused = true)]
async fn a_timer_whose_tick_is_not_set_has_tokios_millisecond_in_tests() {
    let timer = tokio_wheel::Timer::new();
    let service = |timer: &tokio_wheel::Timer| {
        timer.timeout(Duration::from_millis(25), std::future::pending::<()>())
    };
    let start = Instant::now();
    assert_eq!(service(&timer).await, Err(Elapsed::new()));
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(25), "early: {took:?}");
    assert!(took < Duration::from_millis(26), "late: {took:?}");
    assert_eq!(timer.tick(), Duration::from_millis(1));
    let unset = tokio_wheel::Timer::builder().build().unwrap();
    assert_eq!(unset.tick(), Duration::from_millis(1));
    assert_eq!(
        common::timer().tick(),
        TICK,
        "a tick set explicitly is kept"
    );
}

/// An answer just past the deadline can win, as on Tokio's timer: a deadline inside
/// a step fires at the step's end (at Tokio's millisecond at or after it), and the
/// `Timeout` polls its future first, so a future ready before then (here at 101 ms,
/// under a 100 ms deadline whose 2.5 ms step ends at 101.5 ms, which Tokio's grid
/// meets at 102 ms) is `Ok`, though the deadline has passed by then.
#[tokio::test(start_paused = true)]
async fn an_answer_ready_just_past_the_deadline_wins() {
    let timer = timer();
    // Steps end 2.5 ms apart from the timer's origin, 6 ms back from here: 1.5 ms from
    // here and every 2.5 ms after, 101.5 ms among them.
    tokio::time::advance(Duration::from_millis(6)).await;
    let start = Instant::now();
    let answer = timer
        .timeout(Duration::from_millis(100), async {
            tokio::time::sleep(Duration::from_millis(101)).await;
            "late"
        })
        .await;
    assert_eq!(answer, Ok("late"));
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(101), "early: {took:?}");
    assert!(took < Duration::from_millis(101) + TICK, "{took:?}");
}
