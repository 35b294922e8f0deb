//! An axum server whose timeouts run on the wheel: request deadlines through this
//! crate's `TimeoutLayer` under axum's `HandleErrorLayer` recipe, header-read
//! timeouts through hyper, and an idle timeout on each connection through
//! `io::TimeoutStream`, served with hyper-util's `auto::Builder` and shut down
//! gracefully. Four clients show each: a fast request (200), a slow one (408, no
//! earlier than the request timeout), one that never finishes its head (closed after
//! the header-read timeout), and one streamed a response for longer than the idle
//! timeout while it sends nothing (not cut: the writes count). Binds 127.0.0.1 only,
//! and stops by itself.
//!
//! ```text
//! cargo run --release -p tokio-wheel-integrations --example axum_server
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Frame};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_wheel::io::TimeoutStream;
use tokio_wheel::tower::TimeoutLayer;
use tokio_wheel::Timer;
use tower::timeout::error::Elapsed; // the layer's error is tower's, as with tower's layer
use tower::{BoxError, ServiceBuilder};

const REQUEST_TIMEOUT: Duration = Duration::from_millis(300);
const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a connection may move no byte either way, while a read or write waits.
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);
/// `/stream`: this many chunks, one every `CHUNK_EVERY` (twice the idle timeout).
const CHUNKS: u32 = 10;
const CHUNK_EVERY: Duration = Duration::from_millis(200);
/// Real clock on a machine that may be busy: how late a timeout may be here.
const TOLERANCE: Duration = Duration::from_secs(2);

/// A response body of `left` chunks, one every `CHUNK_EVERY` (a download, server-sent
/// events): the response future is ready at once, the body takes its time.
struct Trickle {
    left: u32,
    next: Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for Trickle {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        std::task::ready!(self.next.as_mut().poll(cx));
        self.left -= 1;
        let next = self.next.deadline() + CHUNK_EVERY;
        self.next.as_mut().reset(next);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"chunk\n")))))
    }
}

fn app(timer: &Timer) -> Router {
    Router::new()
        .route("/fast", get(|| async { "fast\n" }))
        .route(
            "/stream",
            get(|| async {
                Body::new(Trickle {
                    left: CHUNKS,
                    next: Box::pin(tokio::time::sleep(CHUNK_EVERY)),
                })
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "slow\n"
            }),
        )
        // axum's recipe for tower's timeout; only the layer comes from tokio_wheel.
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|err: BoxError| async move {
                    if err.is::<Elapsed>() {
                        StatusCode::REQUEST_TIMEOUT
                    } else {
                        StatusCode::INTERNAL_SERVER_ERROR
                    }
                }))
                .layer(TimeoutLayer::with_timer(timer.clone(), REQUEST_TIMEOUT)),
        )
}

/// Accepts connections until `stop` fires, then waits for those open to finish.
async fn serve(
    listener: TcpListener,
    app: Router,
    timer: Timer,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // hyper arms its header-read timeout only if it has a timer: here, the wheel.
    builder
        .http1()
        .timer(timer.clone())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => accepted.expect("accept"),
            _ = &mut stop => break,
        };
        // Cut once nothing has moved either way for IDLE_TIMEOUT.
        let mut stream = TimeoutStream::with_timer(stream, &timer);
        stream.set_idle_timeout(Some(IDLE_TIMEOUT));
        let service = TowerToHyperService::new(app.clone());
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            match connection.await {
                Ok(()) => println!("server: {peer} closed its connection"),
                Err(e) => println!("server: closed {peer}'s connection: {e}"),
            }
        });
    }
    println!("server: stopped accepting; waiting for open connections");
    graceful.shutdown().await;
}

/// GET `path` on a new connection: the status and how long it took.
async fn get_status(addr: std::net::SocketAddr, path: &str) -> (StatusCode, Duration) {
    let start = Instant::now();
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", "127.0.0.1")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    (response.status(), start.elapsed())
}

/// GET `/stream` and read the whole body, sending nothing meanwhile: the bytes
/// received and how long it took.
async fn get_streamed(addr: std::net::SocketAddr) -> (usize, Duration) {
    let start = Instant::now();
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let request = hyper::Request::get("/stream")
        .header("host", "127.0.0.1")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the stream was cut");
    (body.to_bytes().len(), start.elapsed())
}

#[tokio::main]
async fn main() {
    let timer = Timer::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    println!(
        "serving on http://{addr}: request timeout {REQUEST_TIMEOUT:?}, \
         header read timeout {HEADER_READ_TIMEOUT:?}, idle timeout {IDLE_TIMEOUT:?}"
    );
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(serve(listener, app(&timer), timer.clone(), stopped));

    let fast = tokio::spawn(get_status(addr, "/fast"));
    let slow = tokio::spawn(get_status(addr, "/slow"));
    let streamed = tokio::spawn(get_streamed(addr));

    // A client that sends half a request head, then nothing.
    let mut stalled = TcpStream::connect(addr).await.expect("connect");
    let sent = Instant::now();
    stalled
        .write_all(b"GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("write");
    let mut reply = Vec::new();
    // The server closes the connection (a reset counts too), which ends the read;
    // bounded, so that a server that never closes it fails here rather than hangs.
    let closed = tokio::time::timeout(
        HEADER_READ_TIMEOUT + TOLERANCE,
        stalled.read_to_end(&mut reply),
    )
    .await;
    let cut_off = sent.elapsed();
    assert!(closed.is_ok(), "still open after {cut_off:?}");
    println!(
        "stalled client: connection closed after {cut_off:?} ({} bytes of reply)",
        reply.len()
    );
    assert!(cut_off >= HEADER_READ_TIMEOUT, "closed early: {cut_off:?}");
    assert!(
        cut_off < HEADER_READ_TIMEOUT + TOLERANCE,
        "closed late: {cut_off:?}"
    );

    let (status, took) = fast.await.expect("fast client");
    println!("fast client: {status} after {took:?}");
    assert_eq!(status, StatusCode::OK);
    let (status, took) = slow.await.expect("slow client");
    println!("slow client: {status} after {took:?}");
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(took >= REQUEST_TIMEOUT, "timed out early: {took:?}");
    assert!(
        took < REQUEST_TIMEOUT + TOLERANCE,
        "timed out late: {took:?}"
    );

    let (received, took) = streamed.await.expect("streaming client");
    println!("streaming client: {received} bytes over {took:?}, sending nothing");
    assert_eq!(received, CHUNKS as usize * b"chunk\n".len());
    assert!(
        took >= CHUNK_EVERY * CHUNKS && took > IDLE_TIMEOUT,
        "{took:?}"
    );

    stop.send(()).expect("the server is running");
    server.await.expect("server");
    let stats = timer.stats();
    println!(
        "timer: {} pending, {} fired (the slow request's deadline, the stalled \
         client's header timeout, and the streamed connection's idle timeout moving \
         on about once a timeout, never cutting it), {} cancelled, lateness {}",
        stats.pending, stats.fired, stats.cancelled, stats.lateness
    );
    assert_eq!(stats.pending, 0);
    assert!(stats.fired >= 2, "{stats:?}");
}
