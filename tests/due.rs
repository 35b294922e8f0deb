//! Due means ready: a `Sleep`, `Timeout` or `Interval` tick whose deadline has passed
//! on its timer's clock is ready when polled, without waiting for the driver's turn —
//! after `tokio::time::advance` to the exact deadline, after another task slept to it
//! on Tokio's timer, after a `reset` into the past — and never a nanosecond before.
//!
//! Every test polls by hand (tokio-test's mock task), so that the driver task gets no
//! turn in between unless the test yields to it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_wheel::{Elapsed, Timer};

mod common;
use common::{assert_at, current_thread_runtime, timer_on, TICK};

const NS: Duration = Duration::from_nanos(1);

/// A deadline that is neither on a step's end nor on Tokio's whole millisecond.
const ODD: Duration = Duration::from_micros(13_370);

/// `tokio::time::advance`, Tokio's own, with no turn of the wheel's driver after it.
async fn advance(by: Duration) {
    tokio::time::advance(by).await;
}

#[tokio::test(start_paused = true)]
async fn a_polled_sleep_is_ready_at_its_exact_deadline_and_not_a_nanosecond_before() {
    let timer = common::timer();
    let deadline = Instant::now() + ODD;
    let mut sleep = task::spawn(timer.sleep_until(deadline));
    assert_pending!(sleep.poll());
    advance(ODD - NS).await;
    assert_pending!(sleep.poll(), "early by a nanosecond");
    assert!(!sleep.is_elapsed());
    advance(NS).await;
    assert_eq!(Instant::now(), deadline);
    assert!(sleep.is_elapsed());
    assert_ready!(sleep.poll());
    // Out of the wheel: nothing left for the driver to fire.
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_sleep_first_polled_after_its_deadline_is_ready_at_once() {
    let timer = common::timer();
    let start = Instant::now();
    let mut at_deadline = task::spawn(timer.sleep(ODD));
    let mut a_nanosecond_later = task::spawn(timer.sleep(ODD + NS));
    advance(ODD).await;
    assert_ready!(at_deadline.poll());
    assert_pending!(a_nanosecond_later.poll(), "early by a nanosecond");
    assert_eq!(timer.pending(), 1);
    assert_eq!(Instant::now() - start, ODD);
    // A deadline in the past, never polled: ready at the first poll too.
    let mut past = task::spawn(timer.sleep_until(start));
    assert_ready!(past.poll());
}

#[tokio::test(start_paused = true)]
async fn a_sleep_is_ready_for_a_task_that_slept_to_its_deadline_on_tokios_timer() {
    let timer = common::timer();
    // On Tokio's whole millisecond, where its timer wakes a task, and not on a step's
    // end, where the wheel's driver wakes.
    let deadline = Instant::now() + Duration::from_millis(13);
    let mut ours = task::spawn(timer.sleep_until(deadline));
    assert_pending!(ours.poll());
    // The runtime's auto-advance wakes this task at `deadline` on Tokio's timer; the
    // wheel's driver wakes for the end of the step (15 ms), which has not come.
    let woken = tokio::spawn(async move {
        tokio::time::sleep_until(deadline).await;
        let now = Instant::now();
        let ready = ours.poll().is_ready();
        (now, ready)
    });
    let (now, ready) = woken.await.unwrap();
    assert_eq!(now, deadline);
    assert!(
        ready,
        "due on the clock, yet pending until the driver's turn"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sleep_reset_into_the_past_is_ready_and_its_task_woken() {
    let timer = common::timer();
    let start = Instant::now();
    let mut sleep = task::spawn(timer.sleep(Duration::from_secs(1)));
    assert_pending!(sleep.poll());
    advance(ODD).await;
    // To exactly now: due.
    Pin::new(&mut *sleep).reset(Instant::now());
    assert!(sleep.is_woken(), "the task waiting on it was not woken");
    assert!(sleep.is_elapsed());
    assert_ready!(sleep.poll());
    assert_eq!(timer.pending(), 0);
    // Back into the future: pending again, and never early.
    Pin::new(&mut *sleep).reset(Instant::now() + ODD);
    assert_pending!(sleep.poll());
    advance(ODD - NS).await;
    assert_pending!(sleep.poll(), "early by a nanosecond");
    // Into the past (before the timer's first step): due at once.
    Pin::new(&mut *sleep).reset(start);
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn a_timeout_elapses_at_its_exact_deadline() {
    let timer = common::timer();
    let mut timeout = task::spawn(timer.timeout(ODD, std::future::pending::<()>()));
    assert_pending!(timeout.poll());
    advance(ODD - NS).await;
    assert_pending!(timeout.poll(), "early by a nanosecond");
    advance(NS).await;
    let elapsed: Result<(), Elapsed> = assert_ready!(timeout.poll());
    assert!(elapsed.is_err());
}

#[tokio::test(start_paused = true)]
async fn an_intervals_tick_is_ready_at_its_exact_instant() {
    let timer = common::timer();
    let start = Instant::now();
    let mut interval = timer.interval(ODD);
    let mut tick = task::spawn(std::future::poll_fn(move |cx| interval.poll_tick(cx)));
    assert_eq!(assert_ready!(tick.poll()), start);
    assert_pending!(tick.poll());
    advance(ODD - NS).await;
    assert_pending!(tick.poll(), "early by a nanosecond");
    advance(NS).await;
    assert_eq!(assert_ready!(tick.poll()), start + ODD);
    advance(ODD).await;
    assert_eq!(assert_ready!(tick.poll()), start + 2 * ODD);
}

/// On the real clock: a sleep whose deadline passes while its runtime's only thread is
/// busy (so the driver cannot turn) is ready when polled; one whose deadline has not
/// come is not.
#[test]
fn on_the_real_clock_a_sleep_due_while_its_runtime_was_busy_is_ready() {
    let runtime = current_thread_runtime();
    let timer = timer_on(runtime.handle());
    runtime.block_on(async {
        let mut due = task::spawn(timer.sleep(Duration::from_millis(20)));
        let mut not_yet = task::spawn(timer.sleep(Duration::from_secs(5)));
        assert_pending!(due.poll());
        assert_pending!(not_yet.poll());
        std::thread::sleep(Duration::from_millis(30));
        assert_ready!(due.poll());
        assert_pending!(not_yet.poll());
        // A deadline in the past, first polled: ready at once.
        let past = tokio::time::Instant::now() - Duration::from_millis(1);
        let mut past = task::spawn(timer.sleep_until(past));
        assert_ready!(past.poll());
    });
}

/// The wheel's own firing keeps its bounds: a sleep nobody polls early is fired by the
/// driver less than a tick and a millisecond after its deadline.
#[tokio::test(start_paused = true)]
async fn left_to_the_driver_a_sleep_still_fires_within_its_bounds() {
    let timer = Timer::builder().tick(TICK).build().unwrap();
    let deadline = Instant::now() + ODD;
    timer.sleep_until(deadline).await;
    assert_at(Instant::now(), deadline, common::LATE);
}

/// The case on the real clock with the driver on another runtime, as the
/// process-wide default timer's is: a task on its own runtime sleeps to the deadline on
/// Tokio's timer while the driver's runtime is busy and has armed a wakeup for an
/// earlier timer; the wheel's sleep is ready when that task polls it.
#[test]
fn on_the_real_clock_a_sleep_is_ready_for_a_task_on_another_runtime_that_slept_to_it() {
    let (driver_runtime, timer) = common::timer_on_its_own_runtime();
    let caller = current_thread_runtime();
    caller.block_on(async {
        let mut earlier = task::spawn(timer.sleep(2 * TICK));
        let deadline = Instant::now() + 6 * TICK;
        let mut due = task::spawn(timer.sleep_until(deadline));
        assert_pending!(earlier.poll());
        assert_pending!(due.poll());
        timer.catch_up().await;
        // The driver's runtime's one worker gets busy once the driver has parked.
        driver_runtime.spawn(async { std::thread::sleep(Duration::from_millis(400)) });
        tokio::time::sleep_until(deadline).await;
        assert!(Instant::now() >= deadline);
        assert_ready!(
            due.poll(),
            "due on the clock, yet pending until the driver's turn"
        );
        assert_ready!(earlier.poll());
    });
    drop(driver_runtime);
}

/// A sleep registered by one task and found due when polled with another waker wakes
/// the waker it held, as its firing would have: nothing waits for a driver's turn that
/// no longer comes.
#[tokio::test(start_paused = true)]
async fn a_due_sleep_polled_with_another_waker_wakes_the_one_it_held() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let timer = common::timer();
    let mut sleep = timer.sleep(ODD);
    let held = Arc::new(Flag(AtomicBool::new(false)));
    let first = Waker::from(held.clone());
    assert!(Pin::new(&mut sleep)
        .poll(&mut Context::from_waker(&first))
        .is_pending());
    advance(ODD).await;
    let other = Waker::from(Arc::new(Flag(AtomicBool::new(false))));
    assert!(Pin::new(&mut sleep)
        .poll(&mut Context::from_waker(&other))
        .is_ready());
    assert!(
        held.0.load(Ordering::SeqCst),
        "the waker it held was never woken"
    );
}

/// On the real clock (a multi-thread runtime's driver), where a cheap bound on the clock
/// rules most deadlines out without the precise read: a deadline passed by a nanosecond
/// or by a second is ready on the first poll all the same, and one well ahead is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_clock_a_deadline_just_passed_is_ready_when_first_polled() {
    let timer = Timer::new();
    for ago in [
        Duration::ZERO,
        NS,
        Duration::from_micros(50),
        Duration::from_millis(1),
        Duration::from_secs(1),
    ] {
        let mut sleep = task::spawn(timer.sleep_until(Instant::now() - ago));
        assert_ready!(sleep.poll(), "passed {ago:?} ago, yet pending");
    }
    let mut ahead = task::spawn(timer.sleep(Duration::from_secs(5)));
    assert_pending!(ahead.poll(), "early by five seconds");
    assert_eq!(timer.pending(), 1);
}
