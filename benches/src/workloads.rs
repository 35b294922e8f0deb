//! The workloads behind the benches and the `compare` binary, one function each, so
//! that every report measures the same thing the same way.

pub mod keyed;
pub mod overload;
pub mod rpc;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Context;
use std::time::Duration;

use futures::task::noop_waker_ref;
use tokio::time::Instant;
use tokio_util::time::DelayQueue;
use tokio_wheel::Timer;

use crate::cpu_ns;
use crate::runtimes::{current_thread, multi_thread, multi_thread_default, Flavor};

/// A timer implementation under test, in one runtime configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// This crate: a `Timer` whose driver task runs on a runtime with the I/O driver.
    WheelIo,
    /// This crate on a time-only runtime.
    WheelTimeOnly,
    /// `tokio::time` on a runtime with the I/O driver.
    TokioIo,
    /// `tokio::time` on a time-only runtime.
    TokioTimeOnly,
    /// `tokio::time` with Tokio's alternative per-worker timer, I/O driver enabled
    /// (multi-thread workloads, in a `--cfg tokio_unstable` build only).
    TokioAlt,
    /// `pingora_timeout` (its own clock thread), on a runtime with the I/O driver.
    Pingora,
    /// `tokio_util::time::DelayQueue` on a runtime with the I/O driver (churn only).
    DelayQueue,
}

impl Peer {
    /// Its name in reports, configuration included.
    pub fn name(self) -> &'static str {
        match self {
            Peer::WheelIo => "tokio-wheel (I/O runtime)",
            Peer::WheelTimeOnly => "tokio-wheel (time-only runtime)",
            Peer::TokioIo => "tokio::time (I/O runtime)",
            Peer::TokioTimeOnly => "tokio::time (time-only runtime)",
            Peer::TokioAlt => "tokio::time (alt timer + I/O)",
            Peer::Pingora => "pingora-timeout (I/O runtime)",
            Peer::DelayQueue => "DelayQueue (I/O runtime)",
        }
    }

    /// The runtime configuration it runs on.
    pub fn runtime(self) -> Flavor {
        match self {
            Peer::WheelTimeOnly | Peer::TokioTimeOnly => Flavor::TimeOnly,
            Peer::TokioAlt => Flavor::AltTimer,
            Peer::WheelIo | Peer::TokioIo | Peer::Pingora | Peer::DelayQueue => Flavor::Io,
        }
    }

    /// Whether it is this crate's timer.
    pub fn is_wheel(self) -> bool {
        matches!(self, Peer::WheelIo | Peer::WheelTimeOnly)
    }

    /// Whether it is `tokio::time`, in any configuration.
    pub fn is_tokio(self) -> bool {
        matches!(self, Peer::TokioIo | Peer::TokioTimeOnly | Peer::TokioAlt)
    }
}

const SECOND: Duration = Duration::from_secs(1);

/// *churn*: create a 1 s sleep, poll it once so it registers, drop it; ns per op on one
/// thread (a current-thread runtime of the peer's configuration, entered, not running),
/// over `iters` ops, with `pending` one-hour sleeps of the same kind already registered
/// (only for this crate and `tokio::time`).
///
/// # Panics
///
/// For [`Peer::TokioAlt`]: Tokio's alt timer is for multi-thread runtimes only.
pub fn churn(peer: Peer, iters: u32, pending: usize) -> f64 {
    churn_on(peer, iters, pending, Timer::new)
}

/// *churn* on a timer that tracks call sites (`Builder::track_call_sites(true)`), for
/// this crate's peers: what tracking costs an op.
pub fn churn_tracking_sites(peer: Peer, iters: u32, pending: usize) -> f64 {
    assert!(peer.is_wheel(), "call sites are this crate's");
    churn_on(peer, iters, pending, tracking_timer)
}

/// *churn* on a suspend-aware timer (`Builder::suspend_aware(true)`), for this
/// crate's peers: what counting time suspended costs an op.
pub fn churn_suspend_aware(peer: Peer, iters: u32, pending: usize) -> f64 {
    assert!(peer.is_wheel(), "suspend-aware timers are this crate's");
    churn_on(peer, iters, pending, suspend_aware_timer)
}

/// A default timer that counts time suspended.
fn suspend_aware_timer() -> Timer {
    Timer::builder().suspend_aware(true).build().unwrap()
}

/// A default timer that tracks call sites.
fn tracking_timer() -> Timer {
    Timer::builder().track_call_sites(true).build().unwrap()
}

fn churn_on(peer: Peer, iters: u32, pending: usize, build: fn() -> Timer) -> f64 {
    let rt = current_thread(peer.runtime());
    let _enter = rt.enter();
    let mut cx = Context::from_waker(noop_waker_ref());
    let timer = rt.block_on(async { build() });
    let mut held_ours: Vec<_> = Vec::new();
    let mut held_tokio: Vec<_> = Vec::new();
    for _ in 0..pending {
        match peer {
            _ if peer.is_tokio() => {
                let mut s = Box::pin(tokio::time::sleep(Duration::from_secs(3600)));
                let _ = s.as_mut().poll(&mut cx);
                held_tokio.push(s);
            }
            _ => {
                let mut s = timer.sleep(Duration::from_secs(3600));
                let _ = Pin::new(&mut s).poll(&mut cx);
                held_ours.push(s);
            }
        }
    }
    let mut queue = DelayQueue::new();
    let start = std::time::Instant::now();
    for _ in 0..iters {
        match peer {
            Peer::WheelIo | Peer::WheelTimeOnly => {
                let mut sleep = timer.sleep(SECOND);
                let _ = Pin::new(&mut sleep).poll(&mut cx);
            }
            Peer::TokioIo | Peer::TokioTimeOnly | Peer::TokioAlt => {
                let mut sleep = pin!(tokio::time::sleep(SECOND));
                let _ = sleep.as_mut().poll(&mut cx);
            }
            Peer::Pingora => {
                let mut sleep = pin!(pingora_timeout::sleep(SECOND));
                let _ = sleep.as_mut().poll(&mut cx);
            }
            Peer::DelayQueue => {
                let key = queue.insert((), SECOND);
                queue.remove(&key);
            }
        }
    }
    start.elapsed().as_nanos() as f64 / f64::from(iters)
}

/// The deadline of a *churn-later* op: as long as every one already pending, and made
/// after them, so never earlier than all a driver knows.
pub const LATER: Duration = Duration::from_secs(120);

/// *churn-later*: a busy server's uniform request timeouts. Inside `block_on` of a
/// current-thread runtime of the peer's configuration, `pending` (at least one) 120 s
/// sleeps are registered and the drivers let park once knowing the earliest; then each
/// op makes a new 120 s sleep, later than every one pending (so Tokio's driver, parked
/// until the earliest, needs no wakeup), polls it once so it registers, and drops it.
/// ns per op over `iters` ops. This crate and `tokio::time` only.
///
/// # Panics
///
/// For a peer other than this crate's or `tokio::time` on a current-thread runtime.
pub fn churn_later(peer: Peer, iters: u32, pending: usize) -> f64 {
    churn_later_on(peer, iters, pending, Timer::new)
}

/// *churn-later* on a timer that tracks call sites, for this crate's peers.
pub fn churn_later_tracking_sites(peer: Peer, iters: u32, pending: usize) -> f64 {
    assert!(peer.is_wheel(), "call sites are this crate's");
    churn_later_on(peer, iters, pending, tracking_timer)
}

/// *churn-later* on a suspend-aware timer, for this crate's peers.
pub fn churn_later_suspend_aware(peer: Peer, iters: u32, pending: usize) -> f64 {
    assert!(peer.is_wheel(), "suspend-aware timers are this crate's");
    churn_later_on(peer, iters, pending, suspend_aware_timer)
}

fn churn_later_on(peer: Peer, iters: u32, pending: usize, build: fn() -> Timer) -> f64 {
    assert!(
        peer.is_wheel() || matches!(peer, Peer::TokioIo | Peer::TokioTimeOnly),
        "{} has no churn-later",
        peer.name()
    );
    let rt = current_thread(peer.runtime());
    rt.block_on(async move {
        let timer = build();
        let mut cx = Context::from_waker(noop_waker_ref());
        let mut held_ours = Vec::new();
        let mut held_tokio = Vec::new();
        for _ in 0..pending.max(1) {
            if peer.is_wheel() {
                let mut sleep = timer.sleep(LATER);
                let _ = Pin::new(&mut sleep).poll(&mut cx);
                held_ours.push(sleep);
            } else {
                let mut sleep = Box::pin(tokio::time::sleep(LATER));
                let _ = sleep.as_mut().poll(&mut cx);
                held_tokio.push(sleep);
            }
        }
        // Let our driver task turn and park, and Tokio's time driver park, each knowing
        // the earliest deadline pending.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        let start = std::time::Instant::now();
        for _ in 0..iters {
            if peer.is_wheel() {
                let mut sleep = timer.sleep(LATER);
                let _ = Pin::new(&mut sleep).poll(&mut cx);
            } else {
                let mut sleep = pin!(tokio::time::sleep(LATER));
                let _ = sleep.as_mut().poll(&mut cx);
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / f64::from(iters);
        drop((held_ours, held_tokio));
        ns
    })
}

/// *churn* through the free function `tokio_wheel::sleep` (the default timer, whose
/// driver runs on its own thread) from a current-thread runtime of `flavor`, entered,
/// not running; ns per op over `iters` ops.
pub fn churn_free(flavor: Flavor, iters: u32) -> f64 {
    let rt = current_thread(flavor);
    let _enter = rt.enter();
    let mut cx = Context::from_waker(noop_waker_ref());
    // The default timer starts on first use, before the clock starts.
    drop(tokio_wheel::sleep(SECOND));
    let start = std::time::Instant::now();
    for _ in 0..iters {
        let mut sleep = tokio_wheel::sleep(SECOND);
        let _ = Pin::new(&mut sleep).poll(&mut cx);
    }
    start.elapsed().as_nanos() as f64 / f64::from(iters)
}

/// CPU ns of `intervals` tasks on `workers` workers of a multi-thread runtime of the
/// peer's configuration, each taking `ticks` ticks of an `Interval` of `period` (the
/// first, immediate one included), from the runtime's start to its last task's end.
fn heartbeat_cpu(
    peer: Peer,
    intervals: usize,
    period: Duration,
    ticks: u32,
    workers: usize,
) -> u64 {
    let rt = multi_thread(peer.runtime(), workers);
    let before = cpu_ns();
    rt.block_on(async move {
        let timer = Timer::new();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..intervals {
            let timer = timer.clone();
            tasks.spawn(async move {
                if peer.is_wheel() {
                    let mut interval = timer.interval(period);
                    for _ in 0..ticks {
                        interval.tick().await;
                    }
                } else {
                    let mut interval = tokio::time::interval(period);
                    for _ in 0..ticks {
                        interval.tick().await;
                    }
                }
            });
        }
        while tasks.join_next().await.is_some() {}
    });
    let cpu = cpu_ns() - before;
    // Kept until measured: an exited thread's CPU is no longer counted.
    drop(rt);
    cpu
}

/// *heartbeat*: `intervals` tasks each ticking an `Interval` of `period` on `workers`
/// workers of a multi-thread runtime of the peer's configuration (this crate or
/// `tokio::time`); CPU ns per tick after the first: the CPU of a run of `ticks + 1`
/// ticks less that of a run of one (setup, spawning and the immediate first tick), over
/// `intervals × ticks`.
///
/// # Panics
///
/// For a peer other than this crate's or `tokio::time`.
pub fn heartbeat(
    peer: Peer,
    intervals: usize,
    period: Duration,
    ticks: u32,
    workers: usize,
) -> f64 {
    assert!(
        peer.is_wheel() || peer.is_tokio(),
        "{} has no interval",
        peer.name()
    );
    let setup = heartbeat_cpu(peer, intervals, period, 1, workers);
    let run = heartbeat_cpu(peer, intervals, period, ticks + 1, workers);
    run.saturating_sub(setup) as f64 / (intervals as f64 * f64::from(ticks))
}

/// *heartbeat* on one thread, for an instruction counter (`probe heartbeat`):
/// `intervals` tasks on a current-thread runtime of the peer's configuration, on the
/// real clock, each ticking an `Interval` of `period` (this crate's or
/// `tokio::time`'s) `ticks / intervals` times after its immediate first tick. Each
/// tick is the driver firing the interval's sleep, the task waking, and `tick`
/// completing, rescheduling and registering the next one. `period` must be long
/// enough for a round of every interval's tick to take well under it (under an
/// instruction counter too), or ticks go missed and complete without the driver.
///
/// The intervals share one start (`interval_at`), so each round's ticks fall in one
/// step of this crate's wheel: the driver fires them all, then parks with nothing
/// pending and no bound on its clock, and every task's registration reads the
/// clock, as on a multi-thread runtime. (Started a few microseconds apart, the
/// ticks spread over steps as the spawning happens to take, and whether a task finds
/// the driver's bound armed varies from run to run.)
///
/// # Panics
///
/// For a peer other than this crate's or `tokio::time` on a current-thread runtime.
pub fn heartbeat_one_thread(peer: Peer, intervals: usize, period: Duration, ticks: u32) {
    assert!(
        peer.is_wheel() || matches!(peer, Peer::TokioIo | Peer::TokioTimeOnly),
        "{} has no one-thread heartbeat",
        peer.name()
    );
    let per_interval = ticks / u32::try_from(intervals.max(1)).unwrap_or(u32::MAX);
    let rt = current_thread(peer.runtime());
    rt.block_on(async move {
        let timer = Timer::new();
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..intervals {
            let timer = timer.clone();
            tasks.spawn(async move {
                if peer.is_wheel() {
                    let mut interval = timer.interval_at(start, period);
                    for _ in 0..=per_interval {
                        interval.tick().await;
                    }
                } else {
                    let mut interval = tokio::time::interval_at(start, period);
                    for _ in 0..=per_interval {
                        interval.tick().await;
                    }
                }
            });
        }
        while tasks.join_next().await.is_some() {}
    });
}

/// The parts of a churn op that no design with a clock read per sleep and a lock per
/// registration and per cancel can avoid, measured alone on this machine.
#[derive(Debug, Clone, Copy)]
pub struct ChurnFloor {
    /// `tokio::time::Instant::now()`: `sleep(d)` must read the clock for `now + d`.
    pub clock_ns: f64,
    /// An uncontended `Mutex` lock, a write, an unlock.
    pub lock_ns: f64,
}

impl ChurnFloor {
    /// One clock read and two lock round trips (register, cancel).
    pub fn total_ns(&self) -> f64 {
        self.clock_ns + 2.0 * self.lock_ns
    }
}

/// Measures [`ChurnFloor`] over `iters` iterations of each part.
pub fn churn_floor(iters: u32) -> ChurnFloor {
    use std::hint::black_box;
    let start = std::time::Instant::now();
    for _ in 0..iters {
        black_box(Instant::now());
    }
    let clock_ns = start.elapsed().as_nanos() as f64 / f64::from(iters);
    let lock = Mutex::new(0u64);
    let start = std::time::Instant::now();
    for i in 0..iters {
        *black_box(&lock).lock().unwrap() = u64::from(i);
    }
    let lock_ns = start.elapsed().as_nanos() as f64 / f64::from(iters);
    black_box(lock.into_inner().unwrap());
    ChurnFloor { clock_ns, lock_ns }
}

/// *churn-mt*: 1000 tasks on `workers` workers of a `runtime` runtime, each looping
/// `timeout(1 s, yield_now())` `per_task` times; wall ns per op. `None` runs
/// `yield_now` alone: the baseline, whose figure is subtracted from the peers' on the
/// same runtime configuration.
///
/// # Panics
///
/// If `peer` runs on another configuration than `runtime`, or is `DelayQueue`.
pub fn churn_mt(runtime: Flavor, peer: Option<Peer>, workers: usize, per_task: u32) -> f64 {
    const TASKS: u32 = 1000;
    if let Some(peer) = peer {
        assert_eq!(
            peer.runtime(),
            runtime,
            "{} on another runtime",
            peer.name()
        );
        assert_ne!(peer, Peer::DelayQueue, "DelayQueue has no timeout");
    }
    let rt = multi_thread(runtime, workers);
    rt.block_on(async move {
        let timer = Timer::new();
        let start = std::time::Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..TASKS {
            let timer = timer.clone();
            tasks.spawn(async move {
                for _ in 0..per_task {
                    let op = tokio::task::yield_now();
                    match peer {
                        None => op.await,
                        Some(p) if p.is_wheel() => drop(timer.timeout(SECOND, op).await),
                        Some(p) if p.is_tokio() => drop(tokio::time::timeout(SECOND, op).await),
                        Some(_) => drop(pingora_timeout::timeout(SECOND, op).await),
                    }
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        start.elapsed().as_nanos() as f64 / f64::from(TASKS * per_task)
    })
}

/// The time *expiry* gives itself to spawn its sleeps before the first deadline.
const HEAD_START: Duration = Duration::from_millis(500);

/// *expiry*: 200 000 sleeps with deadlines spread evenly over 1 s (timer tick 1 ms) on
/// two workers of the peer's runtime configuration; each one's lateness (wake instant
/// minus deadline), sorted. Panics if one of this crate's sleeps woke early, or if
/// spawning the sleeps outlasted the head start.
pub fn expiry(peer: Peer) -> Vec<Duration> {
    const SLEEPS: u32 = 200_000;
    assert!(
        peer.is_wheel() || peer.is_tokio(),
        "{} has no sleep_until here",
        peer.name()
    );
    let rt = multi_thread(peer.runtime(), 2);
    rt.block_on(async move {
        let timer = Timer::builder()
            .tick(Duration::from_millis(1))
            .build()
            .unwrap();
        let lateness = Arc::new(Mutex::new(Vec::with_capacity(SLEEPS as usize)));
        let early = Arc::new(AtomicUsize::new(0));
        // Time to spawn them all first: 160–300 ms on an AMD EPYC host of the CI kind,
        // so the 200 ms this was once let the first deadlines pass before their sleeps
        // existed, which measured the spawning, not the timers.
        let start = Instant::now() + HEAD_START;
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..SLEEPS {
            let deadline = start + SECOND * i / SLEEPS;
            let (timer, lateness, early) = (timer.clone(), lateness.clone(), early.clone());
            tasks.spawn(async move {
                if peer.is_wheel() {
                    timer.sleep_until(deadline).await
                } else {
                    tokio::time::sleep_until(deadline).await
                }
                let now = Instant::now();
                if now < deadline {
                    early.fetch_add(1, Ordering::Relaxed);
                }
                lateness
                    .lock()
                    .unwrap()
                    .push(now.saturating_duration_since(deadline));
            });
        }
        assert!(
            Instant::now() < start,
            "spawning the sleeps outlasted the head start of {HEAD_START:?}"
        );
        while tasks.join_next().await.is_some() {}
        if peer.is_wheel() {
            assert_eq!(early.load(Ordering::Relaxed), 0, "tokio-wheel woke early");
        }
        let mut lateness = std::mem::take(&mut *lateness.lock().unwrap());
        lateness.sort();
        lateness
    })
}

/// Counts live heap bytes for [`memory`]; install it with `#[global_allocator]`.
///
/// The count is per thread: [`memory`] runs on one thread, and a process-wide atomic
/// would be a cache line that every allocation on every thread writes, a tax on the
/// multi-threaded workloads sharing the binary (heavier on the peer that allocates
/// more). Measured, it moved no figure beyond noise; it is gone anyway, so that no
/// reader has to wonder.
pub struct Counting;

thread_local! {
    // Const-initialised and without a destructor: using it allocates nothing, as it
    // must inside an allocator.
    static HEAP: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: no count once the thread's locals are torn down.
    let _ = HEAP.try_with(|heap| heap.set(heap.get() + delta));
}

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter is a side effect only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: same layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        count(new as isize - layout.size() as isize);
        // SAFETY: `ptr` came from `System` with this layout; forwarded.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

/// Bytes per pending, registered sleep at 1 000 000 pending.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// `size_of` the future.
    pub size_of: usize,
    /// Heap the timer allocated per sleep.
    pub heap: f64,
    /// Everything: ours held by value in a `Vec` (size_of + heap); tokio's boxed to pin
    /// them (the `Vec`'s pointer + the box + heap).
    pub total: f64,
}

/// *memory* for this crate and `tokio::time`. Needs [`Counting`] as the global
/// allocator.
pub fn memory(peer: Peer) -> Memory {
    memory_on(peer, Timer::new)
}

/// *memory* for this crate on a timer that tracks call sites (every sleep from one
/// line). Needs [`Counting`] as the global allocator.
pub fn memory_tracking_sites(peer: Peer) -> Memory {
    assert!(peer.is_wheel(), "call sites are this crate's");
    memory_on(peer, tracking_timer)
}

fn memory_on(peer: Peer, build: fn() -> Timer) -> Memory {
    const N: usize = 1_000_000;
    assert!(
        peer.is_wheel() || peer.is_tokio(),
        "memory: {}",
        peer.name()
    );
    // Everything below allocates on this thread (a current-thread runtime).
    let heap = || HEAP.with(Cell::get);
    let rt = current_thread(peer.runtime());
    let _enter = rt.enter();
    let mut cx = Context::from_waker(noop_waker_ref());
    let timer = rt.block_on(async { build() });
    if peer.is_tokio() {
        let mut sleeps = Vec::with_capacity(N);
        let before = heap();
        for _ in 0..N {
            sleeps.push(Box::pin(tokio::time::sleep(Duration::from_secs(3600))));
        }
        let boxes = heap() - before;
        for s in &mut sleeps {
            let _ = s.as_mut().poll(&mut cx);
        }
        let driver = (heap() - before - boxes) as f64 / N as f64;
        return Memory {
            size_of: std::mem::size_of::<tokio::time::Sleep>(),
            heap: driver,
            total: std::mem::size_of::<Pin<Box<tokio::time::Sleep>>>() as f64
                + boxes as f64 / N as f64
                + driver,
        };
    }
    let mut sleeps = Vec::with_capacity(N);
    let before = heap();
    for _ in 0..N {
        sleeps.push(timer.sleep(Duration::from_secs(3600)));
    }
    for s in &mut sleeps {
        let _ = Pin::new(s).poll(&mut cx);
    }
    assert_eq!(timer.pending(), N);
    let size_of = std::mem::size_of::<tokio_wheel::Sleep>();
    let heap = (heap() - before) as f64 / N as f64;
    Memory {
        size_of,
        heap,
        total: size_of as f64 + heap,
    }
}

/// *idle*: CPU ms used over 2 s by a two-worker runtime with the I/O driver, alone or
/// with an idle 1 ms-tick timer; and the timer's driver wakeups in that window.
pub fn idle(with_timer: bool) -> (f64, u64) {
    let rt = multi_thread(Flavor::Io, 2);
    let timer = with_timer.then(|| {
        rt.block_on(async {
            let timer = Timer::builder()
                .tick(Duration::from_millis(1))
                .build()
                .unwrap();
            // Use it once, so the driver has ticked and gone idle.
            timer.sleep(Duration::from_millis(5)).await;
            timer
        })
    });
    std::thread::sleep(Duration::from_millis(100));
    let wakeups = || timer.as_ref().map_or(0, |t| t.stats().driver_wakeups);
    let (before_wakeups, before) = (wakeups(), cpu_ns());
    std::thread::sleep(Duration::from_secs(2));
    let cpu = (cpu_ns() - before) as f64 / 1e6;
    (cpu, wakeups() - before_wakeups)
}

/// How many callbacks the *callbacks* workload schedules.
const CALLBACKS: u32 = 1_000_000;

/// Deadline `i` of the *callbacks* workload's [`CALLBACKS`], spread evenly over the
/// second from `start`.
fn callback_deadline(start: Instant, i: u32) -> Instant {
    start + SECOND * i / CALLBACKS
}

/// The *callbacks* workload's callbacks with their deadlines: each counts itself into
/// `ran` when run. The floor runs the very same loop as the workload.
fn counted_callbacks(
    start: Instant,
    ran: &Arc<AtomicUsize>,
) -> impl Iterator<Item = (Instant, impl FnOnce() + Send + 'static)> + '_ {
    (0..CALLBACKS).map(move |i| {
        let ran = ran.clone();
        let callback = move || {
            ran.fetch_add(1, Ordering::Relaxed);
        };
        (callback_deadline(start, i), callback)
    })
}

/// The parts of a *callbacks* run that this design cannot avoid, measured alone, per
/// callback: what is left for the timer's own work once they are paid.
#[derive(Debug, Clone, Copy)]
pub struct CallbacksFloor {
    /// The workload's own loop: an `Arc` clone, the deadline's arithmetic, running the
    /// closure (at once, here) and dropping it.
    pub harness_ns: f64,
    /// Storage for 1 000 000 pending callbacks: one 64-byte entry each (the size of ours)
    /// pushed onto a growing `Vec`, as the wheel's slab grows, then read back and freed.
    /// Mostly page faults: the memory is new to the process.
    pub memory_ns: f64,
    /// A second of 1 ms wakeups (a Tokio `interval`, on the same kind of runtime),
    /// shared by the 1 000 000 callbacks spread over that second.
    pub wakeups_ns: f64,
    /// An uncontended lock round trip and an atomic add (the pending count).
    pub sync_ns: f64,
    /// A deadline `Instant` turned into nanoseconds since an origin, as scheduling does.
    pub deadline_ns: f64,
}

impl CallbacksFloor {
    /// All of them.
    pub fn total_ns(&self) -> f64 {
        self.harness_ns + self.memory_ns + self.wakeups_ns + self.sync_ns + self.deadline_ns
    }
}

/// Measures [`CallbacksFloor`] on two workers of a `runtime` runtime (about 1.1 s).
pub fn callbacks_floor(runtime: Flavor) -> CallbacksFloor {
    use std::hint::black_box;
    const N: u32 = CALLBACKS;
    let per = |ns: u64| ns as f64 / f64::from(N);
    let rt = multi_thread(runtime, 2);
    rt.block_on(async {
        let ran = Arc::new(AtomicUsize::new(0));
        let before = cpu_ns();
        for (at, callback) in counted_callbacks(Instant::now(), &ran) {
            black_box(at);
            callback();
        }
        assert_eq!(ran.load(Ordering::Relaxed), N as usize);
        let harness_ns = per(cpu_ns() - before);

        let before = cpu_ns();
        let mut entries: Vec<[u64; 8]> = Vec::new();
        for i in 0..u64::from(N) {
            entries.push([i; 8]);
        }
        black_box(entries.iter().map(|e| e[7]).sum::<u64>());
        drop(entries);
        let memory_ns = per(cpu_ns() - before);

        let before = cpu_ns();
        let mut ticks = tokio::time::interval(Duration::from_millis(1));
        for _ in 0..1000 {
            ticks.tick().await;
        }
        let wakeups_ns = per(cpu_ns() - before);

        let (lock, count) = (Mutex::new(0u32), AtomicUsize::new(0));
        let before = std::time::Instant::now();
        for i in 0..N {
            count.fetch_add(1, Ordering::SeqCst);
            *black_box(&lock).lock().unwrap() = i;
        }
        let sync_ns = per(before.elapsed().as_nanos() as u64);

        let origin = Instant::now();
        let deadlines: Vec<Instant> = (0..N).map(|i| callback_deadline(origin, i)).collect();
        let before = std::time::Instant::now();
        for &at in &deadlines {
            black_box(black_box(at).saturating_duration_since(origin).as_nanos());
        }
        let deadline_ns = per(before.elapsed().as_nanos() as u64);
        CallbacksFloor {
            harness_ns,
            memory_ns,
            wakeups_ns,
            sync_ns,
            deadline_ns,
        }
    })
}

/// How the *callbacks* workload schedules each callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Callbacks {
    /// `Timer::schedule_detached_at`: no handle, as a spawned task's dropped
    /// `JoinHandle`.
    Detached,
    /// `Timer::schedule_at(..)?.detach()`: through a `Scheduled` handle.
    Handles,
    /// The Tokio idiom: a task per callback that sleeps, then runs it.
    TokioTasks,
}

impl Callbacks {
    /// Schedules `callback` at `at` this way (a Tokio task, for `TokioTasks`, on the
    /// current runtime).
    #[inline]
    fn schedule(self, timer: &Timer, at: Instant, callback: impl FnOnce() + Send + 'static) {
        match self {
            Callbacks::Detached => timer.schedule_detached_at(at, callback).unwrap(),
            Callbacks::Handles => timer.schedule_at(at, callback).unwrap().detach(),
            Callbacks::TokioTasks => {
                tokio::spawn(async move {
                    tokio::time::sleep_until(at).await;
                    callback();
                });
            }
        }
    }
}

/// *callbacks*: 1 000 000 callbacks spread over 1 s (tick 1 ms), all fired, on two
/// workers of a `runtime` runtime; CPU ns per callback, all threads. Callbacks run
/// inline on the tick task.
pub fn callbacks(how: Callbacks, runtime: Flavor) -> f64 {
    const N: u32 = CALLBACKS;
    let rt = multi_thread(runtime, 2);
    rt.block_on(async move {
        let timer = Timer::builder()
            .tick(Duration::from_millis(1))
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let before = cpu_ns();
        for (at, callback) in counted_callbacks(Instant::now(), &ran) {
            how.schedule(&timer, at, callback);
        }
        while ran.load(Ordering::Relaxed) < N as usize {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (cpu_ns() - before) as f64 / f64::from(N)
    })
}

/// *callbacks-spread*: the configuration of a server's fire-and-forget work, as an
/// outside harness measured it. On a multi-thread runtime of `runtime` with Tokio's
/// default workers (one per core), a timer of the default tick and executor (10 ms,
/// inline) built at the start; one spawned task (on a worker, as a server's task is)
/// schedules 1 000 000 callbacks, deadlines spread evenly over the second from its
/// start, as `how` says: ours detached (`schedule_detached_at`, or `schedule_at` and
/// `detach`), Tokio's a task each, spawned from that task, that `sleep_until`s the
/// deadline, then runs the callback. Each callback counts itself down and the last
/// wakes the waiting `block_on`. CPU ns per callback, every thread of the process,
/// from before the scheduling task is spawned to the last callback's run.
pub fn callbacks_spread(how: Callbacks, runtime: Flavor) -> f64 {
    const N: u32 = CALLBACKS;
    let rt = multi_thread_default(runtime);
    let cpu = rt.block_on(async move {
        let timer = Timer::new();
        let countdown = Countdown::new(N as usize);
        let before = cpu_ns();
        let schedule = {
            let countdown = countdown.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                for i in 0..N {
                    let at = callback_deadline(start, i);
                    let countdown = countdown.clone();
                    let callback = move || countdown.count();
                    how.schedule(&timer, at, callback);
                }
            })
        };
        schedule.await.expect("the scheduling task");
        countdown.done.notified().await;
        cpu_ns() - before
    });
    // Kept until measured: an exited thread's CPU is no longer counted.
    drop(rt);
    cpu as f64 / f64::from(N)
}

/// Counts callbacks down and wakes one waiting task when the last has run.
struct Countdown {
    left: AtomicUsize,
    done: tokio::sync::Notify,
}

impl Countdown {
    /// A countdown from `n`, shared by the callbacks.
    fn new(n: usize) -> Arc<Countdown> {
        Arc::new(Countdown {
            left: AtomicUsize::new(n),
            done: tokio::sync::Notify::new(),
        })
    }

    fn count(&self) {
        if self.left.fetch_sub(1, Ordering::Relaxed) == 1 {
            // A permit if nobody waits yet: the wait that follows returns at once.
            self.done.notify_one();
        }
    }
}

/// *callbacks, one thread*: for an instruction counter (`probe callbacks`), not a
/// clock. On a current-thread runtime of `runtime`, from `block_on`, `ops` callbacks
/// due 1 µs apart from the start (a million a second, as [`callbacks`]) are scheduled
/// as `how` says, on a timer of the default tick and executor (10 ms, inline), then the
/// runtime is driven until the last one has run. Each callback counts itself down, and
/// the last wakes the waiting task: nothing polls. Under an instruction counter, which
/// slows the program fiftyfold, every deadline has passed by the time the loop ends
/// (the driver cannot run during it), so the driver fires them all in back-to-back
/// turns of at most a batch per shard: the same work in every run.
pub fn callbacks_one_thread(how: Callbacks, runtime: Flavor, ops: u32) {
    let rt = current_thread(runtime);
    rt.block_on(async move {
        let timer = Timer::new();
        let countdown = Countdown::new(ops as usize);
        let start = Instant::now();
        for i in 0..ops {
            let at = start + Duration::from_micros(u64::from(i));
            let countdown = countdown.clone();
            let callback = move || countdown.count();
            how.schedule(&timer, at, callback);
        }
        if ops > 0 {
            countdown.done.notified().await;
        }
    });
}
