//! Timeouts on any [`AsyncRead`]/[`AsyncWrite`]: [`TimeoutStream`].
//!
//! [`AsyncRead`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncRead.html
//! [`AsyncWrite`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncWrite.html
//!
//! A connection whose peer stops sending (or stops reading) holds a task, a socket and
//! its buffers for ever unless something cuts it. Wrapping every read in a `timeout`
//! allocates a timer per read; [`TimeoutStream`] keeps one [`Sleep`] per timeout and
//! moves it in place, so a busy connection costs no new wheel entry per read.
//!
//! ```no_run
//! # async fn serve() -> std::io::Result<()> {
//! use std::time::Duration;
//! use tokio::io::AsyncReadExt;
//! use tokio::net::TcpListener;
//! use tokio_wheel::io::TimeoutStream;
//!
//! let listener = TcpListener::bind("127.0.0.1:0").await?;
//! let (socket, _) = listener.accept().await?;
//! let mut socket = TimeoutStream::new(socket);
//! // Cut the connection once nothing has moved either way for 30 s.
//! socket.set_idle_timeout(Some(Duration::from_secs(30)));
//! let mut buf = [0; 1024];
//! // Fails with `ErrorKind::TimedOut` if nothing is read or written for 30 s.
//! let n = socket.read(&mut buf).await?;
//! # let _ = n;
//! # Ok(())
//! # }
//! ```
//!
//! # Implementation
//!
//! The read and the write timeout each have a [`Sleep`], made on first need, and
//! whether it is armed. An operation that returns `Pending` arms its direction's
//! timeout if it is not armed (moving the `Sleep` to now plus the timeout with
//! [`Sleep::reset`], in place once it is registered) and polls the `Sleep`; one that
//! moves bytes disarms it, touching no shared state. So a stream that is always ready
//! never touches the wheel, and one that waits moves one entry per wait. An armed
//! `Sleep` that completes fails the operation with [`io::ErrorKind::TimedOut`] and is
//! disarmed, so the next operation waits a full timeout again. Dropping an
//! operation's future leaves the wait armed: nothing here sees the drop, and a
//! `select!` loop that restarts its read must still time the peer's silence.
//!
//! The idle timeout has one `Sleep` for the connection. Progress records when the
//! idle stretch begins (reading the clock only when an operation is waiting, or at
//! the next wait); the `Sleep` is moved only when it fires before the stretch's end,
//! about once a timeout on a busy connection, never per byte. While the two halves of
//! a `tokio::io::split` wait in two tasks, it wakes both.
//!
//! [`Sleep`]: crate::Sleep
//! [`Sleep::reset`]: crate::Sleep::reset

mod direction;
mod idle;

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use self::direction::{Dir, DirectionTimeout, Outcome};
use self::idle::IdleTimeout;
use crate::timer::Timer;

pin_project! {
    /// An [`AsyncRead`]/[`AsyncWrite`] whose reads and writes fail with
    /// [`io::ErrorKind::TimedOut`] once they have waited, with no bytes moving, longer
    /// than a timeout (less than a tick and a millisecond longer).
    ///
    /// [`AsyncRead`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncRead.html
    /// [`AsyncWrite`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncWrite.html
    ///
    /// Three timeouts, each off (`None`) until set, each keeping its meaning when
    /// others are set too (Netty's `IdleStateHandler` names in brackets):
    ///
    /// | timeout | a waiting operation fails when | for |
    /// |---|---|---|
    /// | [read](TimeoutStream::set_read_timeout) (`readerIdleTime`) | a read has waited that long for a byte | a peer that must keep sending (a stream of heartbeats) |
    /// | [write](TimeoutStream::set_write_timeout) (`writerIdleTime`) | a write, flush or shutdown has waited that long with no byte accepted | a peer that stopped reading |
    /// | [idle](TimeoutStream::set_idle_timeout) (`allIdleTime`) | a read or write waits and neither direction has moved a byte for that long | a server whose read stays pending while it writes a long response (hyper): only silence both ways cuts it |
    ///
    /// **Progress is bytes moving**: a read that returns data, a write that accepts
    /// bytes, a flush or shutdown that completes after having had to wait. Nothing
    /// else ends a wait: not an error, not end of file, not an empty read or write, and
    /// not a flush that completes at once (it had nothing to flush), so a loop that
    /// flushes a heartbeat in `select!` beside a stuck write still has that write cut.
    ///
    /// The read and write timeouts time one wait each: it starts when an operation
    /// first finds nothing to do, and progress ends it, so a peer that sends a byte
    /// more often than the read timeout is never cut, however long the connection
    /// lives. The idle timeout times the connection: its clock runs from the last
    /// progress either way, or from the first wait after it if no operation was
    /// waiting then, so a read that starts after the program was busy elsewhere still
    /// gets a full timeout. Once it fires, every operation then waiting fails (through
    /// [`tokio::io::split`] halves too, in whichever tasks they wait), and the next
    /// wait starts a full timeout again.
    ///
    /// [`tokio::io::split`]: https://docs.rs/tokio/1/tokio/io/fn.split.html
    ///
    /// A wait ends only by progress or by its timeout, not when the operation's future
    /// is dropped: a read restarted by `select!` (a loop that also writes heartbeats)
    /// goes on timing the peer's silence from the first read that found nothing, so a
    /// silent peer is still cut. To stop reading for a while without that time
    /// counting, set the timeout again ([`set_read_timeout`],
    /// [`set_idle_timeout`]) before the next read, which then waits a full timeout.
    ///
    /// [`set_read_timeout`]: TimeoutStream::set_read_timeout
    /// [`set_idle_timeout`]: TimeoutStream::set_idle_timeout
    ///
    /// `TimeoutStream<S>` is `Unpin` when `S` is (a `TcpStream` is), so it needs no
    /// pinning; it works wherever `S` does, e.g. under hyper as
    /// `hyper_util::rt::TokioIo<TimeoutStream<TcpStream>>`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use tokio::io::AsyncReadExt;
    /// use tokio_wheel::{io::TimeoutStream, Timer};
    ///
    /// let timer = Timer::new();
    /// let (client, _server) = tokio::io::duplex(64);
    /// let mut client = TimeoutStream::with_timer(client, &timer);
    /// client.set_read_timeout(Some(Duration::from_secs(5)));
    /// let err = client.read(&mut [0; 8]).await.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::TimedOut);
    /// # }
    /// ```
    ///
    /// A read pending while the same connection writes is not cut by the idle
    /// timeout; once the writes stop, it is:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// use tokio::time::Instant;
    /// use tokio_wheel::{io::TimeoutStream, Timer};
    ///
    /// let timer = Timer::new();
    /// let (server, mut client) = tokio::io::duplex(64);
    /// // The client takes what it is sent, and sends nothing.
    /// tokio::spawn(async move { client.read_to_end(&mut Vec::new()).await });
    /// let mut server = TimeoutStream::with_timer(server, &timer);
    /// server.set_idle_timeout(Some(Duration::from_secs(1)));
    /// let (mut reader, mut writer) = tokio::io::split(server);
    /// let start = Instant::now();
    /// tokio::spawn(async move {
    ///     for _ in 0..30 {
    ///         tokio::time::sleep(Duration::from_millis(100)).await;
    ///         writer.write_all(b"chunk").await.unwrap();
    ///     }
    /// });
    /// // Pending through 3 s of writes, then cut 1 s after the last.
    /// let err = reader.read(&mut [0; 8]).await.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::TimedOut);
    /// assert!(start.elapsed() >= Duration::from_secs(4));
    /// # }
    /// ```
    pub struct TimeoutStream<S> {
        #[pin]
        stream: S,
        timeouts: Timeouts,
    }
}

/// The timeouts and what they need beside the stream: everything but the stream,
/// which is pinned.
#[derive(Debug)]
struct Timeouts {
    timer: Timer,
    read: DirectionTimeout,
    write: DirectionTimeout,
    idle: IdleTimeout,
    /// A flush or shutdown returned `Pending` and none has completed since: the next
    /// to complete moved bytes (see [`Outcome::of_flush`]).
    flush_waited: bool,
}

impl Timeouts {
    /// Bytes moved in `dir`: ends that direction's wait and renews the idle stretch.
    /// Inlined, with `dir` known, it is a store and a test when the idle timeout is off.
    #[inline(always)]
    fn progress(&mut self, dir: Dir) {
        match dir {
            Dir::Read => self.read.progress(),
            Dir::Write => self.write.progress(),
        }
        if self.idle.is_set() {
            self.idle.progress(&self.timer, dir);
        }
    }

    /// An operation in `dir` returned `Pending`: polls its direction's timeout, then
    /// the idle timeout. `Pending`, or the first timeout's error.
    #[inline(always)]
    fn wait<T>(&mut self, cx: &mut Context<'_>, dir: Dir, what: &str) -> Poll<io::Result<T>> {
        let direction = match dir {
            Dir::Read => &mut self.read,
            Dir::Write => &mut self.write,
        };
        let mut waited = direction.poll_wait(&self.timer, cx, what);
        if waited.is_ok() && self.idle.is_set() {
            waited = self.idle.poll_wait(&self.timer, cx, dir);
        }
        match waited {
            Ok(()) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Runs after every poll of the stream in `dir`, with what the poll did. Always
    /// inlined, as are the two above: at each call site `dir` is known, so progress
    /// folds to a store and a test of the idle timeout.
    #[inline(always)]
    fn after<T>(
        &mut self,
        cx: &mut Context<'_>,
        dir: Dir,
        what: &str,
        outcome: Outcome,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match outcome {
            Outcome::Progress => self.progress(dir),
            Outcome::Nothing => {}
            Outcome::Waiting => return self.wait(cx, dir, what),
        }
        poll
    }
}

impl<S> TimeoutStream<S> {
    /// Wraps `stream`, with its timeouts on the [default timer](crate#default-timer)
    /// (the process-wide one, on the real clock; with the feature `test-util`, the
    /// caller's runtime's, on its clock). The timeouts are off until set.
    ///
    /// # Panics
    ///
    /// As [`sleep`](crate::sleep): if the default timer cannot be created.
    #[track_caller]
    pub fn new(stream: S) -> Self {
        crate::default::with_default(|timer| TimeoutStream::with_timer(stream, timer))
    }

    /// Wraps `stream`, with its timeouts on `timer`. They are off until set.
    ///
    /// # Panics
    ///
    /// In a debug build without the feature `test-util`, on a runtime whose clock is
    /// paused, which `timer` does not follow then (see
    /// [the crate docs](crate#testing-with-the-paused-clock)).
    #[track_caller]
    pub fn with_timer(stream: S, timer: &Timer) -> Self {
        crate::missing_test_util::check();
        TimeoutStream {
            stream,
            timeouts: Timeouts {
                timer: timer.clone(),
                read: DirectionTimeout::OFF,
                write: DirectionTimeout::OFF,
                idle: IdleTimeout::OFF,
                flush_waited: false,
            },
        }
    }

    /// Sets how long a read may wait with no data before it fails with
    /// [`io::ErrorKind::TimedOut`]; `None` waits for ever. Takes effect from the next
    /// read that waits, which waits a full timeout, even if an earlier read that was
    /// dropped while waiting had begun one.
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.timeouts.read.set(timeout);
    }

    /// Sets how long a write, flush or shutdown may wait with no byte accepted before
    /// it fails with [`io::ErrorKind::TimedOut`]; `None` waits for ever. A flush that
    /// completes at once (nothing to flush) does not end the wait of a write that is
    /// stuck. As [`set_read_timeout`](TimeoutStream::set_read_timeout), the next wait
    /// is a full one.
    pub fn set_write_timeout(&mut self, timeout: Option<Duration>) {
        self.timeouts.write.set(timeout);
    }

    /// Sets how long the connection may stay idle, no byte read or written, before a
    /// read or write waiting on it fails with [`io::ErrorKind::TimedOut`] (Netty's
    /// `allIdleTime`); `None` waits for ever. Reads, writes and flushes that move bytes
    /// count, through [`tokio::io::split`] halves too, so a read pending while the
    /// connection streams a response is not cut. Takes effect from the next wait,
    /// which starts a full timeout. It keeps one wheel entry for the connection, moved
    /// about once a timeout while bytes flow, never per byte.
    ///
    /// [`tokio::io::split`]: https://docs.rs/tokio/1/tokio/io/fn.split.html
    pub fn set_idle_timeout(&mut self, timeout: Option<Duration>) {
        self.timeouts.idle.set(timeout);
    }

    /// [`set_read_timeout`](TimeoutStream::set_read_timeout) on a pinned stream (one
    /// whose `S` is not `Unpin`).
    pub fn set_read_timeout_pinned(self: Pin<&mut Self>, timeout: Option<Duration>) {
        self.project().timeouts.read.set(timeout);
    }

    /// [`set_write_timeout`](TimeoutStream::set_write_timeout) on a pinned stream.
    pub fn set_write_timeout_pinned(self: Pin<&mut Self>, timeout: Option<Duration>) {
        self.project().timeouts.write.set(timeout);
    }

    /// [`set_idle_timeout`](TimeoutStream::set_idle_timeout) on a pinned stream.
    pub fn set_idle_timeout_pinned(self: Pin<&mut Self>, timeout: Option<Duration>) {
        self.project().timeouts.idle.set(timeout);
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.timeouts.read.timeout()
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> Option<Duration> {
        self.timeouts.write.timeout()
    }

    /// The idle timeout.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.timeouts.idle.timeout()
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The wrapped stream, mutably. Reading or writing it directly bypasses the
    /// timeouts.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The wrapped stream, pinned.
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut S> {
        self.project().stream
    }

    /// Unwraps the stream; pending timeouts are cancelled.
    pub fn into_inner(self) -> S {
        self.stream
    }
}

impl<S: AsyncRead> AsyncRead for TimeoutStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.remaining();
        let poll = this.stream.poll_read(cx, buf);
        let outcome = Outcome::of_read(&poll, before, buf.remaining());
        this.timeouts.after(cx, Dir::Read, "read", outcome, poll)
    }
}

impl<S: AsyncWrite> AsyncWrite for TimeoutStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let poll = this.stream.poll_write(cx, buf);
        let outcome = Outcome::of_write(&poll);
        this.timeouts.after(cx, Dir::Write, "write", outcome, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let poll = this.stream.poll_write_vectored(cx, bufs);
        let outcome = Outcome::of_write(&poll);
        this.timeouts.after(cx, Dir::Write, "write", outcome, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        let poll = this.stream.poll_flush(cx);
        let outcome = Outcome::of_flush(&poll, &mut this.timeouts.flush_waited);
        this.timeouts.after(cx, Dir::Write, "flush", outcome, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        let poll = this.stream.poll_shutdown(cx);
        let outcome = Outcome::of_flush(&poll, &mut this.timeouts.flush_waited);
        this.timeouts
            .after(cx, Dir::Write, "shutdown", outcome, poll)
    }
}

impl<S: fmt::Debug> fmt::Debug for TimeoutStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimeoutStream")
            .field("stream", &self.stream)
            .field("read_timeout", &self.read_timeout())
            .field("write_timeout", &self.write_timeout())
            .field("idle_timeout", &self.idle_timeout())
            .finish()
    }
}
