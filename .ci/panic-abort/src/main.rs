//! Every public entry point of tokio-wheel, in a program built with
//! `panic = "abort"`: any panic the crate let out, caught or not, would abort it.
//! One function per area, so that a new entry point is one more call.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_wheel::{
    Builder, Elapsed, Error, Executor, Instant, Interval, MissedTickBehavior, Scheduled, Sleep,
    Stats, Timeout, Timer, Unfired,
};

const MS: Duration = Duration::from_millis(1);

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
        default_timer().await;
        hyper_timer(&timer).await;
        tower_layer(&timer).await;
        shutdown(timer).await;
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
    sleep.reset(Instant::now() + MS * 10);
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
    let mut at = timer.interval_at(Instant::now() + MS * 5, Duration::ZERO);
    at.tick().await;
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
    assert!(cancelled.cancel());
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
    let lateness = stats.lateness;
    assert_eq!(lateness.total(), stats.fired);
    let _ = (
        lateness.counts(),
        lateness.at_most(MS),
        format!("{stats:?}"),
    );
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
    assert!(start.elapsed() >= MS * 15);
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

/// Shutdown: callbacks come back, futures are still never early, nothing spins.
async fn shutdown(timer: Timer) {
    timer
        .schedule(Duration::from_secs(60), || ())
        .expect("scheduled")
        .detach();
    let pending = tokio::spawn({
        let timer = timer.clone();
        async move { timer.sleep(MS * 30).await }
    });
    tokio::task::yield_now().await;
    let start = Instant::now();
    let unfired: Vec<Unfired> = timer.shutdown().await;
    assert_eq!(unfired.len(), 1);
    for unfired in unfired {
        let _ = unfired.deadline();
        unfired.run();
    }
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
    std::thread::sleep(MS * 20);
    drop(driver);
    waiter.join().expect("sleep");
    assert!(timer.is_shutdown());
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
