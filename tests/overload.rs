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
