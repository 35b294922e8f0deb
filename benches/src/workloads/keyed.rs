//! Keyed timers and idle I/O: `DelayQueue` against tokio-util's, and
//! `io::TimeoutStream` against a plain stream and tokio-io-timeout.

use std::cell::Cell;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio_wheel::Timer;

use super::HEAP;
use crate::cpu_ns;

/// The queues compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// `tokio_wheel::DelayQueue` on a 1 ms tick.
    Wheel,
    /// `tokio_util::time::DelayQueue`.
    TokioUtil,
}

impl Queue {
    pub const ALL: [Queue; 2] = [Queue::Wheel, Queue::TokioUtil];

    pub fn name(self) -> &'static str {
        match self {
            Queue::Wheel => "tokio-wheel DelayQueue",
            Queue::TokioUtil => "tokio-util DelayQueue",
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn timer() -> Timer {
    Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .expect("valid")
}

/// What the churn and memory workloads ask of a queue.
trait Keyed {
    type Key;
    fn put(&mut self, value: u64, timeout: Duration) -> Self::Key;
    fn take(&mut self, key: &Self::Key) -> Option<u64>;
}

impl Keyed for tokio_wheel::DelayQueue<u64> {
    type Key = tokio_wheel::Key;
    fn put(&mut self, value: u64, timeout: Duration) -> Self::Key {
        self.insert(value, timeout)
    }
    fn take(&mut self, key: &Self::Key) -> Option<u64> {
        self.remove(key)
    }
}

impl Keyed for tokio_util::time::DelayQueue<u64> {
    type Key = tokio_util::time::delay_queue::Key;
    fn put(&mut self, value: u64, timeout: Duration) -> Self::Key {
        self.insert(value, timeout)
    }
    fn take(&mut self, key: &Self::Key) -> Option<u64> {
        Some(self.remove(key).into_inner())
    }
}

/// A new queue of `queue`'s kind; call inside a runtime.
fn with_queue<R>(queue: Queue, timer: &Timer, f: impl FnOnce(&mut dyn KeyedU64) -> R) -> R {
    match queue {
        Queue::Wheel => f(&mut tokio_wheel::DelayQueue::with_timer(timer)),
        Queue::TokioUtil => f(&mut tokio_util::time::DelayQueue::new()),
    }
}

/// `Keyed` with its key erased, so both queues run the same code.
trait KeyedU64 {
    /// Inserts and removes at once; `false` if the value was not there.
    fn put_take(&mut self, value: u64, timeout: Duration) -> bool;
    fn put_only(&mut self, value: u64, timeout: Duration);
}

impl<Q: Keyed> KeyedU64 for Q {
    fn put_take(&mut self, value: u64, timeout: Duration) -> bool {
        let key = self.put(value, timeout);
        self.take(&key).is_some()
    }
    fn put_only(&mut self, value: u64, timeout: Duration) {
        self.put(value, timeout);
    }
}

/// How long the values of the insert + remove workloads wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeouts {
    /// Every value 30 s: a new value is never the earliest of those pending.
    Fixed,
    /// 1 ms to 60 s, spread by a multiplicative hash of the value's number: among
    /// 10 000 pending, a new value is now and then the earliest.
    Varied,
}

impl Timeouts {
    pub const ALL: [Timeouts; 2] = [Timeouts::Fixed, Timeouts::Varied];

    pub fn name(self) -> &'static str {
        match self {
            Timeouts::Fixed => "fixed 30 s timeout",
            Timeouts::Varied => "varied 1 ms–60 s timeout",
        }
    }

    fn of(self, i: u64) -> Duration {
        match self {
            Timeouts::Fixed => Duration::from_secs(30),
            Timeouts::Varied => Duration::from_millis(1 + i.wrapping_mul(7919) % 60_000),
        }
    }
}

/// ns per insert + remove, with `pending` other values in the queue: the workload
/// `compare keyed` ran before it measured both owners (pending values at 60 s, each
/// new value 0–5 s, so it is always tokio-util's earliest and moves its `Sleep` on
/// insert and on remove). On a runtime that is entered, not running a task.
pub fn queue_churn(queue: Queue, iters: u32, pending: usize) -> f64 {
    let rt = runtime();
    let _enter = rt.enter();
    let timer = rt.block_on(async { timer() });
    with_queue(queue, &timer, |q| {
        let far = Duration::from_secs(60);
        for i in 0..pending {
            q.put_only(i as u64, far + Duration::from_micros(i as u64));
        }
        let start = std::time::Instant::now();
        for i in 0..iters {
            let timeout = Duration::from_millis(u64::from(i % 5000));
            assert!(std::hint::black_box(q.put_take(u64::from(i), timeout)));
        }
        start.elapsed().as_nanos() as f64 / f64::from(iters)
    })
}

/// *One owner*, as tokio-util documents its queue: one task on a current-thread
/// runtime (`block_on`), tokio-util's queue owned (`&mut`), ours a handle; each made
/// with `DelayQueue::new()` (ours then on the default timer, whose driver has a
/// thread of its own), or, with `explicit`, ours on a `Timer` built on that runtime.
/// ns per insert + remove, with `pending` other values inserted first with the same
/// timeouts.
pub fn churn_one_owner(
    queue: Queue,
    iters: u32,
    pending: usize,
    timeouts: Timeouts,
    explicit: bool,
) -> f64 {
    runtime().block_on(async move {
        let timer = timer();
        let mut new = tokio_wheel::DelayQueue::new();
        let default: Option<&mut dyn KeyedU64> =
            (queue == Queue::Wheel && !explicit).then_some(&mut new);
        let run = |q: &mut dyn KeyedU64| {
            for i in 0..pending as u64 {
                q.put_only(u64::MAX - i, timeouts.of(u64::MAX - i));
            }
            let start = std::time::Instant::now();
            for i in 0..u64::from(iters) {
                assert!(std::hint::black_box(q.put_take(i, timeouts.of(i))));
            }
            start.elapsed().as_nanos() as f64 / f64::from(iters)
        };
        match default {
            Some(q) => run(q),
            None => with_queue(queue, &timer, run),
        }
    })
}

/// Tasks of the *shared* workload, and the workers they run on.
pub const SHARED_TASKS: u32 = 8;
pub const SHARED_WORKERS: usize = 2;

/// *Shared*: [`SHARED_TASKS`] tasks on a multi-thread runtime of [`SHARED_WORKERS`]
/// workers insert and remove at once while one consumer waits for expired values:
/// ours through clones of the handle, tokio-util's behind `Arc<std::sync::Mutex<_>>`
/// with a `Notify` that wakes its consumer when an insert finds the queue empty
/// (tokio-util's queue answers `None` when empty). Wall ns per insert + remove (all
/// tasks' pairs over the time they took together), with `pending` other values
/// inserted first with the same timeouts.
pub fn churn_shared(queue: Queue, iters: u32, pending: usize, timeouts: Timeouts) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SHARED_WORKERS)
        .enable_all()
        .build()
        .expect("a runtime");
    let per_task = iters / SHARED_TASKS;
    rt.block_on(async move {
        match queue {
            Queue::Wheel => {
                let q = tokio_wheel::DelayQueue::with_timer(&timer());
                for i in 0..pending as u64 {
                    q.insert(u64::MAX - i, timeouts.of(u64::MAX - i));
                }
                let consumer = {
                    let q = q.clone();
                    tokio::spawn(async move {
                        let mut taken = 0u64;
                        while let Some(expired) = q.next_expired().await {
                            taken += std::hint::black_box(expired.into_inner()) & 1;
                        }
                        taken
                    })
                };
                tokio::task::yield_now().await;
                let start = std::time::Instant::now();
                let tasks: Vec<_> = (0..u64::from(SHARED_TASKS))
                    .map(|t| {
                        let q = q.clone();
                        tokio::spawn(async move {
                            for i in 0..u64::from(per_task) {
                                let value = t << 32 | i;
                                let key = q.insert(value, timeouts.of(value));
                                assert_eq!(q.remove(&key), Some(value));
                                if i % 100 == 99 {
                                    tokio::task::yield_now().await;
                                }
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("a task");
                }
                let ns = start.elapsed().as_nanos() as f64;
                q.clear();
                q.close();
                consumer.await.expect("the consumer");
                ns / f64::from(per_task * SHARED_TASKS)
            }
            Queue::TokioUtil => {
                use std::sync::{Arc, Mutex};
                let q = Arc::new(Mutex::new(tokio_util::time::DelayQueue::new()));
                let notify = Arc::new(tokio::sync::Notify::new());
                let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
                {
                    let mut q = q.lock().expect("not poisoned");
                    for i in 0..pending as u64 {
                        q.insert(u64::MAX - i, timeouts.of(u64::MAX - i));
                    }
                }
                let consumer = {
                    let (q, notify, done) = (q.clone(), notify.clone(), done.clone());
                    tokio::spawn(async move {
                        let mut taken = 0u64;
                        loop {
                            let next = std::future::poll_fn(|cx| {
                                q.lock().expect("not poisoned").poll_expired(cx)
                            })
                            .await;
                            match next {
                                Some(expired) => {
                                    taken += std::hint::black_box(expired.into_inner()) & 1;
                                }
                                None if done.load(std::sync::atomic::Ordering::Acquire) => {
                                    break taken;
                                }
                                None => notify.notified().await,
                            }
                        }
                    })
                };
                tokio::task::yield_now().await;
                let start = std::time::Instant::now();
                let tasks: Vec<_> = (0..u64::from(SHARED_TASKS))
                    .map(|t| {
                        let (q, notify) = (q.clone(), notify.clone());
                        tokio::spawn(async move {
                            for i in 0..u64::from(per_task) {
                                let value = t << 32 | i;
                                let (was_empty, key) = {
                                    let mut locked = q.lock().expect("not poisoned");
                                    (locked.is_empty(), locked.insert(value, timeouts.of(value)))
                                };
                                if was_empty {
                                    notify.notify_one();
                                }
                                let removed = q.lock().expect("not poisoned").remove(&key);
                                assert_eq!(removed.into_inner(), value);
                                if i % 100 == 99 {
                                    tokio::task::yield_now().await;
                                }
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("a task");
                }
                let ns = start.elapsed().as_nanos() as f64;
                q.lock().expect("not poisoned").clear();
                done.store(true, std::sync::atomic::Ordering::Release);
                notify.notify_one();
                consumer.await.expect("the consumer");
                ns / f64::from(per_task * SHARED_TASKS)
            }
        }
    })
}

/// How long the values of the expiry workload are spread over.
pub const EXPIRY_SPREAD: Duration = Duration::from_millis(200);

/// CPU ns (all threads) per value: `n` values inserted with deadlines spread evenly
/// over [`EXPIRY_SPREAD`], each taken by one consumer as it expires (real clock, 1 ms
/// tick, current-thread runtime).
pub fn queue_expiry(queue: Queue, n: u32) -> f64 {
    runtime().block_on(async move {
        let cpu = cpu_ns();
        let spread_ns = EXPIRY_SPREAD.as_nanos() as u64;
        let spread = |i: u32| Duration::from_nanos(u64::from(i) * spread_ns / u64::from(n));
        match queue {
            Queue::Wheel => {
                let q = tokio_wheel::DelayQueue::with_timer(&timer());
                for i in 0..n {
                    q.insert(i, spread(i));
                }
                for _ in 0..n {
                    std::hint::black_box(q.next_expired().await);
                }
            }
            Queue::TokioUtil => {
                let mut q = tokio_util::time::DelayQueue::new();
                for i in 0..n {
                    q.insert(i, spread(i));
                }
                for _ in 0..n {
                    std::hint::black_box(std::future::poll_fn(|cx| q.poll_expired(cx)).await);
                }
            }
        }
        (cpu_ns() - cpu) as f64 / f64::from(n)
    })
}

/// Heap bytes requested per pending value (a `u64`), `n` pending, storage growth
/// included.
pub fn queue_memory(queue: Queue, n: usize) -> f64 {
    let heap = || HEAP.with(Cell::get);
    let rt = runtime();
    let _enter = rt.enter();
    let timer = rt.block_on(async { timer() });
    let far = Duration::from_secs(60);
    let before = heap();
    with_queue(queue, &timer, |q| {
        for i in 0..n {
            q.put_only(i as u64, far + Duration::from_micros(i as u64));
        }
        (heap() - before) as f64 / n as f64
    })
}

/// The streams compared for idle reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleIo {
    /// No timeout.
    Plain,
    /// `tokio_wheel::io::TimeoutStream` with a read timeout, 10 ms tick.
    Wheel,
    /// `tokio_wheel::io::TimeoutStream` with an idle timeout (both ways) instead.
    WheelIdle,
    /// `tokio_io_timeout::TimeoutStream` (tokio's timer).
    TokioIoTimeout,
}

impl IdleIo {
    pub const ALL: [IdleIo; 4] = [
        IdleIo::Plain,
        IdleIo::Wheel,
        IdleIo::WheelIdle,
        IdleIo::TokioIoTimeout,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IdleIo::Plain => "plain stream",
            IdleIo::Wheel => "tokio-wheel io::TimeoutStream, read timeout",
            IdleIo::WheelIdle => "tokio-wheel io::TimeoutStream, idle timeout",
            IdleIo::TokioIoTimeout => "tokio-io-timeout",
        }
    }
}

/// CPU ns (all threads) per round trip of one byte over a duplex pipe whose server
/// side is wrapped as `kind` with a 1 s read timeout (or idle timeout): every server
/// read waits (`Pending`) once, then makes progress, so each arms and disarms a read
/// timeout, or starts an idle stretch, whose one `Sleep` moves about once a second.
pub fn idle_io(kind: IdleIo, round_trips: u32) -> f64 {
    runtime().block_on(async move {
        let (client, server) = tokio::io::duplex(64);
        let timeout = Some(Duration::from_secs(1));
        let timer = Timer::builder()
            .tick(Duration::from_millis(10))
            .build()
            .expect("valid");
        let server: Pin<Box<dyn ReadWrite>> = match kind {
            IdleIo::Plain => Box::pin(server),
            IdleIo::Wheel => {
                let mut s = tokio_wheel::io::TimeoutStream::with_timer(server, &timer);
                s.set_read_timeout(timeout);
                Box::pin(s)
            }
            IdleIo::WheelIdle => {
                let mut s = tokio_wheel::io::TimeoutStream::with_timer(server, &timer);
                s.set_idle_timeout(timeout);
                Box::pin(s)
            }
            IdleIo::TokioIoTimeout => {
                let mut s = tokio_io_timeout::TimeoutStream::new(server);
                s.set_read_timeout(timeout);
                Box::pin(s)
            }
        };
        let echo = tokio::spawn(echo(server, round_trips));
        let cpu = cpu_ns();
        ping(client, round_trips).await;
        let per = (cpu_ns() - cpu) as f64 / f64::from(round_trips);
        echo.await.expect("echo");
        per
    })
}

trait ReadWrite: AsyncRead + AsyncWrite + Send {}
impl<T: AsyncRead + AsyncWrite + Send> ReadWrite for T {}

async fn echo(mut server: Pin<Box<dyn ReadWrite>>, n: u32) {
    let mut byte = [0; 1];
    for _ in 0..n {
        server.read_exact(&mut byte).await.expect("read");
        server.write_all(&byte).await.expect("write");
    }
}

async fn ping(mut client: DuplexStream, n: u32) {
    let mut byte = [0; 1];
    for i in 0..n {
        client.write_all(&[i as u8]).await.expect("write");
        client.read_exact(&mut byte).await.expect("read");
    }
}
