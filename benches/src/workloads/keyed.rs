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

/// ns per insert + remove, with `pending` other values in the queue.
pub fn queue_churn(queue: Queue, iters: u32, pending: usize) -> f64 {
    runtime().block_on(async move {
        let far = Duration::from_secs(60);
        match queue {
            Queue::Wheel => {
                let q = tokio_wheel::DelayQueue::with_timer(&timer());
                for i in 0..pending {
                    q.insert(i as u64, far + Duration::from_micros(i as u64));
                }
                let start = std::time::Instant::now();
                for i in 0..iters {
                    let key = q.insert(u64::from(i), Duration::from_millis(u64::from(i % 5000)));
                    std::hint::black_box(q.remove(&key));
                }
                start.elapsed().as_nanos() as f64 / f64::from(iters)
            }
            Queue::TokioUtil => {
                let mut q = tokio_util::time::DelayQueue::new();
                for i in 0..pending {
                    q.insert(i as u64, far + Duration::from_micros(i as u64));
                }
                let start = std::time::Instant::now();
                for i in 0..iters {
                    let key = q.insert(u64::from(i), Duration::from_millis(u64::from(i % 5000)));
                    std::hint::black_box(q.remove(&key));
                }
                start.elapsed().as_nanos() as f64 / f64::from(iters)
            }
        }
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
    let far = Duration::from_secs(60);
    match queue {
        Queue::Wheel => {
            let timer = rt.block_on(async { timer() });
            let before = heap();
            let q = tokio_wheel::DelayQueue::with_timer(&timer);
            for i in 0..n {
                q.insert(i as u64, far + Duration::from_micros(i as u64));
            }
            let bytes = (heap() - before) as f64 / n as f64;
            drop(q);
            bytes
        }
        Queue::TokioUtil => {
            let before = heap();
            let mut q = tokio_util::time::DelayQueue::new();
            for i in 0..n {
                q.insert(i as u64, far + Duration::from_micros(i as u64));
            }
            let bytes = (heap() - before) as f64 / n as f64;
            drop(q);
            bytes
        }
    }
}

/// The streams compared for idle reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleIo {
    /// No timeout.
    Plain,
    /// `tokio_wheel::io::TimeoutStream`, 10 ms tick.
    Wheel,
    /// `tokio_io_timeout::TimeoutStream` (tokio's timer).
    TokioIoTimeout,
}

impl IdleIo {
    pub const ALL: [IdleIo; 3] = [IdleIo::Plain, IdleIo::Wheel, IdleIo::TokioIoTimeout];

    pub fn name(self) -> &'static str {
        match self {
            IdleIo::Plain => "plain stream",
            IdleIo::Wheel => "tokio-wheel io::TimeoutStream",
            IdleIo::TokioIoTimeout => "tokio-io-timeout",
        }
    }
}

/// CPU ns (all threads) per round trip of one byte over a duplex pipe whose server
/// side is wrapped as `kind` with a 1 s read timeout: every server read waits
/// (`Pending`) once, then makes progress, so each arms and disarms its timeout.
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
