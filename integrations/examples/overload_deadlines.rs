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
//! every request under a 100 ms `TimeoutLayer`, and a fixed number of keep-alive
//! clients (on a runtime of their own) send requests back to back for a fixed window.
//! Most clients ask for work: a few short spins on the clock, yielding between them,
//! more together than two workers get through, so the server's run queue stays full.
//! The others ask for an answer from a slow upstream (a thread of its own standing in
//! for a database or another service), which comes after a random 50–149 ms: many of
//! those requests are waiting, not being polled, when their deadline passes, so their
//! timeout answer comes only as soon as the timer wakes their task through the full
//! run queue, which is what is measured. Each stack runs on a fresh server runtime,
//! the stacks taking turns for a few rounds; each figure is the median of the rounds.
//!
//! Two figures per timed-out upstream request, both after the deadline (the instant the
//! server called the timeout service, plus 100 ms): when the server saw the timeout
//! fire (the connection's task ran with the `Elapsed` error), and when the client
//! received the 503 (the deadline travels in a response header; client and server
//! share the process's clock). Work requests that time out (while being polled, so
//! their timeout is found at their next poll rather than woken) are counted and shown
//! apart.
//!
//! The stacks: tower's `TimeoutLayer::new`, on the server runtime's Tokio timer; this
//! crate's `TimeoutLayer::new` (the default timer of the runtime each request is
//! served on, the server's: 10 ms tick; with this package's feature `test-util`, 1 ms);
//! and `TimeoutLayer::with_timer` on a 1 ms-tick `Timer` built on the server's
//! runtime. It stops by itself in about 20 s; every request must be answered,
//! 200 or 503, or it panics.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_wheel::Timer;
use tower::timeout::error::Elapsed;
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, Service, ServiceExt};

/// Every request's deadline, from the server's call.
const TIMEOUT: Duration = Duration::from_millis(100);

/// How long a handler holds its thread between yields.
const STEP: Duration = Duration::from_micros(100);

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
    /// Keep-alive connections asking for work, one request in flight each.
    pub work_clients: usize,
    /// Each work request asks for a whole number of [`STEP`]s, from 1 to this.
    pub work_steps: u64,
    /// Keep-alive connections asking for the upstream's answer, one request in flight
    /// each.
    pub upstream_clients: usize,
    /// The upstream answers after this plus a whole number of milliseconds below
    /// [`upstream_spread`](Self::upstream_spread), drawn for each request.
    pub upstream_min: Duration,
    /// The spread of the upstream's delays above
    /// [`upstream_min`](Self::upstream_min).
    pub upstream_spread: Duration,
    /// How long the clients keep sending new requests, per stack and round.
    pub window: Duration,
    /// Rounds; every stack runs once in each.
    pub rounds: usize,
}

impl Config {
    /// What `main` runs: enough work requests to keep two workers' run queues full,
    /// each short enough that most are answered within the deadline even so; upstream
    /// delays around the deadline, so about half of those requests miss it.
    pub const RUN: Config = Config {
        work_clients: 300,
        work_steps: 4,
        upstream_clients: 100,
        upstream_min: Duration::from_millis(50),
        upstream_spread: Duration::from_millis(100),
        window: Duration::from_secs(2),
        rounds: 3,
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
    /// Per timed-out upstream request: when the server saw its timeout fire, after the
    /// deadline.
    pub fired: Vec<Duration>,
    /// Per timed-out upstream request: when the client received the 503, after the
    /// deadline.
    pub received: Vec<Duration>,
    /// Per timed-out work request: when the server saw its timeout fire, after the
    /// deadline.
    pub fired_at_work: Vec<Duration>,
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

    /// p50 and p99, ms after the deadline, of when an upstream request's timeout fired
    /// at the server.
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

    /// p50 and p99, ms after the deadline, of when a work request's timeout fired at
    /// the server.
    pub fn fired_at_work_ms(&self) -> (f64, f64) {
        (
            self.median_of_rounds(|r| &r.fired_at_work, 0.5),
            self.median_of_rounds(|r| &r.fired_at_work, 0.99),
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
/// one per client, so the run asks for the same on every stack.
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

/// A call to the upstream: when to answer, and where.
type Call = (Instant, oneshot::Sender<()>);

/// The slow upstream: answers each call when it asks, from a thread of its own, until
/// every sender of calls is gone. Its own timing is not measured and owes nothing to
/// the stacks compared: it only keeps requests waiting while their deadline passes.
fn upstream(calls: mpsc::Receiver<Call>) {
    // Keyed by when, then by arrival, as two calls may ask for the same instant.
    let mut waiting: BTreeMap<(Instant, u64), oneshot::Sender<()>> = BTreeMap::new();
    let mut arrivals = 0;
    loop {
        let call = match waiting.first_key_value() {
            None => calls
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(((at, _), _)) => calls.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match call {
            Ok((at, reply)) => {
                waiting.insert((at, arrivals), reply);
                arrivals += 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        while let Some(call) = waiting.first_entry() {
            if call.key().0 > now {
                break;
            }
            // A request that timed out has dropped its receiver: nothing to answer.
            let _ = call.remove().send(());
        }
    }
}

/// The handler. `/work/{steps}` spins for that many [`STEP`]s, yielding between them,
/// as a handler that computes in pieces does; `/upstream/{ms}` waits for the
/// upstream's answer, due that many milliseconds after the call. Then 200.
async fn handle(
    request: Request<Incoming>,
    upstream: mpsc::Sender<Call>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path();
    let number = |prefix| {
        path.strip_prefix(prefix)
            .and_then(|n: &str| n.parse::<u64>().ok())
    };
    if let Some(steps) = number("/work/") {
        for _ in 0..steps {
            let until = Instant::now() + STEP;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            tokio::task::yield_now().await;
        }
    } else if let Some(ms) = number("/upstream/") {
        let (reply, answered) = oneshot::channel();
        let at = Instant::now() + Duration::from_millis(ms);
        if upstream.send((at, reply)).is_ok() {
            let _ = answered.await;
        }
    }
    Ok(Response::new(Full::new(Bytes::from_static(b"done\n"))))
}

type Handler = BoxCloneService<Request<Incoming>, Response<Full<Bytes>>, BoxError>;

/// The handler, calling `upstream`, under `stack`'s 100 ms timeout; `timer` for
/// [`Stack::WheelExplicit`].
fn under_timeout(stack: Stack, timer: Option<Timer>, upstream: mpsc::Sender<Call>) -> Handler {
    let handler = tower::service_fn(move |request| handle(request, upstream.clone()));
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

/// When the server saw timeouts fire, after their deadlines, by kind of request.
#[derive(Debug, Default)]
struct Fired {
    upstream: Vec<Duration>,
    work: Vec<Duration>,
}

/// Calls `handler`, turning its timeout into a 503 that carries the deadline, and
/// records when the timeout was seen.
async fn answer(
    mut handler: Handler,
    request: Request<Incoming>,
    fired: Arc<Mutex<Fired>>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let waits = request.uri().path().starts_with("/upstream/");
    let handler = handler.ready().await?;
    // Taken before the call, where both layers take theirs: never after the layer's
    // own deadline, so a lateness measured from it is never short.
    let deadline = Instant::now() + TIMEOUT;
    match handler.call(request).await {
        Ok(response) => Ok(response),
        Err(e) if e.is::<Elapsed>() => {
            let late = Instant::now().saturating_duration_since(deadline);
            let mut fired = fired.lock().unwrap();
            if waits {
                fired.upstream.push(late);
            } else {
                fired.work.push(late);
            }
            drop(fired);
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
async fn serve(listener: TcpListener, clients: usize, handler: Handler, fired: Arc<Mutex<Fired>>) {
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

/// What a client asks for.
#[derive(Debug, Clone, Copy)]
enum Ask {
    /// Work: 1 to this many steps.
    Work(u64),
    /// The upstream's answer, after this plus a whole number of milliseconds below
    /// the second.
    Upstream(Duration, Duration),
}

/// One client: requests as `ask` says, one at a time over one connection, until
/// `stop`; what it sent and how each was answered.
async fn client(addr: SocketAddr, stop: Instant, seed: u64, ask: Ask) -> Round {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    let connection = tokio::spawn(connection);
    let mut rng = SplitMix(seed);
    let mut round = Round::default();
    while Instant::now() < stop {
        let path = match ask {
            Ask::Work(steps) => format!("/work/{}", 1 + rng.next() % steps),
            Ask::Upstream(min, spread) => {
                let spread = (spread.as_millis() as u64).max(1);
                format!("/upstream/{}", min.as_millis() as u64 + rng.next() % spread)
            }
        };
        let request = Request::get(path)
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
                if let Ask::Upstream(..) = ask {
                    round
                        .received
                        .push(received.saturating_duration_since(deadline));
                }
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
/// stack, a timer on it) and upstream, the clients on a current-thread runtime of
/// their own.
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
    let fired = Arc::new(Mutex::new(Fired::default()));
    let (calls, answers) = mpsc::channel();
    let upstream = std::thread::spawn(move || upstream(answers));
    let connections = config.work_clients + config.upstream_clients;
    let server = server_rt.spawn(serve(
        listener,
        connections,
        under_timeout(stack, timer, calls),
        fired.clone(),
    ));
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the clients' runtime");
    let mut round = client_rt.block_on(async {
        let stop = Instant::now() + config.window;
        let mut clients = tokio::task::JoinSet::new();
        for seed in 0..connections as u64 {
            let ask = if seed < config.work_clients as u64 {
                Ask::Work(config.work_steps)
            } else {
                Ask::Upstream(config.upstream_min, config.upstream_spread)
            };
            clients.spawn(client(addr, stop, seed, ask));
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
    // The server's handlers, and with them the senders of calls, are gone: the
    // upstream returns.
    drop(server_rt);
    upstream.join().expect("the upstream");
    let fired = std::mem::take(&mut *fired.lock().unwrap());
    (round.fired, round.fired_at_work) = (fired.upstream, fired.work);
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
        "hyper HTTP/1 on 127.0.0.1, {WORKERS} server workers, every request under a {} ms \
         timeout; keep-alive clients on a runtime of their own: {} asking for 1–{} steps \
         of {} µs of work, {} for an upstream's answer after {}–{} ms; {} rounds of {} s \
         per stack, interleaved; median of rounds\n",
        TIMEOUT.as_millis(),
        config.work_clients,
        config.work_steps,
        STEP.as_micros(),
        config.upstream_clients,
        config.upstream_min.as_millis(),
        (config.upstream_min + config.upstream_spread).as_millis() - 1,
        config.rounds,
        config.window.as_secs_f64(),
    );
    println!(
        "| stack | requests (timed out: waiting on the upstream / at work), all rounds | waiting: timeout fired at the server, ms after the deadline, p50 / p99 | waiting: 503 received by the client, ms after the deadline, p50 / p99 | at work: timeout fired at the server, p50 / p99 |"
    );
    println!("|---|---|---|---|---|");
    for report in &reports {
        let sent: usize = report.rounds.iter().map(|r| r.sent).sum();
        let waiting: usize = report.rounds.iter().map(|r| r.fired.len()).sum();
        let at_work: usize = report.rounds.iter().map(|r| r.fired_at_work.len()).sum();
        let (fired_50, fired_99) = report.fired_ms();
        let (received_50, received_99) = report.received_ms();
        let (work_50, work_99) = report.fired_at_work_ms();
        println!(
            "| {} | {sent} ({waiting} / {at_work}) | {fired_50:.1} / {fired_99:.1} | {received_50:.1} / {received_99:.1} | {work_50:.1} / {work_99:.1} |",
            report.stack.name()
        );
    }
    println!(
        "\n({:.0} s; another process on the machine moves every figure)",
        started.elapsed().as_secs_f64()
    );
}
