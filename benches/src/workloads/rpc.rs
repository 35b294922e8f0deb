//! *rpc*: a TCP echo over 127.0.0.1, each request's read wrapped in a timeout, so that
//! a timer's cost shows as a share of what a request costs anyway.
//!
//! A server that reads requests under a deadline registers a timer when the read
//! finds no data and cancels it when the data arrives: one register and one cancel
//! per request, with a real waker, next to four system calls and two trips through
//! the I/O driver. The workload measures that share against the same echo without a
//! timeout, on the runtime such a server runs (multi-thread, I/O driver enabled).
//!
//! The differences are a few per cent of a request, less than what one run of the echo
//! varies by on a shared machine. So one [`Echo`] (runtime, server, connections) serves
//! every kind of timeout, switched between short phases: the kinds take turns on the
//! same sockets and threads, and each phase is compared with the no-timeout phase of
//! its own round.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio_wheel::Timer;

use crate::cpu_ns;
use crate::runtimes::{multi_thread, Flavor};

/// Connections open at once, each with one request in flight.
pub const CONNECTIONS: usize = 200;

/// Bytes per request (and per echoed reply).
const REQUEST: usize = 64;

/// The server's read timeout: long enough never to fire.
const READ_TIMEOUT: Duration = Duration::from_secs(1);

/// How the server bounds each request's read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ReadTimeout {
    /// No timeout: the baseline.
    None,
    /// A [`Timer`] of this crate, built on the server's runtime.
    Wheel,
    /// `tokio_wheel::timeout`: the default timer, whose driver has a thread and a
    /// time-only runtime of its own.
    WheelDefault,
    /// `tokio::time::timeout`, on the server's runtime.
    Tokio,
}

impl ReadTimeout {
    /// All of them, the baseline first.
    pub const ALL: [ReadTimeout; 4] = [
        ReadTimeout::None,
        ReadTimeout::Wheel,
        ReadTimeout::WheelDefault,
        ReadTimeout::Tokio,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ReadTimeout::None => "no timeout",
            ReadTimeout::Wheel => "tokio-wheel Timer::timeout",
            ReadTimeout::WheelDefault => "tokio_wheel::timeout (default timer)",
            ReadTimeout::Tokio => "tokio::time::timeout",
        }
    }

    fn from_u8(n: u8) -> ReadTimeout {
        ReadTimeout::ALL[usize::from(n)]
    }
}

/// What one phase of requests cost, per request.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerRequest {
    /// CPU time of every thread of the process (server, clients, timer drivers), ns.
    pub cpu_ns: f64,
    /// Wall time, ns.
    pub wall_ns: f64,
}

/// An echo server and [`CONNECTIONS`] clients on one two-worker runtime with the I/O
/// driver, the server's read timeout switchable between phases.
#[derive(Debug)]
pub struct Echo {
    rt: Runtime,
    clients: Vec<TcpStream>,
    timeout: Arc<AtomicU8>,
}

impl Echo {
    /// Binds 127.0.0.1, connects every client, starts a server task per connection.
    ///
    /// # Panics
    ///
    /// If a socket operation fails.
    pub fn new() -> Echo {
        let rt = multi_thread(Flavor::Io, 2);
        let timeout = Arc::new(AtomicU8::new(ReadTimeout::None as u8));
        let clients = rt.block_on(async {
            let timer = Timer::new();
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("local address");
            let server_timeout = timeout.clone();
            let server = tokio::spawn(async move {
                for _ in 0..CONNECTIONS {
                    let (stream, _) = listener.accept().await.expect("accept");
                    stream.set_nodelay(true).expect("nodelay");
                    tokio::spawn(serve(stream, server_timeout.clone(), timer.clone()));
                }
            });
            let mut clients = Vec::with_capacity(CONNECTIONS);
            for _ in 0..CONNECTIONS {
                let stream = TcpStream::connect(addr).await.expect("connect");
                stream.set_nodelay(true).expect("nodelay");
                clients.push(stream);
            }
            server.await.expect("accepting");
            clients
        });
        Echo {
            rt,
            clients,
            timeout,
        }
    }

    /// *rpc*: every client sends `per_connection` requests of 64 bytes, one at a time,
    /// with the server reading each under `timeout`; the cost per request.
    ///
    /// # Panics
    ///
    /// If a socket operation fails, or a read times out (a request waited 1 s: the
    /// machine is too disturbed for the figure to mean anything).
    pub fn phase(&mut self, timeout: ReadTimeout, per_connection: u32) -> PerRequest {
        self.timeout.store(timeout as u8, Ordering::Relaxed);
        // The server's reads in progress began under the previous phase's timeout; one
        // request on every connection, untimed, restarts them all under this one.
        self.round_trips(1);
        let (cpu, start) = (cpu_ns(), std::time::Instant::now());
        self.round_trips(per_connection);
        let requests = CONNECTIONS as f64 * f64::from(per_connection);
        PerRequest {
            cpu_ns: (cpu_ns() - cpu) as f64 / requests,
            wall_ns: start.elapsed().as_nanos() as f64 / requests,
        }
    }

    /// `n` requests on every connection at once, each waiting for its echo.
    fn round_trips(&mut self, n: u32) {
        let clients = std::mem::take(&mut self.clients);
        self.clients = self.rt.block_on(async move {
            let mut tasks = tokio::task::JoinSet::new();
            for mut stream in clients {
                tasks.spawn(async move {
                    let request = [7u8; REQUEST];
                    let mut reply = [0u8; REQUEST];
                    for _ in 0..n {
                        stream.write_all(&request).await.expect("write");
                        stream.read_exact(&mut reply).await.expect("read");
                    }
                    stream
                });
            }
            let mut clients = Vec::with_capacity(CONNECTIONS);
            while let Some(stream) = tasks.join_next().await {
                clients.push(stream.expect("client"));
            }
            clients
        });
    }
}

impl Default for Echo {
    fn default() -> Echo {
        Echo::new()
    }
}

/// Echoes until the client closes, each read bounded by the current timeout.
async fn serve(mut stream: TcpStream, timeout: Arc<AtomicU8>, timer: Timer) {
    let mut buf = [0u8; REQUEST];
    loop {
        let read = stream.read(&mut buf);
        let n = match ReadTimeout::from_u8(timeout.load(Ordering::Relaxed)) {
            ReadTimeout::None => read.await,
            ReadTimeout::Wheel => timer.timeout(READ_TIMEOUT, read).await.expect(TIMED_OUT),
            ReadTimeout::WheelDefault => tokio_wheel::timeout(READ_TIMEOUT, read)
                .await
                .expect(TIMED_OUT),
            ReadTimeout::Tokio => tokio::time::timeout(READ_TIMEOUT, read)
                .await
                .expect(TIMED_OUT),
        }
        .expect("server read");
        if n == 0 {
            return;
        }
        stream.write_all(&buf[..n]).await.expect("server write");
    }
}

const TIMED_OUT: &str = "a request waited 1 s for its read: the machine is too disturbed";
