//! `io::TimeoutStream` under hyper: one request served through
//! `TokioIo<TimeoutStream<TcpStream>>` on 127.0.0.1, then the idle keep-alive
//! connection cut by the read timeout (real clock, tolerant bounds on both sides).

use std::convert::Infallible;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_wheel::io::TimeoutStream;
use tokio_wheel::Timer;

fn timer() -> Timer {
    Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .unwrap()
}

/// hyper serves a request through `TokioIo<TimeoutStream<TcpStream>>`, then cuts the
/// idle keep-alive connection by the read timeout.
#[tokio::test]
async fn hyper_serves_through_it_and_the_idle_connection_is_cut() {
    use http_body_util::{BodyExt, Empty, Full};
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response};
    use hyper_util::rt::TokioIo;

    let timer = timer();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let timeout = Duration::from_millis(300);
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut socket = TimeoutStream::with_timer(socket, &timer);
        socket.set_read_timeout(Some(timeout));
        let service = hyper::service::service_fn(|_: Request<Incoming>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello"))))
        });
        let served = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(socket), service)
            .await;
        (served, std::time::Instant::now())
    });
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let client_conn = tokio::spawn(conn);
    let response = sender
        .send_request(Request::get("/").body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"hello");
    let idle_since = std::time::Instant::now();
    // The client's side stays open and silent (its sender and connection task are
    // alive): the server's connection ends only because the read timeout cut it.
    // (hyper reports an error while idle between requests as a clean close.)
    let (served, at) = server.await.unwrap();
    if let Err(err) = served {
        assert!(format!("{err:?}").contains("TimedOut"), "{err:?}");
    }
    let idle = at - idle_since;
    assert!(
        idle >= timeout - Duration::from_millis(50),
        "cut early: {idle:?}"
    );
    assert!(
        idle < timeout + Duration::from_secs(2),
        "cut late: {idle:?}"
    );
    drop(sender);
    let _ = client_conn.await;
}
