//! Which clock timers follow without the feature `test-util`, and the default timer's,
//! in a process of its own (the default timer is made once per process): whichever
//! runtime uses it first, the default timer follows the real clock; without the
//! feature an explicit `Timer` does too, even on a paused runtime; and in debug builds
//! without the feature, a paused runtime's use of either is a panic that names the
//! feature. Runs with and without the feature, and in release (`.ci/run`).

use std::time::{Duration, Instant};

use tokio_wheel::Timer;

mod common;

/// A paused runtime, its clock an hour in, that uses the free functions first.
#[cfg(any(feature = "test-util", not(debug_assertions)))]
fn first_use_on_a_paused_runtime() {
    let paused = common::paused_runtime();
    paused.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        drop(tokio_wheel::sleep(Duration::from_millis(1)));
    });
}

/// A 200 ms sleep on the default timer, from a runtime on the real clock, is never
/// early.
fn a_default_sleep_is_never_early() {
    let real = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    real.block_on(async {
        let requested = Duration::from_millis(200);
        let start = Instant::now();
        // Tolerant of a slow machine above; exact below.
        tokio::time::timeout(Duration::from_secs(5), tokio_wheel::sleep(requested))
            .await
            .expect("a 200 ms sleep on the default timer did not complete in 5 s");
        let took = start.elapsed();
        assert!(took >= requested, "early: {took:?}");
    });
}

/// Release builds (no check): the paused runtime's first use must not give the
/// default timer an origin an hour ahead of the real clock, or every later default
/// sleep in the process would be due at once.
#[cfg(any(feature = "test-util", not(debug_assertions)))]
#[test]
fn a_paused_runtime_that_uses_the_default_timer_first_leaves_it_on_the_real_clock() {
    first_use_on_a_paused_runtime();
    a_default_sleep_is_never_early();
}

/// Debug builds without `test-util`: the free functions, and an explicit timer, on a
/// paused runtime would follow the real clock while the test's stands still; the first
/// use says so, naming the feature, at the caller's line (not the crate's), whichever
/// entry point it is, and leaves the default timer as it was.
#[cfg(all(debug_assertions, not(feature = "test-util")))]
#[test]
fn a_paused_runtime_without_the_feature_test_util_is_told_to_add_it() {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};

    type Entry = fn() -> Pin<Box<dyn Future<Output = ()>>>;
    let entry_points: [(&str, Entry); 18] = [
        ("sleep", || {
            drop(tokio_wheel::sleep(Duration::from_millis(1)));
            Box::pin(async {})
        }),
        ("pending_by_site", || {
            drop(tokio_wheel::pending_by_site());
            Box::pin(async {})
        }),
        ("DelayQueue::new", || {
            drop(tokio_wheel::DelayQueue::<u8>::new());
            Box::pin(async {})
        }),
        ("DelayQueue::default", || {
            drop(tokio_wheel::DelayQueue::<u8>::default());
            Box::pin(async {})
        }),
        ("TimeoutStream::new", || {
            drop(tokio_wheel::io::TimeoutStream::new(tokio::io::empty()));
            Box::pin(async {})
        }),
        ("catch_up", || Box::pin(tokio_wheel::catch_up())),
        ("stats", || {
            let _ = tokio_wheel::stats();
            Box::pin(async {})
        }),
        // An explicit timer, built on the paused runtime: its entry points.
        ("Timer::sleep", || {
            drop(Timer::new().sleep(Duration::from_millis(1)));
            Box::pin(async {})
        }),
        ("Timer::sleep_until", || {
            let at = tokio::time::Instant::now() + Duration::from_millis(1);
            drop(Timer::new().sleep_until(at));
            Box::pin(async {})
        }),
        ("Timer::timeout", || {
            drop(Timer::new().timeout(Duration::from_millis(1), async {}));
            Box::pin(async {})
        }),
        ("Timer::timeout_at", || {
            let at = tokio::time::Instant::now() + Duration::from_millis(1);
            drop(Timer::new().timeout_at(at, async {}));
            Box::pin(async {})
        }),
        ("Timer::interval", || {
            drop(Timer::new().interval(Duration::from_millis(1)));
            Box::pin(async {})
        }),
        ("Timer::interval_at", || {
            let at = tokio::time::Instant::now();
            drop(Timer::new().interval_at(at, Duration::from_millis(1)));
            Box::pin(async {})
        }),
        ("Timer::schedule", || {
            drop(Timer::new().schedule(Duration::from_millis(1), || {}));
            Box::pin(async {})
        }),
        ("Timer::schedule_at", || {
            let at = tokio::time::Instant::now() + Duration::from_millis(1);
            drop(Timer::new().schedule_at(at, || {}));
            Box::pin(async {})
        }),
        ("Timer::schedule_detached", || {
            drop(Timer::new().schedule_detached(Duration::from_millis(1), || {}));
            Box::pin(async {})
        }),
        ("DelayQueue::with_timer", || {
            drop(tokio_wheel::DelayQueue::<u8>::with_timer(&Timer::new()));
            Box::pin(async {})
        }),
        ("TimeoutStream::with_timer", || {
            let timer = Timer::new();
            drop(tokio_wheel::io::TimeoutStream::with_timer(
                tokio::io::empty(),
                &timer,
            ));
            Box::pin(async {})
        }),
    ];
    // Where each panic points (one hook for the whole binary: this test alone panics).
    let at = Arc::new(Mutex::new(None));
    let seen = at.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        *seen.lock().unwrap() = info.location().map(|l| l.file().to_owned());
    }));
    let mut wrong = Vec::new();
    for (name, entry) in entry_points {
        *at.lock().unwrap() = None;
        let paused = common::paused_runtime();
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            paused.block_on(async {
                tokio::time::advance(Duration::from_secs(3600)).await;
                entry().await;
            })
        }));
        let Err(panic) = panic else {
            wrong.push(format!(
                "{name}: used a timer on a paused runtime without a word"
            ));
            continue;
        };
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if !(message.contains("paused") && message.contains("features = [\"test-util\"]")) {
            wrong.push(format!("{name}: {message}"));
        }
        let file = at.lock().unwrap().clone();
        if file.as_deref() != Some(file!()) {
            wrong.push(format!(
                "{name}: the panic points at {file:?}, not the caller"
            ));
        }
    }
    std::panic::set_hook(previous);
    assert!(wrong.is_empty(), "{wrong:#?}");
    a_default_sleep_is_never_early();
}

/// A runtime whose clock runs is not taken for a paused one, at its first use or later.
#[cfg(all(debug_assertions, not(feature = "test-util")))]
#[test]
fn a_running_runtime_is_not_taken_for_a_paused_one() {
    a_default_sleep_is_never_early();
    a_default_sleep_is_never_early();
}

/// An explicit timer on a paused runtime: with `test-util` it follows the paused
/// clock (auto-advance, exact to its 1 ms tick, no real time spent); in a release
/// build without the feature, which looks for nothing, the real clock: its sleep
/// takes the real time it asks for, never less, and completes. (A debug build without
/// the feature panics instead: above.)
#[cfg(any(feature = "test-util", not(debug_assertions)))]
#[test]
fn an_explicit_timer_on_a_paused_runtime_follows_its_clock_only_with_test_util() {
    let paused = common::paused_runtime();
    paused.block_on(async {
        let timer = Timer::new();
        let requested = Duration::from_millis(200);
        let (real, on_pause) = (Instant::now(), tokio::time::Instant::now());
        let mut sleep = std::pin::pin!(timer.sleep(requested));
        (&mut sleep).await;
        let (real, on_pause) = (real.elapsed(), on_pause.elapsed());
        if cfg!(feature = "test-util") {
            assert!(on_pause >= requested, "early: {on_pause:?}");
            assert!(
                on_pause < requested + Duration::from_millis(1),
                "late: {on_pause:?}"
            );
            // Auto-advance: far less than the sleep asked of the real clock.
            assert!(real < requested, "waited on the real clock: {real:?}");
        } else {
            // Tolerant of a loaded machine above; exact below.
            assert!(real >= requested, "early on the real clock: {real:?}");
            assert!(real < Duration::from_secs(5), "{real:?}");
            // Its deadline, on the real clock, is what it reports.
            assert!(sleep.is_elapsed());
        }
    });
}
