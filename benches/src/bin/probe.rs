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
//! * `free`: the same through the free function `tokio_wheel::sleep` (the default
//!   timer) for the `wheel-*` peers.
//! * `later`: churn-later: inside `block_on` of a current-thread runtime, `pending` 120 s
//!   sleeps (at least one) registered and the drivers parked once, then each op a new
//!   120 s sleep, later than every one pending, made, polled once, dropped.
//!
//! Peers: `wheel-io`, `wheel-time`, `tokio-io`, `tokio-time`.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

use futures::task::noop_waker_ref;
use tokio_wheel::Timer;
use tokio_wheel_benches::runtimes::current_thread;
use tokio_wheel_benches::workloads::{churn, Peer};

const LATER: Duration = Duration::from_secs(120);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, peer, ops, rest @ ..] = &args[..] else {
        eprintln!(
            "usage: probe churn|free|later wheel-io|wheel-time|tokio-io|tokio-time <ops> [pending]"
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
        "free" => free(peer, ops),
        "later" => later(peer, ops, pending.max(1)),
        other => panic!("unknown workload {other}"),
    }
}

fn free(peer: Peer, ops: u32) {
    assert!(peer.is_wheel(), "the free functions are this crate's");
    let rt = current_thread(peer.runtime());
    let _enter = rt.enter();
    let mut cx = Context::from_waker(noop_waker_ref());
    // The default timer starts on first use, outside the counted difference.
    drop(tokio_wheel::sleep(Duration::from_secs(1)));
    for _ in 0..ops {
        let mut sleep = tokio_wheel::sleep(Duration::from_secs(1));
        let _ = Pin::new(&mut sleep).poll(&mut cx);
    }
}

fn later(peer: Peer, ops: u32, pending: usize) {
    let rt = current_thread(peer.runtime());
    rt.block_on(async move {
        let timer = Timer::new();
        let mut held_ours = Vec::new();
        let mut held_tokio = Vec::new();
        let mut cx = Context::from_waker(noop_waker_ref());
        for _ in 0..pending {
            if peer.is_wheel() {
                let mut s = timer.sleep(LATER);
                let _ = Pin::new(&mut s).poll(&mut cx);
                held_ours.push(s);
            } else {
                let mut s = Box::pin(tokio::time::sleep(LATER));
                let _ = s.as_mut().poll(&mut cx);
                held_tokio.push(s);
            }
        }
        // Let the driver task (ours) run and park, and Tokio's time driver park, each
        // knowing the earliest pending deadline.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        for _ in 0..ops {
            if peer.is_wheel() {
                let mut s = timer.sleep(LATER);
                let _ = Pin::new(&mut s).poll(&mut cx);
            } else {
                let mut s = std::pin::pin!(tokio::time::sleep(LATER));
                let _ = s.as_mut().poll(&mut cx);
            }
        }
        drop((held_ours, held_tokio));
    });
}
