//! `impl hyper::rt::Timer for Timer` (feature `hyper`): the trait's contract, and a
//! real hyper 1.x HTTP/1 server on 127.0.0.1 whose header-read timeouts and
//! keep-alive run on the wheel; and `io::TimeoutStream`'s idle timeout under hyper,
//! which lets a long response stream and closes the idle connection after it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::rt::{Sleep as HyperSleep, Timer as HyperTimer};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_wheel::io::TimeoutStream;
use tokio_wheel::Timer;

const TICK: Duration = Duration::from_millis(10);

fn timer() -> Timer {
    Timer::builder().tick(TICK).build().unwrap()
}

fn poll(sleep: &mut Pin<Box<dyn HyperSleep>>) -> Poll<()> {
    sleep.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

/// The address of a boxed sleep, to tell "moved in place" from "replaced".
fn addr(sleep: &Pin<Box<dyn HyperSleep>>) -> *const () {
    &**sleep as *const dyn HyperSleep as *const ()
}

#[tokio::test(start_paused = true)]
async fn reset_moves_the_same_box_and_entry() {
    let timer = timer();
    let mut sleep = HyperTimer::sleep(&timer, Duration::from_secs(5));
    assert!(poll(&mut sleep).is_pending());
    let before = addr(&sleep);
    let start = Instant::now();
    let deadline = HyperTimer::now(&timer) + Duration::from_millis(100);
    timer.reset(&mut sleep, deadline);
    assert_eq!(addr(&sleep), before, "reset replaced the box");
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.reset, stats.cancelled), (1, 1, 0));
    sleep.await;
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(100) && took < Duration::from_millis(100) + TICK);
}

/// A sleep of another timer implementation: `reset` can only replace it.
struct Foreign(Pin<Box<tokio::time::Sleep>>);
impl Future for Foreign {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}
impl HyperSleep for Foreign {}

#[tokio::test(start_paused = true)]
async fn reset_replaces_a_foreign_sleep_with_one_of_ours() {
    let timer = timer();
    let mut sleep: Pin<Box<dyn HyperSleep>> = Box::pin(Foreign(Box::pin(tokio::time::sleep(
        Duration::from_secs(5),
    ))));
    let start = Instant::now();
    timer.reset(
        &mut sleep,
        HyperTimer::now(&timer) + Duration::from_millis(30),
    );
    assert!(sleep.as_mut().downcast_mut_pin::<Foreign>().is_none());
    assert!(poll(&mut sleep).is_pending());
    assert_eq!(timer.pending(), 1);
    sleep.await;
    assert!(start.elapsed() >= Duration::from_millis(30));
    assert!(start.elapsed() < Duration::from_millis(30) + TICK);
}

#[tokio::test(start_paused = true)]
async fn now_is_tokios_clock_and_instants_before_the_timer_are_past() {
    let timer = timer();
    let now = HyperTimer::now(&timer);
    tokio::time::advance(Duration::from_secs(3600)).await;
    // The paused clock moved an hour; std's clock did not.
    assert_eq!(
        HyperTimer::now(&timer) - now,
        Duration::from_secs(3600),
        "now() does not follow the paused clock"
    );
    assert!(std::time::Instant::now() < now + Duration::from_secs(60));
    // Before the timer was built (and two hours before that, where the machine has
    // been up that long): due at once, no panic.
    let start = Instant::now();
    let mut slept = 0;
    for before in [Duration::from_millis(1), Duration::from_secs(7200)] {
        if let Some(past) = now.checked_sub(before) {
            HyperTimer::sleep_until(&timer, past).await;
            slept += 1;
        }
    }
    assert!(slept >= 1, "no instant before the timer to sleep until");
    assert_eq!(start.elapsed(), Duration::ZERO);
}

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

#[tokio::test(start_paused = true)]
async fn a_half_sent_head_is_cut_off_by_header_read_timeout_on_time() {
    const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(500);
    let timer = timer();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted, on_accept) = tokio::sync::oneshot::channel();
    let server = tokio::spawn({
        let timer = timer.clone();
        async move {
            let (stream, _) = listener.accept().await.unwrap();
            accepted.send(()).unwrap();
            // Measured here, in the task that arms and then reads the timeout: the
            // paused clock moves only when every task waits, to the next timer.
            let start = Instant::now();
            let served = http1::Builder::new()
                .timer(timer)
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service_fn(hello))
                .await;
            (start.elapsed(), served)
        }
    });
    let mut client = TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // A guard far beyond the timeout, armed once hyper's timer is (the server arms it
    // in the same poll that accepted): the paused clock reaches it only if the header
    // timeout never fires.
    on_accept.await.unwrap();
    let (took, served) = tokio::time::timeout(Duration::from_secs(3600), server)
        .await
        .expect("the header read timeout never fired")
        .unwrap();
    let err = served.expect_err("a half-sent head was served");
    assert!(err.is_timeout(), "{err}");
    assert!(took >= HEADER_READ_TIMEOUT, "cut off early: {took:?}");
    assert!(took < HEADER_READ_TIMEOUT + TICK, "cut off late: {took:?}");
    // The client sees the connection closed, not a response.
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).await.unwrap();
    assert!(
        rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"),
        "{rest:?}"
    );
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_clients_are_served_and_leave_nothing_pending() {
    const CLIENTS: usize = 8;
    const REQUESTS: usize = 50;
    let timer = timer();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn({
        let timer = timer.clone();
        async move {
            let mut connections = Vec::new();
            for _ in 0..CLIENTS {
                let (stream, _) = listener.accept().await.unwrap();
                let builder = http1::Builder::new()
                    .timer(timer.clone())
                    .header_read_timeout(Duration::from_secs(5))
                    .keep_alive(true)
                    .clone();
                connections.push(tokio::spawn(async move {
                    builder
                        .serve_connection(TokioIo::new(stream), service_fn(hello))
                        .await
                }));
            }
            for connection in connections {
                connection.await.unwrap().expect("a connection failed");
            }
        }
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            tokio::spawn(async move {
                let stream = TcpStream::connect(addr).await.unwrap();
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .unwrap();
                let connection = tokio::spawn(connection);
                for _ in 0..REQUESTS {
                    let request = Request::get("/")
                        .header("host", "127.0.0.1")
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    let response = sender.send_request(request).await.unwrap();
                    assert!(response.status().is_success());
                    let body = response.into_body().collect().await.unwrap();
                    assert_eq!(body.to_bytes(), "hello");
                }
                drop(sender);
                connection.await.unwrap().unwrap();
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    server.await.unwrap();
    let stats = timer.stats();
    assert_eq!(stats.pending, 0, "{stats:?}");
    // The header timers ran on the wheel: hyper 1.x arms one per request head it
    // waits for and drops it once the head is in (a cancel), and none fired.
    assert!(
        stats.cancelled >= (CLIENTS * REQUESTS / 2) as u64,
        "{stats:?}"
    );
    assert_eq!(stats.fired, 0, "{stats:?}");
}

/// How long an HTTP/2 server on hyper-util's `auto::Builder`, pinging every second
/// with a 500 ms keep-alive timeout on `timer`, takes to give up on a client that sent
/// its preface and SETTINGS and then never answers a PING; and the server's error.
async fn h2_keep_alive_gives_up_after<M>(timer: M) -> (Duration, String)
where
    M: HyperTimer + Clone + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).await.unwrap();
    // The preface and an empty SETTINGS frame, then silence (no SETTINGS or PING acks).
    client
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder
        .http1()
        .timer(timer.clone())
        .header_read_timeout(Duration::from_secs(5));
    builder
        .http2()
        .timer(timer)
        .keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_millis(500));
    let start = Instant::now();
    let served = tokio::time::timeout(
        Duration::from_secs(3600),
        builder.serve_connection(TokioIo::new(stream), service_fn(hello)),
    )
    .await
    .expect("the keep-alive timeout never fired");
    let took = start.elapsed();
    let err = served.expect_err("a client that never acks a PING was kept");
    drop(client);
    (took, format!("{err:?}"))
}

#[tokio::test(start_paused = true)]
async fn h2_keep_alive_on_the_auto_builder_times_out_as_with_tokios_timer() {
    let (tokio_took, tokio_err) =
        h2_keep_alive_gives_up_after(hyper_util::rt::TokioTimer::new()).await;
    let timer = timer();
    let (took, err) = h2_keep_alive_gives_up_after(timer.clone()).await;
    assert!(tokio_err.contains("KeepAliveTimedOut"), "{tokio_err}");
    assert!(err.contains("KeepAliveTimedOut"), "{err}");
    // Interval, then the timeout after the PING: each at most a tick late.
    assert_eq!(tokio_took, Duration::from_millis(1500));
    assert!(took >= tokio_took, "early: {took:?}");
    assert!(took < tokio_took + 2 * TICK, "late: {took:?}");
    assert_eq!(timer.pending(), 0);
}

/// An HTTP/2 client that answers PINGs keeps an idle connection through many
/// keep-alive rounds (each a `reset` of the same sleep), then is served.
#[tokio::test(start_paused = true)]
async fn h2_keep_alive_pings_answered_keep_an_idle_connection_open() {
    let timer = timer();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn({
        let timer = timer.clone();
        async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            builder
                .http2()
                .timer(timer)
                .keep_alive_interval(Duration::from_secs(1))
                .keep_alive_timeout(Duration::from_millis(500));
            builder
                .serve_connection(TokioIo::new(stream), service_fn(hello))
                .await
                .map_err(|e| e.to_string())
        }
    });
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(stream),
    )
    .await
    .unwrap();
    let connection = tokio::spawn(connection);
    for _ in 0..3 {
        // Idle for ten keep-alive intervals, then a request on the same connection.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let request = Request::get("http://127.0.0.1/")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender
            .send_request(request)
            .await
            .expect("connection dropped");
        assert!(response.status().is_success());
        let body = response.into_body().collect().await.unwrap();
        assert_eq!(body.to_bytes(), "hello");
    }
    drop(sender);
    connection.await.unwrap().unwrap();
    server
        .await
        .unwrap()
        .expect("the server dropped a live client");
    let stats = timer.stats();
    assert_eq!(stats.pending, 0, "{stats:?}");
    // About 30 pings: their sleeps fired, and were moved for each PING's timeout.
    assert!(stats.fired >= 20, "{stats:?}");
}

/// How long after its response an idle pooled connection of hyper-util's legacy
/// client, with a 1 s `pool_idle_timeout` on `timer`, is closed (as the server sees it).
async fn pooled_connection_closed_after<M>(timer: M) -> Duration
where
    M: HyperTimer + Clone + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service_fn(hello))
            .await
            .unwrap();
        Instant::now()
    });
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(1))
        .pool_timer(timer)
        .build_http::<Empty<Bytes>>();
    let uri: hyper::Uri = format!("http://{addr}/").parse().unwrap();
    let response = client.get(uri).await.unwrap();
    response.into_body().collect().await.unwrap();
    let idle_since = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(3600), server)
        .await
        .expect("the idle pooled connection was never closed")
        .unwrap();
    drop(client);
    closed - idle_since
}

#[tokio::test(start_paused = true)]
async fn legacy_client_pool_idle_timeout_closes_idle_connections_on_the_wheel() {
    let with_tokio = pooled_connection_closed_after(hyper_util::rt::TokioTimer::new()).await;
    let timer = timer();
    let with_wheel = pooled_connection_closed_after(timer.clone()).await;
    // hyper-util checks every `pool_idle_timeout` for connections idle longer than it.
    for took in [with_tokio, with_wheel] {
        assert!(took >= Duration::from_secs(1), "early: {took:?}");
        assert!(took < Duration::from_secs(2) + 2 * TICK, "late: {took:?}");
    }
    tokio::task::yield_now().await;
    assert_eq!(timer.pending(), 0, "{:?}", timer.stats());
}

/// How long hyper-util's `auto::Builder`, with a 500 ms header-read timeout on `timer`,
/// takes to drop a client that sends half a request head.
async fn auto_h1_half_head_cut_off_after<M>(timer: M) -> Duration
where
    M: HyperTimer + Clone + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder
        .http1()
        .timer(timer)
        .header_read_timeout(Duration::from_millis(500));
    let start = Instant::now();
    let served = tokio::time::timeout(
        Duration::from_secs(3600),
        builder.serve_connection(TokioIo::new(stream), service_fn(hello)),
    )
    .await
    .expect("the header read timeout never fired");
    let took = start.elapsed();
    served.expect_err("a half-sent head was served");
    took
}

#[tokio::test(start_paused = true)]
async fn auto_builder_http1_header_read_timeout_as_with_tokios_timer() {
    let with_tokio = auto_h1_half_head_cut_off_after(hyper_util::rt::TokioTimer::new()).await;
    let timer = timer();
    let took = auto_h1_half_head_cut_off_after(timer.clone()).await;
    assert_eq!(with_tokio, Duration::from_millis(500));
    assert!(took >= with_tokio && took < with_tokio + TICK, "{took:?}");
    assert_eq!(timer.pending(), 0);
}

/// `reset` in every state hyper leaves a sleep in, polled by a task afterwards as hyper
/// does: the task is woken at the new deadline (never before), whatever came before.
#[tokio::test(start_paused = true)]
async fn reset_in_every_state_wakes_the_task_at_the_new_deadline() {
    let timer = timer();
    let ms = Duration::from_millis;
    // (what to do before the reset, how far ahead the new deadline is)
    for (state, ahead) in [
        ("never polled", ms(300)),
        ("pending", ms(300)),
        ("pending", ms(30)),
        ("fired", ms(300)),
        ("fired, not polled since", ms(300)),
    ] {
        let mut sleep = tokio_test::task::spawn(HyperTimer::sleep(&timer, ms(100)));
        match state {
            "never polled" => {}
            "pending" => assert!(sleep.poll().is_pending()),
            _ => {
                assert!(sleep.poll().is_pending());
                tokio::time::advance(ms(100)).await;
                timer.catch_up().await;
                assert!(sleep.is_woken());
                if state == "fired" {
                    assert!(sleep.poll().is_ready());
                }
            }
        }
        let start = Instant::now();
        HyperTimer::reset(&timer, &mut sleep, HyperTimer::now(&timer) + ahead);
        assert!(sleep.poll().is_pending(), "{state}: ready at once");
        // Not woken before the new deadline...
        tokio::time::advance(ahead - ms(1)).await;
        timer.catch_up().await;
        assert!(!sleep.is_woken(), "{state}: woken early");
        assert!(sleep.poll().is_pending(), "{state}: ready early");
        // ...and woken within a tick after it.
        tokio::time::advance(ms(1) + TICK).await;
        timer.catch_up().await;
        assert!(
            sleep.is_woken(),
            "{state}: not woken after {:?}",
            start.elapsed()
        );
        assert!(sleep.poll().is_ready());
    }
    // A reset to a deadline already past: ready on the next poll, woken if it was pending.
    for polled in [false, true] {
        let mut sleep = tokio_test::task::spawn(HyperTimer::sleep(&timer, ms(100)));
        if polled {
            assert!(sleep.poll().is_pending());
        }
        let past = HyperTimer::now(&timer) - ms(50);
        HyperTimer::reset(&timer, &mut sleep, past);
        assert_eq!(sleep.is_woken(), polled);
        timer.catch_up().await;
        assert!(sleep.poll().is_ready(), "polled before: {polled}");
    }
    assert_eq!(timer.pending(), 0);
}

/// hyper's timer resets a sleep that another `Timer` made, on a clock an hour ahead of
/// its own (a paused runtime, advanced): the new deadline, `now() + 200 ms` by the
/// resetting timer, must not be read on the other timer's clock, where it has passed.
#[test]
fn reset_of_a_sleep_from_a_timer_on_another_clock_is_never_early() {
    const AHEAD: Duration = Duration::from_millis(200);
    let real = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let hypers = Timer::builder().tick(TICK).build_on(real.handle()).unwrap();
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    paused.block_on(async {
        let other = timer();
        tokio::time::advance(Duration::from_secs(3600)).await;
        let mut sleep = HyperTimer::sleep(&other, Duration::from_secs(7200));
        assert!(poll(&mut sleep).is_pending());
        let start = std::time::Instant::now();
        HyperTimer::reset(&hypers, &mut sleep, HyperTimer::now(&hypers) + AHEAD);
        other.catch_up().await;
        assert!(
            poll(&mut sleep).is_pending(),
            "ready at once, {AHEAD:?} early by the resetting timer's clock"
        );
        // Not under `tokio::time::timeout`: the paused clock would jump to its end at
        // once, with nothing on this runtime to wait for but a wake from the other.
        sleep.await;
        let took = start.elapsed();
        assert!(took >= AHEAD, "early: {took:?}");
    });
    drop(paused);
    real.shutdown_background();
}

/// A response body of `left` chunks, one every `period` on Tokio's clock (a download,
/// server-sent events), recording when it yields its last chunk.
struct Trickle {
    left: usize,
    period: Duration,
    next: Pin<Box<tokio::time::Sleep>>,
    last: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
}

impl hyper::body::Body for Trickle {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        std::task::ready!(self.next.as_mut().poll(cx));
        self.left -= 1;
        let next = self.next.deadline() + self.period;
        self.next.as_mut().reset(next);
        *self.last.lock().unwrap() = Some(Instant::now());
        Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(
            b"chunk\n",
        )))))
    }
}

/// What [`stream_to_a_silent_client`] saw: how many bytes the client received, whether
/// its body ended cleanly, when the server's last chunk went out and when the server's
/// connection ended, with how.
struct Streamed {
    received: usize,
    complete: bool,
    last_chunk: Option<Instant>,
    closed: Instant,
    served: Result<(), hyper::Error>,
}

/// A hyper HTTP/1 server on 127.0.0.1 serving one connection through
/// `TokioIo<TimeoutStream<TcpStream>>` (set up by `configure`), whose one response
/// streams 30 chunks 100 ms apart (3 s) to a client that sends its request and then
/// nothing, and keeps its connection open until the server closes it.
async fn stream_to_a_silent_client(
    configure: impl FnOnce(&mut TimeoutStream<TcpStream>) + Send + 'static,
) -> Streamed {
    const CHUNKS: usize = 30;
    const PERIOD: Duration = Duration::from_millis(100);
    let timer = timer();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let last = std::sync::Arc::new(std::sync::Mutex::new(None));
    let server = tokio::spawn({
        let last = last.clone();
        async move {
            let (socket, _) = listener.accept().await.unwrap();
            let mut socket = TimeoutStream::with_timer(socket, &timer);
            configure(&mut socket);
            let service = service_fn(move |_: Request<Incoming>| {
                let body = Trickle {
                    left: CHUNKS,
                    period: PERIOD,
                    next: Box::pin(tokio::time::sleep(PERIOD)),
                    last: last.clone(),
                };
                async move { Ok::<_, Infallible>(Response::new(body)) }
            });
            let served = http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
            (served, Instant::now())
        }
    });
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    let request = Request::get("/")
        .header("host", "127.0.0.1")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let mut body = response.into_body();
    let (mut received, mut complete) = (0, false);
    loop {
        match body.frame().await {
            Some(Ok(frame)) => received += frame.data_ref().map_or(0, |data| data.len()),
            Some(Err(_)) => break,
            None => {
                complete = true;
                break;
            }
        }
    }
    // The client stays silent with its connection open: only the server can end it.
    let (served, closed) = tokio::time::timeout(Duration::from_secs(3600), server)
        .await
        .expect("the server never closed the connection")
        .unwrap();
    drop(sender);
    let _ = connection.await;
    let last_chunk = *last.lock().unwrap();
    Streamed {
        received,
        complete,
        last_chunk,
        closed,
        served,
    }
}

/// `TimeoutStream::set_idle_timeout` under hyper: a response streamed for 3 s to a
/// client that sends nothing is not cut by a 500 ms idle timeout (hyper's read stays
/// pending meanwhile, but the writes count), and the keep-alive connection, idle
/// afterwards, is closed one idle timeout after the last chunk, never earlier.
#[tokio::test(start_paused = true)]
async fn idle_timeout_lets_a_long_response_stream_then_closes_the_idle_connection() {
    const IDLE: Duration = Duration::from_millis(500);
    let streamed = stream_to_a_silent_client(|socket| socket.set_idle_timeout(Some(IDLE))).await;
    assert!(streamed.complete, "the response was cut");
    assert_eq!(streamed.received, 30 * b"chunk\n".len());
    if let Err(err) = &streamed.served {
        assert!(format!("{err:?}").contains("TimedOut"), "{err:?}");
    }
    let last_chunk = streamed.last_chunk.expect("chunks were sent");
    let idle = streamed.closed - last_chunk;
    assert!(idle >= IDLE, "closed early: {idle:?}");
    assert!(
        idle < IDLE + TICK + Duration::from_millis(1),
        "closed late: {idle:?}"
    );
}

/// Why the idle timeout: with only a 500 ms read timeout, the same response is cut,
/// since hyper keeps a read pending while it writes.
#[tokio::test(start_paused = true)]
async fn a_read_timeout_alone_cuts_a_long_response_to_a_silent_client() {
    const READ: Duration = Duration::from_millis(500);
    let streamed = stream_to_a_silent_client(|socket| socket.set_read_timeout(Some(READ))).await;
    assert!(
        !streamed.complete,
        "a read timeout let the response through"
    );
    assert!(streamed.received < 30 * b"chunk\n".len());
    let err = streamed.served.expect_err("served to the end");
    assert!(format!("{err:?}").contains("TimedOut"), "{err:?}");
}
