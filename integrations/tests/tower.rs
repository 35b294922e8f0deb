//! `tokio_wheel::tower::{TimeoutLayer, Timeout}` (feature `tower`): in a
//! `ServiceBuilder` stack with the paused clock, and behind a real axum server on
//! 127.0.0.1 with axum's `HandleErrorLayer` recipe unchanged. `TimeoutLayer::new`'s
//! default timer follows the real clock, or with this package's feature `test-util`
//! (tokio-wheel's) the caller's paused one: CI runs both builds.

use std::task::Poll;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_wheel::tower::TimeoutLayer;
use tokio_wheel::Timer;
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, Layer, Service, ServiceBuilder, ServiceExt};

const TICK: Duration = Duration::from_millis(10);
/// The paused tests' deadline.
#[cfg(feature = "test-util")]
const TIMEOUT: Duration = Duration::from_millis(100);

fn timer() -> Timer {
    Timer::builder().tick(TICK).build().unwrap()
}

/// A service answering each request (a latency) after that latency, or with an error
/// for `None`.
#[cfg(feature = "test-util")]
async fn answer_after(latency: Option<Duration>) -> Result<&'static str, std::io::Error> {
    match latency {
        Some(latency) => {
            tokio::time::sleep(latency).await;
            Ok("answer")
        }
        None => Err(std::io::Error::other("inner failure")),
    }
}

// An explicit timer follows the paused clock with `test-util` only.
#[cfg(feature = "test-util")]
#[tokio::test(start_paused = true)]
async fn in_a_service_builder_slow_requests_time_out_on_time_and_fast_ones_answer() {
    let timer = timer();
    let mut service = ServiceBuilder::new()
        .layer(TimeoutLayer::with_timer(timer.clone(), TIMEOUT))
        .service(service_fn(answer_after));

    let start = Instant::now();
    let fast = service.ready().await.unwrap().call(Some(TIMEOUT / 2)).await;
    assert_eq!(fast.unwrap(), "answer");
    assert_eq!(start.elapsed(), TIMEOUT / 2);

    let start = Instant::now();
    let slow = service.ready().await.unwrap().call(Some(TIMEOUT * 3)).await;
    let took = start.elapsed();
    let err = slow.unwrap_err();
    assert!(err.is::<Elapsed>(), "{err}");
    assert!(took >= TIMEOUT && took < TIMEOUT + TICK, "{took:?}");

    // The inner service's own error passes through, boxed, and is not an Elapsed.
    let err = service.ready().await.unwrap().call(None).await.unwrap_err();
    assert!(!err.is::<Elapsed>());
    assert_eq!(err.to_string(), "inner failure");

    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.fired, stats.cancelled),
        (0, 1, 1),
        "{stats:?}"
    );
}

// An explicit timer follows the paused clock with `test-util` only.
#[cfg(feature = "test-util")]
#[tokio::test(start_paused = true)]
async fn an_answer_ready_when_the_deadline_passes_wins() {
    let timer = timer();
    let start = Instant::now();
    // Ready once the deadline has passed, but never wakes its task by itself: only
    // the timeout's sleep brings the poll that finds it ready.
    let mut service =
        TimeoutLayer::with_timer(timer.clone(), TIMEOUT).layer(service_fn(move |()| {
            std::future::poll_fn(move |_| match start.elapsed() >= TIMEOUT {
                true => Poll::Ready(Ok::<_, BoxError>("just in time")),
                false => Poll::Pending,
            })
        }));
    let answer = service.ready().await.unwrap().call(()).await;
    assert_eq!(answer.unwrap(), "just in time");
    assert!(start.elapsed() >= TIMEOUT && start.elapsed() < TIMEOUT + TICK);
}

#[tokio::test]
async fn the_layer_without_a_timer_uses_the_default_one() {
    // The default timer runs on its own thread and follows the real clock.
    let mut service =
        TimeoutLayer::new(Duration::from_millis(20)).layer(service_fn(|(): ()| async {
            std::future::pending::<Result<(), BoxError>>().await
        }));
    let start = std::time::Instant::now();
    let err = service.ready().await.unwrap().call(()).await.unwrap_err();
    let took = start.elapsed();
    assert!(err.is::<Elapsed>());
    assert!(took >= Duration::from_millis(20), "early: {took:?}");
    // Real clock: tolerant of a loaded machine, but bounded.
    assert!(
        took < Duration::from_millis(20) + Duration::from_secs(2),
        "late: {took:?}"
    );
}

/// GET `path` on a fresh connection; the status, and how long it took.
async fn get_status(addr: std::net::SocketAddr, path: &str) -> (StatusCode, Duration) {
    let start = Instant::now();
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", "127.0.0.1")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    (response.status(), start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_real_axum_server_slow_handlers_time_out_and_fast_ones_answer() {
    const TIMEOUT: Duration = Duration::from_millis(200);
    let timer = timer();
    let app = Router::new()
        .route("/fast", get(|| async { "fast" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "slow"
            }),
        )
        // axum's recipe for tower's timeout, with only the layer's import changed.
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|err: BoxError| async move {
                    if err.is::<Elapsed>() {
                        StatusCode::REQUEST_TIMEOUT
                    } else {
                        StatusCode::INTERNAL_SERVER_ERROR
                    }
                }))
                .layer(TimeoutLayer::with_timer(timer.clone(), TIMEOUT)),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });

    let requests: Vec<_> = (0..20)
        .map(|n| tokio::spawn(get_status(addr, if n % 4 == 0 { "/slow" } else { "/fast" })))
        .collect();
    let (mut slow, mut fast) = (0, 0);
    for (n, request) in requests.into_iter().enumerate() {
        let (status, took) = request.await.unwrap();
        if n % 4 == 0 {
            assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
            assert!(took >= TIMEOUT, "timed out early: {took:?}");
            // Real clock: tolerant of a loaded machine.
            assert!(took < TIMEOUT + Duration::from_secs(2), "{took:?}");
            slow += 1;
        } else {
            assert_eq!(status, StatusCode::OK);
            fast += 1;
        }
    }
    assert_eq!((slow, fast), (5, 15));
    stop.send(()).unwrap();
    server.await.unwrap();
    let stats = timer.stats();
    assert_eq!(stats.pending, 0, "{stats:?}");
    assert_eq!(stats.fired, 5, "{stats:?}");
}

/// A paused runtime whose clock stands still while the real clock runs on: the default
/// timer follows the real clock, so a request answered in real time well within its
/// timeout is answered, not cut off because the paused clock lags.
#[test]
// Release builds: a debug build without `test-util` refuses a paused runtime (below).
#[cfg(all(not(feature = "test-util"), not(debug_assertions)))]
fn the_default_timer_layer_in_a_paused_runtime_behind_the_real_clock_is_never_early() {
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    // The paused clock is frozen where the runtime was built; the real one moves on.
    std::thread::sleep(Duration::from_millis(400));
    paused.block_on(async {
        let (answer, answered) = tokio::sync::oneshot::channel::<&'static str>();
        let mut answered = Some(answered);
        let mut service =
            TimeoutLayer::new(Duration::from_millis(300)).layer(service_fn(move |()| {
                let answered = answered.take().unwrap();
                async move { Ok::<_, BoxError>(answered.await.unwrap()) }
            }));
        // Answered after 50 ms of real time, 250 ms before the deadline.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            answer.send("in time").unwrap();
        });
        let start = std::time::Instant::now();
        let answer = service.ready().await.unwrap().call(()).await;
        assert_eq!(
            answer.expect("timed out early"),
            "in time",
            "after {:?}",
            start.elapsed()
        );
    });
}

/// A paused runtime whose clock has been advanced an hour: a 50 ms timeout on the
/// default timer (real clock) elapses after about 50 ms of real time, not an hour.
#[test]
// Release builds: a debug build without `test-util` refuses a paused runtime (below).
#[cfg(all(not(feature = "test-util"), not(debug_assertions)))]
fn the_default_timer_layer_in_a_paused_runtime_ahead_of_the_real_clock_does_not_hang() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let paused = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        paused.block_on(async {
            tokio::time::advance(Duration::from_secs(3600)).await;
            let mut service =
                TimeoutLayer::new(Duration::from_millis(50)).layer(service_fn(|(): ()| async {
                    std::future::pending::<Result<(), BoxError>>().await
                }));
            let start = std::time::Instant::now();
            let err = service.ready().await.unwrap().call(()).await.unwrap_err();
            done.send((err.is::<Elapsed>(), start.elapsed())).unwrap();
        });
    });
    let (elapsed, took) = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("a 50 ms timeout on the default timer had not elapsed after 10 s");
    assert!(elapsed);
    assert!(took >= Duration::from_millis(50), "early: {took:?}");
}

/// Debug builds without `test-util`: the layer's first request on a paused runtime
/// would be timed by the real clock while the test's stands still; it panics instead,
/// naming the feature to add.
#[test]
#[cfg(all(not(feature = "test-util"), debug_assertions))]
fn the_default_timer_layer_on_a_paused_runtime_without_test_util_names_the_feature() {
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        paused.block_on(async {
            let mut service = TimeoutLayer::new(Duration::from_millis(50))
                .layer(service_fn(|(): ()| async { Ok::<_, BoxError>(()) }));
            service.ready().await.unwrap().call(()).await.unwrap();
        })
    }))
    .expect_err("a paused runtime used the default timer without a word");
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    assert!(message.contains("test-util"), "{message}");
}

/// With the feature `test-util`, the layer without a timer uses one on the calling
/// runtime, so a paused test's clock times it: cut off on time, no real time spent.
#[tokio::test(start_paused = true)]
#[cfg(feature = "test-util")]
async fn with_test_util_the_default_timer_layer_follows_the_paused_clock() {
    const TIMEOUT: Duration = Duration::from_secs(30);
    let mut service = TimeoutLayer::new(TIMEOUT).layer(service_fn(|(): ()| async {
        std::future::pending::<Result<(), BoxError>>().await
    }));
    let real = std::time::Instant::now();
    let start = Instant::now();
    let err = service.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(err.is::<Elapsed>());
    let took = start.elapsed();
    assert!(took >= TIMEOUT, "early: {took:?}");
    assert!(
        took < TIMEOUT + TICK + Duration::from_millis(1),
        "late: {took:?}"
    );
    assert!(
        real.elapsed() < Duration::from_secs(10),
        "{:?} of real time",
        real.elapsed()
    );
}

/// tower's `TimeoutLayer::new` and `Timeout::new` are `const fn`s: a drop-in must be too.
#[test]
fn new_is_const_as_towers_is() {
    const LAYER: TimeoutLayer = TimeoutLayer::new(Duration::from_secs(1));
    const SERVICE: tokio_wheel::tower::Timeout<()> =
        tokio_wheel::tower::Timeout::new((), Duration::from_secs(1));
    let _ = (LAYER, SERVICE);
}

/// The first request through `TimeoutLayer::new` (the default timer's first use)
/// made where Tokio holds its context borrowed (a future dropped by `tokio::spawn` on
/// a runtime that has shut down) aborted the process. Run in a child process; the
/// layer works afterwards. Self-contained.
#[test]
fn the_first_request_while_tokio_holds_its_context_does_not_abort() {
    const NAME: &str = "the_first_request_while_tokio_holds_its_context_does_not_abort";
    const CHILD: &str = "TOKIO_WHEEL_TEST_CHILD";
    const MARKER: &str = "child: the layer works";
    if std::env::var_os(CHILD).is_none() {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains(MARKER),
            "child: {:?}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        return;
    }
    /// Runs its closure when dropped, as `tokio::spawn` on a closed runtime drops it.
    struct RunsWhenDropped<F: FnOnce() + Unpin>(Option<F>);
    impl<F: FnOnce() + Unpin> std::future::Future for RunsWhenDropped<F> {
        type Output = ();
        fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<()> {
            Poll::Ready(())
        }
    }
    impl<F: FnOnce() + Unpin> Drop for RunsWhenDropped<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    let layer = TimeoutLayer::new(Duration::from_millis(30));
    let slow = || service_fn(|(): ()| std::future::pending::<Result<(), BoxError>>());
    let closed = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let handle = closed.handle().clone();
    drop(closed);
    let (send, made) = std::sync::mpsc::channel();
    {
        let _closed = handle.enter();
        let layer = layer.clone();
        drop(tokio::spawn(RunsWhenDropped(Some(move || {
            let mut service = layer.layer(slow());
            let _ = send.send(service.call(()));
        }))));
    }
    let request = made.recv().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = std::time::Instant::now();
    let err = runtime.block_on(request).unwrap_err();
    assert!(err.is::<Elapsed>() && start.elapsed() < Duration::from_secs(5));
    let start = std::time::Instant::now();
    let err = runtime
        .block_on(layer.layer(slow()).oneshot(()))
        .unwrap_err();
    let took = start.elapsed();
    assert!(err.is::<Elapsed>());
    assert!(took >= Duration::from_millis(30), "early: {took:?}");
    assert!(
        took < Duration::from_millis(30) + Duration::from_secs(2),
        "late: {took:?}"
    );
    println!("{MARKER}");
}
