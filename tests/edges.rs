//! Edges a correct program reaches: `max_pending` under concurrent `schedule`, and
//! building or using timers where Tokio's context is borrowed or torn down.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_wheel::{Error, Timer};

/// With `max_pending(1)`, thread A cancels its only callback and schedules again while
/// thread B keeps trying on the full timer (while A holds the room). A refusal of A
/// is right only while B holds the room; B, when it gets it, says so and keeps it
/// until A has seen that. A refusal that no success of B explains is a phantom: a
/// refused `schedule` of B counted for a moment (it came in under a second on two
/// cores).
#[test]
fn max_pending_refuses_only_when_that_many_are_pending() {
    const NONE: usize = 0;
    const HOLDS: usize = 1;
    const SEEN: usize = 2;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
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
    eprintln!("{rounds} rounds, {explained} refusals explained");
    assert!(rounds > 1000, "{rounds} rounds");
    assert_eq!(timer.pending(), 0);
}
