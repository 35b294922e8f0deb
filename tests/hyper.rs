//! `impl hyper::rt::Timer for Timer` (feature `hyper`): the trait's contract, and a
//! real hyper 1.x HTTP/1 server on 127.0.0.1 whose header-read timeouts and
//! keep-alive run on the wheel.
#![cfg(feature = "hyper")]

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
    // Before the timer was built (and an hour before that): due at once, no panic.
    let start = Instant::now();
    for before in [Duration::from_secs(1), Duration::from_secs(7200)] {
        if let Some(past) = now.checked_sub(before) {
            HyperTimer::sleep_until(&timer, past).await;
        }
    }
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
