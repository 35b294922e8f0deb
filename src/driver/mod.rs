//! The driver: the sharded wheels every timer of a [`Timer`](crate::Timer) shares, and
//! the Tokio task that turns them.
//!
//! Everything that knows about locking or waking lives here; the [`wheel`](crate::wheel)
//! it turns knows none of it, and the [`clock`](crate::clock) does the arithmetic of
//! time. Handles reach the wheels only through [`Shared`]'s methods, which keep each
//! lock short and never wake a waker, run a callback, or drop either, while holding it.
//!
//! Its files, bottom to top; each uses only those above it in this list (the
//! `module_order` test checks the imports and the calls between `impl Shared` blocks):
//!
//! * `context.rs` — entering a runtime's context without `Handle::enter`'s panics.
//! * `runtime.rs` — the driver's runtime and the clock choice: which clock "now" is,
//!   wherever the caller runs, and that clock once the runtime is gone (`Lost`).
//! * `alarm.rs` — Tokio's timer armed for the driver's next wakeup, whose waker turns
//!   the wheels from Tokio's own pass over its timers.
//! * `parking.rs` — publishing when the driver next wakes and arming the alarm for
//!   it, under one lock, without lost wakeups.
//! * `keep_alive.rs` — the timer's hold on itself while a detached callback is pending.
//! * `progress.rs` — the driver's turns and its stop, for `catch_up` and `shutdown`.
//! * `executor.rs` — handing expired callbacks to their executor, and the callbacks
//!   an executor hands back unrun: where they wait, and the three ways they leave.
//! * `shared.rs` — the shared state: shards, registrations, the groups above.
//! * `site_report.rs` — the pending timers by call site: the entries' tags and the
//!   delay queues' (`pending_by_site`, `register_sites`).
//! * `futures.rs` — what a [`Sleep`](crate::Sleep) asks: register, update its waker,
//!   move, cancel, whether it has fired.
//! * `callbacks.rs` — what a [`Scheduled`](crate::Scheduled) asks (schedule, cancel,
//!   move, its state), the pending count and keep-alive.
//! * `fallbacks.rs` — the fallbacks `Sleep`s own, kept in the timer by key.
//! * `fallback.rs` — timing a `Sleep` once the wheel no longer turns (shut down, its
//!   runtime gone): never early, on another clock.
//! * `anchor.rs` — the per-shard references handles hold the timer by, and, in a
//!   timer that tracks call sites, those per shard and line.
//! * `turn.rs` — one turn (the task's or the alarm's): advance the shards, fire,
//!   finish the turn and park.
//! * `shutdown.rs` — shutdown and the driver's loss, one walk over the shards.
//! * `task.rs` — the Tokio task that turns when notified, and the alarm's waker that
//!   turns when Tokio's timer fires.
//! * `mod.rs` — this list, and what the rest of the crate uses.
//!
//! # Implementation
//!
//! There is one shard per core (or per worker of the runtime the timer is built on,
//! if it has more), each two wheels (futures' wakers, callbacks) under
//! one lock. A thread registers in its own shard and the timer remembers which
//! ([`Registration`]), so threads that register and cancel at once rarely touch the
//! same lock or cache line; the driver advances every shard to the same step.
//!
//! Futures and callback handles keep the timer alive through an [`Anchor`], a strong
//! reference of their shard's own, so that threads creating and dropping timers write
//! their own reference count rather than one they all share. The driver task holds
//! only a `Weak` while it waits: when the last `Timer` clone and the last handle are
//! gone, [`Shared`] drops, notifies the driver, and the driver ends.

mod alarm;
mod anchor;
#[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
mod boot_alarm;
mod callbacks;
mod context;
mod executor;
mod fallback;
mod fallbacks;
mod futures;
mod keep_alive;
mod parking;
mod progress;
mod runtime;
mod shared;
mod shutdown;
mod site_report;
mod task;
mod turn;

pub(crate) use anchor::{Anchor, SiteAnchors};
pub(crate) use callbacks::{CallbackState, Place};
pub(crate) use fallbacks::FallbackKey;
pub(crate) use futures::Registered;
pub(crate) use shared::{Registration, Shared, REGISTRATION_BITS};
pub(crate) use task::start;
#[cfg(loom)]
pub(crate) use task::{install_alarm_by_hand, lose_by_hand, ring_by_hand};
#[cfg(loom)]
pub(crate) use turn::Turn;
