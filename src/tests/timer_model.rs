//! The whole `Timer` against a model, with the paused clock: random sequences of
//! sleep / timeout / schedule / cancel / reset / drop / advance. Every timer fires
//! exactly once inside `[deadline, deadline + tick)` or was cancelled, and `pending()`
//! always equals the model's count.
//!
//! A unit test rather than one in the package's `tests/`, so that it runs with the
//! wheel's generations wrapping every three inserts (`cfg(test)`): sleeps that fired
//! and are reset or dropped later hold keys whose index and generation often name
//! another timer's entry by then.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use crate::scheduled::Scheduled;
use crate::sleep::Sleep;
use crate::timeout::Timeout;
use crate::timer::Timer;

const TICK: Duration = Duration::from_millis(10);

/// Records every wake with the (paused) time it happened at.
#[derive(Default)]
struct Recorder(Mutex<Vec<Instant>>);

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.0.lock().unwrap().push(Instant::now());
    }
}

#[derive(Debug, Clone)]
enum Op {
    Sleep(u64),
    Timeout(u64),
    Schedule(u64),
    /// `schedule_detached`: no handle, so `Cancel` cannot stop it.
    Detached(u64),
    /// Cancel (callbacks) or drop (futures) the n-th timer made so far.
    Cancel(usize),
    /// Reset the n-th sleep to `now + ms`, whether it has fired or not.
    Reset(usize, u64),
    /// Let `ms` of paused time pass.
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let ms = prop_oneof![0u64..30, 0u64..400, Just(10_240), 10_000u64..12_000];
    prop_oneof![
        3 => ms.clone().prop_map(Op::Sleep),
        2 => ms.clone().prop_map(Op::Timeout),
        3 => ms.clone().prop_map(Op::Schedule),
        1 => ms.clone().prop_map(Op::Detached),
        2 => any::<usize>().prop_map(Op::Cancel),
        2 => (any::<usize>(), ms).prop_map(|(n, ms)| Op::Reset(n, ms)),
        3 => prop_oneof![1u64..15, 0u64..200, 1000u64..3000].prop_map(Op::Advance),
    ]
}

enum Kind {
    Sleep(Sleep),
    Timeout(Pin<Box<Timeout<std::future::Pending<()>>>>),
    Callback(Scheduled),
    Detached,
}

struct Entry {
    kind: Option<Kind>,
    deadline: Instant,
    /// When it was registered: a deadline already due then fires by the next tick
    /// (documented: zero and past deadlines fire on the next tick), so up to a whole
    /// tick after it.
    registered: Instant,
    fires: Arc<Recorder>,
    waker: Waker,
}

impl Entry {
    fn fired(&self) -> usize {
        self.fires.0.lock().unwrap().len()
    }

    /// Registered, not fired, not cancelled.
    fn pending(&self) -> bool {
        self.kind.is_some() && self.fired() == 0
    }
}

fn poll_once(kind: &mut Kind, waker: &Waker) {
    let mut cx = Context::from_waker(waker);
    match kind {
        Kind::Sleep(sleep) => assert!(Pin::new(sleep).poll(&mut cx).is_pending()),
        Kind::Timeout(timeout) => assert!(timeout.as_mut().poll(&mut cx).is_pending()),
        Kind::Callback(_) | Kind::Detached => {}
    }
}

/// `fires` is one firing of `e`, on time.
#[track_caller]
fn check_fired(fires: &[Instant], e: &Entry) {
    assert_eq!(fires.len(), 1, "fired exactly once");
    let at = fires[0];
    assert!(at >= e.deadline, "early by {:?}", e.deadline - at);
    if e.deadline <= e.registered {
        assert!(
            at <= e.registered + TICK,
            "due, but late by {:?}",
            at - e.deadline
        );
    } else {
        assert!(at < e.deadline + TICK, "late by {:?}", at - e.deadline);
    }
}

async fn run(ops: Vec<Op>) {
    let timer = Timer::builder().tick(TICK).wheel_size(256).build().unwrap();
    let mut entries: Vec<Entry> = Vec::new();
    for op in ops {
        let now = Instant::now();
        match op {
            Op::Sleep(ms) | Op::Timeout(ms) | Op::Schedule(ms) | Op::Detached(ms) => {
                let d = Duration::from_millis(ms);
                let fires = Arc::new(Recorder::default());
                let waker = Waker::from(fires.clone());
                let mut kind = match op {
                    Op::Sleep(_) => Kind::Sleep(timer.sleep(d)),
                    Op::Timeout(_) => {
                        Kind::Timeout(Box::pin(timer.timeout(d, std::future::pending())))
                    }
                    Op::Detached(_) => {
                        let f = fires.clone();
                        timer
                            .schedule_detached(d, move || f.0.lock().unwrap().push(Instant::now()))
                            .unwrap();
                        Kind::Detached
                    }
                    _ => {
                        let f = fires.clone();
                        Kind::Callback(
                            timer
                                .schedule(d, move || f.0.lock().unwrap().push(Instant::now()))
                                .unwrap(),
                        )
                    }
                };
                // Zero delays may complete on the spot; only register the rest here.
                if ms > 0 || matches!(kind, Kind::Callback(_) | Kind::Detached) {
                    poll_once(&mut kind, &waker);
                    entries.push(Entry {
                        kind: Some(kind),
                        deadline: now + d,
                        registered: now,
                        fires,
                        waker,
                    });
                }
            }
            Op::Cancel(n) => {
                if entries.is_empty() {
                    continue;
                }
                let len = entries.len();
                let e = &mut entries[n % len];
                let was_pending = e.pending();
                match e.kind.take() {
                    Some(Kind::Callback(handle)) => {
                        assert_eq!(
                            handle.cancel(),
                            was_pending,
                            "cancel is true iff it stopped it"
                        )
                    }
                    // Nothing to cancel it with: it must still fire.
                    Some(Kind::Detached) => e.kind = Some(Kind::Detached),
                    other => drop(other),
                }
            }
            Op::Reset(n, ms) => {
                if entries.is_empty() {
                    continue;
                }
                let len = entries.len();
                let e = &mut entries[n % len];
                if !matches!(e.kind, Some(Kind::Sleep(_))) {
                    continue;
                }
                if !e.pending() {
                    // Fired (not polled since): its firing is done with; check it now.
                    check_fired(e.fires.0.lock().unwrap().as_slice(), e);
                }
                let pending = e.pending();
                let Some(Kind::Sleep(sleep)) = &mut e.kind else {
                    unreachable!("checked above");
                };
                if pending {
                    e.deadline = now + Duration::from_millis(ms);
                    e.registered = now;
                    Pin::new(&mut *sleep).reset(e.deadline);
                    if sleep.is_elapsed() {
                        // Reset into the current tick: completes by the next one.
                        e.deadline = now;
                    }
                } else if ms > 0 {
                    // Fired, not polled since: its key may name another entry by now.
                    // It must touch nothing but its own new registration.
                    let fires = Arc::new(Recorder::default());
                    e.waker = Waker::from(fires.clone());
                    e.fires = fires;
                    e.deadline = now + Duration::from_millis(ms);
                    e.registered = now;
                    Pin::new(&mut *sleep).reset(e.deadline);
                    poll_once(e.kind.as_mut().expect("a sleep"), &e.waker);
                }
            }
            Op::Advance(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
        let model = entries.iter().filter(|e| e.pending()).count();
        assert_eq!(timer.pending(), model, "pending() after {op:?}");
    }
    // Let everything due fire.
    tokio::time::sleep(Duration::from_secs(15)).await;
    for e in &entries {
        let fires = e.fires.0.lock().unwrap().clone();
        match &e.kind {
            None if fires.is_empty() => {} // cancelled in time
            _ => check_fired(&fires, e),
        }
    }
    // Futures that fired complete when polled; then nothing is pending.
    for e in &mut entries {
        let mut cx = Context::from_waker(&e.waker);
        match &mut e.kind {
            Some(Kind::Sleep(s)) => assert!(Pin::new(s).poll(&mut cx).is_ready()),
            Some(Kind::Timeout(t)) => assert!(t.as_mut().poll(&mut cx).is_ready()),
            _ => {}
        }
    }
    assert_eq!(timer.pending(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn timer_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(run(ops));
    }
}
