//! How long after its deadline a request gets its timeout answer from a saturated
//! hyper server: tower's `TimeoutLayer` (on `tokio::time`) beside this crate's, in one
//! run, as a markdown table.
//!
//! ```text
//! cargo run --release -p tokio-wheel-integrations --example overload_deadlines
//! ```
//!
//! A timeout is for the bad minute: a server behind on its work answers 503 once a
//! request's deadline has passed, and how soon after the deadline that answer leaves
//! is what its clients see. Here a hyper HTTP/1 server on 127.0.0.1 (two workers) runs
//! every request under a 100 ms `TimeoutLayer`; each request's handler works in short
//! spins on the clock, yielding between them, for a length the client picks at random,
//! and a fixed number of keep-alive clients (on a runtime of their own) send requests
//! back to back for a fixed window, so the server's run queue stays full and many
//! requests outlive their deadline. Each stack runs on a fresh server runtime, the
//! stacks taking turns for a few rounds; each figure is the median of the rounds.
//!
//! Two figures per timed-out request, both after the deadline (the instant the server
//! called the timeout service, plus 100 ms): when the server saw the timeout fire
//! (the connection's task ran with the `Elapsed` error), and when the client received
//! the 503 (the deadline travels in a response header; client and server share the
//! process's clock).
//!
//! The stacks: tower's `TimeoutLayer::new`, on the server runtime's Tokio timer; this
//! crate's `TimeoutLayer::new` (the default timer: its own thread, 10 ms tick; with
//! this package's feature `test-util`, a 1 ms-tick timer on the server's runtime
//! instead); and `TimeoutLayer::with_timer` on a 1 ms-tick `Timer` built on the
//! server's runtime. It stops by itself in about 20 s; every request must be answered,
//! 200 or 503, or it panics.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio_wheel::Timer;
use tower::timeout::error::Elapsed;
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, Service, ServiceExt};

/// Every request's deadline, from the server's call.
const TIMEOUT: Duration = Duration::from_millis(100);

/// How long a handler holds its thread between yields.
const STEP: Duration = Duration::from_micros(50);

/// The tick of the explicit `Timer`.
const EXPLICIT_TICK: Duration = Duration::from_millis(1);

/// The server's worker threads (the cores of the project's benchmark host).
const WORKERS: usize = 2;

/// Longer than any answer can take on a working server: a request still unanswered
/// then fails the run rather than hanging it.
const NO_ANSWER: Duration = Duration::from_secs(10);

/// The response header carrying a timed-out request's deadline, in ns since
/// [`origin`].
const DEADLINE_HEADER: &str = "x-deadline-ns";

/// The shape of a run.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Keep-alive connections, each with one request in flight at a time.
    pub clients: usize,
    /// How long the clients keep sending new requests, per stack and round.
    pub window: Duration,
    /// Rounds; every stack runs once in each.
    pub rounds: usize,
    /// Each request asks for a whole number of [`STEP`]s of work, from 1 to this.
    pub max_steps: u64,
}

impl Config {
    /// What `main` runs: the work a request asks for is, on average, about what the
    /// server can do for all clients within the deadline, so many requests miss it
    /// and many make it.
    pub const RUN: Config = Config {
        clients: 400,
        window: Duration::from_secs(2),
        rounds: 3,
        max_steps: 20,
    };
}

/// The timeout stacks compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// `tower::timeout::TimeoutLayer`, on `tokio::time`.
    Tower,
    /// `tokio_wheel::tower::TimeoutLayer::new`: the default timer.
    WheelDefault,
    /// `tokio_wheel::tower::TimeoutLayer::with_timer`, a 1 ms-tick `Timer` on the
    /// server's runtime.
    WheelExplicit,
}

impl Stack {
    /// All of them, tower's first.
    pub const ALL: [Stack; 3] = [Stack::Tower, Stack::WheelDefault, Stack::WheelExplicit];

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Tower => "tower `TimeoutLayer` (tokio::time)",
            Stack::WheelDefault => "tokio-wheel `TimeoutLayer::new` (default timer)",
            Stack::WheelExplicit => "tokio-wheel `TimeoutLayer::with_timer` (1 ms tick)",
        }
    }
}

/// What one stack's run measured.
#[derive(Debug, Default, Clone)]
pub struct Round {
    /// Requests the clients sent.
    pub sent: usize,
    /// Of them, answered 200.
    pub ok: usize,
    /// Of them, answered 503: timed out.
    pub timed_out: usize,
    /// Per timed-out request: when the server saw its timeout fire, after the deadline.
    pub fired: Vec<Duration>,
    /// Per timed-out request: when the client received the 503, after the deadline.
    pub received: Vec<Duration>,
}

/// A stack's rounds, summed up.
#[derive(Debug, Clone)]
pub struct Report {
    /// The stack.
    pub stack: Stack,
    /// Every round's figures, in the order run.
    pub rounds: Vec<Round>,
}

impl Report {
    /// Median over the rounds of `figure` of each round's sorted samples.
    fn median_of_rounds(&self, samples: fn(&Round) -> &[Duration], p: f64) -> f64 {
        let mut figures: Vec<f64> = self
            .rounds
            .iter()
            .map(|r| {
                let mut sorted = samples(r).to_vec();
                sorted.sort();
                ms(percentile(&sorted, p))
            })
            .collect();
        figures.sort_by(f64::total_cmp);
        figures[figures.len() / 2]
    }

    /// p50 and p99, ms after the deadline, of when the timeout fired at the server.
    pub fn fired_ms(&self) -> (f64, f64) {
        (
            self.median_of_rounds(|r| &r.fired, 0.5),
            self.median_of_rounds(|r| &r.fired, 0.99),
        )
    }

    /// p50 and p99, ms after the deadline, of when the client received the 503.
    pub fn received_ms(&self) -> (f64, f64) {
        (
            self.median_of_rounds(|r| &r.received, 0.5),
            self.median_of_rounds(|r| &r.received, 0.99),
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The sample at rank `p` of sorted samples, nearest rank (zero for none).
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The instant deadlines are counted from, shared by server and clients.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// A small, seedable source of request lengths: SplitMix64 (Steele, Lea and Flood),
/// one per client, so the run asks for the same work on every stack.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The handler: `/work/{steps}` spins for that many [`STEP`]s, yielding between
/// them, as a handler that computes in pieces does; then answers 200.
async fn work(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let steps: u64 = request
        .uri()
        .path()
        .strip_prefix("/work/")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for _ in 0..steps {
        let until = Instant::now() + STEP;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        tokio::task::yield_now().await;
    }
    Ok(Response::new(Full::new(Bytes::from_static(b"done\n"))))
}

type Handler = BoxCloneService<Request<Incoming>, Response<Full<Bytes>>, BoxError>;

/// The handler under `stack`'s 100 ms timeout; `timer` for [`Stack::WheelExplicit`].
fn under_timeout(stack: Stack, timer: Option<Timer>) -> Handler {
    let handler = tower::service_fn(work);
    match stack {
        Stack::Tower => {
            BoxCloneService::new(tower::timeout::TimeoutLayer::new(TIMEOUT).layer(handler))
        }
        Stack::WheelDefault => {
            BoxCloneService::new(tokio_wheel::tower::TimeoutLayer::new(TIMEOUT).layer(handler))
        }
        Stack::WheelExplicit => {
            let timer = timer.expect("a timer for the explicit stack");
            BoxCloneService::new(
                tokio_wheel::tower::TimeoutLayer::with_timer(timer, TIMEOUT).layer(handler),
            )
        }
    }
}

/// Calls `handler`, turning its timeout into a 503 that carries the deadline, and
/// records when the timeout was seen.
async fn answer(
    mut handler: Handler,
    request: Request<Incoming>,
    fired: Arc<Mutex<Vec<Duration>>>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let handler = handler.ready().await?;
    // Taken before the call, where both layers take theirs: never after the layer's
    // own deadline, so a lateness measured from it is never short.
    let deadline = Instant::now() + TIMEOUT;
    match handler.call(request).await {
        Ok(response) => Ok(response),
        Err(e) if e.is::<Elapsed>() => {
            fired
                .lock()
                .unwrap()
                .push(Instant::now().saturating_duration_since(deadline));
            let since_origin = deadline.duration_since(origin()).as_nanos();
            Ok(Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .header(DEADLINE_HEADER, since_origin.to_string())
                .body(Full::new(Bytes::from_static(b"timed out\n")))?)
        }
        Err(e) => Err(e),
    }
}

/// Serves `clients` connections, then returns once they have all closed.
async fn serve(
    listener: TcpListener,
    clients: usize,
    handler: Handler,
    fired: Arc<Mutex<Vec<Duration>>>,
) {
    let mut connections = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (stream, _) = listener.accept().await.expect("accept");
        stream.set_nodelay(true).expect("nodelay");
        let (handler, fired) = (handler.clone(), fired.clone());
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                answer(handler.clone(), request, fired.clone())
            });
            http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
        });
    }
    while let Some(connection) = connections.join_next().await {
        connection
            .expect("a connection's task")
            .expect("a connection failed");
    }
}

/// One client: requests of random length, one at a time over one connection, until
/// `stop`; what it sent and how each was answered.
async fn client(addr: SocketAddr, stop: Instant, seed: u64, max_steps: u64) -> Round {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    let connection = tokio::spawn(connection);
    let mut rng = SplitMix(seed);
    let mut round = Round::default();
    while Instant::now() < stop {
        let steps = 1 + rng.next() % max_steps;
        let request = Request::get(format!("/work/{steps}"))
            .header("host", "127.0.0.1")
            .body(Empty::<Bytes>::new())
            .expect("a request");
        round.sent += 1;
        let response = tokio::time::timeout(NO_ANSWER, sender.send_request(request))
            .await
            .expect("a request unanswered")
            .expect("a request failed");
        let received = Instant::now();
        match response.status() {
            StatusCode::OK => round.ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                let deadline: u64 = response.headers()[DEADLINE_HEADER]
                    .to_str()
                    .expect("a deadline")
                    .parse()
                    .expect("a deadline in ns");
                let deadline = origin() + Duration::from_nanos(deadline);
                round
                    .received
                    .push(received.saturating_duration_since(deadline));
                round.timed_out += 1;
            }
            status => panic!("answered {status}"),
        }
        response.into_body().collect().await.expect("a body");
    }
    // Closing the connection ends the server's side of it.
    drop(sender);
    connection
        .await
        .expect("the connection's task")
        .expect("the connection");
    round
}

/// One round of `stack`: a fresh two-worker server runtime (and, for the explicit
/// stack, a timer on it), the clients on a current-thread runtime of their own.
fn round(stack: Stack, config: Config) -> Round {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("the server's runtime");
    let timer = (stack == Stack::WheelExplicit).then(|| {
        Timer::builder()
            .tick(EXPLICIT_TICK)
            .build_on(server_rt.handle())
            .expect("a valid tick")
    });
    let listener = server_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("an address");
    let fired = Arc::new(Mutex::new(Vec::new()));
    let server = server_rt.spawn(serve(
        listener,
        config.clients,
        under_timeout(stack, timer),
        fired.clone(),
    ));
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the clients' runtime");
    let mut round = client_rt.block_on(async {
        let stop = Instant::now() + config.window;
        let mut clients = tokio::task::JoinSet::new();
        for seed in 0..config.clients as u64 {
            clients.spawn(client(addr, stop, seed, config.max_steps));
        }
        let mut all = Round::default();
        while let Some(one) = clients.join_next().await {
            let one = one.expect("a client");
            all.sent += one.sent;
            all.ok += one.ok;
            all.timed_out += one.timed_out;
            all.received.extend(one.received);
        }
        all
    });
    server_rt.block_on(server).expect("the server");
    drop(server_rt);
    round.fired = std::mem::take(&mut *fired.lock().unwrap());
    round
}

/// Every stack for `config.rounds` rounds, a different one first in each round.
pub fn run(config: Config) -> Vec<Report> {
    origin();
    let mut reports: Vec<Report> = Stack::ALL
        .into_iter()
        .map(|stack| Report {
            stack,
            rounds: Vec::new(),
        })
        .collect();
    for r in 0..config.rounds {
        for k in 0..reports.len() {
            let i = (r + k) % reports.len();
            let stack = reports[i].stack;
            reports[i].rounds.push(round(stack, config));
        }
    }
    reports
}

fn main() {
    let config = Config::RUN;
    let started = Instant::now();
    let reports = run(config);
    println!(
        "hyper HTTP/1 on 127.0.0.1, {WORKERS} server workers, {} keep-alive clients on a \
         runtime of their own, each request {} µs × 1–{} steps of work under a {} ms \
         timeout; {} rounds of {} s per stack, interleaved; median of rounds\n",
        config.clients,
        STEP.as_micros(),
        config.max_steps,
        TIMEOUT.as_millis(),
        config.rounds,
        config.window.as_secs_f64(),
    );
    println!(
        "| stack | requests (timed out), all rounds | timeout fired at the server, ms after the deadline, p50 / p99 | 503 received by the client, ms after the deadline, p50 / p99 |"
    );
    println!("|---|---|---|---|");
    for report in &reports {
        let sent: usize = report.rounds.iter().map(|r| r.sent).sum();
        let timed_out: usize = report.rounds.iter().map(|r| r.timed_out).sum();
        let (fired_50, fired_99) = report.fired_ms();
        let (received_50, received_99) = report.received_ms();
        println!(
            "| {} | {sent} ({timed_out}) | {fired_50:.1} / {fired_99:.1} | {received_50:.1} / {received_99:.1} |",
            report.stack.name()
        );
    }
    println!(
        "\n({:.0} s; another process on the machine moves every figure)",
        started.elapsed().as_secs_f64()
    );
}
