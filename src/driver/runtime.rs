//! The driver's runtime and the clock every deadline is read on: which clock "now" is,
//! wherever the caller runs, and what that clock becomes once the runtime is gone.
//!
//! The origin is read on the driver's runtime, so steps count that runtime's clock,
//! which may be paused when the caller's is not, or the other way round. Every "now"
//! a deadline is built from or checked against is that clock, read from wherever the
//! caller is: the real clock when nobody can pause it (the default timer's runtime,
//! any multi-thread runtime); the caller's Tokio clock when the caller's context is
//! the driver's runtime; otherwise the clock read inside the driver's runtime
//! ([`context`]); once the runtime is gone, its last reading moved on with the real
//! clock ([`Lost`]). A suspend-aware timer's clock is that one plus the time the
//! machine has spent suspended since the timer's origin ([`Suspended`]).
//!
//! Without the feature `test-util` nobody's clock is taken to be paused: every
//! driver follows the real clock, as Tokio's `Instant` does without its own
//! `test-util`, so no "now" asks which runtime the caller is on. Debug builds check
//! the caller's clock at each entry point instead
//! ([`missing_test_util`](crate::missing_test_util)).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::runtime::{Handle, Id, RuntimeFlavor};
use tokio::time::Instant;

use super::context;
use crate::clock::Clock;
use crate::coarse_clock::CoarseBound;
use crate::suspend_clock::Suspended;

/// The real clock, as a Tokio instant.
#[inline]
pub(super) fn real_now() -> Instant {
    Instant::from_std(std::time::Instant::now())
}

/// The driver's clock once its runtime is gone: its last reading, taken when the
/// runtime dropped the driver, moving on with the real clock from then. A paused
/// clock stops for ever with its runtime (or is ahead of, or behind, the real clock by
/// however far it was advanced); read as it is, every later `sleep(d)` would wait for
/// it for ever, or complete at once, or an hour late.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lost {
    /// The driver's clock, then.
    driver: Instant,
    /// The real clock, then.
    real: Instant,
}

impl Lost {
    /// Now, on the driver's clock moved on with the real one.
    fn now(&self) -> Instant {
        self.driver + real_now().saturating_duration_since(self.real)
    }
}

/// The runtime the driver runs on, and how to read its clock from anywhere.
#[derive(Debug)]
pub(super) struct DriverRuntime {
    /// Where `Spawn` and `Blocking` callbacks go; `None` only in loom models and unit
    /// tests, which have no runtime (callbacks then run inline, and the caller's
    /// Tokio clock is the driver's).
    handle: Option<Handle>,
    /// `handle`'s id, kept here so that [`is_current`](DriverRuntime::is_current),
    /// asked on every `sleep(d)` of a current-thread driver under `test-util`, does
    /// not reach it through the handle.
    id: Option<Id>,
    /// Whether the driver's clock is the real one
    /// ([`follows_real_clock`](DriverRuntime::follows_real_clock)).
    real_clock: bool,
    /// Set when the runtime dropped the driver, whether or not it had shut down first.
    lost: OnceLock<Lost>,
    /// An upper bound on the real clock cheaper than reading it: only for a driver on
    /// the real clock, where the platform has one.
    coarse: Option<CoarseBound>,
    /// For a suspend-aware timer, the time suspended since the origin, which its clock
    /// adds to Tokio's.
    suspended: Option<Arc<Suspended>>,
}

impl DriverRuntime {
    /// Whether a driver on the runtime `handle` names follows the real clock: when
    /// configured so (`real_clock`), without the feature `test-util` (where no timer
    /// follows a paused clock; the loom models, which have no runtime, keep the
    /// paused-clock path they check), and on a runtime whose clock cannot be paused
    /// (multi-thread).
    pub(super) fn follows_real_clock(handle: Option<&Handle>, real_clock: bool) -> bool {
        real_clock
            || cfg!(not(any(feature = "test-util", loom)))
            || handle.is_some_and(|handle| handle.runtime_flavor() != RuntimeFlavor::CurrentThread)
    }

    /// The runtime `handle` names, its clock the real one if
    /// [`follows_real_clock`](DriverRuntime::follows_real_clock) says so; deadlines are
    /// offsets from `clock`'s origin; `suspended` counts from it too.
    pub(super) fn new(
        handle: Option<Handle>,
        real_clock: bool,
        clock: &Clock,
        suspended: Option<Arc<Suspended>>,
    ) -> DriverRuntime {
        let real_clock = Self::follows_real_clock(handle.as_ref(), real_clock);
        DriverRuntime {
            id: handle.as_ref().map(Handle::id),
            handle,
            real_clock,
            lost: OnceLock::new(),
            // The coarse clock bounds Tokio's clock, not one that a suspend moves on.
            coarse: (real_clock && suspended.is_none())
                .then(|| CoarseBound::new(clock))
                .flatten(),
            suspended,
        }
    }

    /// The runtime's handle (`None` in loom models and unit tests).
    pub(super) fn handle(&self) -> Option<&Handle> {
        self.handle.as_ref()
    }

    /// Whether the driver's clock is the real one.
    pub(super) fn has_real_clock(&self) -> bool {
        self.real_clock
    }

    /// Whether the runtime has dropped the driver.
    pub(super) fn is_lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// Records that the runtime dropped the driver, with its clock's last reading.
    /// Only the first call counts.
    pub(super) fn mark_lost(&self) {
        let real = real_now();
        let driver = if self.real_clock {
            real
        } else {
            self.driver_now().unwrap_or(real)
        };
        let _ = self.lost.set(Lost { driver, real });
    }

    /// "Now" for a deadline given relative to it (`sleep(d)`, hyper's `now() + d`):
    /// the clock the driver follows, whatever runtime the caller is on, since a
    /// caller's paused clock would put deadlines early or late by however far it lags
    /// or leads the driver's. The real clock for a driver whose runtime's clock is
    /// never paused: cheap, no runtime handle. Otherwise (a current-thread runtime's)
    /// the caller's Tokio clock when the caller is in the driver's runtime, and from
    /// anywhere else that runtime's clock, read inside it (see
    /// [`driver_now`](DriverRuntime::driver_now)); the real clock only if that fails
    /// (no thread can be started to read it).
    ///
    /// A suspend-aware timer's adds the time suspended since the origin.
    #[inline]
    pub(super) fn now(&self) -> Instant {
        // The common case inline, as cheap as before suspend-aware timers: the real
        // clock, no time suspended to add.
        if self.real_clock && self.suspended.is_none() {
            return real_now();
        }
        self.now_counting()
    }

    /// [`now`](DriverRuntime::now) past its common case: Tokio's clock (paused, or
    /// lost) or a suspend-aware timer's.
    fn now_counting(&self) -> Instant {
        let now = self.tokio_now();
        match &self.suspended {
            None => now,
            Some(suspended) => crate::clock::deadline_after(now, suspended.since_origin()),
        }
    }

    /// The time suspended since the origin that the timer's clock counts: zero for a
    /// timer that is not suspend-aware. Tokio's instant `t` is `t` plus this on the
    /// timer's clock, as of now.
    #[inline]
    pub(super) fn suspended(&self) -> Duration {
        self.suspended
            .as_ref()
            .map_or(Duration::ZERO, |suspended| suspended.since_origin())
    }

    /// What counts the time suspended, for a suspend-aware timer.
    pub(super) fn suspend_clock(&self) -> Option<&Arc<Suspended>> {
        self.suspended.as_ref()
    }

    /// [`now`](DriverRuntime::now) on Tokio's clock, before any suspend is added.
    #[inline]
    fn tokio_now(&self) -> Instant {
        if self.real_clock {
            real_now()
        } else if let Some(lost) = self.lost.get() {
            // Even from inside the dropped runtime's context: its clock may be frozen.
            lost.now()
        } else if self.is_current() {
            Instant::now()
        } else {
            self.driver_now().unwrap_or_else(real_now)
        }
    }

    /// Whether the driver's clock is known to be before the deadline `offset` without
    /// reading it: on the real clock, by its coarse bound (never wrongly `true`, but
    /// for a kernel whose coarse clock lags beyond the margin: see
    /// [`CoarseBound`]); `false` when it cannot tell.
    #[inline]
    pub(super) fn is_before(&self, offset: i64) -> bool {
        self.coarse.is_some_and(|coarse| coarse.is_before(offset))
    }

    /// Whether the caller's Tokio context is the driver's runtime, so that its Tokio
    /// clock is the driver's. Asked of the context, not of the thread: a thread that
    /// ran the driver may since have left its runtime (its `block_on` returned) for one
    /// whose clock is paused, or entered another one inside it.
    #[inline]
    pub(super) fn is_current(&self) -> bool {
        let Some(id) = self.id else {
            return true;
        };
        Handle::try_current().is_ok_and(|current| current.id() == id)
    }

    /// Now, by the clock the driver follows (its runtime's, which may be paused when
    /// the caller's is not, or the other way round): what the driver will find when it
    /// next turns, whoever asks. `None` only when no thread can be started to read it.
    /// Once the runtime is gone, its clock moved on with the real one ([`Lost`]).
    ///
    /// Read in place where that cannot panic; in a thread-local's destructor, once the
    /// thread's Tokio context is torn down, on a thread of its own
    /// ([`context::on_own_thread`]). From another runtime's context it enters the
    /// driver's runtime in place, as cheaply as every `sleep(d)` there needs: that
    /// panics only while Tokio holds the context borrowed (a future dropped by
    /// `tokio::spawn` on a runtime that has shut down), which Tokio gives no way to
    /// ask about. The panic, which happens before `enter` changes anything, is caught
    /// and the clock read on a thread of its own; under `panic = "abort"` it aborts,
    /// as Tokio's own `Handle::enter` does there (documented in RELIABILITY.md).
    pub(super) fn driver_now(&self) -> Option<Instant> {
        if self.real_clock {
            return Some(real_now());
        }
        let Some(runtime) = &self.handle else {
            return Some(Instant::now());
        };
        if let Some(lost) = self.lost.get() {
            return Some(lost.now());
        }
        match Handle::try_current() {
            Ok(current) if current.id() == runtime.id() => Some(Instant::now()),
            Ok(_) => catch_unwind(AssertUnwindSafe(|| {
                let _enter = runtime.enter();
                Instant::now()
            }))
            .ok()
            .or_else(|| context::on_own_thread(runtime, Instant::now)),
            Err(e) if e.is_missing_context() => {
                let _enter = runtime.enter();
                Some(Instant::now())
            }
            Err(_) => context::on_own_thread(runtime, Instant::now),
        }
    }

    /// Whether the driver's clock has reached the last step `clock` can name (where
    /// far deadlines saturate); `true` when it cannot be read.
    pub(super) fn is_past_last_step(&self, clock: &Clock) -> bool {
        self.driver_now()
            .is_none_or(|now| clock.step_now(now) >= clock.last_step())
    }
}
