//! Runs one churn workload a given number of times and nothing else, for an
//! instruction counter: `valgrind --tool=callgrind` at two counts, the difference over
//! the difference of counts is the cost of one op (setup cancels out).
//!
//! ```text
//! probe <workload> <peer> <ops> [pending]
//! ```
//!
//! * `churn`: `workloads::churn` (a 1 s sleep made, polled once, dropped, on a
//!   current-thread runtime entered but not running), `pending` one-hour sleeps held.
//! * `free`: `workloads::churn_free`, the same through the free function
//!   `tokio_wheel::sleep` (the default timer), for the `wheel-*` peers.
//! * `later`: `workloads::churn_later`: inside `block_on` of a current-thread runtime,
//!   `pending` 120 s sleeps (at least one) registered and the drivers parked once, then
//!   each op a new 120 s sleep, later than every one pending, made, polled once, dropped.
//! * `callbacks`: `workloads::callbacks_one_thread`: each op one callback scheduled and
//!   fired on a current-thread runtime driven to completion (this crate:
//!   `schedule_detached_at`, inline executor, 10 ms tick; Tokio: a task that
//!   `sleep_until`s the deadline, then runs it), deadlines 1 µs apart.
//! * `handles`: the same through `schedule_at(..)?.detach()` (this crate's peers only).
//! * `heartbeat`: `workloads::heartbeat_one_thread`: `pending` intervals (1000 if
//!   zero) of 100 ms on a current-thread runtime on the real clock, each op one tick
//!   (the driver fires the sleep, the task wakes, `tick` reschedules and registers).
//!   The real clock, because the benches build Tokio without `test-util`; each round
//!   of ticks takes well under the period even under callgrind, so none is missed.
//!   The intervals share one start, so every registration reads the clock, as on a
//!   multi-thread runtime (through the driver's runtime handle here, dearer than the
//!   plain real clock a multi-thread driver reads), and the count is the same from
//!   run to run.
//! * `churn-sites`, `later-sites`: the same on a timer that tracks call sites
//!   (`Builder::track_call_sites(true)`), for the `wheel-*` peers. For `free`, set
//!   `TOKIO_WHEEL_TRACK_CALL_SITES=1` in the environment instead.
//!
//! * `churn-suspend`, `later-suspend`: the same on a suspend-aware timer
//!   (`Builder::suspend_aware(true)`), for the `wheel-*` peers.
//!
//! The churn workloads print their ns per op to stderr (timed, so only a sanity
//! check beside callgrind's count).
//!
//! Peers: `wheel-io`, `wheel-time`, `tokio-io`, `tokio-time`.
//!
//! * `io`: `workloads::keyed::idle_io`, one-byte round trips over `tokio::io::duplex`
//!   whose server side is wrapped as the peer: `plain`, `read` (`io::TimeoutStream`
//!   with a read timeout), `idle` (with an idle timeout), `tokio-io-timeout`.

use std::time::Duration;

use tokio_wheel_benches::workloads::keyed::{idle_io, IdleIo};
use tokio_wheel_benches::workloads::{
    callbacks_one_thread, churn, churn_free, churn_later, churn_later_suspend_aware,
    churn_later_tracking_sites, churn_suspend_aware, churn_tracking_sites, heartbeat_one_thread,
    Callbacks, Peer,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, peer, ops, rest @ ..] = &args[..] else {
        eprintln!(
            "usage: probe churn|free|later|churn-sites|later-sites|churn-suspend|later-suspend|callbacks|handles|heartbeat wheel-io|wheel-time|tokio-io|tokio-time <ops> [pending]\n       \
             probe io plain|read|idle|tokio-io-timeout <ops>"
        );
        std::process::exit(2);
    };
    if workload == "io" {
        let kind = match peer.as_str() {
            "plain" => IdleIo::Plain,
            "read" => IdleIo::Wheel,
            "idle" => IdleIo::WheelIdle,
            "tokio-io-timeout" => IdleIo::TokioIoTimeout,
            other => panic!("unknown io peer {other}"),
        };
        let _ = idle_io(kind, ops.parse().expect("ops"));
        return;
    }
    let peer = match peer.as_str() {
        "wheel-io" => Peer::WheelIo,
        "wheel-time" => Peer::WheelTimeOnly,
        "tokio-io" => Peer::TokioIo,
        "tokio-time" => Peer::TokioTimeOnly,
        other => panic!("unknown peer {other}"),
    };
    let ops: u32 = ops.parse().expect("ops");
    let pending: usize = rest.first().map_or(0, |p| p.parse().expect("pending"));
    match workload.as_str() {
        "churn" => report(churn(peer, ops, pending)),
        "free" => {
            assert!(peer.is_wheel(), "the free functions are this crate's");
            let _ = churn_free(peer.runtime(), ops);
        }
        "later" => report(churn_later(peer, ops, pending)),
        "callbacks" if peer.is_wheel() => {
            callbacks_one_thread(Callbacks::Detached, peer.runtime(), ops)
        }
        "callbacks" => callbacks_one_thread(Callbacks::TokioTasks, peer.runtime(), ops),
        "handles" => {
            assert!(peer.is_wheel(), "handles are this crate's");
            callbacks_one_thread(Callbacks::Handles, peer.runtime(), ops)
        }
        "heartbeat" => {
            let intervals = if pending == 0 { 1000 } else { pending };
            heartbeat_one_thread(peer, intervals, Duration::from_millis(100), ops)
        }
        "churn-sites" => report(churn_tracking_sites(peer, ops, pending)),
        "later-sites" => report(churn_later_tracking_sites(peer, ops, pending)),
        "churn-suspend" => report(churn_suspend_aware(peer, ops, pending)),
        "later-suspend" => report(churn_later_suspend_aware(peer, ops, pending)),
        other => panic!("unknown workload {other}"),
    }
}

/// A churn workload's ns per op, on stderr.
fn report(ns_per_op: f64) {
    eprintln!("{ns_per_op:.1} ns/op");
}
