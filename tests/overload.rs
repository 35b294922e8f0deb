//! On time under overload: with the run queue full, a due timer's task is woken in the
//! same pass over Tokio's timers as a Tokio sleep with the same deadline, not after
//! the driver task's own turn behind every ready task.
//!
//! The runtime is current-thread with the paused clock; busy tasks keep the run queue
//! full and move the clock themselves (`advance`), so which task runs when is decided
//! by the scheduler alone. Each test records the order in which the tasks run and
//! counts the busy polls between the Tokio sleep's task and ours.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use std::future::Future;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use tokio_wheel::{DelayQueue, Instant, Timer};

/// Busy tasks: each poll of one is a turn of the run queue that a woken task waits
/// for, if it is queued behind them.
const BUSY: usize = 50;

/// What ran, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    Busy,
    Tokio,
    Wheel,
}

type Log = Arc<Mutex<Vec<Ran>>>;

/// Runs `ours` (which completes at `deadline` on a 1 ms-tick timer) beside a Tokio
/// sleep to the same deadline, with [`BUSY`] tasks keeping the run queue full and
/// moving the paused clock by 100 µs a poll; returns how many busy polls ran between
/// the two completions.
fn busy_polls_between<F>(ours: impl FnOnce(Timer, Instant) -> F) -> usize
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let timer = Timer::builder()
            .tick(Duration::from_millis(1))
            .build()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(20);
        let log: Log = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut busy = Vec::new();
        for _ in 0..BUSY {
            let (log, stop) = (log.clone(), stop.clone());
            busy.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    log.lock().unwrap().push(Ran::Busy);
                    tokio::time::advance(Duration::from_micros(100)).await;
                }
            }));
        }
        let tokio_side = {
            let log = log.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(deadline).await;
                log.lock().unwrap().push(Ran::Tokio);
            })
        };
        let wheel_side = {
            let (log, ours) = (log.clone(), ours(timer.clone(), deadline));
            tokio::spawn(async move {
                ours.await;
                assert!(Instant::now() >= deadline, "early");
                log.lock().unwrap().push(Ran::Wheel);
            })
        };
        tokio_side.await.unwrap();
        wheel_side.await.unwrap();
        stop.store(true, Ordering::SeqCst);
        for task in busy {
            task.await.unwrap();
        }
        let log = log.lock().unwrap();
        let at = |ran| log.iter().position(|r| *r == ran).unwrap();
        let (tokio_at, wheel_at) = (at(Ran::Tokio), at(Ran::Wheel));
        log[tokio_at.min(wheel_at)..tokio_at.max(wheel_at)]
            .iter()
            .filter(|r| **r == Ran::Busy)
            .count()
    })
}

/// Fewer busy polls between the two than there are busy tasks: ours was not queued
/// behind the run queue a second time (the driver task's turn, then its wakeups).
#[track_caller]
fn assert_one_wait(between: usize) {
    assert!(
        between < BUSY,
        "{between} busy polls between the Tokio sleep's task and ours: a second wait"
    );
}

#[test]
fn a_due_sleep_wakes_its_task_in_tokios_pass() {
    assert_one_wait(busy_polls_between(|timer, deadline| async move {
        timer.sleep_until(deadline).await
    }));
}

#[test]
fn a_due_timeout_wakes_its_task_in_tokios_pass() {
    assert_one_wait(busy_polls_between(|timer, deadline| async move {
        let pending = std::future::pending::<()>();
        assert!(timer.timeout_at(deadline, pending).await.is_err());
    }));
}

#[test]
fn an_intervals_due_tick_wakes_its_task_in_tokios_pass() {
    assert_one_wait(busy_polls_between(|timer, deadline| async move {
        let start = deadline - Duration::from_millis(10);
        let mut interval = timer.interval_at(start, Duration::from_millis(10));
        assert_eq!(interval.tick().await, start);
        assert_eq!(interval.tick().await, deadline);
    }));
}

#[test]
fn a_due_delay_queue_value_wakes_its_consumer_in_tokios_pass() {
    assert_one_wait(busy_polls_between(|timer, deadline| async move {
        let queue = DelayQueue::with_timer(&timer);
        let _key = queue.insert_at("due", deadline);
        let mut consumer = queue.clone();
        assert_eq!(consumer.next().await.map(|e| e.into_inner()), Some("due"));
        drop(queue);
    }));
}

#[test]
fn an_idle_cut_wakes_its_task_in_tokios_pass() {
    assert_one_wait(busy_polls_between(|timer, deadline| async move {
        let idle = deadline - Instant::now();
        let (client, _server) = tokio::io::duplex(64);
        let mut stream = tokio_wheel::io::TimeoutStream::with_timer(client, &timer);
        stream.set_read_timeout(Some(idle));
        let mut buf = [0; 8];
        let err = stream.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let _ = stream.write_all(b"").await;
    }));
}

/// The free functions' timer, per runtime with `test-util`, wakes from Tokio's pass
/// too.
#[cfg(feature = "test-util")]
#[test]
fn the_free_functions_due_sleep_wakes_its_task_in_tokios_pass() {
    assert_one_wait(busy_polls_between(|_, deadline| async move {
        tokio_wheel::sleep_until(deadline).await
    }));
}

/// The thread each wake of a task came from, recorded before passing the wake on.
struct RecordWakes {
    threads: Arc<Mutex<Vec<Option<String>>>>,
    task: std::task::Waker,
}

impl std::task::Wake for RecordWakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let name = std::thread::current().name().map(str::to_owned);
        self.threads.lock().unwrap().push(name);
        self.task.wake_by_ref();
    }
}

/// The names of the threads that woke the task awaiting a free `sleep` of `ms`,
/// awaited on `runtime` (the real clock).
fn free_sleep_woken_from(runtime: tokio::runtime::Runtime, ms: u64) -> Vec<Option<String>> {
    runtime.block_on(async {
        tokio::spawn(async move {
            let threads: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
            let mut sleep = tokio_wheel::sleep(Duration::from_millis(ms));
            let start = Instant::now();
            std::future::poll_fn(|cx| {
                let recording = std::task::Waker::from(Arc::new(RecordWakes {
                    threads: threads.clone(),
                    task: cx.waker().clone(),
                }));
                std::pin::Pin::new(&mut sleep).poll(&mut std::task::Context::from_waker(&recording))
            })
            .await;
            let took = start.elapsed();
            // The real clock: never early; late by less than the default tick and a
            // busy machine's slack.
            assert!(took >= Duration::from_millis(ms), "early: {took:?}");
            assert!(
                took < Duration::from_millis(ms) + common::TICK + common::SLACK,
                "late: {took:?}"
            );
            let woken = threads.lock().unwrap().clone();
            woken
        })
        .await
        .unwrap()
    })
}

/// The free functions use a timer on the caller's runtime, whose due timers wake their
/// tasks from that runtime's own timer pass (on its thread), not from the process-wide
/// timer's thread: a busy runtime takes wakeups from other threads once every few
/// dozen tasks. Real clock, with and without `test-util`.
#[test]
fn the_free_functions_wake_their_tasks_from_the_callers_runtime() {
    let current_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("caller")
        .build()
        .unwrap();
    let main = std::thread::current().name().map(str::to_owned);
    let woken = free_sleep_woken_from(current_thread, 20);
    assert!(!woken.is_empty(), "the sleep completed without a wake");
    assert!(
        woken.iter().all(|thread| *thread == main),
        "woken from {woken:?}, not the runtime's thread {main:?}"
    );
    let multi_thread = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("caller-worker")
        .build()
        .unwrap();
    let woken = free_sleep_woken_from(multi_thread, 20);
    assert!(!woken.is_empty(), "the sleep completed without a wake");
    assert!(
        woken
            .iter()
            .all(|thread| thread.as_deref() == Some("caller-worker")),
        "woken from {woken:?}, not one of the runtime's workers"
    );
}
