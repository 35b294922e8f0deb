//! Building or using timers where Tokio's context is borrowed or torn down.

use std::time::Duration;

use tokio_wheel::Timer;

mod common;
use common::{
    answer_while_tokio_holds_its_context, assert_child_ok, is_child, paused_runtime, run_in_child,
    runtime_with_time,
};

/// `build_on` a live runtime while Tokio holds its context borrowed (a future dropped
/// by `tokio::spawn` on a runtime that has shut down) returns a working timer: it
/// panicked ("already borrowed"), entering the runtime in place.
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
    let took = start.elapsed();
    // Real clock: never early; tolerant of a loaded machine, but bounded.
    assert!(took >= Duration::from_millis(30), "early: {took:?}");
    assert!(
        took < Duration::from_millis(30) + Duration::from_secs(2),
        "late: {took:?}"
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

/// The first use of the default timer there aborted the process: its initialisation
/// panicked entering its new runtime, and unwinding dropped that runtime, whose drop
/// panicked again. Run in a child process; the default timer works afterwards.
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
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(20), "early: {took:?}");
    assert!(
        took < Duration::from_millis(20) + Duration::from_secs(2),
        "late: {took:?}"
    );
    println!("child: default timer ok");
}

/// Something to run when this thread's locals are torn down.
type AtExit = Box<dyn FnOnce()>;

thread_local! {
    static AT_EXIT: std::cell::RefCell<Option<RunsAtExit>> = const { std::cell::RefCell::new(None) };
}

struct RunsAtExit(Option<AtExit>);

impl Drop for RunsAtExit {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// A timer whose driver runs on a (paused, an hour in) current-thread runtime, used
/// in a thread-local's destructor once the thread's Tokio context is torn down:
/// `sleep`, `timeout`, `schedule`, `interval` and its first `poll_tick` (and hyper's
/// `now`) neither panic (they did: the caller's Tokio clock, their fallback, panics
/// there with `test-util` on) nor measure from a clock behind the driver's (the real
/// one is an hour behind): every deadline is the driver's now plus the duration.
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
    let handle = driver.handle().clone();
    let (send, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Ours first: locals are torn down in reverse, so ours after Tokio's context.
        AT_EXIT.with(|_| {});
        drop(handle.enter());
        let at_exit: AtExit = Box::new(move || {
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
        });
        AT_EXIT.with(|slot| *slot.borrow_mut() = Some(RunsAtExit(Some(at_exit))));
    })
    .join()
    .unwrap();
    let (sleep, timeout, scheduled, first, hyper_now) = seen.recv().unwrap().unwrap();
    assert_eq!(sleep, now + after);
    assert_eq!(timeout, now + after);
    assert_eq!(scheduled, Ok(now + after));
    assert_eq!(first, std::task::Poll::Ready(now));
    if let Some(hyper_now) = hyper_now {
        assert_eq!(hyper_now, now.into_std());
    }
}
