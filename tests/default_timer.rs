//! The default timer's clock, in a process of its own (the default timer is made once
//! per process): whichever runtime uses it first, it follows the real clock.

use std::time::{Duration, Instant};

/// A test with the paused clock an hour in, the first to touch the default timer, must
/// not give it an origin an hour ahead of the real clock: every later default sleep
/// in the process would then be due at once.
#[test]
fn a_paused_runtime_that_uses_the_default_timer_first_leaves_it_on_the_real_clock() {
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    paused.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        drop(tokio_wheel::sleep(Duration::from_millis(1)));
    });
    drop(paused);

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
