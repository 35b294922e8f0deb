//! `max_pending`: `schedule` and `schedule_detached` are refused with
//! `Error::AtCapacity` only while that many callbacks are pending, under concurrent
//! `schedule` too; a cancel or an expiry frees room before the closure is dropped or
//! run; futures are never counted.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_wheel::{Error, Timer};

mod common;
use common::{runtime_with_time, TICK};

#[tokio::test(start_paused = true)]
async fn capacity_refuses_then_frees_on_cancel_and_expiry() {
    let timer = Timer::builder().tick(TICK).max_pending(2).build().unwrap();
    let a = timer.schedule(Duration::from_secs(1), || {}).unwrap();
    let _b = timer.schedule(Duration::from_millis(50), || {}).unwrap();
    assert_eq!(
        timer.schedule(Duration::from_secs(1), || {}).unwrap_err(),
        Error::AtCapacity { max: 2 }
    );
    // Futures are not counted against max_pending and never refused.
    let mut sleep = timer.sleep(Duration::from_secs(1));
    assert!(futures::poll!(&mut sleep).is_pending());
    assert_eq!(timer.pending(), 3);
    assert!(a.cancel());
    let c = timer.schedule(Duration::from_secs(1), || {}).unwrap();
    assert!(timer.schedule(Duration::from_secs(1), || {}).is_err());
    tokio::time::sleep(Duration::from_millis(60)).await; // _b expires
    let d = timer.schedule(Duration::from_secs(1), || {}).unwrap();
    assert_eq!(timer.pending(), 3);
    drop((c, d));
    let zero = Timer::builder().max_pending(0).build().unwrap();
    assert_eq!(
        zero.schedule(TICK, || {}).unwrap_err(),
        Error::AtCapacity { max: 0 }
    );
}

/// An expiry frees capacity before the callback runs, so a heartbeat can re-arm itself
/// even at `max_pending(1)`.
#[tokio::test(start_paused = true)]
async fn a_callback_rearms_itself_at_capacity_one() {
    let timer = Timer::builder().tick(TICK).max_pending(1).build().unwrap();
    let beats = Arc::new(AtomicUsize::new(0));
    fn beat(timer: Timer, beats: Arc<AtomicUsize>) {
        if beats.fetch_add(1, Ordering::SeqCst) < 3 {
            let next = timer.clone();
            timer
                .schedule(TICK, move || beat(next, beats))
                .expect("capacity freed by the expiry")
                .detach();
        }
    }
    beat(timer.clone(), beats.clone());
    tokio::time::sleep(TICK * 10).await;
    assert_eq!(beats.load(Ordering::SeqCst), 4);
}

/// A cancel frees capacity before the cancelled closure is dropped, as an expiry
/// frees it before the callback runs: a closure whose captures re-arm a fallback when
/// dropped can do so at `max_pending(1)`, with nothing pending any more.
#[tokio::test(start_paused = true)]
async fn a_cancel_frees_capacity_before_the_closure_is_dropped() {
    type Outcome = Arc<Mutex<Option<(usize, Result<(), Error>)>>>;
    struct Fallback {
        timer: Timer,
        outcome: Outcome,
    }
    impl Drop for Fallback {
        fn drop(&mut self) {
            let pending = self.timer.pending();
            let result = self.timer.schedule_detached(Duration::from_secs(1), || {});
            *self.outcome.lock().unwrap() = Some((pending, result));
        }
    }
    let timer = Timer::builder().tick(TICK).max_pending(1).build().unwrap();
    let outcome = Arc::new(Mutex::new(None));
    let fallback = Fallback {
        timer: timer.clone(),
        outcome: outcome.clone(),
    };
    let handle = timer
        .schedule(Duration::from_secs(1), move || drop(fallback))
        .unwrap();
    assert!(handle.cancel());
    assert_eq!(
        outcome.lock().unwrap().take(),
        Some((0, Ok(()))),
        "nothing pending, yet the fallback was refused"
    );
    assert_eq!(timer.pending(), 1);
}

#[tokio::test(start_paused = true)]
async fn detached_without_a_handle_is_refused_like_schedule() {
    let timer = Timer::builder().tick(TICK).max_pending(1).build().unwrap();
    timer
        .schedule_detached(Duration::from_secs(1), || {})
        .unwrap();
    // Refused at capacity: the closure is dropped unrun, and says so by dropping its
    // capture.
    let probe = Arc::new(());
    let captured = probe.clone();
    assert_eq!(
        timer
            .schedule_detached(Duration::from_secs(1), move || drop(captured))
            .unwrap_err(),
        Error::AtCapacity { max: 1 }
    );
    assert_eq!(Arc::strong_count(&probe), 1);
    // A pending one is returned by shutdown, unrun; after it, refused.
    let unfired = timer.shutdown().await;
    assert_eq!(unfired.len(), 1);
    assert_eq!(
        timer.schedule_detached(TICK, || {}).unwrap_err(),
        Error::Shutdown
    );
    assert_eq!(timer.stats().fired, 0);
}

/// With `max_pending(1)`, thread A cancels its only callback and schedules again while
/// thread B keeps trying on the full timer (while A holds the room). A refusal of A
/// is right only while B holds the room; B, when it gets it, says so and keeps it
/// until A has seen that. A refusal that no success of B explains is a phantom: a
/// refused `schedule` of B counted against the limit for a moment.
#[test]
fn max_pending_refuses_only_when_that_many_are_pending() {
    const NONE: usize = 0;
    const HOLDS: usize = 1;
    const SEEN: usize = 2;
    let runtime = runtime_with_time();
    let timer = runtime.block_on(async { Timer::builder().max_pending(1).build().unwrap() });
    let a_holds = Arc::new(AtomicBool::new(false));
    let b_state = Arc::new(AtomicUsize::new(NONE));
    let stop = Arc::new(AtomicBool::new(false));
    let b = std::thread::spawn({
        let (timer, a_holds, b_state, stop) = (
            timer.clone(),
            a_holds.clone(),
            b_state.clone(),
            stop.clone(),
        );
        move || {
            while !stop.load(Ordering::SeqCst) {
                if !a_holds.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                    continue;
                }
                if let Ok(handle) = timer.schedule(Duration::from_secs(3600), || ()) {
                    b_state.store(HOLDS, Ordering::SeqCst);
                    while b_state.load(Ordering::SeqCst) == HOLDS && !stop.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    drop(handle);
                    b_state.store(NONE, Ordering::SeqCst);
                }
            }
        }
    });
    let started = std::time::Instant::now();
    let mut held: Option<tokio_wheel::Scheduled> = None;
    let (mut rounds, mut explained) = (0, 0);
    while started.elapsed() < Duration::from_secs(2) {
        rounds += 1;
        a_holds.store(false, Ordering::SeqCst);
        if let Some(handle) = held.take() {
            assert!(handle.cancel());
        }
        match timer.schedule(Duration::from_secs(3600), || ()) {
            Ok(handle) => {
                held = Some(handle);
                a_holds.store(true, Ordering::SeqCst);
            }
            Err(Error::AtCapacity { max: 1 }) => {
                // Explained only if B holds the room: it says so soon after it got it.
                let wait = std::time::Instant::now();
                while b_state.load(Ordering::SeqCst) != HOLDS {
                    assert!(
                        wait.elapsed() < Duration::from_secs(1),
                        "refused with nothing pending (round {rounds})"
                    );
                    std::thread::yield_now();
                }
                explained += 1;
                b_state.store(SEEN, Ordering::SeqCst);
                while b_state.load(Ordering::SeqCst) != NONE {
                    std::thread::yield_now();
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, Ordering::SeqCst);
    b.join().unwrap();
    drop(held);
    assert!(
        rounds > 1000,
        "{rounds} rounds, {explained} refusals explained"
    );
    assert_eq!(timer.pending(), 0);
}
