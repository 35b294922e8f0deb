//! `Scheduled::reset` / `reset_at`: a pending callback moves in place, earlier or
//! later, runs once at its new deadline (never early, less than a tick late), and a
//! handle whose callback ran or was cancelled moves nothing. Paused clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

mod common;
use common::{assert_at, timer, timer_on_a_paused_runtime, TICK};

/// A callback that records when it ran.
fn recorder() -> (Arc<Mutex<Vec<Instant>>>, impl FnOnce() + Send + 'static) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let record = ran.clone();
    (ran, move || record.lock().unwrap().push(Instant::now()))
}

/// Asserts the callback ran once, never early, late by less than a tick and Tokio's
/// millisecond.
#[track_caller]
fn assert_ran_once_at(ran: &Mutex<Vec<Instant>>, deadline: Instant) {
    let ran = ran.lock().unwrap();
    assert_eq!(ran.len(), 1, "ran {} times", ran.len());
    assert_at(ran[0], deadline, TICK + Duration::from_millis(1));
}

#[tokio::test(start_paused = true)]
async fn reset_later_runs_once_at_the_new_deadline_not_the_old() {
    let timer = timer();
    let start = Instant::now();
    let (ran, f) = recorder();
    let handle = timer.schedule(Duration::from_millis(100), f).unwrap();
    assert!(handle.reset(Duration::from_millis(555)));
    let deadline = start + Duration::from_millis(555);
    assert_eq!(handle.deadline(), deadline);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(ran.lock().unwrap().is_empty(), "ran at its old deadline");
    assert_eq!(timer.pending(), 1, "moved, not copied");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_ran_once_at(&ran, deadline);
    assert!(handle.is_expired());
    assert_eq!(timer.stats().reset, 1);
}

#[tokio::test(start_paused = true)]
async fn reset_earlier_and_reset_at_run_once_at_the_new_deadline() {
    let timer = timer();
    let start = Instant::now();
    let (ran, f) = recorder();
    let handle = timer.schedule(Duration::from_secs(3600), f).unwrap();
    let deadline = start + Duration::from_millis(73);
    assert!(handle.reset_at(deadline));
    assert_eq!(handle.deadline(), deadline);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_ran_once_at(&ran, deadline);
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn many_resets_move_one_entry() {
    let timer = timer();
    let (ran, f) = recorder();
    let handle = timer.schedule(Duration::from_millis(50), f).unwrap();
    let mut deadline = Instant::now();
    // A lease renewed every 30 ms for a second: the 50 ms check never comes due.
    for _ in 0..33 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(handle.reset(Duration::from_millis(50)));
        deadline = Instant::now() + Duration::from_millis(50);
        assert_eq!(timer.pending(), 1);
    }
    assert!(ran.lock().unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_ran_once_at(&ran, deadline);
}

#[tokio::test(start_paused = true)]
async fn reset_to_the_past_runs_on_the_next_step_not_on_the_callers_stack() {
    let timer = timer();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (ran, f) = recorder();
    let handle = timer.schedule(Duration::from_secs(10), f).unwrap();
    let now = Instant::now();
    assert!(handle.reset_at(now - Duration::from_millis(500)));
    assert!(ran.lock().unwrap().is_empty(), "ran on the caller's stack");
    assert!(handle.reset(Duration::ZERO));
    assert!(ran.lock().unwrap().is_empty(), "ran on the caller's stack");
    tokio::time::sleep(TICK * 2).await;
    let ran = ran.lock().unwrap();
    assert_eq!(ran.len(), 1);
    assert!(ran[0] >= now && ran[0] <= now + TICK, "{:?}", ran[0] - now);
    // Moved to the next step in the wheel, not taken out and handed back.
    assert_eq!(timer.stats().executor_rejections, 0);
    assert_eq!(timer.stats().reset, 2);
}

#[tokio::test(start_paused = true)]
async fn a_callback_that_ran_or_was_cancelled_does_not_move() {
    let timer = timer();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let fired = timer
        .schedule(Duration::from_millis(20), move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let deadline = fired.deadline();
    assert!(!fired.reset(Duration::from_millis(20)));
    assert_eq!(
        fired.deadline(),
        deadline,
        "a refused reset changes nothing"
    );

    let c = count.clone();
    let cancelled = timer
        .schedule(Duration::from_millis(20), move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    assert!(cancelled.cancel());
    assert!(!cancelled.reset(Duration::from_millis(20)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "nothing runs twice or revives"
    );
    assert_eq!(timer.pending(), 0);
}

/// After a move, `cancel` and `is_expired` name the entry at its new step: the handle
/// must not keep asking about the step it left.
#[tokio::test(start_paused = true)]
async fn cancel_after_reset_stops_the_moved_callback() {
    let timer = timer();
    let (ran, f) = recorder();
    let handle = timer.schedule(Duration::from_millis(100), f).unwrap();
    assert!(handle.reset(Duration::from_millis(2000)));
    assert!(!handle.is_expired());
    assert!(handle.cancel(), "cancel must find the moved entry");
    assert!(handle.is_cancelled());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(ran.lock().unwrap().is_empty());
    assert_eq!(timer.pending(), 0);
}

/// Shutdown returns a moved callback with its new deadline.
#[tokio::test(start_paused = true)]
async fn shutdown_returns_a_moved_callback_at_its_new_deadline() {
    let timer = timer();
    let (ran, f) = recorder();
    let handle = timer.schedule(Duration::from_secs(1), f).unwrap();
    let deadline = Instant::now() + Duration::from_secs(7);
    assert!(handle.reset_at(deadline));
    let unfired = timer.shutdown().await;
    assert_eq!(unfired.len(), 1);
    assert_eq!(unfired[0].deadline(), deadline);
    assert!(
        !handle.reset(Duration::from_secs(1)),
        "returned by shutdown"
    );
    drop(unfired);
    assert!(ran.lock().unwrap().is_empty());
}

/// After the loss of the driver's runtime (its clock paused, so frozen there), a
/// callback with a handle stays pending, unrun: a reset still moves it, to a delay from
/// the timer's clock, which after the loss moves on with the real one from where the
/// paused clock stood (not from the frozen instant, which would put it early by however
/// long ago the loss was), and `shutdown` returns it at that deadline. Nothing runs it
/// early, nor drops it silently.
#[test]
fn after_the_runtimes_loss_a_reset_moves_the_callback_from_the_real_now() {
    let real_now = || Instant::from_std(std::time::Instant::now());
    // The paused clock starts at the real now and stands still until the loss.
    let built = real_now();
    let (driver, timer) = timer_on_a_paused_runtime();
    let (ran, f) = recorder();
    let handle = timer.schedule(Duration::from_secs(1), f).unwrap();
    drop(driver);
    let lost = real_now();
    assert!(timer.is_shutdown());
    // The real clock moves on; the dead runtime's paused one does not.
    std::thread::sleep(Duration::from_millis(200));
    let before = real_now();
    assert!(handle.reset(Duration::from_secs(5)), "still pending");
    let after = real_now();
    let deadline = handle.deadline();
    // The timer's clock ran behind the real one by the time it stood paused, at most
    // from `built` to `lost`: a reset from the frozen instant would be 200 ms earlier.
    let lowest = before + Duration::from_secs(5) - (lost - built);
    assert!(deadline >= lowest, "{:?} early", lowest - deadline);
    assert!(deadline <= after + Duration::from_secs(5));
    let unfired = futures::executor::block_on(timer.shutdown());
    assert_eq!(unfired.len(), 1);
    assert_eq!(unfired[0].deadline(), deadline);
    assert!(ran.lock().unwrap().is_empty());
}
