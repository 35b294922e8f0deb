//! The few real-clock tests: a multi-thread stress with tolerant bounds, and the
//! free functions on the default timer (which follows the real clock by design).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_wheel::Timer;

mod common;

/// Generous: a loaded 2-core CI machine can be slow to schedule.
const SLACK: Duration = Duration::from_millis(250);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_on_many_threads() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .build()
        .unwrap();
    let timed_out = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000u64 {
        let timer = timer.clone();
        let timed_out = timed_out.clone();
        tasks.spawn(async move {
            for round in 0..3u64 {
                let requested = Duration::from_millis(10 + (i * 7 + round * 13) % 90);
                let start = Instant::now();
                if (i + round) % 2 == 0 {
                    timer.sleep(requested).await;
                } else {
                    let never = std::future::pending::<()>();
                    assert!(timer.timeout(requested, never).await.is_err());
                    timed_out.fetch_add(1, Ordering::Relaxed);
                }
                let took = start.elapsed();
                assert!(took >= requested, "early: {requested:?} took {took:?}");
                assert!(
                    took < requested + SLACK,
                    "late: {requested:?} took {took:?}"
                );
                // Plus a timeout that its future beats: cancelled by drop.
                let quick = timer.timeout(Duration::from_secs(5), tokio::task::yield_now());
                assert!(quick.await.is_ok());
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(timed_out.load(Ordering::Relaxed), 1500);
    assert_eq!(timer.pending(), 0);
}

#[tokio::test]
async fn the_free_functions_use_the_default_timer() {
    let start = Instant::now();
    tokio_wheel::sleep(Duration::from_millis(30)).await;
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(30) && took < Duration::from_millis(30) + SLACK);

    let start = Instant::now();
    let deadline = tokio_wheel::Instant::now() + Duration::from_millis(20);
    tokio_wheel::sleep_until(deadline).await;
    assert!(tokio_wheel::Instant::now() >= deadline);
    assert!(start.elapsed() < Duration::from_millis(20) + SLACK);

    assert_eq!(
        tokio_wheel::timeout(Duration::from_secs(1), async { 3 }).await,
        Ok(3)
    );
    let never = std::future::pending::<()>();
    assert!(tokio_wheel::timeout(Duration::from_millis(20), never)
        .await
        .is_err());
    let at = tokio_wheel::Instant::now() + Duration::from_millis(20);
    assert!(tokio_wheel::timeout_at(at, std::future::pending::<()>())
        .await
        .is_err());
    assert!(tokio_wheel::Instant::now() >= at);

    let mut interval = tokio_wheel::interval(Duration::from_millis(20));
    let first = interval.tick().await;
    let second = interval.tick().await;
    assert_eq!(second - first, Duration::from_millis(20));
    assert!(tokio_wheel::Instant::now() >= second);
}

#[test]
fn the_default_timer_works_without_any_runtime() {
    let start = Instant::now();
    futures::executor::block_on(tokio_wheel::sleep(Duration::from_millis(20)));
    assert!(start.elapsed() >= Duration::from_millis(20));
}

/// With only far timers pending, the real-clock driver sleeps: no wakeup per
/// revolution of the wheel. Here a revolution is 1 ms (1 ms tick, one tick per
/// revolution), so waking once per revolution would be ~300 wakeups in 300 ms.
#[tokio::test]
async fn only_far_timers_cost_no_wakeups_per_revolution() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .wheel_size(1)
        .build()
        .unwrap();
    let far = tokio::spawn(timer.sleep(Duration::from_secs(3600)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(timer.pending(), 1);
    let wakeups = timer.stats().driver_wakeups;
    // The registration and one per level the deadline moves down (it is not due).
    assert!(wakeups <= 10, "{wakeups} driver wakeups in 300 ms");
    far.abort();
}

/// Without the feature `test-util` a timer follows the real clock, also where the
/// test pauses Tokio's clock after the timer's first use there (which the debug
/// build's check for a paused clock, made at that first use, does not see): the
/// sleep takes its time on the real clock, never less, however far Tokio's paused
/// clock auto-advances meanwhile.
#[cfg(not(feature = "test-util"))]
#[tokio::test]
async fn a_real_clock_sleep_is_never_early_after_tokios_clock_is_paused() {
    tokio_wheel::sleep(Duration::from_millis(1)).await;
    tokio::time::pause();
    let start = Instant::now();
    tokio_wheel::sleep(Duration::from_millis(300)).await;
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300), "early: {took:?}");
    assert!(took < Duration::from_millis(300) + SLACK, "late: {took:?}");
}

/// A suspend-aware timer on the real clock (boot clock on Linux), with no suspend:
/// its sleeps, intervals and callbacks are on time, and idle it does not wake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_aware_timer_is_on_time_without_a_suspend() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .suspend_aware(true)
        .build()
        .unwrap();
    for ms in [20, 60, 150] {
        let requested = Duration::from_millis(ms);
        let start = Instant::now();
        timer.sleep(requested).await;
        let took = start.elapsed();
        assert!(took >= requested, "early: {requested:?} took {took:?}");
        assert!(
            took < requested + SLACK,
            "late: {requested:?} took {took:?}"
        );
    }
    // A Tokio instant given: met on Tokio's clock.
    let deadline = tokio_wheel::Instant::now() + Duration::from_millis(40);
    timer.sleep_until(deadline).await;
    let now = tokio_wheel::Instant::now();
    assert!(
        now >= deadline && now < deadline + SLACK,
        "{:?}",
        now - deadline
    );
    // A callback, from the driver.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let start = Instant::now();
    timer
        .schedule_detached(Duration::from_millis(30), move || {
            let _ = tx.send(Instant::now());
        })
        .unwrap();
    let ran = rx.await.unwrap() - start;
    assert!(ran >= Duration::from_millis(30) && ran < Duration::from_millis(30) + SLACK);
    // Idle, far timers pending: no wakeup per tick.
    let far = tokio::spawn(timer.sleep(Duration::from_secs(3600)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = timer.stats().driver_wakeups;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let wakeups = timer.stats().driver_wakeups - before;
    assert!(wakeups <= 10, "{wakeups} driver wakeups in 300 ms");
    far.abort();
    // On Linux its alarm is a boot-clock timerfd with a thread waiting on it, which
    // ends with the timer.
    #[cfg(target_os = "linux")]
    {
        assert_eq!(common::threads_named("tokio-wheel-boo"), 1);
        let _ = far.await;
        drop(timer);
        let start = Instant::now();
        while common::threads_named("tokio-wheel-boo") > 0 && start.elapsed() < SLACK * 4 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            common::threads_named("tokio-wheel-boo"),
            0,
            "the alarm's thread outlived its timer"
        );
    }
}

/// Uses about `kib` KiB of stack.
#[cfg(target_os = "linux")]
fn stack_hungry(kib: usize) -> u8 {
    let buf = std::hint::black_box([1u8; 1024]);
    if kib <= 1 {
        buf[0]
    } else {
        buf[kib % 1024].wrapping_add(stack_hungry(kib - 1))
    }
}

/// A suspend-aware timer's boot-clock alarm passes over the wheels on its own thread,
/// so a `Custom` executor that runs jobs in place runs callbacks there: that thread
/// has the stack a Tokio worker has, and a callback that needs a few hundred KiB runs
/// (in a child process: running out of stack aborts).
#[cfg(target_os = "linux")]
#[test]
fn a_callback_run_in_place_by_the_boot_alarm_has_a_workers_stack() {
    const NAME: &str = "a_callback_run_in_place_by_the_boot_alarm_has_a_workers_stack";
    if !common::is_child() {
        return common::assert_child_ok(&common::run_in_child(NAME), "child: ran");
    }
    let runtime = common::multi_thread_runtime(2);
    runtime.block_on(async {
        let in_place =
            tokio_wheel::Executor::Custom(Arc::new(|job: Box<dyn FnOnce() + Send>| job()));
        let timer = Timer::builder()
            .suspend_aware(true)
            .executor(in_place)
            .build()
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        timer
            .schedule_detached(Duration::from_millis(20), move || {
                let _ = tx.send(std::hint::black_box(stack_hungry(256)));
            })
            .unwrap();
        let ran = tokio::time::timeout(SLACK * 4, rx).await;
        assert!(
            matches!(ran, Ok(Ok(_))),
            "the callback did not run: {ran:?}"
        );
        println!("child: ran");
    });
}
