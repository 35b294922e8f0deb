//! Timers where Tokio holds its context borrowed (inside the drop of a future
//! `tokio::spawn` refused on a runtime that has shut down) or has torn it down (a
//! thread-local's destructor): building one, the default timer's first use, and
//! sleeps, timeouts, intervals and callbacks used there neither panic nor abort, and
//! count from the driver's clock.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::Timer;

mod common;
use common::{
    answer_while_tokio_holds_its_context, assert_child_ok, assert_within, is_child, paused_runtime,
    run_in_child, runtime_with_time, timer_on_its_own_runtime, TICK,
};

/// `build_on` a live runtime while Tokio holds its context borrowed (a future dropped
/// by `tokio::spawn` on a runtime that has shut down) returns a working timer, not the
/// panic ("already borrowed") that entering the runtime in place would be.
#[test]
fn build_on_while_tokio_holds_its_context_returns_a_timer() {
    let runtime = runtime_with_time();
    let handle = runtime.handle().clone();
    let (send, made) = std::sync::mpsc::channel();
    let answer = answer_while_tokio_holds_its_context(move || {
        let built = Timer::builder().build_on(&handle);
        let answer = format!(
            "{:?}",
            built.as_ref().map(|_| "timer").map_err(|e| e.to_string())
        );
        let _ = send.send(built);
        answer
    });
    assert_eq!(answer, "Ok(\"timer\")");
    let timer = made.recv().unwrap().unwrap();
    let start = std::time::Instant::now();
    runtime.block_on(timer.sleep(Duration::from_millis(30)));
    // Real clock: never early; tolerant of a loaded machine, but bounded.
    assert_within(
        Duration::from_millis(30),
        start.elapsed(),
        Duration::from_secs(2),
    );
}

/// `build()` there is on a runtime that has shut down: `Error::Shutdown`, as
/// documented, not a panic.
#[test]
fn build_while_tokio_holds_its_context_is_an_error() {
    let answer = answer_while_tokio_holds_its_context(|| match Timer::builder().build() {
        Ok(_) => "a timer".into(),
        Err(e) => format!("{e:?}"),
    });
    assert_eq!(answer, "Shutdown");
}

/// The first use of the default timer there works, and so does the default timer
/// afterwards: no panic entering its new runtime, which unwinding would drop, whose
/// drop would panic again and abort the process. Run in a child process, as a path
/// that could abort.
#[test]
fn the_default_timers_first_use_while_tokio_holds_its_context_does_not_abort() {
    const NAME: &str = "the_default_timers_first_use_while_tokio_holds_its_context_does_not_abort";
    if !is_child() {
        return assert_child_ok(&run_in_child(NAME), "child: default timer ok");
    }
    let answer = answer_while_tokio_holds_its_context(|| {
        let sleep = tokio_wheel::sleep(Duration::from_millis(20));
        format!("{}", sleep.is_elapsed())
    });
    assert_eq!(answer, "false");
    let start = std::time::Instant::now();
    runtime_with_time().block_on(tokio_wheel::sleep(Duration::from_millis(20)));
    assert_within(
        Duration::from_millis(20),
        start.elapsed(),
        Duration::from_secs(2),
    );
    println!("child: default timer ok");
}

/// There, entering the driver's runtime to read its clock would panic: a reset
/// `Sleep` asked `is_elapsed` answers from what the driver has processed instead, as
/// Tokio's own `Sleep` answers.
#[test]
fn a_reset_sleep_asked_while_tokio_holds_its_context_does_not_panic() {
    let (driver, timer) = timer_on_its_own_runtime();
    let mut sleep = {
        let _driver = driver.enter();
        timer.sleep(Duration::from_secs(100))
    };
    std::pin::Pin::new(&mut sleep)
        .reset(Instant::from_std(std::time::Instant::now()) + Duration::from_secs(5));
    let answer =
        answer_while_tokio_holds_its_context(move || format!("is_elapsed: {}", sleep.is_elapsed()));
    assert_eq!(answer, "is_elapsed: false");
}

/// The same for `schedule` at the wheel's last step (a callback 400 years ahead
/// saturates there at a 10 ms tick), which must know whether the driver's clock has
/// passed that step: it reads that clock on a thread of its own (entering the
/// runtime there would panic; the clock has not passed the step, so the callback is
/// accepted), and dropping its handle counts it out (a panic there would leak it from
/// `max_pending` for good).
#[test]
fn schedule_at_the_last_step_while_tokio_holds_its_context_reads_the_clock_and_leaks_nothing() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let timer = runtime.block_on(async { Timer::builder().max_pending(1).build().unwrap() });
    let t = timer.clone();
    let answer = answer_while_tokio_holds_its_context(move || {
        let far =
            Instant::from_std(std::time::Instant::now()) + Duration::from_secs(86_400 * 365 * 400);
        match t.schedule_at(far, || ()) {
            Ok(_) => "scheduled".into(),
            Err(e) => format!("{e:?}"),
        }
    });
    assert_eq!(answer, "scheduled");
    let after = runtime.block_on(async { timer.schedule(Duration::from_secs(1), || ()) });
    assert!(after.is_ok(), "{:?}", after.err());
}

/// Something to run when a thread's locals are torn down.
type AtExit = Box<dyn FnOnce()>;

thread_local! {
    static AT_EXIT: std::cell::RefCell<Option<RunsAtExit>> = const { std::cell::RefCell::new(None) };
}

/// Runs its closure when dropped, with the thread's locals.
struct RunsAtExit(Option<AtExit>);

impl Drop for RunsAtExit {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// On a thread of its own: runs `set_up` inside `handle`'s runtime context, then what
/// it returns once the thread's locals are torn down, after Tokio's context (locals go
/// in the reverse order of their first use, and ours is used first). Returns when the
/// thread has ended.
fn at_exit_after_tokios_context(
    handle: tokio::runtime::Handle,
    set_up: impl FnOnce() -> AtExit + Send + 'static,
) {
    std::thread::spawn(move || {
        AT_EXIT.with(|_| {});
        let at_exit = {
            let _enter = handle.enter();
            set_up()
        };
        AT_EXIT.with(|slot| *slot.borrow_mut() = Some(RunsAtExit(Some(at_exit))));
    })
    .join()
    .unwrap();
}

/// A timer whose driver runs on a (paused, an hour in) current-thread runtime, used
/// in a thread-local's destructor once the thread's Tokio context is torn down:
/// `sleep`, `timeout`, `schedule`, `interval` and its first `poll_tick` (and hyper's
/// `now`) neither panic (the caller's Tokio clock, were it their fallback, panics there
/// with `test-util` on) nor measure from a clock behind the driver's (the real one is
/// an hour behind): every deadline is the driver's now plus the duration.
#[test]
fn in_a_thread_local_destructor_timers_neither_panic_nor_come_early() {
    let after = Duration::from_millis(50);
    let driver = paused_runtime();
    let (timer, now) = driver.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        let timer = Timer::builder()
            .tick(Duration::from_millis(10))
            .build()
            .unwrap();
        (timer, tokio::time::Instant::now())
    });
    let (send, seen) = std::sync::mpsc::channel();
    at_exit_after_tokios_context(driver.handle().clone(), move || {
        Box::new(move || {
            let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let sleep = timer.sleep(after).deadline();
                let timeout = timer
                    .timeout(after, std::future::pending::<()>())
                    .deadline();
                let scheduled = timer.schedule(after, || ()).map(|s| s.deadline());
                let mut interval = timer.interval(after);
                let waker = std::task::Waker::noop();
                let first = interval.poll_tick(&mut std::task::Context::from_waker(waker));
                #[cfg(feature = "hyper")]
                let hyper_now = Some(hyper::rt::Timer::now(&timer));
                #[cfg(not(feature = "hyper"))]
                let hyper_now: Option<std::time::Instant> = None;
                (sleep, timeout, scheduled, first, hyper_now)
            }));
            let _ = send.send(answer.map_err(|_| "panicked"));
        })
    });
    let (sleep, timeout, scheduled, first, hyper_now) = seen.recv().unwrap().unwrap();
    assert_eq!(sleep, now + after);
    assert_eq!(timeout, now + after);
    assert_eq!(scheduled, Ok(now + after));
    assert_eq!(first, std::task::Poll::Ready(now));
    if let Some(hyper_now) = hyper_now {
        assert_eq!(hyper_now, now.into_std());
    }
}

/// What a thread-local's destructor on a new thread sees of a `Sleep` of `timer` reset
/// to `after` from now, by `runtime`'s clock, once real time has moved on a little:
/// `is_elapsed`, then a poll.
fn seen_in_thread_local_teardown(
    runtime: &tokio::runtime::Runtime,
    timer: Timer,
    after: Duration,
) -> Vec<String> {
    let (seen, said) = std::sync::mpsc::channel();
    at_exit_after_tokios_context(runtime.handle().clone(), move || {
        let mut sleep = timer.sleep(Duration::from_secs(100));
        std::pin::Pin::new(&mut sleep).reset(Instant::now() + after);
        Box::new(move || {
            use std::panic::{catch_unwind, AssertUnwindSafe};
            std::thread::sleep(Duration::from_millis(30));
            let elapsed = catch_unwind(AssertUnwindSafe(|| sleep.is_elapsed()));
            let polled = catch_unwind(AssertUnwindSafe(|| {
                let waker = std::task::Waker::noop();
                std::pin::Pin::new(&mut sleep)
                    .poll(&mut std::task::Context::from_waker(waker))
                    .is_ready()
            }));
            let say = |what: &str, r: std::thread::Result<bool>| match r {
                Ok(answer) => format!("{what}: {answer}"),
                Err(_) => format!("{what}: panicked"),
            };
            let _ = seen.send(say("is_elapsed", elapsed));
            let _ = seen.send(say("ready", polled));
        })
    });
    said.iter().collect()
}

/// A reset `Sleep` asks the driver's clock by entering its runtime, which Tokio
/// refuses (with a panic) once the thread's Tokio context is torn down (it is read on
/// a thread of its own then); a `Sleep` used from a thread-local's destructor after
/// that must still answer, as Tokio's own `Sleep` does.
#[test]
fn a_reset_sleep_used_in_a_thread_local_destructor_does_not_panic() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let timer = runtime.block_on(async { Timer::new() });
    let seen = seen_in_thread_local_teardown(&runtime, timer, Duration::from_secs(5));
    assert_eq!(seen, ["is_elapsed: false", "ready: false"]);
}

/// There the driver's clock is read on a thread of its own, and the real clock is no
/// stand-in for a paused one (it runs on while the paused one stands): a reset `Sleep`
/// whose deadline the real clock has passed but the paused driver's has not is not
/// elapsed.
#[test]
fn in_a_thread_local_destructor_a_paused_drivers_deadline_is_not_passed_early() {
    let runtime = paused_runtime();
    let timer = runtime.block_on(async { Timer::builder().tick(TICK).build().unwrap() });
    let seen = seen_in_thread_local_teardown(&runtime, timer, Duration::from_millis(20));
    assert_eq!(seen, ["is_elapsed: false", "ready: false"]);
}
