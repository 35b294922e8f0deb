//! Every public entry point of tokio-wheel, in a program built with
//! `panic = "abort"`: any panic the crate let out, caught or not, would abort it.
//! One function per area, so that a new entry point is one more call.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_wheel::io::TimeoutStream;
use tokio_wheel::{
    Builder, DelayQueue, Elapsed, Error, Executor, Expired, Instant, Interval, Key, Lateness,
    MissedTickBehavior, NextExpired, PendingSite, Scheduled, Sleep, Stats, Timeout, Timer,
    TryInsertError, Unfired,
};

const MS: tokio_wheel::Duration = tokio_wheel::Duration::from_millis(1);

fn main() {
    const { assert!(cfg!(panic = "abort"), "built without panic = \"abort\"") };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        builder().await;
        let timer = Timer::new();
        sleeps(&timer).await;
        timeouts(&timer).await;
        intervals(&timer).await;
        callbacks(&timer).await;
        stats(&timer);
        call_sites().await;
        default_timer().await;
        hyper_timer(&timer).await;
        tower_layer(&timer).await;
        delay_queue(&timer).await;
        io_timeouts(&timer).await;
        errors();
        let queue = DelayQueue::with_timer(&timer);
        shutdown(timer, &queue).await;
    });
    runtime_loss();
    println!("panic-abort: every entry point ran");
}

async fn builder() {
    let custom = Executor::Custom(Arc::new(|job| job()));
    for executor in [
        Executor::Inline,
        Executor::Spawn,
        Executor::Blocking,
        custom,
    ] {
        let timer = Timer::builder()
            .tick(MS * 5)
            .wheel_size(1000)
            .max_pending(10)
            .executor(executor)
            .build()
            .expect("valid settings");
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        timer
            .schedule(MS, move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .expect("scheduled")
            .detach();
        timer.sleep(MS * 30).await;
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
    let on = Builder::default()
        .build_on(&tokio::runtime::Handle::current())
        .expect("build_on");
    assert_eq!(on.tick(), MS * 10);
    let _default = Timer::default();
    // Bad settings are errors, not panics.
    assert!(matches!(
        Timer::builder().tick(Duration::ZERO).build(),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Timer::builder().wheel_size(0).build(),
        Err(Error::InvalidConfig(_))
    ));
    // Building on a runtime that has shut down, or from outside any runtime.
    let closed = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let handle = closed.handle().clone();
    std::thread::spawn(move || drop(closed))
        .join()
        .expect("drop");
    assert_eq!(
        Timer::builder().build_on(&handle).unwrap_err(),
        Error::Shutdown
    );
    let outside = std::thread::spawn(|| Timer::builder().build().is_err());
    assert!(outside.join().expect("thread"));
}

async fn sleeps(timer: &Timer) {
    let start = Instant::now();
    timer.sleep(MS * 20).await;
    assert!(start.elapsed() >= MS * 20);
    let mut sleep: Sleep = timer.sleep_until(Instant::now() + MS * 50);
    assert!(!sleep.is_elapsed());
    std::pin::Pin::new(&mut sleep).reset(Instant::now() + MS * 10);
    let _ = sleep.deadline();
    (&mut sleep).await;
    assert!(sleep.is_elapsed());
    let _far = timer.sleep(Duration::MAX);
    assert_eq!(timer.pending(), 0);
    let _ = format!("{timer:?} {sleep:?}");
}

async fn timeouts(timer: &Timer) {
    assert_eq!(timer.timeout(MS * 50, async { 1 }).await, Ok(1));
    let slow: Timeout<_> = timer.timeout_at(Instant::now() + MS * 10, std::future::pending::<()>());
    let _ = (slow.deadline(), slow.get_ref());
    let err: Elapsed = slow.await.unwrap_err();
    assert_eq!(err, Elapsed::new());
    let mut pending = timer.timeout(MS, async { 2 });
    let _ = pending.get_mut();
    assert_eq!(pending.into_inner().await, 2);
}

async fn intervals(timer: &Timer) {
    let mut interval: Interval = timer.interval(MS * 10);
    interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Skip);
    assert_eq!(interval.period(), MS * 10);
    interval.tick().await;
    interval.tick().await;
    interval.reset();
    interval.reset_after(MS * 5);
    interval.reset_immediately();
    poll_fn(|cx| interval.poll_tick(cx)).await;
    interval.reset_at(Instant::now() + MS * 5);
    let next = poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut interval), cx)).await;
    assert!(next.is_some());
    interval.set_jitter(Duration::MAX); // the period
    assert_eq!(interval.jitter(), MS * 10);
    interval.tick().await;
    interval.set_jitter(Duration::ZERO);
    let mut at = timer.interval_at(Instant::now() + MS * 5, Duration::ZERO);
    at.tick().await;
    let mut far = timer.interval(Duration::MAX);
    far.set_jitter(Duration::MAX);
    far.tick().await;
    far.set_jitter(MS);
}

async fn callbacks(timer: &Timer) {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let handle: Scheduled = timer
        .schedule_at(Instant::now() + MS * 5, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .expect("scheduled");
    let _ = handle.deadline();
    timer.sleep(MS * 30).await;
    assert!(handle.is_expired() && !handle.is_cancelled());
    let cancelled = timer
        .schedule(Duration::from_secs(60), || ())
        .expect("scheduled");
    assert!(cancelled.reset(Duration::from_secs(120)));
    assert!(cancelled.reset_at(Instant::now() + Duration::from_secs(90)));
    assert!(cancelled.cancel());
    assert!(!cancelled.reset(MS) && !cancelled.reset_at(Instant::now()));
    let r = ran.clone();
    timer
        .schedule_detached(MS, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .expect("scheduled");
    timer
        .schedule_detached_at(Instant::now() + MS, panic_free)
        .expect("scheduled");
    timer.sleep(MS * 30).await;
    timer.catch_up().await;
    assert_eq!(ran.load(Ordering::SeqCst), 2);
}

fn panic_free() {}

fn stats(timer: &Timer) {
    let stats: Stats = timer.stats();
    let lateness: Lateness = stats.lateness;
    assert_eq!(lateness.total(), stats.fired);
    // The default timer's, as the free functions see it.
    let free: Stats = tokio_wheel::stats();
    assert_eq!(free.lateness.total(), free.fired);
    let _ = (
        lateness.counts(),
        lateness.at_most(MS),
        format!("{stats:?}"),
    );
}

async fn call_sites() {
    let timer = Timer::builder()
        .track_call_sites(true)
        .build()
        .expect("valid settings");
    let mut sleep = timer.sleep(MS * 20);
    let mut timeout = timer.timeout_at(Instant::now() + MS * 20, std::future::pending::<()>());
    let mut interval = timer.interval_at(Instant::now() + MS * 20, MS * 20);
    let scheduled = timer.schedule_at(Instant::now() + MS * 20, || {});
    timer.schedule_detached(MS * 20, || {}).expect("scheduled");
    poll_fn(|cx| {
        assert!(std::future::Future::poll(Pin::new(&mut sleep), cx).is_pending());
        assert!(std::future::Future::poll(Pin::new(&mut timeout), cx).is_pending());
        assert!(interval.poll_tick(cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
    let sites: Vec<PendingSite> = timer.pending_by_site();
    assert_eq!(sites.len(), 5);
    for site in &sites {
        assert_eq!(site.pending(), 1);
        assert_eq!(site.location().file(), file!());
        assert!(site.earliest_deadline().is_some());
        let _ = format!("{site} {site:?}");
    }
    drop(scheduled);
    std::pin::Pin::new(&mut sleep).reset(Instant::now());
    (&mut sleep).await;
    assert_eq!(timer.pending_by_site().len(), 3);
    // Shut down: nothing pending, and a sleep made now is timed elsewhere.
    let unfired = timer.shutdown().await;
    assert_eq!(unfired.len(), 1);
    assert!(timer.pending_by_site().is_empty());
    timer.sleep(MS).await;
    // The default timer's, empty unless TOKIO_WHEEL_TRACK_CALL_SITES is set.
    let _ = tokio_wheel::pending_by_site();
}

async fn default_timer() {
    let start = Instant::now();
    tokio_wheel::sleep(MS * 10).await;
    tokio_wheel::sleep_until(Instant::now() + MS * 5).await;
    assert!(tokio_wheel::timeout(MS * 5, std::future::pending::<()>())
        .await
        .is_err());
    assert_eq!(
        tokio_wheel::timeout_at(Instant::now() + MS * 50, async { 3 }).await,
        Ok(3)
    );
    tokio_wheel::interval(MS * 5).tick().await;
    let mut at = tokio_wheel::interval_at(Instant::now() + MS * 5, MS * 5);
    at.tick().await;
    at.tick().await;
    tokio_wheel::catch_up().await;
    assert!(start.elapsed() >= MS * 25);
    let queue = DelayQueue::default();
    queue.insert(1u8, MS);
    assert_eq!(queue.next_expired().await.map(Expired::into_inner), Some(1));
    let _ = TimeoutStream::new(tokio::io::empty());
}

async fn hyper_timer(timer: &Timer) {
    use hyper::rt::Timer as HyperTimer;
    let now = HyperTimer::now(timer);
    let mut sleep = HyperTimer::sleep(timer, MS * 5);
    HyperTimer::reset(timer, &mut sleep, now + MS * 10);
    sleep.await;
    HyperTimer::sleep_until(timer, now).await;
}

async fn tower_layer(timer: &Timer) {
    use tower::{service_fn, Layer, ServiceExt};
    let slow = || service_fn(|(): ()| std::future::pending::<Result<(), tower::BoxError>>());
    let err = tokio_wheel::tower::TimeoutLayer::new(MS * 5)
        .layer(slow())
        .oneshot(())
        .await
        .unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>());
    let layer = tokio_wheel::tower::TimeoutLayer::with_timer(timer.clone(), MS * 5);
    assert!(layer.layer(slow()).oneshot(()).await.is_err());
    let mut service = tokio_wheel::tower::Timeout::with_timer(slow(), timer.clone(), MS);
    let _ = service.get_ref();
    let _ = service.get_mut();
    let _ = tokio_wheel::tower::Timeout::new(service.into_inner(), MS);
}

async fn delay_queue(timer: &Timer) {
    let queue: DelayQueue<u32> = DelayQueue::with_timer(timer);
    assert!(queue.is_empty() && !queue.is_closed());
    let first: Key = queue.insert(1, MS * 10);
    let second = queue.insert_at(2, Instant::now() + MS * 30);
    let third = queue.try_insert(3, MS * 50).expect("inserted");
    let _ = queue
        .try_insert_at(4, Instant::now() + MS * 5)
        .expect("inserted");
    assert!(queue.reset(&second, MS * 20));
    assert!(queue.reset_at(&third, Instant::now() + MS * 40));
    assert!(queue.deadline(&first).is_some());
    assert_eq!(queue.len(), 4);
    assert!(queue.peek().is_some());
    queue.reserve(10);
    assert!(queue.capacity() >= 14);
    queue.shrink_to_fit();
    let mut stream = queue.clone();
    let mut expired: Expired<u32> = poll_fn(|cx| stream.poll_expired(cx)).await.expect("open");
    *expired.get_mut() += 10;
    assert_eq!(
        (*expired.get_ref(), expired.deadline() <= Instant::now()),
        (14, true)
    );
    let _ = (expired.key(), expired.into_inner());
    let next = poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut stream), cx)).await;
    assert_eq!(next.map(Expired::into_inner), Some(1));
    assert_eq!(queue.remove(&second), Some(2));
    assert_eq!(queue.remove(&second), None);
    assert!(!queue.reset(&first, MS) && queue.deadline(&first).is_none());
    queue.clear();
    assert!(queue.is_empty());
    queue.insert(5, MS);
    queue.close();
    assert_eq!(queue.next_expired().await.map(Expired::into_inner), Some(5));
    assert!(queue.next_expired().await.is_none());
    // A timer at max_pending still takes queue values: they are not its callbacks.
    let capped = Timer::builder().max_pending(1).build().expect("timer");
    let _full = capped
        .schedule(Duration::from_secs(60), || ())
        .expect("scheduled");
    let queue = DelayQueue::with_timer(&capped);
    let start = Instant::now();
    queue.try_insert(3, MS * 10).expect("inserted");
    let next: NextExpired<'_, u32> = queue.next_expired();
    assert_eq!(next.await.map(Expired::into_inner), Some(3));
    assert!(start.elapsed() >= MS * 10);
    let _ = format!("{queue:?} {:?}", queue.next_expired());
    let roomy: DelayQueue<u8> = DelayQueue::with_capacity(8);
    assert!(roomy.capacity() >= 8);
}

async fn io_timeouts(timer: &Timer) {
    let (client, mut server) = tokio::io::duplex(64);
    let mut stream = TimeoutStream::with_timer(client, timer);
    stream.set_read_timeout(Some(MS * 20));
    stream.set_write_timeout(Some(MS * 20));
    assert_eq!(stream.read_timeout(), Some(MS * 20));
    assert_eq!(stream.write_timeout(), Some(MS * 20));
    server.write_all(b"hi").await.expect("write");
    let mut buf = [0; 2];
    stream.read_exact(&mut buf).await.expect("read");
    stream.write_all(b"ok").await.expect("write");
    server.read_exact(&mut buf).await.expect("read");
    let _ = stream.get_ref();
    let _ = stream.get_mut();
    let _ = format!("{stream:?}");
    let start = Instant::now();
    let err = stream.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    assert!(start.elapsed() >= MS * 20);
    stream.set_read_timeout(None);
    let _client = stream.into_inner();
    let (client, _server) = tokio::io::duplex(64);
    let mut pinned = std::pin::pin!(TimeoutStream::with_timer(client, timer));
    pinned.as_mut().set_read_timeout_pinned(Some(MS));
    pinned.as_mut().set_write_timeout_pinned(None);
    pinned.as_mut().set_idle_timeout_pinned(None);
    let _ = pinned.as_mut().get_pin_mut();
    io_read_times_out(timer, MS * 5).await;
    io_idle_cuts_both_halves(timer).await;
}

/// The idle timeout through `tokio::io::split` halves waiting in two tasks on a
/// silent peer: both fail with `TimedOut`, never early.
async fn io_idle_cuts_both_halves(timer: &Timer) {
    let (client, _server) = tokio::io::duplex(4);
    let mut stream = TimeoutStream::with_timer(client, timer);
    stream.set_idle_timeout(Some(MS * 20));
    assert_eq!(stream.idle_timeout(), Some(MS * 20));
    let (mut reader, mut writer) = tokio::io::split(stream);
    let start = Instant::now();
    let read = tokio::spawn(async move { reader.read(&mut [0; 4]).await.map(drop) });
    let written = writer.write_all(&[0; 64]).await;
    assert_eq!(written.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    let read = tokio::time::timeout(MS * 2000, read)
        .await
        .expect("the read was never cut")
        .expect("the read's task");
    assert_eq!(read.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    assert!(start.elapsed() >= MS * 20);
}

/// A read from a silent peer through `timer` fails with `TimedOut`, never early.
async fn io_read_times_out(timer: &Timer, after: Duration) {
    let (client, _server) = tokio::io::duplex(64);
    let mut stream = TimeoutStream::with_timer(client, timer);
    stream.set_read_timeout(Some(after));
    let start = Instant::now();
    let err = stream.read(&mut [0; 4]).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    assert!(start.elapsed() >= after);
}

fn errors() {
    let elapsed: tokio_wheel::error::Elapsed = Elapsed::new();
    let error: tokio_wheel::error::Error = Error::AtCapacity { max: 1 };
    let _ = (
        elapsed.to_string(),
        error.to_string(),
        Error::Shutdown.to_string(),
        format!("{elapsed:?} {error:?}"),
        std::io::Error::from(elapsed),
    );
    assert!(error.is_at_capacity() && !error.is_shutdown() && !error.is_invalid());
}

/// Shutdown: callbacks come back, futures and queued values are still never early,
/// nothing spins.
async fn shutdown(timer: Timer, queue: &DelayQueue<&'static str>) {
    timer
        .schedule(Duration::from_secs(60), || ())
        .expect("scheduled")
        .detach();
    queue.insert("first", MS * 20);
    let pending = tokio::spawn({
        let timer = timer.clone();
        async move { timer.sleep(MS * 30).await }
    });
    tokio::task::yield_now().await;
    let start = Instant::now();
    // The detached callback; the queue's values are not the timer's callbacks.
    let unfired: Vec<Unfired> = timer.shutdown().await;
    assert_eq!(unfired.len(), 1);
    for unfired in unfired {
        let _ = unfired.deadline();
        unfired.run();
    }
    let refused: TryInsertError<_> = queue.try_insert("refused", MS).unwrap_err();
    assert_eq!(refused.error(), &Error::Shutdown);
    let _ = (
        refused.to_string(),
        format!("{refused:?}"),
        refused.into_inner(),
    );
    queue.insert("late", MS * 30);
    let mut order = Vec::new();
    for _ in 0..2 {
        let expired = queue.next_expired().await.expect("open");
        assert!(Instant::now() >= expired.deadline(), "early after shutdown");
        order.push(expired.into_inner());
    }
    assert_eq!(order, ["first", "late"]);
    assert!(start.elapsed() >= MS * 20);
    io_read_times_out(&timer, MS * 10).await;
    assert!(timer.is_shutdown());
    assert_eq!(timer.schedule(MS, || ()).unwrap_err(), Error::Shutdown);
    pending.await.expect("sleep");
    let mut interval = timer.interval(MS * 10);
    for _ in 0..3 {
        interval.tick().await;
    }
    assert!(start.elapsed() >= MS * 20);
    assert!(timer
        .timeout(MS * 5, std::future::pending::<()>())
        .await
        .is_err());
}

/// The driver's runtime dropped under pending sleeps, polled from another runtime and
/// from no runtime at all.
fn runtime_loss() {
    let driver = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let timer = Timer::builder().build_on(driver.handle()).expect("timer");
    let caller = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let sleep = timer.sleep(MS * 100);
    let handle = timer
        .schedule(Duration::from_secs(60), || ())
        .expect("scheduled");
    let waiter = std::thread::spawn(move || caller.block_on(sleep));
    // A queue with values pending and a consumer waiting on another runtime.
    let queue = DelayQueue::with_timer(&timer);
    let consumer = std::thread::spawn({
        let queue = queue.clone();
        move || {
            let value = block_on(queue.next_expired()).map(Expired::into_inner);
            (value, std::time::Instant::now())
        }
    });
    let queued = queue.insert(7u8, MS * 60);
    let due = queue.deadline(&queued).expect("pending").into_std();
    std::thread::sleep(MS * 20);
    drop(driver);
    waiter.join().expect("sleep");
    assert!(timer.is_shutdown());
    let (value, at) = consumer.join().expect("consumer");
    assert_eq!(value, Some(7));
    assert!(at >= due, "early after the runtime's loss");
    queue.insert(8, MS * 10);
    assert!(queue.reset(&queue.insert(9, MS * 5), MS * 15));
    assert_eq!(
        block_on(queue.next_expired()).map(Expired::into_inner),
        Some(8)
    );
    assert_eq!(
        block_on(queue.next_expired()).map(Expired::into_inner),
        Some(9)
    );
    block_on(io_read_times_out(&timer, MS * 10));
    let start = std::time::Instant::now();
    block_on(timer.sleep(MS * 20));
    assert!(start.elapsed() >= MS * 20);
    let mut interval = timer.interval(MS * 10);
    for _ in 0..3 {
        block_on(interval.tick());
    }
    assert!(start.elapsed() >= MS * 40);
    assert!(!handle.is_expired());
    let unfired = block_on(timer.shutdown());
    assert_eq!(unfired.len(), 1);
}

/// A minimal executor with no Tokio runtime: a thread that parks until woken.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}
