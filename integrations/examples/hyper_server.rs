//! A hyper 1.x HTTP/1 server whose timers run on the wheel, with a few keep-alive
//! clients and one that never finishes its request head.
//!
//! ```text
//! cargo run --release -p tokio-wheel-integrations --example hyper_server
//! ```
//!
//! `http1::Builder::timer(timer.clone())` is the whole hookup: hyper then arms its
//! header-read timeout (and keep-alive timers) through `hyper::rt::Timer`, which the
//! `hyper` feature implements for `Timer`.

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
use tokio_wheel::Timer;

const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(500);
const CLIENTS: usize = 3;
const REQUESTS: usize = 100;

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
}

#[tokio::main]
async fn main() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .expect("a valid tick");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    println!("serving on http://{addr}, header read timeout {HEADER_READ_TIMEOUT:?}");

    // The server: one task per connection, all on the wheel's timer; it stops after
    // the keep-alive clients and the slow one have come and gone.
    let server = tokio::spawn({
        let timer = timer.clone();
        async move {
            let mut connections = tokio::task::JoinSet::new();
            for _ in 0..CLIENTS + 1 {
                let (stream, peer) = listener.accept().await.unwrap();
                let builder = http1::Builder::new()
                    .timer(timer.clone())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .clone();
                connections.spawn(async move {
                    let served = builder
                        .serve_connection(TokioIo::new(stream), service_fn(hello))
                        .await;
                    (peer, served)
                });
            }
            while let Some(done) = connections.join_next().await {
                match done.unwrap() {
                    (peer, Ok(())) => println!("server: {peer} closed its connection"),
                    (peer, Err(e)) => println!("server: dropped {peer}: {e}"),
                }
            }
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

    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }
    server.await.unwrap();
    let stats = timer.stats();
    println!(
        "timer: {} pending, {} fired (the slow client's header timeout), {} cancelled \
         (header timeouts of heads that arrived), lateness {}",
        stats.pending, stats.fired, stats.cancelled, stats.lateness
    );
    assert_eq!(stats.pending, 0);
    assert_eq!(stats.fired, 1);
}
