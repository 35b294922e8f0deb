//! `io::TimeoutStream`'s idle timeout, Netty's `allIdleTime`: a waiting read or write
//! is cut once neither direction has moved a byte for the timeout, through split
//! halves too, composed with the read and write timeouts. Paused clock over
//! `tokio::io::duplex`; under hyper, `integrations/tests/hyper.rs`.

use std::future::Future;
use std::io::ErrorKind;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;
use tokio_wheel::io::TimeoutStream;

mod common;
use common::{assert_within, timer, LATE};

/// How long a paused test waits for a cut that a broken wrapper never makes.
const HOUR: Duration = Duration::from_secs(3600);

/// The idle timeout (both ways) on a connection that nobody writes to or reads from is
/// cut at the timeout; the next wait is a full one again; `None` waits for ever.
#[tokio::test(start_paused = true)]
async fn idle_a_silent_connection_is_cut_at_the_timeout_never_early() {
    let timer = timer();
    let (client, _server) = tokio::io::duplex(64);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_millis(750);
    client.set_idle_timeout(Some(timeout));
    assert_eq!(client.idle_timeout(), Some(timeout));
    assert!(format!("{client:?}").contains("idle_timeout: Some(750ms)"));
    let start = Instant::now();
    let read = tokio::time::timeout(HOUR, client.read(&mut [0; 8])).await;
    assert_eq!(
        read.expect("never cut").unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    assert_within(timeout, start.elapsed(), LATE);
    let again = Instant::now();
    let err = client.read(&mut [0; 8]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(timeout, again.elapsed(), LATE);
    client.set_idle_timeout(None);
    let read = tokio::time::timeout(HOUR, client.read(&mut [0; 8])).await;
    assert!(read.is_err(), "a read with no timeout ended: {read:?}");
}

/// A read pending while the same stream writes every 100 ms for 3 s is not cut by a
/// 500 ms idle timeout, and is cut one timeout after the last write. The connection
/// keeps one wheel entry, moved about once a timeout rather than once a write.
#[tokio::test(start_paused = true)]
async fn idle_a_read_pending_while_the_stream_writes_is_cut_one_timeout_after_the_last_write() {
    let timer = timer();
    let (client, mut server) = tokio::io::duplex(1024);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_millis(500);
    client.set_idle_timeout(Some(timeout));
    // The peer takes everything and sends nothing.
    let peer = tokio::spawn(async move { server.read_to_end(&mut Vec::new()).await });
    let start = Instant::now();
    let period = Duration::from_millis(100);
    let mut writes = tokio::time::interval_at(start + period, period);
    let (mut written, mut last_write) = (0, start);
    let mut buf = [0; 8];
    let err = loop {
        tokio::select! {
            read = client.read(&mut buf) => break read.unwrap_err(),
            _ = writes.tick(), if written < 30 => {
                client.write_all(b"chunk").await.unwrap();
                written += 1;
                last_write = Instant::now();
            }
        }
        assert!(timer.pending() <= 1, "{} pending", timer.pending());
        assert!(start.elapsed() < HOUR, "never cut");
    };
    assert_eq!(
        written,
        30,
        "cut while writing, after {:?}",
        start.elapsed()
    );
    assert!(last_write - start >= Duration::from_secs(3));
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(timeout, last_write.elapsed(), LATE);
    let stats = timer.stats();
    assert!(
        stats.fired + stats.reset <= 10,
        "moved about once a timeout (3.5 s / 500 ms), not once a write (30): {stats:?}"
    );
    drop(client);
    assert!(peer.await.unwrap().is_ok());
}

/// The same through `tokio::io::split`: the read half waits in one task while the
/// write half writes in another.
#[tokio::test(start_paused = true)]
async fn idle_split_halves_writes_in_another_task_keep_a_pending_read_alive() {
    let timer = timer();
    let (client, mut server) = tokio::io::duplex(1024);
    let mut client = TimeoutStream::with_timer(client, &timer);
    // Not a multiple of the writes' period: the read, never polled between writes,
    // must be cut one timeout after the last write, not at a later wakeup's timeout.
    let timeout = Duration::from_millis(450);
    client.set_idle_timeout(Some(timeout));
    let peer = tokio::spawn(async move { server.read_to_end(&mut Vec::new()).await });
    let (mut reader, mut writer) = tokio::io::split(client);
    let start = Instant::now();
    let writes = tokio::spawn(async move {
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            writer.write_all(b"chunk").await.unwrap();
        }
        (writer, Instant::now())
    });
    let read = tokio::time::timeout(HOUR, reader.read(&mut [0; 8])).await;
    let cut = Instant::now();
    assert_eq!(
        read.expect("never cut").unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    let (writer, last_write) = writes.await.unwrap();
    assert!(last_write - start >= Duration::from_secs(3));
    assert_within(timeout, cut - last_write, LATE);
    assert!(timer.pending() <= 1, "{} pending", timer.pending());
    drop(reader.unsplit(writer));
    assert!(peer.await.unwrap().is_ok());
}

/// Split halves waiting in two tasks at once (a peer that neither sends nor reads):
/// the idle timeout cuts both, each at the timeout, whichever task its `Sleep` woke.
#[tokio::test(start_paused = true)]
async fn idle_split_halves_waiting_in_two_tasks_are_both_cut() {
    let timer = timer();
    let (client, _server) = tokio::io::duplex(16);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_millis(400);
    client.set_idle_timeout(Some(timeout));
    let (mut reader, mut writer) = tokio::io::split(client);
    let start = Instant::now();
    let read = tokio::spawn(async move {
        let read = tokio::time::timeout(HOUR, reader.read(&mut [0; 8])).await;
        (
            read.map(|r| r.map(drop).map_err(|e| e.kind())),
            Instant::now(),
        )
    });
    let write = tokio::spawn(async move {
        let written = tokio::time::timeout(HOUR, writer.write_all(&[7; 1024])).await;
        (written.map(|r| r.map_err(|e| e.kind())), Instant::now())
    });
    for (what, task) in [("read", read), ("write", write)] {
        let (result, at) = task.await.unwrap();
        let result = result.unwrap_or_else(|_| panic!("the {what} was never cut"));
        assert_eq!(result, Err(ErrorKind::TimedOut), "{what}");
        assert_within(timeout, at - start, LATE);
    }
}

/// A peer that sends a byte more often than the idle timeout is never cut, with one
/// wheel entry for the connection; it is cut one timeout after the last byte.
#[tokio::test(start_paused = true)]
async fn idle_a_peer_that_sends_more_often_than_the_timeout_is_never_cut() {
    let timer = timer();
    let (client, mut server) = tokio::io::duplex(64);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_secs(1);
    client.set_idle_timeout(Some(timeout));
    let sender = tokio::spawn(async move {
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(900)).await;
            server.write_all(b"x").await.unwrap();
        }
        (server, Instant::now())
    });
    let mut buf = [0; 8];
    for _ in 0..50 {
        assert_eq!(client.read(&mut buf).await.unwrap(), 1);
        assert!(timer.pending() <= 1, "{} pending", timer.pending());
    }
    let (_server, last) = sender.await.unwrap();
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(timeout, last.elapsed(), LATE);
}

/// A stream that is always ready: reads give a byte, writes take everything.
struct Flowing;

impl AsyncRead for Flowing {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        buf.put_slice(b"x");
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Flowing {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Operations that never wait never touch the wheel: a connection whose reads and
/// writes are always ready holds no entry, however many bytes it moves.
#[tokio::test(start_paused = true)]
async fn idle_a_stream_that_never_waits_never_touches_the_wheel() {
    let timer = timer();
    let mut stream = TimeoutStream::with_timer(Flowing, &timer);
    stream.set_idle_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0; 4];
    for _ in 0..10_000 {
        stream.write_all(b"ping").await.unwrap();
        stream.flush().await.unwrap();
        stream.read_exact(&mut buf).await.unwrap();
    }
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.fired, stats.reset),
        (0, 0, 0),
        "{stats:?}"
    );
}

/// Each timeout keeps its meaning beside the idle timeout: writes keep the connection
/// alive but do not feed the read timeout; a silent connection is cut by whichever
/// is shorter; a write stuck while reads flow is cut by the write timeout.
#[tokio::test(start_paused = true)]
async fn idle_composes_with_the_read_and_write_timeouts() {
    // A read timeout of 2 s, an idle timeout of 500 ms, writes every 100 ms.
    let timer = timer();
    let (client, mut server) = tokio::io::duplex(1024);
    let mut client = TimeoutStream::with_timer(client, &timer);
    client.set_read_timeout(Some(Duration::from_secs(2)));
    client.set_idle_timeout(Some(Duration::from_millis(500)));
    let peer = tokio::spawn(async move { server.read_to_end(&mut Vec::new()).await });
    let start = Instant::now();
    let mut writes = tokio::time::interval(Duration::from_millis(100));
    let mut buf = [0; 8];
    let err = loop {
        tokio::select! {
            read = client.read(&mut buf) => break read.unwrap_err(),
            _ = writes.tick() => client.write_all(b"chunk").await.unwrap(),
        }
        assert!(timer.pending() <= 2, "{} pending", timer.pending());
        assert!(start.elapsed() < HOUR, "never cut");
    };
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(Duration::from_secs(2), start.elapsed(), LATE);
    drop(client);
    assert!(peer.await.unwrap().is_ok());

    // Silent: the shorter of the read (1 s) and idle (300 ms) timeouts cuts.
    let (client, _server) = tokio::io::duplex(64);
    let mut client = TimeoutStream::with_timer(client, &timer);
    client.set_read_timeout(Some(Duration::from_secs(1)));
    client.set_idle_timeout(Some(Duration::from_millis(300)));
    let start = Instant::now();
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(Duration::from_millis(300), start.elapsed(), LATE);

    // A peer that sends every 100 ms and never reads: the write stuck behind it is cut
    // by the write timeout (400 ms), though the reads keep the connection from idling.
    let (client, mut server) = tokio::io::duplex(16);
    let mut client = TimeoutStream::with_timer(client, &timer);
    client.set_write_timeout(Some(Duration::from_millis(400)));
    client.set_idle_timeout(Some(Duration::from_secs(1)));
    let sender = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if server.write_all(b"x").await.is_err() {
                break;
            }
        }
    });
    let (mut reader, mut writer) = tokio::io::split(client);
    let start = Instant::now();
    let mut read = 0;
    let err = loop {
        tokio::select! {
            written = writer.write_all(&[7; 1024]) => break written.unwrap_err(),
            n = reader.read(&mut buf) => read += n.unwrap(),
        }
        assert!(start.elapsed() < HOUR, "never cut");
    };
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_within(Duration::from_millis(400), start.elapsed(), LATE);
    assert!(read >= 3, "the reads flowed: {read} bytes");
    drop((reader, writer));
    sender.await.unwrap();
}

/// Progress either way restarts the idle stretch for both directions: a write that
/// waited and was given up (a `timeout` around it), an idle cut of a read, then bytes
/// read. The cut found the write still waiting and marked it; the bytes read end that
/// mark too, so the next write that waits gets a full timeout, not an error at once.
#[tokio::test(start_paused = true)]
async fn idle_progress_either_way_clears_a_cut_of_the_other_direction() {
    let timer = timer();
    let (client, mut server) = tokio::io::duplex(16);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_millis(500);
    client.set_idle_timeout(Some(timeout));
    // The peer reads nothing: 16 bytes fill the pipe and the write waits; given up.
    let given_up = tokio::time::timeout(Duration::from_millis(100), client.write_all(&[7; 64]));
    assert!(given_up.await.is_err(), "the write waits on a full pipe");
    // A read waits too, and the idle timeout (from the write's wait) cuts it.
    let err = client.read(&mut [0; 8]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    // Bytes read: progress.
    server.write_all(b"hi").await.unwrap();
    assert_eq!(client.read(&mut [0; 8]).await.unwrap(), 2);
    // The next write waits a full timeout from its own wait, never less.
    let start = Instant::now();
    let write = tokio::time::timeout(HOUR, client.write_all(&[7; 8])).await;
    assert_eq!(
        write.expect("never cut").unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    assert_within(timeout, start.elapsed(), LATE);
    drop(server);
}

/// A stream whose reads wait for ever and whose flush, once given a drain time, waits
/// that long and completes: a buffered write draining to a slow peer.
struct Draining {
    drain: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl AsyncRead for Draining {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Pending
    }
}

impl AsyncWrite for Draining {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let Some(drain) = &mut self.drain else {
            return Poll::Ready(Ok(()));
        };
        std::task::ready!(drain.as_mut().poll(cx));
        self.drain = None;
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// For the idle timeout a flush is progress when it moved bytes: one that had to wait
/// (200 ms to 400 ms) renews the stretch; the heartbeat's flushes every 100 ms, which
/// complete at once with nothing to flush, do not. Cut 500 ms after the draining one.
#[tokio::test(start_paused = true)]
async fn idle_a_flush_that_drains_counts_and_one_with_nothing_to_flush_does_not() {
    let timer = timer();
    let mut stream = TimeoutStream::with_timer(Draining { drain: None }, &timer);
    let timeout = Duration::from_millis(500);
    stream.set_idle_timeout(Some(timeout));
    let start = Instant::now();
    let mut heartbeat = tokio::time::interval(Duration::from_millis(100));
    let (mut draining, mut drained) = (false, None);
    let mut buf = [0; 8];
    let err = loop {
        tokio::select! {
            read = stream.read(&mut buf) => break read.unwrap_err(),
            _ = heartbeat.tick() => {
                let drains = !draining && start.elapsed() >= Duration::from_millis(200);
                if drains {
                    let drain = tokio::time::sleep(Duration::from_millis(200));
                    stream.get_mut().drain = Some(Box::pin(drain));
                    draining = true;
                }
                stream.flush().await.unwrap();
                if drains {
                    drained = Some(Instant::now());
                }
            }
        }
        assert!(start.elapsed() < HOUR, "never cut");
    };
    let drained = drained.expect("the draining flush completed at 400 ms");
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert!(drained - start >= Duration::from_millis(400));
    assert_within(timeout, drained.elapsed(), LATE);
}

/// Split halves waiting in two tasks on an idle connection: when one half's task is
/// polled after the idle deadline but before the driver's turn (woken by something
/// else, as a `select!` branch would be), its operation is cut, and the other half's
/// task is woken to see its own cut. Paused clock on a runtime that is not running, so
/// that the driver turns only when the test lets it.
#[test]
fn idle_a_due_cut_seen_by_one_half_wakes_the_other() {
    use std::task::Waker;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let timer = common::timer_on(rt.handle());
    // In the runtime's context (duplex and split want one), without running it.
    let entered = rt.enter();
    let (client, _server) = tokio::io::duplex(16);
    let mut client = TimeoutStream::with_timer(client, &timer);
    let timeout = Duration::from_millis(400);
    client.set_idle_timeout(Some(timeout));
    let (mut reader, mut writer) = tokio::io::split(client);
    let mut read = tokio_test::task::spawn(async move { reader.read(&mut [0; 8]).await });
    let mut write = tokio_test::task::spawn(async move { writer.write_all(&[7; 1024]).await });
    assert!(read.poll().is_pending());
    assert!(write.poll().is_pending());
    assert_eq!(timer.pending(), 1, "one idle sleep for the connection");
    // The clock moves to the deadline; the driver has not run.
    let mut advance = Box::pin(tokio::time::advance(timeout));
    let _ = advance
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    assert!(!read.is_woken() && !write.is_woken());
    // The read half's task, polled for some other reason, sees the cut.
    match read.poll() {
        Poll::Ready(Err(e)) => assert_eq!(e.kind(), ErrorKind::TimedOut),
        other => panic!("read not cut at its idle timeout: {other:?}"),
    }
    assert_eq!(timer.pending(), 0, "the idle sleep left the wheel, unfired");
    drop(entered);
    // Let the driver run as long as it likes: nothing is left to wake the write.
    rt.block_on(async { tokio::time::sleep(Duration::from_secs(60)).await });
    assert!(
        write.is_woken(),
        "the write half's task is never woken: its write hangs past the idle timeout"
    );
    match write.poll() {
        Poll::Ready(Err(e)) => assert_eq!(e.kind(), ErrorKind::TimedOut),
        other => panic!("write not cut: {other:?}"),
    }
}

/// A waker that counts its wakes, and panics at its first if `panics`: a buggy
/// executor's. (Once: the duplex pipe wakes it again when the test drops the peer.)
struct Counting {
    woken: std::sync::atomic::AtomicUsize,
    panics: bool,
}

impl std::task::Wake for Counting {
    fn wake(self: std::sync::Arc<Self>) {
        let before = self.woken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert!(!self.panics || before > 0, "the executor's waker panics");
    }
}

/// Split halves waiting in two tasks, the read's waker panicking: when the idle
/// timeout fires, the driver wakes both through one waker, and the write's task is
/// woken past the read's panic (which the driver counts). A paused runtime run only
/// when the test lets it.
#[test]
fn idle_a_panicking_waker_of_one_half_strands_not_the_other() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::task::Waker;

    let rt = common::paused_runtime();
    let timer = common::timer_on(rt.handle());
    let entered = rt.enter();
    let (client, _server) = tokio::io::duplex(16);
    let mut client = TimeoutStream::with_timer(client, &timer);
    client.set_idle_timeout(Some(Duration::from_millis(400)));
    let (mut reader, mut writer) = tokio::io::split(client);
    let mut read = Box::pin(async move { reader.read(&mut [0; 8]).await });
    let mut write = Box::pin(async move { writer.write_all(&[7; 1024]).await });
    let waker = |panics| {
        let counting = Arc::new(Counting {
            woken: std::sync::atomic::AtomicUsize::new(0),
            panics,
        });
        (counting.clone(), Waker::from(counting))
    };
    let ((_, panicking), (second, counted)) = (waker(true), waker(false));
    assert!(read
        .as_mut()
        .poll(&mut Context::from_waker(&panicking))
        .is_pending());
    assert!(write
        .as_mut()
        .poll(&mut Context::from_waker(&counted))
        .is_pending());
    drop(entered);
    rt.block_on(async { tokio::time::sleep(Duration::from_secs(60)).await });
    assert_eq!(
        second.woken.load(Ordering::SeqCst),
        1,
        "the write half's task, woken after the read's panicking waker, was stranded"
    );
    assert_eq!(timer.stats().callback_panics, 1, "{:?}", timer.stats());
}
