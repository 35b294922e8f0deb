//! Callbacks: `schedule` runs each once, never early, less than a tick late;
//! `Scheduled::cancel` wins exactly when the callback has not run (racing its expiry
//! too); a detached callback still runs, and keeps the driver alive. Paused clock
//! unless a test needs real threads. (Executors: `executors.rs`; `max_pending`:
//! `capacity.rs`; at shutdown and the runtime's loss: `shutdown_callbacks.rs`; `reset`:
//! `scheduled_reset.rs`.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Executor, Timer};

mod common;
use common::{assert_on_time, keeping_executor, timer_with, TICK};

/// Each `(ms, at)`, scheduled `ms` after `start`, ran at `at`: never early, and less
/// than a tick late.
fn assert_all_on_time(fired: &[(u64, Instant)], start: Instant) {
    for &(ms, at) in fired {
        let requested = Duration::from_millis(ms);
        let took = at - start;
        assert!(took >= requested, "{ms} ms fired early at {took:?}");
        if ms == 0 {
            // Due already: runs on the next tick, never on the caller's stack.
            assert!(took <= TICK, "0 ms fired late at {took:?}");
        } else {
            assert_on_time(requested, took);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn fires_once_never_early_less_than_a_tick_late() {
    let timer = timer_with(Executor::Inline);
    let fired = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut handles = Vec::new();
    for ms in [0u64, 1, 9, 10, 11, 25, 99, 1000, 12_345] {
        let fired = fired.clone();
        let handle = timer
            .schedule(Duration::from_millis(ms), move || {
                fired.lock().unwrap().push((ms, Instant::now()));
            })
            .unwrap();
        assert_eq!(handle.deadline(), start + Duration::from_millis(ms));
        handles.push(handle);
    }
    tokio::time::sleep(Duration::from_secs(13)).await;
    let fired = fired.lock().unwrap();
    assert_eq!(fired.len(), 9, "each callback runs exactly once");
    assert_all_on_time(&fired, start);
    assert!(handles.iter().all(|h| h.is_expired() && !h.is_cancelled()));
    assert_eq!(timer.pending(), 0);
}

/// More callbacks due at one step than a turn hands out (4096): the turn stops inside
/// the step. Those that ran meanwhile must say `is_expired()`, those waiting not.
#[tokio::test(start_paused = true)]
async fn callbacks_run_by_a_turn_that_stopped_inside_their_step_are_expired() {
    const N: usize = 5000;
    let timer = timer_with(Executor::Inline);
    let ran: Arc<Vec<AtomicBool>> = Arc::new((0..N).map(|_| AtomicBool::new(false)).collect());
    let first = Arc::new(tokio::sync::Notify::new());
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (ran, first) = (ran.clone(), first.clone());
            let callback = move || {
                ran[i].store(true, Ordering::SeqCst);
                first.notify_one();
            };
            timer.schedule(Duration::from_millis(15), callback).unwrap()
        })
        .collect();
    first.notified().await; // between the driver's first turn and its second
    let done = (0..N).filter(|&i| ran[i].load(Ordering::SeqCst)).count();
    assert!(
        done > 0 && done < N,
        "the turn stopped inside the step: {done}"
    );
    for (i, handle) in handles.iter().enumerate() {
        assert_eq!(
            handle.is_expired(),
            ran[i].load(Ordering::SeqCst),
            "callback {i}"
        );
    }
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<tokio_wheel::Scheduled>();
    check::<tokio_wheel::Unfired>();
}

#[tokio::test(start_paused = true)]
async fn cancel_is_true_once_and_never_after_running() {
    let timer = timer_with(Executor::Inline);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let first = timer
        .schedule(TICK, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    assert!(!first.is_cancelled() && !first.is_expired());
    assert!(first.cancel());
    assert!(!first.cancel());
    assert!(first.is_cancelled() && !first.is_expired());
    assert_eq!(timer.pending(), 0);

    let r = runs.clone();
    let second = timer
        .schedule(TICK, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    tokio::time::sleep(TICK * 3).await;
    assert!(second.is_expired() && !second.is_cancelled());
    assert!(!second.cancel(), "cancel after it ran stops nothing");
    assert!(!second.is_cancelled());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// A handle names its entry by slab key, whose generation wraps after 2^20 - 1 inserts;
/// a stale handle must still never cancel the entry that later got its key.
#[tokio::test(start_paused = true)]
async fn a_stale_handle_never_cancels_the_entry_that_reused_its_key() {
    let timer = timer_with(Executor::Inline);
    let fired = timer.schedule(TICK, || ()).unwrap();
    tokio::time::sleep(TICK * 3).await;
    assert!(fired.is_expired());
    // Each round reuses the freed index; one of them gets `fired`'s generation back.
    for round in 0..(1 << 20) + 2 {
        let later = timer.schedule(Duration::from_secs(3600), || ()).unwrap();
        assert!(
            !fired.cancel(),
            "round {round}: a stale cancel stopped another callback"
        );
        assert!(fired.is_expired() && !later.is_expired(), "round {round}");
        drop(later);
    }
    // Only `fired` ever ran; every later callback was cancelled by its own handle.
    assert_eq!((timer.stats().fired, timer.pending()), (1, 0));
}

/// Cancel racing expiry on another thread: exactly one of "cancel returned true" and
/// "the callback ran" happens, for every callback.
#[test]
fn cancel_racing_expiry_is_exactly_once() {
    let runtime = common::multi_thread_runtime(2);
    let timer = runtime.block_on(async {
        Timer::builder()
            .tick(Duration::from_millis(1))
            .build()
            .unwrap()
    });
    const N: usize = 20_000;
    let ran: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
    let mut handles = Vec::with_capacity(N);
    for i in 0..N {
        let ran = ran.clone();
        // Deadlines spread over ~20 ms so that expiry and cancel overlap.
        let delay = Duration::from_micros((i % 20) as u64 * 1000);
        handles.push(
            timer
                .schedule(delay, move || {
                    ran[i].fetch_add(1, Ordering::SeqCst);
                })
                .unwrap(),
        );
    }
    let cancelled: Vec<bool> = std::thread::scope(|s| {
        let canceller = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(8));
            handles.iter().map(|h| h.cancel()).collect::<Vec<_>>()
        });
        canceller.join().unwrap()
    });
    std::thread::sleep(Duration::from_millis(100));
    let mut both = 0;
    let mut neither = 0;
    let (mut n_cancelled, mut n_ran) = (0, 0);
    for i in 0..N {
        let runs = ran[i].load(Ordering::SeqCst);
        assert!(runs <= 1, "callback {i} ran {runs} times");
        match (cancelled[i], runs == 1) {
            (true, true) => both += 1,
            (false, false) => neither += 1,
            (true, false) => n_cancelled += 1,
            (false, true) => n_ran += 1,
        }
    }
    assert_eq!(
        (both, neither),
        (0, 0),
        "ran {n_ran}, cancelled {n_cancelled}"
    );
    assert_eq!(n_cancelled + n_ran, N);
    drop(handles);
    assert_eq!(timer.pending(), 0);
}

/// Every state a cancel can meet the callback in, deterministically: before its tick,
/// after it ran, after the driver took it out but before its executor ran it, and from
/// another callback expiring in the same tick. Together with the stress test above
/// (real threads) this covers the protocol's interleavings: the callback's state only
/// changes under the wheel lock, so these are the only orders there are.
#[tokio::test(start_paused = true)]
async fn cancel_meets_every_state_exactly_once() {
    // Deferred executor: holds jobs until we run them.
    let (jobs, executor) = keeping_executor();
    let timer = timer_with(executor);
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = |runs: &Arc<AtomicUsize>| {
        let runs = runs.clone();
        move || {
            runs.fetch_add(1, Ordering::SeqCst);
        }
    };

    // 1. Before the tick: cancel wins, the callback never runs.
    let h = timer.schedule(TICK, counted(&runs)).unwrap();
    assert!(h.cancel());
    // 2. Taken out by the driver, handed to the executor, not yet run: cancel loses.
    let h2 = timer.schedule(TICK, counted(&runs)).unwrap();
    tokio::time::sleep(TICK * 2).await;
    assert!(h2.is_expired());
    assert!(!h2.cancel(), "too late: the executor has it");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let pending_jobs: Vec<_> = jobs.lock().unwrap().drain(..).collect();
    assert_eq!(pending_jobs.len(), 1);
    for job in pending_jobs {
        job();
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // 3. After it ran: cancel loses again.
    assert!(!h2.cancel());
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // 4. Two callbacks expiring in the same tick, inline: the first cancels the second,
    //    which the driver has already taken out, so the cancel loses and it runs.
    let inline = timer_with(Executor::Inline);
    let victim_runs = Arc::new(AtomicUsize::new(0));
    let victim = Arc::new(Mutex::new(None));
    let v = victim.clone();
    let cancel_result = Arc::new(Mutex::new(None));
    let c = cancel_result.clone();
    inline
        .schedule(TICK, move || {
            let handle: Option<tokio_wheel::Scheduled> = v.lock().unwrap().take();
            *c.lock().unwrap() = handle.as_ref().map(|h| h.cancel());
        })
        .unwrap()
        .detach();
    *victim.lock().unwrap() = Some(inline.schedule(TICK, counted(&victim_runs)).unwrap());
    tokio::time::sleep(TICK * 2).await;
    let cancelled = cancel_result.lock().unwrap().expect("first callback ran");
    let ran = victim_runs.load(Ordering::SeqCst);
    assert!(ran <= 1);
    assert!(
        cancelled != (ran == 1),
        "exactly one of cancel=true ({cancelled}) and ran ({ran})"
    );
}

#[tokio::test(start_paused = true)]
async fn drop_cancels_detach_runs() {
    let timer = timer_with(Executor::Inline);
    let runs = Arc::new(AtomicUsize::new(0));
    let (r1, r2) = (runs.clone(), runs.clone());
    drop(
        timer
            .schedule(TICK, move || {
                r1.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap(),
    );
    assert_eq!(timer.pending(), 0, "dropping the handle cancels at once");
    timer
        .schedule(TICK, move || {
            r2.fetch_add(10, Ordering::SeqCst);
        })
        .unwrap()
        .detach();
    assert_eq!(timer.pending(), 1);
    tokio::time::sleep(TICK * 3).await;
    assert_eq!(runs.load(Ordering::SeqCst), 10);
}

#[tokio::test(start_paused = true)]
async fn detached_callbacks_keep_the_driver_alive() {
    let runs = Arc::new(AtomicUsize::new(0));
    {
        let timer = timer_with(Executor::Inline);
        let r = runs.clone();
        timer
            .schedule(Duration::from_secs(2), move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap()
            .detach();
    } // every Timer handle is gone
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn detached_without_a_handle_fires_once_on_time_and_keeps_the_driver_alive() {
    let fired = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    {
        let timer = timer_with(Executor::Inline);
        for ms in [0u64, 9, 10, 11, 999] {
            let fired = fired.clone();
            timer
                .schedule_detached(Duration::from_millis(ms), move || {
                    fired.lock().unwrap().push((ms, Instant::now()));
                })
                .unwrap();
        }
        let fired = fired.clone();
        let at = start + Duration::from_millis(1500);
        timer
            .schedule_detached_at(at, move || {
                fired.lock().unwrap().push((1500, Instant::now()))
            })
            .unwrap();
        assert_eq!(timer.pending(), 6);
    } // every Timer handle is gone: the callbacks keep the driver alive
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fired = fired.lock().unwrap();
    assert_eq!(fired.len(), 6, "each callback runs exactly once: {fired:?}");
    assert_all_on_time(&fired, start);
}
