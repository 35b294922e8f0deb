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
//! * `churn-sites`, `later-sites`: the same on a timer that tracks call sites
//!   (`Builder::track_call_sites(true)`), for the `wheel-*` peers. For `free`, set
//!   `TOKIO_WHEEL_TRACK_CALL_SITES=1` in the environment instead.
//!
//! Peers: `wheel-io`, `wheel-time`, `tokio-io`, `tokio-time`.

use tokio_wheel_benches::workloads::{
    churn, churn_free, churn_later, churn_later_tracking_sites, churn_tracking_sites, Peer,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, peer, ops, rest @ ..] = &args[..] else {
        eprintln!(
            "usage: probe churn|free|later|churn-sites|later-sites wheel-io|wheel-time|tokio-io|tokio-time <ops> [pending]"
        );
        std::process::exit(2);
    };
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
        "churn" => drop(churn(peer, ops, pending)),
        "free" => {
            assert!(peer.is_wheel(), "the free functions are this crate's");
            let _ = churn_free(peer.runtime(), ops);
        }
        "later" => drop(churn_later(peer, ops, pending)),
        "churn-sites" => drop(churn_tracking_sites(peer, ops, pending)),
        "later-sites" => drop(churn_later_tracking_sites(peer, ops, pending)),
        other => panic!("unknown workload {other}"),
    }
}
