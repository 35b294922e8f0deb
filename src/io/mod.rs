//! Idle timeouts on any [`AsyncRead`]/[`AsyncWrite`]: [`TimeoutStream`].
//!
//! [`AsyncRead`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncRead.html
//! [`AsyncWrite`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncWrite.html
//!
//! A connection whose peer stops sending (or stops reading) holds a task, a socket and
//! its buffers for ever unless something cuts it. Wrapping every read in a `timeout`
//! allocates a timer per read; [`TimeoutStream`] keeps one [`Sleep`] per direction and
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
//! socket.set_read_timeout(Some(Duration::from_secs(30)));
//! let mut buf = [0; 1024];
//! // Fails with `ErrorKind::TimedOut` if the peer sends nothing for 30 s.
//! let n = socket.read(&mut buf).await?;
//! # let _ = n;
//! # Ok(())
//! # }
//! ```
//!
//! # Implementation
//!
//! Each direction has a timeout, a [`Sleep`] made on first need, and whether that
//! `Sleep` is armed. An operation that returns `Pending` arms the timeout if it is not
//! armed (moving the `Sleep` to now plus the timeout with [`Sleep::reset`], in place
//! once it is registered) and polls the `Sleep`; one that moves bytes disarms it,
//! touching no shared state. So a stream that is always ready
//! never touches the wheel, and one that waits moves one entry per wait. An armed
//! `Sleep` that completes fails the operation with [`io::ErrorKind::TimedOut`] and is
//! disarmed, so the next operation waits a full timeout again. Dropping an
//! operation's future leaves the wait armed: nothing here sees the drop, and a
//! `select!` loop that restarts its read must still time the peer's silence.
//!
//! [`Sleep`]: crate::Sleep
//! [`Sleep::reset`]: crate::Sleep::reset

mod direction;

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use self::direction::{Dir, DirectionTimeout, Outcome};
use crate::Timer;

pin_project! {
    /// An [`AsyncRead`]/[`AsyncWrite`] whose reads and writes fail with
    /// [`io::ErrorKind::TimedOut`] after waiting, with no bytes moving, longer than
    /// their timeout (less than a tick and a millisecond longer).
    ///
    /// [`AsyncRead`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncRead.html
    /// [`AsyncWrite`]: https://docs.rs/tokio/1/tokio/io/trait.AsyncWrite.html
    ///
    /// The timeouts are idle timeouts: a wait starts when an operation first finds
    /// nothing to do, and progress ends it, so a peer that sends a byte more often
    /// than the read timeout is never cut, however long the connection lives. A wait
    /// ends only by progress or by its timeout, not when the operation's future is
    /// dropped: a read restarted by `select!` (a loop that also writes heartbeats)
    /// goes on timing the peer's silence from the first read that found nothing, so a
    /// silent peer is still cut. To stop reading for a while without that time
    /// counting, set the timeout again ([`set_read_timeout`]) before the next read,
    /// which then waits a full timeout. Writes, flushes and shutdowns share the write
    /// timeout. Both are off (`None`) until set.
    ///
    /// [`set_read_timeout`]: TimeoutStream::set_read_timeout
    ///
    /// **Progress is bytes moving**: a read that returns data, a write that accepts
    /// bytes, a flush or shutdown that completes after having had to wait. Nothing
    /// else ends a wait: not an error, not end of file, not an empty read or write, and
    /// not a flush that completes at once (it had nothing to flush), so a loop that
    /// flushes a heartbeat in `select!` beside a stuck write still has that write cut.
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
    /// A flush or shutdown returned `Pending` and none has completed since: the next
    /// to complete moved bytes (see [`Outcome::of_flush`]).
    flush_waited: bool,
}

impl Timeouts {
    /// Runs after every poll of the stream in `dir`: progress ends that direction's
    /// wait; a wait polls its timeout.
    #[inline]
    fn after<T>(
        &mut self,
        cx: &mut Context<'_>,
        dir: Dir,
        what: &str,
        outcome: Outcome,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let direction = match dir {
            Dir::Read => &mut self.read,
            Dir::Write => &mut self.write,
        };
        match outcome {
            Outcome::Progress => {
                direction.progress();
                poll
            }
            Outcome::Nothing => poll,
            Outcome::Waiting => match direction.poll_wait(&self.timer, cx, what) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
        }
    }
}

impl<S> TimeoutStream<S> {
    /// Wraps `stream`, with its timeouts on the [default timer](crate#default-timer)
    /// (the process-wide one, on the real clock; with the feature `test-util`, the
    /// caller's runtime's, on its clock). Both timeouts are off until set.
    ///
    /// # Panics
    ///
    /// As [`sleep`](crate::sleep): if the default timer cannot be created.
    pub fn new(stream: S) -> Self {
        crate::default::with_default(|timer| TimeoutStream::with_timer(stream, timer))
    }

    /// Wraps `stream`, with its timeouts on `timer`. Both are off until set.
    pub fn with_timer(stream: S, timer: &Timer) -> Self {
        TimeoutStream {
            stream,
            timeouts: Timeouts {
                timer: timer.clone(),
                read: DirectionTimeout::OFF,
                write: DirectionTimeout::OFF,
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

    /// [`set_read_timeout`](TimeoutStream::set_read_timeout) on a pinned stream (one
    /// whose `S` is not `Unpin`).
    pub fn set_read_timeout_pinned(self: Pin<&mut Self>, timeout: Option<Duration>) {
        self.project().timeouts.read.set(timeout);
    }

    /// [`set_write_timeout`](TimeoutStream::set_write_timeout) on a pinned stream.
    pub fn set_write_timeout_pinned(self: Pin<&mut Self>, timeout: Option<Duration>) {
        self.project().timeouts.write.set(timeout);
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.timeouts.read.timeout()
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> Option<Duration> {
        self.timeouts.write.timeout()
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
        let before = buf.filled().len();
        let poll = this.stream.poll_read(cx, buf);
        let outcome = Outcome::of_read(&poll, before, buf.filled().len());
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
            .finish()
    }
}
