//! `io::TimeoutStream`: the read and write timeouts and what counts as progress (the
//! idle timeout, both ways, is `io_idle.rs`). Paused clock over `tokio::io::duplex` for
//! the bounds; real TCP on 127.0.0.1 (real clock, tolerant bounds) for a silent and an
//! active peer. Through hyper: `integrations/tests/io.rs` and, for the idle timeout
//! under a streamed response, `integrations/tests/hyper.rs`.

use std::io::ErrorKind;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_wheel::io::TimeoutStream;

mod common;
use common::{assert_within, timer, LATE};

/// How long a paused test waits for a cut that a broken wrapper never makes.
const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(start_paused = true)]
async fn a_silent_peer_is_cut_after_the_read_timeout_never_early() {
    let timer = timer();
    let (client, _server) = tokio::io::duplex(64);
    let mut client = TimeoutStream::with_timer(client, &timer);
    client.set_read_timeout(Some(Duration::from_millis(750)));
    assert_eq!(client.read_timeout(), Some(Duration::from_millis(750)));
    let start = Instant::now();
    let read = tokio::time::timeout(HOUR, client.read(&mut [0; 8])).await;
    assert_eq!(
        read.expect("never cut").unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    assert_within(Duration::from_millis(750), start.elapsed(), LATE);
    // The next read waits a full timeout again.
    let again = Instant::now();
    let err = client.read(&mut [0; 8]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(Duration::from_millis(750), again.elapsed(), LATE);
}

/// A peer that sends more often than the timeout is never cut, however long the
/// connection lives; when it stops, the reader is cut one timeout after the last byte.
/// Every wait moves the same wheel entry: one pending timer, never more.
#[tokio::test(start_paused = true)]
async fn an_active_peer_is_never_cut_and_each_wait_moves_one_entry() {
    let timer = timer();
    let (client, mut server) = tokio::io::duplex(64);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_secs(1);
    client.set_read_timeout(Some(timeout));
    let writer = tokio::spawn(async move {
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(900)).await;
            server.write_all(b"x").await.unwrap();
        }
        let last = Instant::now();
        (server, last)
    });
    let mut buf = [0; 8];
    for _ in 0..50 {
        assert_eq!(client.read(&mut buf).await.unwrap(), 1);
        assert!(timer.pending() <= 1, "{} pending", timer.pending());
    }
    let stats = timer.stats();
    assert!(stats.reset >= 49, "moved in place: {stats:?}");
    let (_server, last) = writer.await.unwrap();
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(timeout, last.elapsed(), LATE);
}

#[tokio::test(start_paused = true)]
async fn no_timeout_waits_for_ever() {
    let timer = timer();
    let (client, _server) = tokio::io::duplex(64);
    let mut client = TimeoutStream::with_timer(client, &timer);
    client.set_read_timeout(Some(Duration::from_millis(10)));
    client.set_read_timeout(None);
    let read = tokio::time::timeout(Duration::from_secs(3600), client.read(&mut [0; 8])).await;
    assert!(read.is_err(), "a read with no timeout ended: {read:?}");
    assert_eq!(timer.pending(), 0);
}

/// A peer that stops reading: writes fill the pipe, then the write that waits is cut.
#[tokio::test(start_paused = true)]
async fn a_peer_that_stops_reading_cuts_the_write_after_the_write_timeout() {
    let timer = timer();
    let (client, _server) = tokio::io::duplex(16);
    let mut client = TimeoutStream::with_timer(client, &timer);
    client.set_write_timeout(Some(Duration::from_millis(300)));
    assert_eq!(client.write_timeout(), Some(Duration::from_millis(300)));
    let start = Instant::now();
    let err = client.write_all(&[7; 1024]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(Duration::from_millis(300), start.elapsed(), LATE);
    // Reads are not timed by the write timeout.
    assert_eq!(client.read_timeout(), None);
}

/// A stream whose every operation waits for ever (a peer that never acknowledges).
struct Stalled;

impl AsyncRead for Stalled {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Pending
    }
}

impl AsyncWrite for Stalled {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Pending
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Pending
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Pending
    }
}

#[tokio::test(start_paused = true)]
async fn flush_and_shutdown_are_timed_by_the_write_timeout() {
    let timer = timer();
    let mut stream = TimeoutStream::with_timer(Stalled, &timer);
    stream.set_write_timeout(Some(Duration::from_millis(200)));
    let start = Instant::now();
    let flushed = tokio::time::timeout(HOUR, stream.flush())
        .await
        .expect("never cut");
    assert_eq!(flushed.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_within(Duration::from_millis(200), start.elapsed(), LATE);
    let start = Instant::now();
    let shut = tokio::time::timeout(HOUR, stream.shutdown())
        .await
        .expect("never cut");
    assert_eq!(shut.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_within(Duration::from_millis(200), start.elapsed(), LATE);
    let _: &Stalled = stream.get_ref();
    let _: &mut Stalled = stream.get_mut();
    let Stalled = stream.into_inner();
}

#[test]
fn unpin_when_the_stream_is() {
    fn unpin<T: Unpin + Send + Sync + std::fmt::Debug>() {}
    unpin::<TimeoutStream<TcpStream>>();
    unpin::<TimeoutStream<tokio::io::DuplexStream>>();
}

/// Real TCP, real clock: a client that connects and sends nothing is cut by the
/// server's read timeout, no earlier than it and within a tolerant bound.
#[tokio::test]
async fn tcp_a_silent_client_is_cut_no_earlier_than_the_read_timeout() {
    let timer = timer();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = TcpStream::connect(addr).await.unwrap();
    let (socket, _) = listener.accept().await.unwrap();
    let mut socket = TimeoutStream::with_timer(socket, &timer);
    let timeout = Duration::from_millis(300);
    socket.set_read_timeout(Some(timeout));
    let start = std::time::Instant::now();
    let err = socket.read(&mut [0; 64]).await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert!(took >= timeout, "cut early: {took:?}");
    assert!(
        took < timeout + Duration::from_secs(2),
        "cut late: {took:?}"
    );
}

/// Real TCP, real clock: a client that writes every 100 ms for 1.5 s is never cut by
/// a 400 ms read timeout.
#[tokio::test]
async fn tcp_an_active_client_is_never_cut() {
    let timer = timer();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let mut client = TcpStream::connect(addr).await.unwrap();
        for _ in 0..15 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            client.write_all(b"ping").await.unwrap();
        }
        client.shutdown().await.unwrap();
    });
    let (socket, _) = listener.accept().await.unwrap();
    let mut socket = TimeoutStream::with_timer(socket, &timer);
    socket.set_read_timeout(Some(Duration::from_millis(400)));
    let mut received = Vec::new();
    let start = std::time::Instant::now();
    socket.read_to_end(&mut received).await.unwrap();
    assert_eq!(received.len(), 60);
    assert!(start.elapsed() < Duration::from_secs(10));
    client.await.unwrap();
}

/// The pinned setters and accessor, for a `TimeoutStream` that is pinned in place
/// (as one over a `!Unpin` stream must be).
#[tokio::test(start_paused = true)]
async fn pinned_setters_time_a_pinned_stream() {
    let timer = timer();
    let (client, _server) = tokio::io::duplex(16);
    let mut stream = std::pin::pin!(TimeoutStream::with_timer(client, &timer));
    stream
        .as_mut()
        .set_read_timeout_pinned(Some(Duration::from_millis(120)));
    stream
        .as_mut()
        .set_write_timeout_pinned(Some(Duration::from_millis(80)));
    assert_eq!(stream.read_timeout(), Some(Duration::from_millis(120)));
    let _: Pin<&mut tokio::io::DuplexStream> = stream.as_mut().get_pin_mut();
    let start = Instant::now();
    let read = tokio::time::timeout(HOUR, stream.as_mut().read(&mut [0; 4])).await;
    assert_eq!(
        read.expect("never cut").unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    assert_within(Duration::from_millis(120), start.elapsed(), LATE);
    let start = Instant::now();
    let write = tokio::time::timeout(HOUR, stream.as_mut().write_all(&[1; 64])).await;
    assert_eq!(
        write.expect("never cut").unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    assert_within(Duration::from_millis(80), start.elapsed(), LATE);
}

/// A connection loop that writes a heartbeat every 100 ms in `select!` drops and
/// restarts its read each time; the read timeout still times the peer's silence from
/// the first read that found nothing, so a silent peer is cut (a timeout that each
/// restarted read began anew would never fire here). Re-setting the timeout starts
/// the next wait afresh.
#[tokio::test(start_paused = true)]
async fn a_read_restarted_by_select_keeps_timing_the_peers_silence() {
    let timer = timer();
    let (client, mut server) = tokio::io::duplex(1024);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_millis(300);
    client.set_read_timeout(Some(timeout));
    server.write_all(b"last").await.unwrap();
    // The peer takes the heartbeats and sends nothing more.
    let peer = tokio::spawn(async move {
        let mut sink = Vec::new();
        server.read_to_end(&mut sink).await
    });
    let mut buf = [0; 8];
    assert_eq!(client.read(&mut buf).await.unwrap(), 4);
    let silent_since = Instant::now();
    let mut heartbeat = tokio::time::interval(Duration::from_millis(100));
    let mut heartbeats = 0;
    let err = loop {
        tokio::select! {
            read = client.read(&mut buf) => break read.unwrap_err(),
            _ = heartbeat.tick() => {
                client.write_all(b".").await.unwrap();
                heartbeats += 1;
            }
        }
        assert!(silent_since.elapsed() < HOUR, "never cut");
    };
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(timeout, silent_since.elapsed(), LATE);
    assert!(
        heartbeats >= 3,
        "the read was restarted: {heartbeats} heartbeats"
    );

    // A wait abandoned long ago does not cut the next read at once once the timeout
    // is set again.
    let mut abandoned = tokio_test::task::spawn(client.read(&mut buf));
    assert!(abandoned.poll().is_pending());
    drop(abandoned);
    tokio::time::sleep(timeout * 10).await;
    client.set_read_timeout(Some(timeout));
    let start = Instant::now();
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(timeout, start.elapsed(), LATE);
    drop(client);
    assert!(peer.await.unwrap().is_ok());
}

/// A peer that stopped reading, and a loop that flushes a heartbeat beside the stuck
/// write (in `select!`, which restarts the write): a flush that completes at once
/// moved no byte, so the write is cut one write timeout after it first waited.
#[tokio::test(start_paused = true)]
async fn a_stuck_write_is_cut_whatever_else_the_loop_flushes() {
    let timer = timer();
    let (client, _server) = tokio::io::duplex(16);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_millis(300);
    client.set_write_timeout(Some(timeout));
    let mut heartbeat = tokio::time::interval(Duration::from_millis(100));
    let start = Instant::now();
    let mut flushes = 0;
    let err = loop {
        tokio::select! {
            written = client.write_all(&[7; 1024]) => break written.unwrap_err(),
            _ = heartbeat.tick() => {
                client.flush().await.unwrap();
                flushes += 1;
            }
        }
        assert!(start.elapsed() < HOUR, "never cut");
    };
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(timeout, start.elapsed(), LATE);
    assert!(flushes >= 3, "the write was restarted: {flushes} flushes");
}
