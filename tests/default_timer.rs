//! The default timer's clock, in a process of its own (the default timer is made once
//! per process): whichever runtime uses it first, it follows the real clock; and in
//! debug builds without the feature `test-util`, a paused runtime's use of it is a
//! panic that names the feature.

use std::time::{Duration, Instant};

/// A paused runtime, its clock an hour in, that uses the free functions first.
#[cfg(any(feature = "test-util", not(debug_assertions)))]
fn first_use_on_a_paused_runtime() {
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
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

/// Debug builds without `test-util`: the free functions on a paused runtime would
/// follow the real clock while the test's stands still; the first use says so, naming
/// the feature, at the caller's line (not the crate's), whichever default entry point
/// it is, and leaves the default timer as it was.
#[cfg(all(debug_assertions, not(feature = "test-util")))]
#[test]
fn a_paused_runtime_without_the_feature_test_util_is_told_to_add_it() {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};

    type Entry = fn() -> Pin<Box<dyn Future<Output = ()>>>;
    let entry_points: [(&str, Entry); 6] = [
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
        let paused = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            paused.block_on(async {
                tokio::time::advance(Duration::from_secs(3600)).await;
                entry().await;
            })
        }));
        let Err(panic) = panic else {
            wrong.push(format!(
                "{name}: used a paused runtime's default timer without a word"
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
