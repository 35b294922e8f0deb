//! Executors and the jobs they hand back: every executor runs each callback once, on
//! time, catches its panics and lets callbacks schedule and cancel; a slow callback off
//! the driver's task delays no other; a job a `Custom` executor drops or panics on is
//! handed back and still runs once, on the timer's runtime, even after the last
//! `Timer` handle is gone. Paused clock unless a test needs real threads to be slow.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Executor, Timer};

mod common;
use common::{keeping_executor, timer_with, LATE, SLACK, TICK};

fn all_executors() -> Vec<(&'static str, Executor)> {
    vec![
        ("inline", Executor::Inline),
        ("spawn", Executor::Spawn),
        ("blocking", Executor::Blocking),
        (
            "custom",
            Executor::Custom(Arc::new(|job: Box<dyn FnOnce() + Send>| {
                std::thread::spawn(job);
            })),
        ),
    ]
}

/// Waits (in paused time, letting other threads run) until `cond` holds.
async fn eventually(mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("condition never held");
}

/// On the real clock (the executors' threads must run): each callback runs once, never
/// early, and late by less than a tick, Tokio's millisecond and a busy machine's
/// slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_executor_runs_each_callback_once() {
    for (name, executor) in all_executors() {
        let timer = timer_with(executor);
        let ran = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        for i in 0..100u64 {
            let ran = ran.clone();
            let requested = Duration::from_millis(20 + i % 5);
            timer
                .schedule(requested, move || {
                    ran.lock().unwrap().push((requested, Instant::now()));
                })
                .unwrap()
                .detach();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ran = ran.lock().unwrap();
        assert_eq!(ran.len(), 100, "{name}");
        for &(requested, at) in ran.iter() {
            let took = at - start;
            assert!(
                took >= requested,
                "{name}: {requested:?} ran early, at {took:?}"
            );
            assert!(
                took < requested + LATE + SLACK,
                "{name}: {requested:?} ran late, at {took:?}"
            );
        }
        assert_eq!(timer.pending(), 0, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_callbacks_off_the_tick_task_do_not_delay_others() {
    for (name, executor) in all_executors().into_iter().skip(1) {
        let timer = timer_with(executor);
        let start = Instant::now();
        timer
            .schedule(Duration::from_millis(20), || {
                std::thread::sleep(Duration::from_millis(600));
            })
            .unwrap()
            .detach();
        let fast_at = Arc::new(Mutex::new(None));
        let f = fast_at.clone();
        timer
            .schedule(Duration::from_millis(60), move || {
                *f.lock().unwrap() = Some(Instant::now());
            })
            .unwrap()
            .detach();
        tokio::time::sleep(Duration::from_millis(400)).await;
        let fast = fast_at
            .lock()
            .unwrap()
            .expect("fast callback ran while slow one ran");
        let took = fast - start;
        // Tolerant real-clock bound: well under the slow callback's 600 ms.
        assert!(
            took >= Duration::from_millis(60) && took < Duration::from_millis(300),
            "{name}: {took:?}"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_callbacks_are_caught_on_every_executor() {
    for (name, executor) in all_executors() {
        let timer = timer_with(executor);
        let runs = Arc::new(AtomicUsize::new(0));
        timer
            .schedule(Duration::from_millis(10), || {
                panic!("callback panics (expected in this test)")
            })
            .unwrap()
            .detach();
        let r = runs.clone();
        timer
            .schedule(Duration::from_millis(40), move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap()
            .detach();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{name}: later timer fired");
        // The custom executor runs jobs on plain threads: the job catches the panic.
        assert_eq!(timer.stats().callback_panics, 1, "{name}");
        // The driver still works afterwards.
        timer.sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_may_schedule_and_cancel_on_every_executor() {
    for (name, executor) in all_executors() {
        let timer = timer_with(executor);
        let beats = Arc::new(AtomicUsize::new(0));
        fn beat(timer: Timer, beats: Arc<AtomicUsize>) {
            if beats.fetch_add(1, Ordering::SeqCst) < 4 {
                let next = timer.clone();
                timer
                    .schedule(Duration::from_millis(10), move || beat(next, beats))
                    .unwrap()
                    .detach();
            }
        }
        beat(timer.clone(), beats.clone());

        let victim_ran = Arc::new(AtomicUsize::new(0));
        let v = victim_ran.clone();
        let victim = timer
            .schedule(Duration::from_millis(100), move || {
                v.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        let cancelled = Arc::new(AtomicUsize::new(0));
        let c = cancelled.clone();
        timer
            .schedule(Duration::from_millis(20), move || {
                if victim.cancel() {
                    c.fetch_add(1, Ordering::SeqCst);
                }
            })
            .unwrap()
            .detach();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(beats.load(Ordering::SeqCst), 5, "{name}");
        assert_eq!(cancelled.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!(victim_ran.load(Ordering::SeqCst), 0, "{name}");
        assert_eq!(timer.pending(), 0, "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn custom_executor_that_drops_or_panics_loses_nothing() {
    let dropping = Executor::Custom(Arc::new(|job: Box<dyn FnOnce() + Send>| drop(job)));
    let panicking = Executor::Custom(Arc::new(|_job: Box<dyn FnOnce() + Send>| {
        panic!("executor panics (expected in this test)")
    }));
    for (name, executor) in [("drops", dropping), ("panics", panicking)] {
        let timer = timer_with(executor);
        let runs = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        for _ in 0..3 {
            let r = runs.clone();
            timer
                .schedule(Duration::from_millis(30), move || {
                    r.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap()
                .detach();
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        eventually(|| runs.load(Ordering::SeqCst) == 3).await;
        assert!(
            Instant::now() - start < Duration::from_millis(30) + TICK * 2,
            "{name}"
        );
        let stats = timer.stats();
        assert_eq!(stats.executor_rejections, 3, "{name}");
        assert_eq!(stats.callback_panics, 0, "{name}");
    }
}

/// A detached callback whose executor hands it back, with every `Timer` handle gone:
/// its expiry released the timer's keep-alive, so the turn that fired it may be the
/// timer's last, and the callback must still run (once), not go down with the timer.
#[tokio::test(start_paused = true)]
async fn a_job_handed_back_after_every_handle_is_gone_still_runs_once() {
    let dropping = || Executor::Custom(Arc::new(|job: Box<dyn FnOnce() + Send>| drop(job)));
    let panicking = || {
        Executor::Custom(Arc::new(|_job: Box<dyn FnOnce() + Send>| {
            panic!("executor panics (expected in this test)")
        }))
    };
    for (name, executor) in [
        ("drops", dropping()),
        ("panics", panicking()),
        ("drops, no handle", dropping()),
    ] {
        let timer = timer_with(executor);
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let callback = move || {
            r.fetch_add(1, Ordering::SeqCst);
        };
        if name.ends_with("no handle") {
            timer.schedule_detached(TICK * 5, callback).unwrap();
        } else {
            timer.schedule(TICK * 5, callback).unwrap().detach();
        }
        drop(timer);
        tokio::time::sleep(TICK * 10).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{name}");
    }
}

/// An executor that keeps the job and drops it later, unrun, just before the last
/// `Timer` handle goes: the job is back with the timer and no turn will come to run
/// it. It runs on the timer's runtime, where the driver would have run it, and not
/// inside the drop that let the last handle go, which may hold a lock of the user's
/// that the callback takes (it would deadlock there).
#[tokio::test(start_paused = true)]
async fn a_job_handed_back_as_the_last_handle_goes_runs_on_the_runtime() {
    let (jobs, executor) = keeping_executor();
    let timer = timer_with(executor);
    // The user's lock: held while the last handle is dropped, taken by the callback.
    let users: Arc<Mutex<Option<Timer>>> = Default::default();
    let (u, runs) = (users.clone(), Arc::new(AtomicUsize::new(0)));
    let r = runs.clone();
    timer
        .schedule_detached(TICK, move || {
            // `lock()` here would deadlock inside the user's drop.
            let free = u.try_lock().is_ok();
            r.fetch_add(if free { 1 } else { 100 }, Ordering::SeqCst);
        })
        .unwrap();
    tokio::time::sleep(TICK * 3).await;
    timer.catch_up().await;
    let job = jobs.lock().unwrap().pop().expect("handed to the executor");
    *users.lock().unwrap() = Some(timer);
    drop(job); // unrun: back to the timer, for its next turn
    {
        let mut guard = users.lock().unwrap();
        drop(guard.take()); // no turn between: the timer's last reference
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "ran inside the drop (100: under its lock)"
    );
    tokio::task::yield_now().await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "once, without the user's lock held"
    );
}
