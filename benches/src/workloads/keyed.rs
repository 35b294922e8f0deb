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

/// ns per insert + remove, with `pending` other values in the queue.
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

/// CPU ns (all threads) per value: `n` values inserted with deadlines spread over
/// 100 ms, each taken by the consumer as it expires.
pub fn queue_expiry(queue: Queue, n: u32) -> f64 {
    runtime().block_on(async move {
        let cpu = cpu_ns();
        let spread = |i: u32| Duration::from_micros(u64::from(i % 100_000));
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

/// Heap bytes per pending value (a `u64`), `n` pending, storage growth included.
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
