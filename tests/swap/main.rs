//! The swap from `tokio::time` to this crate: one small service, written against
//! `tokio::time`, compiled twice — once on Tokio's timer, once on the wheel's — with
//! only the path its `time` module comes from changed, and the same paused-clock tests
//! run on both. With the feature `test-util`, the wheel's free functions use a timer
//! on the test's runtime, so `#[tokio::test(start_paused = true)]` keeps working.
//!
//! Every test asserts both bounds of every wait: never early, and late by less than
//! the wheel's default tick and a millisecond (Tokio's timer, at one millisecond,
//! falls within it too).

/// The service on Tokio's timer: how it was written.
mod on_tokio {
    use tokio::time;

    include!("service.rs");
}

/// The same service on the wheel: the `use` above is the whole change.
mod on_wheel {
    use tokio_wheel as time;

    include!("service.rs");
}

/// What a paused test on the wheel does differently: after `advance`, `catch_up`.
mod advance_then_catch_up {
    use std::time::Duration;

    use tokio_test::{assert_pending, assert_ready, task};

    #[tokio::test(start_paused = true)]
    async fn a_sleep_advanced_past_fires_once_the_default_timer_catches_up() {
        let mut sleep = task::spawn(tokio_wheel::sleep(Duration::from_secs(30)));
        assert_pending!(sleep.poll());
        tokio::time::advance(Duration::from_millis(29_990)).await;
        tokio_wheel::catch_up().await;
        assert_pending!(sleep.poll(), "early");
        tokio::time::advance(Duration::from_millis(20)).await;
        tokio_wheel::catch_up().await;
        assert!(sleep.is_woken());
        assert_ready!(sleep.poll());
    }
}
