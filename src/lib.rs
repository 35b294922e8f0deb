//! A hashed-wheel timer for Tokio: sleeps, timeouts and intervals that cost a few
//! tens of nanoseconds to register and cancel, for programs with very many deadlines
//! that are mostly cancelled before they fire.
//!
//! RPC request deadlines, idle-connection checks, heartbeats and lease renewals all
//! set a timer per operation and cancel nearly all of them. `tokio::time` keeps each
//! timer exact to the millisecond in a hierarchical wheel shared with the runtime;
//! this crate trades resolution (one configurable tick, 10 ms by default) for a flat
//! slab-backed wheel in which registering and cancelling are a few pointer writes.
//!
//! * [`Timer`] — the handle; [`Timer::builder`] configures tick, wheel size, the
//!   [`Executor`] callbacks run on, and [`Builder::max_pending`].
//! * [`Sleep`], [`Timeout`], [`Interval`] — futures, with tokio's shapes and semantics;
//!   dropping one cancels it.
//! * [`Timer::schedule`] → [`Scheduled`] — Netty-style callbacks, cancelled when the
//!   handle drops unless detached; [`Timer::schedule_detached`] for fire-and-forget ones
//!   without a handle; [`Timer::shutdown`] returns the [`Unfired`] ones;
//!   [`Scheduled::reset`] moves one in place.
//! * [`DelayQueue`] — keyed timers: values that come out when their deadlines pass,
//!   a cheap handle shared by any number of producers and consumers.
//! * [`io::TimeoutStream`] — read, write and idle (nothing moving either way)
//!   timeouts on any `AsyncRead` / `AsyncWrite`, moved in place as data flows.
//! * [`sleep`], [`sleep_until`], [`timeout`], [`timeout_at`], [`interval`],
//!   [`interval_at`] — the same on the [default timer](#default-timer), at
//!   the paths `tokio::time` has them, as are [`error::Elapsed`] and `Duration`,
//!   `Instant` and `MissedTickBehavior` (re-exported: they are std's and Tokio's own
//!   types, so values mix with `tokio::time`'s): swapping `tokio::time` for
//!   `tokio_wheel` in the imports is the whole change. An [`Interval`] counts a tick as
//!   missed, and applies its `MissedTickBehavior`, past its timer's tick and a
//!   millisecond rather than Tokio's 5 ms; see [its docs](Interval#missed-ticks).
//! * [`Builder::track_call_sites`] → [`Timer::pending_by_site`] — pending timers by the
//!   line of code that made them ([`PendingSite`]), to find a timer leak; for the
//!   default timer, the environment variable `TOKIO_WHEEL_TRACK_CALL_SITES=1` and
//!   [`pending_by_site`].
//! * [`Builder::suspend_aware`] — timers that count the time the machine spends
//!   suspended (Linux: `CLOCK_BOOTTIME`), which `tokio::time`'s do not; with
//!   `test-util`, `Timer::simulate_suspend` tests them on the paused clock.
//! * With the `hyper` feature, `Timer` implements `hyper::rt::Timer`:
//!   `http1::Builder::new().timer(timer.clone())` runs hyper's header-read timeouts and
//!   keep-alive on the wheel. With `tower`, `tower::TimeoutLayer` is a drop-in for
//!   tower's. Both are off by default.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
//! use std::time::Duration;
//! use tokio_wheel::Timer;
//!
//! let timer = Timer::new(); // driver spawned on this runtime, 10 ms tick (1 ms in tests)
//!
//! // A request with a deadline: answered in time, so the deadline is cancelled.
//! let answer = timer.timeout(Duration::from_secs(1), async { "pong" }).await;
//! assert_eq!(answer, Ok("pong"));
//!
//! // A heartbeat: the first tick at once, then every 500 ms.
//! let start = tokio::time::Instant::now();
//! let mut beat = timer.interval(Duration::from_millis(500));
//! for _ in 0..3 {
//!     beat.tick().await;
//! }
//! assert!(start.elapsed() >= Duration::from_millis(1000));
//! assert!(start.elapsed() < Duration::from_millis(1000) + timer.tick());
//! # }
//! ```
//!
//! # Semantics
//!
//! * **Never early.** A timer fires at the first driver wakeup after the end of its
//!   deadline's step: a quarter tick (half or all of one on wheels over 2^18 ticks).
//!   The driver wakes at the end of each step with something due, or at Tokio's whole
//!   millisecond just before it. So a timer is late by less than a step plus one
//!   millisecond (Tokio's timer, which wakes the driver, counts whole milliseconds,
//!   and a step's end rarely falls on one), always less than a tick and a millisecond,
//!   plus the runtime's scheduling delay (the time the woken task waits behind the
//!   ready ones, as with Tokio's timer: tens of milliseconds on a saturated runtime,
//!   see the guide's "Lateness on a busy runtime"), and often by much less. Steps are counted from when the timer was
//!   built, so work that runs in step with that moment (a loop started right after
//!   `build()` that sleeps whole ticks) lands just after one ends and is nearly a step
//!   late every time; choose the tick for the lateness you can accept.
//! * **Due means ready.** A [`Sleep`], [`Timeout`] or [`Interval`] tick whose
//!   deadline has passed on its timer's clock is ready when polled, whether or not the
//!   driver has turned since: after `tokio::time::advance` to the exact deadline,
//!   after another task slept to it on Tokio's timer, after a reset into the past. On
//!   the real clock a polled future first asks a bound cheaper than the clock (the
//!   kernel's coarse clock, where there is one) whether its deadline can have passed.
//!   With the feature `test-util`, on a current-thread runtime, whose clock may be
//!   paused, the driver's armed wakeup tells a polled future that its deadline cannot
//!   have passed, so the clock is read only when it cannot tell; there, on the real
//!   clock, "passed" is as that runtime's own timer sees it, as for Tokio's sleeps (a
//!   thread kept busy past a deadline leaves it pending until the runtime's timer
//!   runs).
//! * **Lazy.** A future touches the wheel on its first poll, not when created; a
//!   [`Timeout`] whose future is ready at once never touches it.
//! * **Drop cancels** in O(1) and frees the entry at once.
//! * **Saturating.** `Duration::MAX` sleeps about 30 years, as Tokio's does; an
//!   instant beyond the wheel's range (139 years at a 1 ms tick, 292 from 2.2 ms on)
//!   saturates there; nothing overflows or panics. Past deadlines complete at once.
//! * **Idle is free.** With nothing pending the driver does not wake at all (after
//!   the last timer is cancelled, it wakes once more, when it had asked to).
//! * **Exactly once.** A callback that is not cancelled runs once, or is returned by
//!   [`Timer::shutdown`]; a panicking callback is caught and the timer goes on.
//! * **Never early after shutdown either.** Once [`Timer::shutdown`] ran or the
//!   driver's runtime is gone, futures are timed by Tokio's timer instead of the
//!   wheel, still never early: nothing hangs and no [`Interval`] loop spins.
//!
//! # Default timer
//!
//! The free functions ([`sleep`], [`timeout`], [`interval`], ...) and
//! `tower::TimeoutLayer::new` use a [`Timer`] (10 ms tick; 1 ms with `test-util`, as every timer whose tick is not
//! set) built on the *caller's*
//! runtime on its first use there, one per runtime, so that their due timers wake
//! their tasks from that runtime's own timer pass, as Tokio's do (a timer driven from
//! another thread wakes them through the runtime's remote queue, which a busy runtime
//! takes from once every few dozen tasks: under load, several times Tokio's
//! lateness). Outside any runtime, or on one without a time driver, they use one
//! process-wide timer, created on first use, whose driver runs on its own thread with
//! its own current-thread runtime. Without the feature `test-util` both follow the
//! **real clock**, not a test's paused one.
//!
//! With the feature **`test-util`**, meant for `[dev-dependencies]` as Tokio's is, the
//! timer on the caller's runtime is built with a 1 ms tick (Tokio's resolution) and
//! follows that runtime's clock, paused or not (a paused current-thread runtime gets
//! one too, where without the feature it falls back to the process-wide timer):
//! `#[tokio::test(start_paused = true)]` tests of code that calls them work as they
//! did on `tokio::time`, auto-advance and whole-millisecond assertions included. The
//! feature also brings Tokio's `pause` and `resume` to this crate's root, and an
//! `advance` that is Tokio's followed by [`catch_up`], which waits for the wheel's
//! driver to fire what the advance passed, so that the tasks waiting on them are woken
//! (after Tokio's own `advance` a due timer is ready when polled, but its task is woken
//! only once the driver turns: `catch_up().await`). Cargo's feature resolver 2
//! (the default since edition 2021) leaves a dev-dependency's features out of normal
//! builds, so production code keeps the real clock and the 10 ms tick; tests, examples
//! and benchmarks, which Cargo builds with the dev-dependencies, get the feature's
//! timers (a 1 ms tick).
//!
//! # Testing with the paused clock
//!
//! As Tokio's `Instant` is the real clock unless Tokio's `test-util` is on, every
//! timer of this crate, explicit [`Timer`]s included, follows the real clock unless
//! this crate's feature **`test-util`** is on, and pays nothing per operation for
//! clocks that might be paused. Tests that pause the clock (`start_paused`,
//! `tokio::time::pause`) turn it on beside Tokio's:
//!
//! ```toml
//! [dev-dependencies]
//! tokio = { version = "1", features = ["macros", "rt", "test-util"] }
//! tokio-wheel = { version = "0.1", features = ["test-util"] }
//! ```
//!
//! With it, a `Timer` follows the clock of the runtime it was built on, paused or
//! not (auto-advance included), and a timer whose tick was not set
//! ([`Timer::new`], a [`Builder`] without [`tick`](Builder::tick)) has a 1 ms tick,
//! Tokio's resolution, so a 25 ms deadline fires at exactly 25 ms as on Tokio's timer.
//!
//! Without it, in a debug build, a timer used on a runtime whose clock is paused (an
//! entry point of a `Timer`, a free function, `DelayQueue::new`, ...) panics at the
//! caller's line: "tokio-wheel: this runtime's clock is paused (`start_paused` or
//! `tokio::time::pause`), but tokio-wheel's feature `test-util` is off, so its timers
//! follow the real clock and would not see the paused one: add `features =
//! ["test-util"]` to tokio-wheel in [dev-dependencies] (as for tokio)". Release
//! builds do not look: there a paused test's timers wait for the real clock (a
//! 1-hour sleep takes an hour, never less), and nothing spins: their wakeups move
//! to a real-clock runtime once the paused clock has run ahead of them.
//!
//! # Implementation
//!
//! The timing wheel of Varghese and Lauck ("Hashed and Hierarchical Timing Wheels",
//! SOSP 1987): one slot per quarter tick for the near future, as in Netty's
//! `HashedWheelTimer`, coarser levels above it for the far future, as in Kafka's, and
//! the slab storage of tokio-util's `DelayQueue`, turned from Tokio's own pass over
//! its timers (a `Sleep` whose waker advances the wheel and wakes the due timers'
//! tasks), with one Tokio task for what runs on it (inline callbacks). The tour of the
//! source, its module order and its invariants are in `docs/DESIGN.md`.
#![deny(
    unsafe_code,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]
#![deny(missing_docs)]
// docs.rs builds with `--cfg docsrs`, on nightly: items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_debug_implementations, unreachable_pub, rust_2018_idioms)]

// Modules depend in one direction: docs/DESIGN.md lists them bottom to top.
mod background;
mod builder;
mod callback;
mod clock;
mod coarse_clock;
mod config;
mod default;
pub mod delay_queue;
mod driver;
mod entry_points;
pub mod error;
#[cfg(feature = "hyper")]
mod hyper;
#[allow(unsafe_code)]
mod inline_fn;
mod interval;
pub mod io;
mod jitter;
mod missing_test_util;
mod scheduled;
mod sites;
mod sleep;
mod stats;
mod suspend_clock;
mod sync;
#[cfg(any(test, fuzzing))]
mod tests;
mod timeout;
mod timer;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
mod wake;
mod wheel;

pub use builder::Builder;
pub use config::Executor;
#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub use default::advance;
pub use default::{
    catch_up, interval, interval_at, pending_by_site, sleep, sleep_until, stats, timeout,
    timeout_at,
};
#[doc(inline)]
pub use delay_queue::{DelayQueue, Expired, Key, NextExpired, TryInsertError};
#[doc(inline)]
pub use error::{Elapsed, Error};
pub use interval::Interval;
pub use scheduled::{Scheduled, Unfired};
pub use sites::PendingSite;
pub use sleep::Sleep;
pub use stats::{Lateness, Stats};
pub use timeout::Timeout;
pub use timer::Timer;

// Tokio's own types (and std's `Duration`), so that values mix freely with
// `tokio::time`'s: `tokio_wheel::MissedTickBehavior::Delay` is
// `tokio::time::MissedTickBehavior::Delay`. Not inlined: an inlined page would be
// Tokio's (its 5 ms threshold, its examples) with its links broken in this crate's
// docs; how this crate's `Interval` applies the behaviour is on `Interval`.
#[doc(no_inline)]
pub use std::time::Duration;
#[doc(no_inline)]
pub use tokio::time::{Instant, MissedTickBehavior};
// Tokio's, for tests that import them from `tokio::time` (feature `test-util`): the
// default timer follows the clock they pause and resume.
#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
#[doc(no_inline)]
pub use tokio::time::{pause, resume};

/// Entry point for `fuzz/fuzz_targets/wheel.rs`; only under `cfg(fuzzing)`, which
/// cargo-fuzz sets, and not part of the public API.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    /// Decodes `data` into wheel operations and checks them against the model; panics on
    /// any disagreement.
    pub fn wheel(data: &[u8]) {
        crate::tests::wheel_model::fuzz(data);
    }
}

/// Compiles and runs the README's code blocks as doc tests, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Entry points for the loom models in `tests/loom.rs`; only under `--cfg loom`.
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_hooks {
    use std::time::Duration;

    use crate::driver::{Shared, Turn};
    use crate::{Builder, Timer};

    /// A timer with no driver task and no runtime: the model turns it by hand.
    pub fn timer(tick: Duration) -> Timer {
        let config = Builder::default()
            .tick(tick)
            .validate(1)
            .expect("valid tick");
        Timer::from_shared(Shared::new(config, None))
    }

    /// A timer as [`timer`], with at most `max_pending` callbacks pending.
    pub fn capped_timer(tick: Duration, max_pending: usize) -> Timer {
        let config = Builder::default()
            .tick(tick)
            .max_pending(max_pending)
            .validate(1)
            .expect("valid tick");
        Timer::from_shared(Shared::new(config, None))
    }

    /// A timer as [`timer`] that tracks call sites, with one shard, so that every
    /// thread's timers share one wheel (and its storage indices).
    pub fn tracking_timer(tick: Duration) -> Timer {
        let mut config = Builder::default()
            .tick(tick)
            .track_call_sites(true)
            .validate(1)
            .expect("valid tick");
        config.shards = 1;
        Timer::from_shared(Shared::new(config, None))
    }

    /// A timer as [`timer`], with a driver alarm that the model rings by hand
    /// ([`ring`]), as Tokio's timer would: registrations arm it, and ringing it turns
    /// the wheels on the ringing thread.
    pub fn alarmed_timer(tick: Duration) -> Timer {
        let timer = timer(tick);
        crate::driver::install_alarm_by_hand(timer.shared());
        timer
    }

    /// The alarm of an [`alarmed_timer`] going off, if it is armed, as Tokio's timer
    /// would once its clock had reached the end of step `step`: a pass over the wheels
    /// here, or left to whoever holds the alarm.
    pub fn ring(timer: &Timer, step: u64) {
        crate::driver::ring_by_hand(timer.shared(), step);
    }

    /// One driver turn, as if the clock had reached the end of step `step`.
    pub fn turn(timer: &Timer, step: u64) {
        let mut expired = Vec::new();
        let now = timer.shared().clock.step_end(step);
        let _: Turn = timer.shared().turn_to(now, &mut expired);
    }

    /// When step `step` of `timer`'s wheel ends. Models place deadlines with it
    /// rather than with `Instant::now()`, so a slow machine cannot move them into the
    /// next step.
    pub fn step_end(timer: &Timer, step: u64) -> crate::Instant {
        timer.shared().clock.step_end(step)
    }

    /// The step the driver would sleep until after its last turn (`u64::MAX`: until
    /// notified). No lost wakeup means this is never after a pending entry's step,
    /// unless the driver was notified.
    pub fn parked_until(timer: &Timer) -> u64 {
        timer.shared().parked_until()
    }

    /// Whether the timer holds itself alive for detached callbacks.
    pub fn kept_alive(timer: &Timer) -> bool {
        timer.shared().kept_alive()
    }

    /// What the driver's guard does when the driver's runtime drops it.
    pub fn lose_driver(timer: &Timer) {
        crate::driver::lose_by_hand(timer.shared());
    }

    /// The synchronous part of `Timer::shutdown` (the rest waits for the driver task,
    /// which a model does not have).
    pub fn shutdown(timer: &Timer) -> Vec<crate::Unfired> {
        timer.shutdown_now()
    }
}
