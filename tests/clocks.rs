//! One runtime against another: a timer whose driver runs on one runtime, used from
//! another, paused or not. Deadlines count the driver's clock, whoever asks. (Used
//! where Tokio's context is borrowed or torn down: `tokio_context.rs`.)

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::Timer;

mod common;
use common::{
    assert_on_time, current_thread_runtime, paused_runtime, timer_on, timer_on_its_own_runtime,
    TICK,
};

#[test]
fn built_on_one_runtime_awaited_on_another() {
    let (_driver_rt, timer) = timer_on_its_own_runtime();
    let other = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap(); // no time driver at all
    let start = std::time::Instant::now();
    other.block_on(timer.sleep(Duration::from_millis(50)));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(50) && took < Duration::from_secs(2),
        "{took:?}"
    );
    // And from no runtime at all.
    futures::executor::block_on(timer.sleep(Duration::from_millis(20)));
}

/// A multi-thread runtime's clock cannot be paused, so a timer driven there measures
/// `sleep(d)` from the real clock, also when called from a paused test whose clock lags
/// it (frozen since the runtime was built) or leads it (advanced): counted from the
/// caller's clock, the deadline would be already past (firing at once) or an hour away.
#[test]
fn a_sleep_from_a_paused_caller_on_a_timer_driven_by_a_multi_thread_runtime_lasts_its_duration() {
    let (_driver_rt, timer) = timer_on_its_own_runtime();
    for lead in [Duration::ZERO, Duration::from_secs(3600)] {
        let paused = paused_runtime();
        // The paused clock stands still while the real one runs on.
        std::thread::sleep(Duration::from_millis(300));
        paused.block_on(async {
            tokio::time::advance(lead).await;
            let start = std::time::Instant::now();
            timer.sleep(Duration::from_millis(100)).await;
            let took = start.elapsed();
            assert!(
                took >= Duration::from_millis(100),
                "{lead:?}: early: {took:?}"
            );
            assert!(took < Duration::from_secs(2), "{lead:?}: late: {took:?}");
        });
    }
}

/// A timer whose driver runs on a current-thread runtime of its own, on the real
/// clock, on a thread of its own (as the default timer's does); the runtime ends when
/// the returned sender is dropped.
fn timer_on_its_own_current_thread_runtime() -> (tokio::sync::oneshot::Sender<()>, Timer) {
    let runtime = current_thread_runtime();
    let timer = timer_on(runtime.handle());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || drop(runtime.block_on(stopped)));
    (stop, timer)
}

/// As for a multi-thread driver: a timer driven by a real-clock current-thread runtime
/// on another thread measures `sleep(d)` from its driver's clock, not from a paused
/// caller's, which lags it (frozen since that runtime was built: the sleep would
/// complete at once) or leads it (advanced an hour: it would take an hour, so the test
/// bounds each sleep in real time rather than hang).
#[test]
fn a_sleep_from_a_paused_caller_on_a_timer_driven_by_another_current_thread_runtime_lasts_its_duration(
) {
    let (_stop, timer) = timer_on_its_own_current_thread_runtime();
    for lead in [Duration::ZERO, Duration::from_secs(3600)] {
        let paused = paused_runtime();
        // The paused clock stands still while the real one runs on.
        std::thread::sleep(Duration::from_millis(300));
        let timer = timer.clone();
        let (took, seen) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            paused.block_on(async {
                tokio::time::advance(lead).await;
                let start = std::time::Instant::now();
                timer.sleep(Duration::from_millis(100)).await;
                let _ = took.send(start.elapsed());
            });
        });
        let took = seen
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{lead:?}: a 100 ms sleep did not complete in 10 s"));
        assert!(
            took >= Duration::from_millis(100),
            "{lead:?}: early: {took:?}"
        );
        assert!(took < Duration::from_secs(2), "{lead:?}: late: {took:?}");
    }
}

/// The timer's origin comes from the clock of the runtime its driver runs on, not from
/// the caller's: built from a test whose paused clock is an hour in, it must not count
/// its own runtime's deadlines from an hour ahead (they would all be due at once).
#[test]
fn built_from_a_paused_runtime_an_hour_in_it_follows_its_own_runtimes_clock() {
    let paused = |start| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(start)
            .build()
            .unwrap()
    };
    let (caller, own) = (paused(true), paused(true));
    let timer = caller.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        Timer::builder().tick(TICK).build_on(own.handle()).unwrap()
    });
    own.block_on(async {
        let start = Instant::now();
        timer.sleep(Duration::from_millis(200)).await;
        assert_on_time(Duration::from_millis(200), start.elapsed());
    });
}

/// A `Sleep` that `reset` left out of the wheel answers "has it passed?" by the clock
/// the timer's driver follows, not the caller's: here the driver's runtime follows the
/// real clock and the caller is a paused test an hour ahead of it, so by the driver's
/// clock the reset deadline is an hour away (by the caller's clock it would complete at
/// once).
#[test]
fn a_reset_sleep_asks_the_drivers_clock_not_the_callers() {
    let (_real, timer) = timer_on_its_own_runtime();
    let paused = paused_runtime();
    paused.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        let mut sleep = timer.sleep(Duration::from_secs(10));
        std::pin::Pin::new(&mut sleep).reset(Instant::now() + Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!sleep.is_elapsed(), "by the caller's clock");
        let polled = std::pin::Pin::new(&mut sleep)
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        assert!(polled.is_pending(), "Ready by the caller's clock");
    });
}

/// An `Interval` tells a due tick by the clock the timer's driver follows, as a reset
/// `Sleep` does: here the driver's runtime follows the real clock and the caller is a
/// paused test an hour ahead of it, so by the driver's clock the tick is a second away
/// (by the caller's clock it would complete at once, while a `Sleep` due at the same
/// instant waits).
#[test]
fn an_intervals_tick_is_due_by_the_drivers_clock_not_the_callers() {
    let own = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = Timer::builder().tick(TICK).build_on(own.handle()).unwrap();
    let paused = paused_runtime();
    paused.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        // A second ahead on the driver's (real) clock, an hour behind the caller's.
        let start = Instant::from_std(std::time::Instant::now()) + Duration::from_secs(1);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut sleep = timer.sleep_until(start);
        assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_pending());
        let mut interval = timer.interval_at(start, Duration::from_secs(1));
        assert!(
            interval.poll_tick(&mut cx).is_pending(),
            "a tick completed before the driver's clock reached it"
        );
        // "At once" is by that clock too, not an hour away.
        interval.reset_immediately();
        assert!(interval.poll_tick(&mut cx).is_ready());
        let mut interval = timer.interval(Duration::from_secs(1));
        assert!(interval.poll_tick(&mut cx).is_ready(), "the first tick");
    });
}

/// A thread that ran the driver's current-thread runtime is on it only while it runs
/// it: once `block_on` returns and the runtime moves to a thread of its own (the
/// driver, idle, has no turn there until something wakes it), this thread running a
/// paused test runtime, whose clock lags the driver's real one, must not measure
/// `sleep(d)` from that paused clock (by which the sleep would complete at once).
#[test]
fn a_thread_that_left_the_drivers_current_thread_runtime_measures_by_the_drivers_clock() {
    let runtime = current_thread_runtime();
    // The driver turns on this thread, fires the sleep, and parks with nothing pending.
    let timer = runtime.block_on(async {
        let timer = Timer::builder().tick(TICK).build().unwrap();
        timer.sleep(TICK).await;
        timer
    });
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || drop(runtime.block_on(stopped)));
    let paused = paused_runtime();
    // The paused clock stands still while the real one runs on.
    std::thread::sleep(Duration::from_millis(300));
    let took = paused.block_on(async {
        let start = std::time::Instant::now();
        timer.sleep(Duration::from_millis(100)).await;
        start.elapsed()
    });
    assert!(took >= Duration::from_millis(100), "early: {took:?}");
}

/// `catch_up` from a paused-clock test on a timer whose driver runs on another,
/// real-clock runtime: it waits for one turn of that driver, not for the driver's
/// clock to reach the caller's (which would spin the driver for as long as the
/// advance).
#[test]
fn catch_up_waits_one_turn_of_a_driver_on_another_runtime() {
    let (_driver_rt, timer) = timer_on_its_own_runtime();
    let paused = paused_runtime();
    paused.block_on(async {
        tokio::time::advance(Duration::from_secs(2)).await;
        let before = timer.stats().driver_wakeups;
        let started = std::time::Instant::now();
        timer.catch_up().await;
        let turns = timer.stats().driver_wakeups - before;
        assert!(turns <= 3, "{turns} driver turns");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    });
}
