//! [`Sleep`]: the future every other future here is built on.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::driver::{Anchor, FallbackKey, Registered, Registration, Shared, REGISTRATION_BITS};

/// A future that completes at its deadline, less than a tick and a millisecond late.
///
/// Made by [`Timer::sleep`](crate::Timer::sleep),
/// [`Timer::sleep_until`](crate::Timer::sleep_until) or the free functions
/// [`sleep`](crate::sleep) and [`sleep_until`](crate::sleep_until).
///
/// * **Lazy.** Creating a `Sleep` touches no shared state: it registers in the wheel on
///   its first poll, so a `Sleep` that is never polled costs nothing but its memory.
/// * **Cheap to poll again.** A registered `Sleep` learns it has fired from an atomic,
///   and replaces its waker only when the new one would not wake the same task.
/// * **Due means ready.** Polled once its deadline has passed on the timer's clock
///   (after `tokio::time::advance`, say), it is `Ready`, whether or not the driver
///   has turned since.
/// * **Unpin.** No `Box::pin` or `pin!` needed: [`reset`](Sleep::reset) takes
///   `Pin<&mut Self>` as Tokio's does, and `Pin::new(&mut sleep)` makes one.
///
/// # Cancellation
///
/// Dropping a `Sleep` removes it from the wheel in O(1) and frees its slot at once
/// ([`Timer::pending`](crate::Timer::pending) drops by one). Nothing is retained until
/// the deadline, unlike Netty's lazily purged cancellation queue.
///
/// # Shutdown
///
/// After [`Timer::shutdown`](crate::Timer::shutdown), or once the driver's runtime has
/// shut down, a `Sleep` of that timer, pending then or made later, still completes no
/// earlier than its deadline: Tokio's timer times it instead of the wheel, on the
/// driver's runtime when polled from a task there, otherwise on the process-wide
/// default timer's runtime (the real clock; while the driver's runtime is alive, its clock, which may
/// be paused, must agree). It neither hangs nor completes early. Only a `Sleep` that
/// meets a stopped wheel pays for this (an allocation).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::Timer;
///
/// let timer = Timer::new();
/// let mut sleep = timer.sleep(Duration::from_secs(1));
/// // Push it back before it fires, without allocating.
/// std::pin::Pin::new(&mut sleep).reset(tokio::time::Instant::now() + Duration::from_secs(2));
/// (&mut sleep).await;
/// assert!(sleep.is_elapsed());
/// # }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    anchor: Arc<Anchor>,
    /// The deadline, in nanoseconds from the timer's origin (see `Clock::offset_of`):
    /// half an `Instant`, and its step is a division away.
    deadline: i64,
    /// [`State`], packed: a `Sleep` is 24 bytes, which is most of what a pending one
    /// costs (its wheel entry is 32). Atomic only so that `is_elapsed` (`&self`) can
    /// record an `Unregistered` sleep it found elapsed (relaxed: a plain load and store).
    state: AtomicU64,
}

/// What a `Sleep` knows of its place in the wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not in the wheel: never polled.
    Idle,
    /// Not in the wheel, though polled or reset before: after a `reset` that could not
    /// move an entry (there was none, it had fired, or the new deadline had passed).
    /// Polled, it registers as `Idle` does; until then
    /// `is_elapsed` counts it as fired once its deadline has passed, as tokio's (whose
    /// `reset` always registers) does, and records that as `Complete`.
    Unregistered,
    /// In the wheel at `reg`, due at the deadline's step.
    Registered(Registration),
    /// Complete: fired, or found due when polled or reset (its deadline passed).
    Complete,
    /// Timed by the fallback `key` names (see `driver/fallback.rs`), its wheel no longer
    /// turning; the `Sleep` gives it back when it completes or drops.
    FellBack(FallbackKey),
}

// The packing: two tag bits below the registration's bits, or below a fallback's key
// (`UNREGISTERED` with a key is `FellBack`).
const IDLE: u64 = 0;
const REGISTERED: u64 = 1;
const COMPLETE: u64 = 2;
const UNREGISTERED: u64 = 3;
const _: () = assert!(REGISTRATION_BITS + 2 <= 64);

impl State {
    fn pack(self) -> u64 {
        match self {
            State::Idle => IDLE,
            State::Unregistered => UNREGISTERED,
            State::FellBack(key) => (key.to_bits() << 2) | UNREGISTERED,
            State::Registered(reg) => (reg.to_bits() << 2) | REGISTERED,
            State::Complete => COMPLETE,
        }
    }

    fn unpack(bits: u64) -> State {
        match bits & 3 {
            REGISTERED => State::Registered(Registration::from_bits(bits >> 2)),
            COMPLETE => State::Complete,
            UNREGISTERED => match FallbackKey::from_bits(bits >> 2) {
                Some(key) => State::FellBack(key),
                None => State::Unregistered,
            },
            _ => State::Idle,
        }
    }
}

impl Sleep {
    #[inline]
    pub(crate) fn new(anchor: Arc<Anchor>, deadline: Instant) -> Sleep {
        let deadline = anchor.shared.clock.offset_of(deadline);
        Sleep::at_offset(anchor, deadline)
    }

    /// A `Sleep` of `duration` from `now`.
    #[inline]
    pub(crate) fn after(anchor: Arc<Anchor>, now: Instant, duration: Duration) -> Sleep {
        let deadline = anchor.shared.clock.offset_after(now, duration);
        Sleep::at_offset(anchor, deadline)
    }

    #[inline]
    fn at_offset(anchor: Arc<Anchor>, deadline: i64) -> Sleep {
        Sleep {
            anchor,
            deadline,
            state: AtomicU64::new(State::Idle.pack()),
        }
    }

    fn state(&self) -> State {
        State::unpack(self.state.load(Ordering::Relaxed))
    }

    fn set_state(&mut self, state: State) {
        *self.state.get_mut() = state.pack();
    }

    /// The step of the wheel this `Sleep` fires at, which names its entry there.
    fn step(&self) -> u64 {
        self.shared().clock.step_at_offset(self.deadline)
    }

    /// The instant this `Sleep` completes at (less than a tick and a millisecond
    /// after it).
    ///
    /// Exactly the instant it was given, unless that lies beyond the wheel's range
    /// from the timer's creation (2^44 quarter ticks: 139 years at a 1 ms tick, 292
    /// years from a 2.2 ms tick on): such deadlines saturate there, and this reports
    /// the saturated instant, which the sleep never fires before. A `Duration::MAX`
    /// sleep saturates sooner, at about 30 years from now. Once the timer's clock has
    /// itself passed that range (a paused clock advanced that far), a new sleep's
    /// saturated deadline has passed too, and it completes at once: build a new
    /// `Timer` there.
    pub fn deadline(&self) -> Instant {
        self.shared().reported(self.deadline_on_clock())
    }

    /// The deadline on the timer's clock (see [`Shared::given`]).
    pub(crate) fn deadline_on_clock(&self) -> Instant {
        self.shared().clock.instant_at(self.deadline)
    }

    /// Whether this `Sleep` has completed, or would complete if polled now: the driver
    /// fired it, or its deadline has passed on the timer's clock.
    ///
    /// A `Sleep` that was never polled has not registered, so reports `false` even
    /// past its deadline, as tokio's does. One that was [`reset`](Sleep::reset)
    /// reports `true` once its new deadline has passed, polled or not, as tokio's
    /// (whose `reset` registers) does.
    pub fn is_elapsed(&self) -> bool {
        let shared = self.shared();
        let elapsed = match self.state() {
            State::Idle => return false,
            State::Complete => return true,
            State::FellBack(_) => shared.fallback_has_passed(self.deadline_on_clock()),
            State::Unregistered if shared.is_shutdown() => {
                shared.fallback_has_passed(self.deadline_on_clock())
            }
            State::Unregistered => shared.due(self.deadline).is_some(),
            State::Registered(reg) => {
                shared.has_fired(reg, self.deadline)
                    || shared.due(self.deadline).is_some()
                    || (!shared.is_pending(reg, self.step())
                        // Not in the wheel and not fired: drained by shutdown.
                        && shared.is_shutdown()
                        && shared.fallback_has_passed(self.deadline_on_clock()))
            }
        };
        // An `Unregistered` one found elapsed records it, so that the next `poll` is `Ready`
        // without reading the clock again.
        if elapsed && self.state() == State::Unregistered {
            self.state.store(State::Complete.pack(), Ordering::Relaxed);
        }
        elapsed
    }

    /// Moves the deadline, earlier or later, whether or not this `Sleep` has fired.
    ///
    /// A registered `Sleep` keeps its place in the wheel's storage and its waker (no
    /// allocation); one that had fired becomes pending again. A deadline that has
    /// already passed completes it: the next poll is `Ready`, and the task that last
    /// polled it is woken.
    ///
    /// Takes `Pin<&mut Self>`, as Tokio's does, so that code written for Tokio's
    /// `Sleep` (a pin-projected field, `me.sleep.reset(t)`) compiles unchanged; a
    /// `Sleep` is [`Unpin`], so `Pin::new(&mut sleep).reset(t)` resets one held by
    /// value.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        let deadline = this.shared().given(deadline);
        this.reset_on_clock(deadline);
    }

    /// [`reset`](Sleep::reset) to `deadline` on the timer's clock (see
    /// [`Shared::given`]).
    pub(crate) fn reset_on_clock(&mut self, deadline: Instant) {
        let offset = self.shared().clock.offset_of(deadline);
        self.reset_offset(offset);
    }

    /// Moves the deadline `by` later, as [`reset`](Sleep::reset) to the deadline plus
    /// `by` does, unless the sum would saturate (lie beyond the wheel's range) or the
    /// deadline lies before the timer's origin: then it changes nothing and returns
    /// `false`, for the caller to `reset` to the instant it means. Exact otherwise, in
    /// nanoseconds from the origin, without a round trip through `Instant`: what an
    /// `Interval` does every tick.
    pub(crate) fn postpone(&mut self, by: Duration) -> bool {
        match self.shared().clock.offset_plus(self.deadline, by) {
            Some(offset) => {
                self.reset_offset(offset);
                true
            }
            None => false,
        }
    }

    /// [`reset`](Sleep::reset) to the deadline `offset` (see `Clock::offset_of`).
    fn reset_offset(&mut self, offset: i64) {
        let old = self.deadline;
        self.deadline = offset;
        let state = match self.state() {
            State::FellBack(key) => {
                // Out of the timer's keeping while reset, as while polled.
                self.set_state(State::Unregistered);
                match self.shared().reset_fallback(key, self.deadline_on_clock()) {
                    Some(key) => State::FellBack(key),
                    None => State::Unregistered,
                }
            }
            State::Idle | State::Unregistered | State::Complete => State::Unregistered,
            State::Registered(reg) => {
                // The entry is named by the step of the deadline it was placed at.
                let step = self.shared().clock.step_at_offset(old);
                match self.shared().due(self.deadline) {
                    // Due now: out of the wheel, its task woken to complete it.
                    Some(late) => {
                        if let Some(waker) = self.shared().complete_due(reg, step, late, true) {
                            waker.wake();
                        }
                        State::Complete
                    }
                    None => {
                        let to = self.step();
                        if self.shared().reschedule(reg, step, to, self.deadline) {
                            State::Registered(reg)
                        } else {
                            // Fired already, or the new deadline has been processed:
                            // register afresh on the next poll (the waker, if any, was
                            // woken to bring that poll).
                            State::Unregistered
                        }
                    }
                }
            }
        };
        self.set_state(state);
    }

    /// Times this `Sleep` on another clock, its wheel no longer turning (see
    /// `driver/fallback.rs`): its own fallback, made on the first such poll.
    #[cold]
    fn poll_fallback(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut key = match self.state() {
            State::FellBack(key) => {
                // The fallback is out of the timer's keeping while polled: a panic
                // then (a waker's clone) must leave no key behind to be reused.
                self.set_state(State::Unregistered);
                Some(key)
            }
            _ => None,
        };
        let ready = self
            .shared()
            .poll_fallback(&mut key, self.deadline_on_clock(), cx);
        self.set_state(match (ready, key) {
            (Poll::Pending, Some(key)) => State::FellBack(key),
            (Poll::Pending, None) => State::Unregistered,
            (Poll::Ready(()), _) => State::Complete,
        });
        ready
    }

    /// The shared state of the timer this `Sleep` belongs to.
    pub(crate) fn shared(&self) -> &Shared {
        &self.anchor.shared
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = &*this.anchor.shared;
        let state = match this.state() {
            State::Complete => return Poll::Ready(()),
            State::FellBack(_) => return this.poll_fallback(cx),
            // Due already (`advance`, a sleep elsewhere to the same instant, a
            // deadline in the past): ready without registering.
            State::Idle | State::Unregistered if shared.due(this.deadline).is_some() => {
                State::Complete
            }
            State::Idle | State::Unregistered => {
                match shared.register(this.step(), cx.waker(), this.anchor.site, this.deadline) {
                    Registered::Pending(reg) => State::Registered(reg),
                    Registered::Due => State::Complete,
                    Registered::Fallback => return this.poll_fallback(cx),
                }
            }
            State::Registered(reg) => {
                if shared.has_fired(reg, this.deadline) {
                    State::Complete
                } else if let Some(late) = shared.due(this.deadline) {
                    // Due before the driver's turn: complete now, as if fired. The
                    // stored waker is woken unless it wakes this poll's task (a waker
                    // shared by several tasks is the caller's to wake: see io's idle
                    // timeout and the DelayQueue).
                    if let Some(stored) = shared.complete_due(reg, this.step(), late, false) {
                        if !stored.will_wake(cx.waker()) {
                            stored.wake();
                        }
                    }
                    State::Complete
                } else if shared.update_waker(reg, this.step(), cx.waker()) {
                    return Poll::Pending;
                } else if shared.has_fired(reg, this.deadline) || !shared.is_shutdown() {
                    // Fired since the first look (the lock just taken shows it).
                    State::Complete
                } else {
                    // Drained unfired by shutdown or the driver's loss.
                    return this.poll_fallback(cx);
                }
            }
        };
        this.set_state(state);
        match state {
            State::Complete => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }
}

impl Sleep {
    /// Drops a `Sleep` the crate made for itself (a `DelayQueue`'s, re-aimed) without
    /// counting it in `Stats::cancelled`: it is no user's timer being cancelled.
    pub(crate) fn discard(mut self) {
        if let State::Registered(reg) = self.state() {
            if !self.shared().has_fired(reg, self.deadline) {
                self.shared().discard(reg, self.step());
            }
            self.set_state(State::Idle);
        }
        // A fallback is let go of by `drop`, which counts nothing.
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        match self.state() {
            State::Registered(reg) if !self.shared().has_fired(reg, self.deadline) => {
                self.shared().cancel(reg, self.step());
            }
            State::FellBack(key) => self.shared().drop_fallback(key),
            _ => {}
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .field("state", &self.state())
            .finish()
    }
}
