//! A hyper 1.x HTTP/1 server whose timers run on the wheel, with a few keep-alive
//! clients, one that never finishes its request head, and one that asks for a large
//! response and never reads it.
//!
//! ```text
//! cargo run --release -p tokio-wheel-integrations --example hyper_server
//! ```
//!
//! `http1::Builder::timer(timer.clone())` is the whole hookup: hyper then arms its
//! header-read timeout (and keep-alive timers) through `hyper::rt::Timer`, which the
//! `hyper` feature implements for `Timer`. Each connection is also wrapped in an
//! `io::TimeoutStream` with an idle timeout, which cuts it once nothing has moved
//! either way for that long: a client that stops reading a response it asked for
//! (hyper arms no timer there), never one still being sent a long response.

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_wheel::io::TimeoutStream;
use tokio_wheel::Timer;

const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(500);
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);
const CLIENTS: usize = 3;
const REQUESTS: usize = 100;
/// More than the socket buffers of both ends hold, so that a client that does not
/// read stalls the server's writes.
const LARGE: usize = 64 << 20;

async fn hello(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match request.uri().path() {
        "/large" => Bytes::from(vec![b'x'; LARGE]),
        _ => Bytes::from_static(b"hello\n"),
    };
    Ok(Response::new(Full::new(body)))
}

#[tokio::main]
async fn main() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .expect("a valid tick");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    println!(
        "serving on http://{addr}, header read timeout {HEADER_READ_TIMEOUT:?}, \
         idle timeout {IDLE_TIMEOUT:?}"
    );

    // The server: one task per connection, all on the wheel's timer; it stops after
    // the keep-alive clients, the slow one and the one that stops reading have come
    // and gone, and returns how long each connection lasted and how it ended.
    let server = tokio::spawn({
        let timer = timer.clone();
        async move {
            let mut connections = tokio::task::JoinSet::new();
            for _ in 0..CLIENTS + 2 {
                let (stream, peer) = listener.accept().await.unwrap();
                let accepted = Instant::now();
                let mut stream = TimeoutStream::with_timer(stream, &timer);
                stream.set_idle_timeout(Some(IDLE_TIMEOUT));
                let builder = http1::Builder::new()
                    .timer(timer.clone())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .clone();
                connections.spawn(async move {
                    let served = builder
                        .serve_connection(TokioIo::new(stream), service_fn(hello))
                        .await;
                    (
                        peer,
                        served.map_err(|e| format!("{e} ({e:?})")),
                        accepted.elapsed(),
                    )
                });
            }
            let mut ended = Vec::new();
            while let Some(done) = connections.join_next().await {
                let (peer, served, lasted) = done.unwrap();
                match &served {
                    Ok(()) => println!("server: {peer} closed its connection"),
                    Err(e) => println!("server: dropped {peer} after {lasted:?}: {e}"),
                }
                ended.push((peer, served, lasted));
            }
            ended
        }
    });

    // Keep-alive clients: many requests each over one connection.
    let mut clients = tokio::task::JoinSet::new();
    for n in 0..CLIENTS {
        clients.spawn(async move {
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
                response.into_body().collect().await.unwrap();
            }
            drop(sender);
            connection.await.unwrap().unwrap();
            println!("client {n}: {REQUESTS} requests answered over one connection");
        });
    }

    // The slow client: half a request head, then nothing.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    let sent = Instant::now();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    slow.read_to_end(&mut reply).await.unwrap();
    println!(
        "slow client: disconnected after {:?} ({} bytes of reply)",
        sent.elapsed(),
        reply.len()
    );

    // The client that stops reading: it asks for a large response and never reads
    // it, so the server's writes stall; the idle timeout closes the connection.
    let mut stuck = TcpStream::connect(addr).await.unwrap();
    let stuck_addr = stuck.local_addr().unwrap();
    stuck
        .write_all(b"GET /large HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();

    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }
    let ended = server.await.unwrap();
    let (_, served, lasted) = ended
        .iter()
        .find(|(peer, _, _)| *peer == stuck_addr)
        .expect("the stuck client's connection");
    let err = served
        .as_ref()
        .expect_err("a client that never reads was served");
    assert!(err.contains("TimedOut"), "{err}");
    assert!(*lasted >= IDLE_TIMEOUT, "cut early: {lasted:?}");
    drop(stuck);
    let stats = timer.stats();
    println!(
        "timer: {} pending, {} fired (the slow client's header timeout, the stuck \
         client's idle timeout), {} cancelled (header timeouts of heads that arrived, \
         idle timeouts of connections closed), lateness {}",
        stats.pending, stats.fired, stats.cancelled, stats.lateness
    );
    assert_eq!(stats.pending, 0);
    assert!(stats.fired >= 2, "{stats:?}");
}
