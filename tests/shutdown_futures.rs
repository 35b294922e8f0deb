//! Sleeps, timeouts and intervals after `shutdown()` or the loss of the driver's
//! runtime, pending then or made later: timed by the clock the driver followed, never
//! early, nothing spins, nothing hangs.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Error, Timer};

mod common;
use common::{
    assert_at, assert_within, current_thread_runtime, paused_runtime, timer, timer_on,
    timer_on_a_paused_runtime, timer_on_its_own_runtime, SLACK, TICK,
};

/// Tokio's timer, which times a shut-down timer's futures, rounds up to its
/// millisecond.
const MS: Duration = Duration::from_millis(1);

/// A heartbeat loop across a shutdown ticks once a period, each tick at its scheduled
/// instant (paused clock): never early, and never spinning once the timer is shut
/// down.
#[tokio::test(start_paused = true)]
async fn an_interval_ticks_once_a_period_across_a_shutdown() {
    let timer = timer();
    let period = Duration::from_millis(100);
    let start = Instant::now();
    let mut heartbeat = timer.interval(period);
    let t = timer.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(t.shutdown().await.is_empty());
    });
    let mut ticks = Vec::new();
    // Bounded: a spinning interval would tick without the paused clock moving.
    while ticks.len() < 1000 && start.elapsed() < Duration::from_secs(1) {
        let scheduled = heartbeat.tick().await;
        assert_at(Instant::now(), scheduled, TICK + MS);
        ticks.push(scheduled - start);
    }
    assert!(timer.is_shutdown());
    let expected: Vec<_> = (0..=10).map(|i| period * i).collect();
    assert_eq!(ticks, expected);
}

/// Sleeps and timeouts pending at shutdown, or made after it, complete at their
/// deadline on the driver's (paused) clock, neither at once nor on their first poll:
/// `timeout(5 s, a 50 ms future)` is the future's answer.
#[tokio::test(start_paused = true)]
async fn sleeps_and_timeouts_after_shutdown_are_never_early_on_the_paused_clock() {
    let timer = timer();
    let start = Instant::now();
    let pending = tokio::spawn({
        let timer = timer.clone();
        async move {
            timer.sleep(Duration::from_millis(500)).await;
            Instant::now()
        }
    });
    let mut registered = timer.sleep(Duration::from_millis(300));
    assert!(futures::poll!(&mut registered).is_pending());
    tokio::task::yield_now().await;
    assert_eq!(timer.pending(), 2);
    assert!(timer.shutdown().await.is_empty());
    assert!(!registered.is_elapsed(), "drained by shutdown, not fired");

    // Made after the shutdown.
    let answer = timer
        .timeout(
            Duration::from_secs(5),
            tokio::time::sleep(Duration::from_millis(50)),
        )
        .await;
    assert_eq!(answer, Ok(()), "a 50 ms future within a 5 s timeout");
    assert_at(Instant::now(), start + Duration::from_millis(50), MS);
    let deadline = Instant::now() + Duration::from_millis(120);
    timer.sleep(Duration::from_millis(120)).await;
    assert_at(Instant::now(), deadline, MS);

    (&mut registered).await;
    assert_at(Instant::now(), start + Duration::from_millis(300), MS);
    assert!(registered.is_elapsed());
    assert_at(
        pending.await.unwrap(),
        start + Duration::from_millis(500),
        MS,
    );

    let deadline = Instant::now() + Duration::from_secs(5);
    let slow = timer.timeout(Duration::from_secs(5), std::future::pending::<()>());
    assert!(slow.await.is_err());
    assert_at(Instant::now(), deadline, MS);
}

/// After shutdown, a `Sleep` timed by its fallback on the driver's runtime is due at
/// its exact deadline, as a registered one is (Tokio's timer would fire it at its next
/// whole millisecond): `is_elapsed` and `poll` agree, and neither is a nanosecond early.
#[tokio::test(start_paused = true)]
async fn after_shutdown_a_sleep_is_ready_when_polled_at_its_exact_deadline() {
    const NS: Duration = Duration::from_nanos(1);
    // Neither on a step's end nor on Tokio's whole millisecond.
    const ODD: Duration = Duration::from_micros(13_370);
    let timer = timer();
    timer.shutdown().await;
    let deadline = Instant::now() + ODD;
    let mut sleep = tokio_test::task::spawn(timer.sleep_until(deadline));
    assert!(sleep.poll().is_pending());
    tokio::time::advance(ODD - NS).await;
    assert!(!sleep.is_elapsed(), "early by a nanosecond");
    assert!(sleep.poll().is_pending(), "early by a nanosecond");
    tokio::time::advance(NS).await;
    assert_eq!(Instant::now(), deadline);
    assert!(sleep.is_elapsed());
    assert!(
        sleep.poll().is_ready(),
        "due, yet pending until Tokio's millisecond"
    );
}

/// A reset after shutdown moves the deadline on the other clock too, both ways.
#[tokio::test(start_paused = true)]
async fn a_sleep_reset_after_shutdown_follows_its_new_deadline() {
    let timer = timer();
    timer.shutdown().await;
    let mut sleep = timer.sleep(Duration::from_secs(10));
    assert!(futures::poll!(&mut sleep).is_pending());
    let deadline = Instant::now() + Duration::from_millis(30);
    std::pin::Pin::new(&mut sleep).reset(deadline);
    assert!(!sleep.is_elapsed());
    (&mut sleep).await;
    assert_at(Instant::now(), deadline, MS);
    let deadline = Instant::now() + Duration::from_millis(70);
    std::pin::Pin::new(&mut sleep).reset(deadline);
    (&mut sleep).await;
    assert_at(Instant::now(), deadline, MS);
}

fn real_now() -> Instant {
    Instant::from_std(std::time::Instant::now())
}

/// After an explicit shutdown, from another runtime (real clock): never early, late by
/// less than a tick and a few milliseconds.
#[test]
fn after_shutdown_sleeps_from_another_runtime_are_never_early() {
    let (_driver, timer) = timer_on_its_own_runtime();
    let caller = current_thread_runtime();
    caller.block_on(async {
        assert!(timer.shutdown().await.is_empty());
        let start = real_now();
        let answer = timer
            .timeout(
                Duration::from_secs(5),
                tokio::time::sleep(Duration::from_millis(50)),
            )
            .await;
        assert_eq!(answer, Ok(()));
        assert_at(real_now(), start + Duration::from_millis(50), SLACK);
        let deadline = real_now() + Duration::from_millis(200);
        timer.sleep(Duration::from_millis(200)).await;
        assert_at(real_now(), deadline, TICK + SLACK);
    });
    // And from a plain executor, with no runtime at all.
    let deadline = real_now() + Duration::from_millis(100);
    futures::executor::block_on(timer.sleep(Duration::from_millis(100)));
    assert_at(real_now(), deadline, TICK + SLACK);
}

/// A sleep polled from another runtime when its timer's runtime is dropped completes
/// at its deadline, not at the loss; so do sleeps made after the loss, from a plain
/// executor, and an interval there ticks once a period.
#[test]
fn after_the_runtimes_loss_a_sleep_from_another_runtime_is_never_early() {
    let (driver, timer) = timer_on_its_own_runtime();
    let caller = current_thread_runtime();
    let after = Duration::from_millis(600);
    let deadline = real_now() + after;
    let sleep = timer.sleep_until(deadline);
    let waiter = std::thread::spawn(move || {
        caller.block_on(sleep);
        real_now()
    });
    std::thread::sleep(Duration::from_millis(100));
    drop(driver);
    assert!(timer.is_shutdown());
    assert_at(waiter.join().unwrap(), deadline, TICK + SLACK);
    // Made after the loss, polled from a plain executor.
    let deadline = real_now() + Duration::from_millis(100);
    futures::executor::block_on(timer.sleep(Duration::from_millis(100)));
    assert_at(real_now(), deadline, TICK + SLACK);
    // An interval ticks once a period there, without spinning.
    let period = Duration::from_millis(50);
    let mut interval = timer.interval(period);
    let first = futures::executor::block_on(interval.tick());
    for i in 1..4 {
        let scheduled = futures::executor::block_on(interval.tick());
        assert_eq!(scheduled - first, period * i);
        assert_at(real_now(), scheduled, TICK + SLACK);
    }
    assert_eq!(timer.schedule(TICK, || {}).unwrap_err(), Error::Shutdown);
}

/// A timer whose driver runs on a paused runtime of its own, shut down, then polled
/// from another runtime that follows the real clock: the real clock passes the
/// deadline long before the paused one, which decides (never early on it).
#[test]
fn after_shutdown_a_paused_drivers_clock_still_decides() {
    let driver = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let timer = driver.block_on(async { timer() });
    driver.block_on(timer.shutdown());
    let handle = driver.handle().clone();
    let start = handle.block_on(async { Instant::now() });
    let mut sleep = timer.sleep(Duration::from_millis(50));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_pending());
    std::thread::sleep(Duration::from_millis(100));
    // The real clock is past the deadline; the driver's paused clock is not.
    assert!(!sleep.is_elapsed());
    assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_pending());
    driver.block_on(tokio::time::advance(Duration::from_millis(50)));
    assert!(handle.block_on(async { Instant::now() }) >= start + Duration::from_millis(50));
    assert!(sleep.is_elapsed());
    assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_ready());
}

/// The driver's (real-clock) runtime gone, a sleep polled from a paused runtime: the
/// real clock, the driver's, decides, not the caller's paused clock (which would
/// jump to the deadline at once when idle).
#[test]
fn after_the_runtimes_loss_a_paused_caller_waits_on_the_real_clock() {
    let (driver, timer) = timer_on_its_own_runtime();
    drop(driver);
    assert!(timer.is_shutdown());
    let paused = paused_runtime();
    let after = Duration::from_millis(150);
    let start = std::time::Instant::now();
    let deadline = real_now() + after;
    paused.block_on(timer.sleep(after));
    assert_at(real_now(), deadline, TICK + SLACK);
    assert!(start.elapsed() >= after);
}

/// Runs `f` on a thread of its own and gives its answer, or fails after `limit` (a
/// hang would otherwise hang the test run).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    receive
        .recv_timeout(limit)
        .expect("still waiting: it hangs")
}

/// Asserts that `timer.sleep(after)`, awaited on a plain executor, lasts `after` by
/// the real clock, within a tick and some slack (failing, not hanging, if it waits
/// far longer).
fn lasts_its_duration_from_a_plain_executor(timer: Timer, after: Duration) {
    let (start, end) = within(Duration::from_secs(3), move || {
        let start = real_now();
        futures::executor::block_on(timer.sleep(after));
        (start, real_now())
    });
    assert_at(end, start + after, TICK + SLACK);
}

/// A paused driver's runtime dropped after `shutdown()`: its clock is frozen for ever,
/// so a sleep must not wait for it; the real clock decides, from the frozen reading on.
#[test]
fn after_shutdown_then_the_paused_runtimes_loss_a_sleep_completes() {
    let (driver, timer) = timer_on_a_paused_runtime();
    driver.block_on(timer.shutdown());
    drop(driver);
    let after = Duration::from_millis(50);
    lasts_its_duration_from_a_plain_executor(timer, after);
}

/// A paused driver's runtime dropped while the real clock runs ahead of its frozen
/// clock: a sleep made later still lasts its duration, not completing at once (a retry
/// loop on it would spin), and one made on a clock advanced an hour ahead does not wait
/// an hour.
#[test]
fn after_a_paused_runtimes_loss_sleeps_last_their_duration() {
    let (driver, timer) = timer_on_a_paused_runtime();
    std::thread::sleep(Duration::from_millis(200));
    drop(driver);
    let after = Duration::from_millis(100);
    lasts_its_duration_from_a_plain_executor(timer, after);

    let (driver, timer) = timer_on_a_paused_runtime();
    driver.block_on(tokio::time::advance(Duration::from_secs(3600)));
    drop(driver);
    lasts_its_duration_from_a_plain_executor(timer, after);
}

/// After `shutdown()`, a paused driver's clock an hour ahead of the real one: a sleep
/// polled from another thread waits for that clock to pass its deadline, not for the
/// real clock to reach an instant an hour ahead.
#[test]
fn after_shutdown_a_paused_clock_ahead_of_the_real_one_does_not_delay_sleeps() {
    let (driver, timer) = timer_on_a_paused_runtime();
    driver.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        timer.shutdown().await;
    });
    let after = Duration::from_millis(50);
    let sleep = timer.sleep(after);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        futures::executor::block_on(sleep);
        let _ = done.send(real_now());
    });
    std::thread::sleep(Duration::from_millis(100));
    let advanced = real_now();
    driver.block_on(tokio::time::advance(after));
    let end = finished
        .recv_timeout(Duration::from_secs(3))
        .expect("still waiting: it waits for the real clock to catch up");
    // Never early on the paused clock: it had not passed the deadline before.
    assert_at(end, advanced, TICK + SLACK);
}

/// A sleep first timed on the driver's runtime (polled there after `shutdown()`), then
/// awaited from another thread inside that runtime's context while the runtime is
/// dropped: Tokio's timer there ends with its runtime, and the sleep moves to another
/// clock instead of panicking on it ("timer error"), or, the runtime's clock paused,
/// waiting for that frozen clock for ever.
#[test]
fn a_sleep_timed_on_the_drivers_runtime_survives_its_loss_after_shutdown() {
    sleep_timed_on_the_drivers_runtime_survives_its_loss(false);
    sleep_timed_on_the_drivers_runtime_survives_its_loss(true);
}

fn sleep_timed_on_the_drivers_runtime_survives_its_loss(paused: bool) {
    let driver = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(paused)
        .build()
        .unwrap();
    let timer = driver.block_on(async { timer() });
    driver.block_on(timer.shutdown());
    let after = Duration::from_millis(300);
    let deadline = real_now() + after;
    let mut sleep = timer.sleep(after);
    driver.block_on(async { assert!(futures::poll!(&mut sleep).is_pending()) });
    let handle = driver.handle().clone();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _driver = handle.enter();
        futures::executor::block_on(sleep);
        let _ = done.send(real_now());
    });
    let before_the_loss = Duration::from_millis(50);
    std::thread::sleep(before_the_loss);
    drop(driver);
    let end = finished
        .recv_timeout(Duration::from_secs(3))
        .expect("still waiting: it hangs (or panicked)");
    // A paused clock stood still until the loss, then moved on with the real one.
    let deadline = if paused {
        deadline + before_the_loss
    } else {
        deadline
    };
    assert_at(end, deadline, TICK + SLACK);
}

/// A timer whose driver ran on a paused runtime, that runtime gone: a sleep made
/// afterwards times its duration on the real clock, from now, not from the instant
/// the dead runtime's paused clock froze at (behind the real clock here, so every
/// sleep made later would be early; ahead of it after an `advance`, so it would hang).
#[test]
fn after_a_paused_runtimes_loss_a_new_sleep_is_never_early_nor_late() {
    for advanced in [Duration::ZERO, Duration::from_secs(3600)] {
        let (driver, timer) = timer_on_a_paused_runtime();
        driver.block_on(tokio::time::advance(advanced));
        drop(driver);
        assert!(timer.is_shutdown());
        // The real clock moves on; the dead runtime's paused clock does not.
        std::thread::sleep(Duration::from_millis(300));
        let after = Duration::from_millis(200);
        let start = std::time::Instant::now();
        // Bounded: a sleep timed from a clock an hour ahead would not end for an hour.
        let caller = current_thread_runtime();
        let slept = caller
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(5), timer.sleep(after)).await
            })
            .is_ok();
        let took = start.elapsed();
        assert!(slept, "advanced {advanced:?}: still asleep after {took:?}");
        assert!(
            took >= after,
            "advanced {advanced:?}: early, after {took:?}"
        );
        assert!(
            took < after + TICK + SLACK,
            "advanced {advanced:?}: {took:?}"
        );
    }
}

/// Shut down, then its paused runtime gone: the dead runtime's clock, frozen short of
/// a sleep's deadline, must not hold the sleep for ever.
#[test]
fn shut_down_then_its_paused_runtime_lost_a_sleep_still_ends() {
    let (driver, timer) = timer_on_a_paused_runtime();
    driver.block_on(timer.shutdown());
    drop(driver);
    let after = Duration::from_millis(200);
    let caller = current_thread_runtime();
    let start = std::time::Instant::now();
    let slept = caller
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), timer.sleep(after)).await })
        .is_ok();
    let took = start.elapsed();
    assert!(slept, "still asleep after {took:?}");
    assert_within(after, took, TICK + SLACK);
}

/// The driver's runtime shut down under a pending sleep polled from elsewhere: the
/// sleep still completes at its deadline (the real clock times it now), neither early
/// nor hanging, and so do later ones.
#[test]
fn a_runtime_shut_down_under_a_live_timer_completes_its_sleeps() {
    let (driver_rt, timer) = timer_on_its_own_runtime();
    let after = Duration::from_millis(400);
    let start = std::time::Instant::now();
    let waiter = std::thread::spawn({
        let timer = timer.clone();
        move || {
            futures::executor::block_on(timer.sleep(after));
            start.elapsed()
        }
    });
    let probe = std::sync::Arc::new(());
    let captured = probe.clone();
    let callback = timer
        .schedule(Duration::from_secs(3600), move || drop(captured))
        .unwrap();
    while timer.pending() < 2 {
        std::thread::sleep(Duration::from_millis(1));
    }
    driver_rt.shutdown_timeout(Duration::from_secs(1));
    assert!(timer.is_shutdown());
    let slept = waiter.join().unwrap();
    // Real clock: never early, late by a tick and a busy machine's slack.
    assert_within(after, slept, TICK + SLACK);
    assert_eq!(timer.pending(), 1, "the callback stays, unrun");
    assert_eq!(timer.stats().stranded_callbacks, 1);
    assert_eq!(timer.schedule(TICK, || {}).unwrap_err(), Error::Shutdown);
    // Later futures also last their duration.
    let later = std::time::Instant::now();
    futures::executor::block_on(timer.sleep(Duration::from_millis(50)));
    assert_within(
        Duration::from_millis(50),
        later.elapsed(),
        Duration::from_secs(2),
    );
    // The pending callback is kept for shutdown() to return.
    assert_eq!(std::sync::Arc::strong_count(&probe), 2, "dropped unrun");
    let unfired = futures::executor::block_on(timer.shutdown());
    assert_eq!(unfired.len(), 1);
    assert!(!callback.is_expired() && !callback.is_cancelled());
    assert_eq!(timer.pending(), 0);
}

/// The driver task is spawned but its runtime is dropped before polling it: the
/// timer must still learn that its driver is gone, so nothing waits on it for ever.
#[test]
fn a_runtime_dropped_before_the_driver_ever_ran_leaves_nothing_hanging() {
    let never_ran = current_thread_runtime();
    let timer = timer_on(never_ran.handle());
    drop(never_ran); // a current-thread runtime polls nothing until block_on
    assert!(timer.is_shutdown());
    let other = current_thread_runtime();
    other.block_on(async {
        let done = tokio::time::timeout(Duration::from_secs(10), async {
            timer.sleep(Duration::from_millis(20)).await;
            timer.shutdown().await
        });
        let unfired = done.await.expect("a sleep or shutdown hung");
        assert!(unfired.is_empty());
    });
    assert_eq!(timer.schedule(TICK, || {}).unwrap_err(), Error::Shutdown);
}

/// A waker whose wake drops a `Sleep` it holds (as an inline executor finishing the
/// task that owned it would).
struct DropsOnWake(std::sync::Mutex<Option<tokio_wheel::Sleep>>);

impl std::task::Wake for DropsOnWake {
    fn wake(self: std::sync::Arc<Self>) {
        drop(self.0.lock().unwrap().take());
    }
}

/// A fallback reset into the past wakes its task at once (Tokio's sleep fires inside
/// the reset); that wake runs no user code under a lock of the timer's, so it may
/// drop another of the timer's fallen-back sleeps. Run on a thread of its own so that
/// a deadlock fails the test instead of hanging it.
#[test]
fn a_fallback_reset_into_the_past_wakes_its_task_holding_no_lock() {
    use std::pin::Pin;
    use std::task::{Context, Waker};
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        paused_runtime().block_on(async {
            let timer = Timer::new();
            let _ = timer.shutdown().await;
            let start = Instant::now();
            let hour = Duration::from_secs(3600);
            let noop = Waker::noop();
            let mut other = timer.sleep(hour);
            assert!(Pin::new(&mut other)
                .poll(&mut Context::from_waker(noop))
                .is_pending());
            let drops = std::sync::Arc::new(DropsOnWake(std::sync::Mutex::new(Some(other))));
            let waker = Waker::from(drops.clone());
            let mut sleep = timer.sleep(hour);
            assert!(Pin::new(&mut sleep)
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            tokio::time::advance(Duration::from_millis(50)).await;
            Pin::new(&mut sleep).reset(start);
            assert!(drops.0.lock().unwrap().is_none(), "woken by the reset");
            assert!(Pin::new(&mut sleep)
                .poll(&mut Context::from_waker(noop))
                .is_ready());
        });
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the reset's wake ran under the timer's lock (deadlock) or panicked");
}
