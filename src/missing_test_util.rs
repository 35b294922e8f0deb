//! The one check behind every timer's entry points in debug builds without the
//! feature `test-util`: a caller on a runtime whose clock is paused gets a panic that
//! names the feature, at its own line.
//!
//! Without the feature every timer follows the real clock, as Tokio's `Instant` does
//! without its own `test-util`, and pays nothing per operation for clocks that might
//! be paused. A test that pauses its runtime's clock would then wait on the real clock
//! while its own stands still; in debug builds the first use of a timer there says
//! so instead. Release builds compile none of it: [`check`] is empty there, and with
//! the feature.
//!
//! # Implementation
//!
//! Tokio offers no way to ask whether a clock is paused: its `Instant::now()` is read
//! twice with a microsecond of the real clock between; a paused clock does not move
//! meanwhile (it moves only by `advance` or by auto-advance, which needs the runtime
//! idle, and this caller is running on it). Each runtime is looked at once per
//! thread: the last one found running is remembered.

/// Panics, at the caller's line, if the caller's runtime's clock is paused; in debug
/// builds without the feature `test-util` only.
#[inline(always)]
#[track_caller]
pub(crate) fn check() {
    #[cfg(all(debug_assertions, not(feature = "test-util")))]
    debug::check();
}

/// Whether the caller's Tokio clock stands still while the real one moves: paused
/// (see the module's "Implementation"). Also what keeps a paused runtime's default
/// timer the process-wide one without the feature.
#[cfg(not(feature = "test-util"))]
pub(crate) fn clock_is_paused() -> bool {
    let before = tokio::time::Instant::now();
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_micros(1) {
        std::hint::spin_loop();
    }
    tokio::time::Instant::now() == before
}

#[cfg(all(debug_assertions, not(feature = "test-util")))]
mod debug {
    use std::cell::Cell;

    use tokio::runtime::{Handle, Id};

    thread_local! {
        /// The runtime this thread last found with a running clock.
        static RUNNING: Cell<Option<Id>> = const { Cell::new(None) };
    }

    /// Panics if the caller's runtime's clock is paused, at the caller's line.
    #[track_caller]
    pub(super) fn check() {
        let Ok(runtime) = Handle::try_current() else {
            return;
        };
        let id = runtime.id();
        // In a thread-local's destructor the cache is gone: look again.
        if RUNNING.try_with(Cell::get).ok().flatten() == Some(id) {
            return;
        }
        if super::clock_is_paused() {
            panic!(
                "tokio-wheel: this runtime's clock is paused (`start_paused` or \
                 `tokio::time::pause`), but tokio-wheel's feature `test-util` is off, so \
                 its timers follow the real clock and would not see the paused one: add \
                 `features = [\"test-util\"]` to tokio-wheel in [dev-dependencies] (as \
                 for tokio)"
            );
        }
        let _ = RUNNING.try_with(|running| running.set(Some(id)));
    }
}
