//! Callbacks at `shutdown()` and at the loss of the driver's runtime: `shutdown`
//! returns the unfired ones, the handles tell run from cancelled from unfired, a
//! detached callback nothing can run any more is counted as stranded and dropped (not
//! leaked, even holding its own timer), and a closure that panics when dropped hangs
//! nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Error, Executor, Timer};

mod common;
use common::{current_thread_runtime, keeping_executor, timer_on, timer_with, TICK};

#[tokio::test(start_paused = true)]
async fn after_shutdown_handles_still_tell_expired_from_unfired() {
    let timer = timer_with(Executor::Inline);
    let ran = timer.schedule(TICK, || ()).unwrap();
    let cancelled = timer.schedule(TICK * 5, || ()).unwrap();
    let unfired = timer.schedule(TICK * 5, || ()).unwrap();
    assert!(cancelled.cancel());
    tokio::time::sleep(TICK * 3).await;
    assert_eq!(timer.shutdown().await.len(), 1);
    assert!(ran.is_expired() && !ran.is_cancelled());
    assert!(cancelled.is_cancelled() && !cancelled.is_expired());
    assert!(!unfired.is_expired() && !unfired.is_cancelled());
    assert!(format!("{unfired:?}").contains("Unfired"), "{unfired:?}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_returns_unfired_and_completes_futures() {
    let timer = timer_with(Executor::Inline);
    let ran = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let r = ran.clone();
    let handle = timer
        .schedule(Duration::from_secs(5), move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let r = ran.clone();
    timer
        .schedule(Duration::from_secs(7), move || {
            r.fetch_add(100, Ordering::SeqCst);
        })
        .unwrap()
        .detach();
    let sleeper = tokio::spawn({
        let timer = timer.clone();
        async move { timer.sleep(Duration::from_secs(3600)).await }
    });
    let waiter = tokio::spawn({
        let timer = timer.clone();
        async move {
            timer
                .timeout(Duration::from_secs(3600), std::future::pending::<()>())
                .await
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(timer.pending(), 4);

    let mut unfired = timer.shutdown().await;
    assert_eq!(timer.pending(), 0);
    assert!(timer.is_shutdown());
    unfired.sort_by_key(|u| u.deadline());
    let deadlines: Vec<_> = unfired.iter().map(|u| u.deadline() - start).collect();
    assert_eq!(deadlines, [Duration::from_secs(5), Duration::from_secs(7)]);
    assert!(!handle.is_expired() && !handle.is_cancelled());
    assert!(
        !handle.cancel(),
        "returned by shutdown: cancel stops nothing"
    );
    // Pending ones still complete at their deadline, not early, on Tokio's clock.
    sleeper.await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(3600));
    assert!(
        waiter.await.unwrap().is_err(),
        "a pending Timeout completes as Elapsed"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    for u in unfired {
        u.run();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 101);
    assert_eq!(timer.schedule(TICK, || {}).unwrap_err(), Error::Shutdown);
    // A later one neither completes at once nor hangs: it lasts its duration.
    let before = Instant::now();
    let mut later = timer.sleep(Duration::from_secs(1));
    assert!(futures::poll!(&mut later).is_pending());
    later.await;
    assert_eq!(before.elapsed(), Duration::from_secs(1));
    assert!(timer.shutdown().await.is_empty());
}

/// A detached callback holds its timer alive; once the driver's runtime is gone
/// nothing can run it, and dropping the last handle must drop it (not leak it, nor
/// the timer). Until then `shutdown` can still return it, and `Stats` counts it.
#[test]
fn a_detached_callback_is_dropped_not_leaked_when_its_runtime_goes_away() {
    for driver_ran in [false, true] {
        let runtime = current_thread_runtime();
        let timer = timer_on(runtime.handle());
        if driver_ran {
            runtime.block_on(tokio::task::yield_now());
        }
        let probe = Arc::new(());
        let captured = probe.clone();
        timer
            .schedule_detached(Duration::from_secs(3600), move || drop(captured))
            .unwrap();
        drop(runtime);
        assert!(timer.is_shutdown(), "driver_ran: {driver_ran}");
        assert_eq!(
            timer.stats().stranded_callbacks,
            1,
            "driver_ran: {driver_ran}"
        );
        // No handle owns it and nothing can run it: dropped with the driver, as Tokio
        // drops a spawned task with its runtime (it may hold the timer itself).
        assert_eq!(Arc::strong_count(&probe), 1, "driver_ran: {driver_ran}");
        assert!(futures::executor::block_on(timer.shutdown()).is_empty());
        drop(timer);
        assert_eq!(
            Arc::strong_count(&probe),
            1,
            "driver_ran: {driver_ran}: the closure leaked with its timer"
        );
    }
}

/// A job its executor drops after the driver's last turn goes back to the timer; if
/// the driver's runtime then goes away, it is counted as stranded, not lost unseen.
#[test]
fn a_handed_back_callback_pending_when_the_driver_is_lost_is_counted() {
    let (jobs, executor) = keeping_executor();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let timer = runtime.block_on(async {
        let timer = Timer::builder()
            .tick(TICK)
            .executor(executor)
            .build()
            .unwrap();
        timer.schedule_detached(TICK, || ()).unwrap();
        tokio::time::advance(TICK * 3).await;
        timer.catch_up().await;
        timer
    });
    assert_eq!(jobs.lock().unwrap().len(), 1, "handed to the executor");
    jobs.lock().unwrap().clear(); // dropped unrun: back to the timer
    drop(runtime);
    let stats = timer.stats();
    assert_eq!(
        (stats.executor_rejections, stats.stranded_callbacks),
        (1, 1)
    );
}

/// The re-arming heartbeat of `Timer::schedule`'s docs keeps a `Timer` clone in its
/// detached callback. Once the driver's runtime is gone nothing can run it, and
/// dropping the user's last handle must still free the timer: the clone inside the
/// callback, which the timer itself holds, must not keep it (and the closure) alive
/// for ever. Whether detached by `schedule_detached`, by `Scheduled::detach` before
/// the runtime goes or after it, or handed back by its executor after the driver's
/// last turn.
#[test]
fn a_callback_holding_its_timer_with_no_handle_is_freed_when_its_runtime_goes_away() {
    for how in [
        "schedule_detached, driver never ran",
        "schedule_detached",
        "detach",
        "detach after the runtime went",
        "handed back",
    ] {
        let (jobs, executor) = keeping_executor();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let timer = Timer::builder()
            .tick(TICK)
            .executor(executor)
            .build_on(runtime.handle())
            .unwrap();
        if how != "schedule_detached, driver never ran" {
            runtime.block_on(tokio::task::yield_now());
        }
        let probe = Arc::new(());
        let captured = (probe.clone(), timer.clone());
        let callback = move || drop(captured);
        let delay = if how == "handed back" {
            TICK
        } else {
            Duration::from_secs(3600)
        };
        let mut handle = None;
        if how.starts_with("schedule_detached") {
            timer.schedule_detached(delay, callback).unwrap();
        } else {
            let scheduled = timer.schedule(delay, callback).unwrap();
            if how == "detach after the runtime went" {
                handle = Some(scheduled);
            } else {
                scheduled.detach();
            }
        }
        if how == "handed back" {
            runtime.block_on(async {
                tokio::time::advance(TICK * 3).await;
                timer.catch_up().await;
            });
            assert_eq!(jobs.lock().unwrap().len(), 1, "handed to the executor");
            jobs.lock().unwrap().clear(); // dropped unrun: back to the timer
        }
        drop(runtime);
        assert!(timer.is_shutdown(), "{how}");
        assert_eq!(timer.stats().stranded_callbacks, 1, "{how}");
        if let Some(handle) = handle {
            handle.detach();
        }
        drop(timer);
        assert_eq!(
            Arc::strong_count(&probe),
            1,
            "{how}: the closure and its timer leaked"
        );
    }
}

/// The loss drops the detached callbacks' closures: one whose captures panic in `Drop`
/// must not end the loss early (Tokio would swallow the panic while dropping the
/// driver's task). The other closures are still dropped, the driver is still marked
/// stopped, so that `shutdown().await` (and a `catch_up` already waiting) returns, and
/// the panic is counted.
#[test]
fn a_detached_callback_panicking_in_drop_at_the_runtimes_loss_hangs_nothing() {
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("a capture panics when dropped");
        }
    }
    let runtime = current_thread_runtime();
    let timer = timer_on(runtime.handle());
    runtime.block_on(tokio::task::yield_now());
    let bomb = PanicOnDrop;
    timer
        .schedule_detached(Duration::from_secs(3600), move || {
            let _keep = &bomb;
        })
        .unwrap();
    let probe = Arc::new(());
    let captured = probe.clone();
    timer
        .schedule_detached(Duration::from_secs(3600), move || drop(captured))
        .unwrap();
    drop(runtime);
    assert!(timer.is_shutdown());
    assert_eq!(
        Arc::strong_count(&probe),
        1,
        "the other detached callback leaked"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let t = timer.clone();
    std::thread::spawn(move || {
        futures::executor::block_on(t.shutdown());
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("shutdown() hung: the driver was never marked stopped");
    assert_eq!(
        timer.stats().callback_panics,
        1,
        "the panic is caught and counted"
    );
}
