//! The rows of docs/RELIABILITY.md not already covered by another test file.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Error, Sleep, Timer};

mod common;
use common::{timer, TICK};

#[tokio::test(start_paused = true)]
async fn schedule_saturates_huge_delays() {
    let timer = timer();
    let now = Instant::now();
    let max = timer.schedule(Duration::MAX, || unreachable!()).unwrap();
    // About 30 years, as tokio's: not 292 (where an `i64` of nanoseconds ends).
    assert!(max.deadline() > now + Duration::from_secs(86_400 * 365 * 29));
    assert!(max.deadline() < now + Duration::from_secs(86_400 * 365 * 31));
    let far = timer
        .schedule_at(
            now + Duration::from_secs(86_400 * 365 * 500),
            || unreachable!(),
        )
        .unwrap();
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(!max.is_expired() && !far.is_expired());
    assert_eq!(timer.pending(), 2);
}

/// One saturation rule for every entry point that takes a duration: a hundred years
/// is capped where `sleep` caps it (about 30 years, as Tokio's), not kept as given
/// by some and capped by others.
#[tokio::test(start_paused = true)]
async fn every_entry_point_caps_a_duration_where_sleep_does() {
    let timer = timer();
    let century = Duration::from_secs(86_400 * 365 * 100);
    let capped = timer.sleep(century).deadline();
    assert!(capped < Instant::now() + Duration::from_secs(86_400 * 365 * 31));
    let timeout = timer.timeout(century, std::future::pending::<()>());
    let scheduled = timer.schedule(century, || unreachable!()).unwrap();
    let moved = timer.schedule(TICK, || unreachable!()).unwrap();
    assert!(moved.reset(century));
    let queue = tokio_wheel::DelayQueue::with_timer(&timer);
    let inserted = queue.insert("a", century);
    let reset = queue.insert("b", TICK);
    assert!(queue.reset(&reset, century));
    for (what, deadline) in [
        ("timeout", timeout.deadline()),
        ("schedule", scheduled.deadline()),
        ("Scheduled::reset", moved.deadline()),
        ("DelayQueue::insert", queue.deadline(&inserted).unwrap()),
        ("DelayQueue::reset", queue.deadline(&reset).unwrap()),
    ] {
        assert_eq!(deadline, capped, "{what}");
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_every_timer_handle_leaves_pending_sleeps_working() {
    let timer = timer();
    let start = Instant::now();
    let sleeps: Vec<Sleep> = (1..=5)
        .map(|i| timer.sleep(Duration::from_millis(i * 100)))
        .collect();
    drop(timer); // the sleeps hold the timer; nothing is lost
    let mut tasks = tokio::task::JoinSet::new();
    for (i, sleep) in sleeps.into_iter().enumerate() {
        tasks.spawn(async move {
            sleep.await;
            let requested = Duration::from_millis((i as u64 + 1) * 100);
            let took = start.elapsed();
            assert!(took >= requested && took < requested + TICK, "{took:?}");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_callback_that_schedules_a_million_more() {
    const MORE: usize = 1_000_000;
    let timer = timer();
    let ran = Arc::new(AtomicUsize::new(0));
    let (t, r) = (timer.clone(), ran.clone());
    timer
        .schedule(TICK, move || {
            for _ in 0..MORE {
                let r = r.clone();
                t.schedule(TICK, move || {
                    r.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap()
                .detach();
            }
        })
        .unwrap()
        .detach();
    // A future on the same timer, due while the million fire, is not starved.
    let start = Instant::now();
    timer.sleep(TICK * 3).await;
    assert!(start.elapsed() < TICK * 4);
    while ran.load(Ordering::Relaxed) < MORE {
        timer.sleep(TICK).await;
    }
    assert_eq!(ran.load(Ordering::Relaxed), MORE);
    assert_eq!(timer.pending(), 0);
    assert!(
        timer.stats().driver_wakeups > MORE as u64 / 4096,
        "the driver worked in bounded batches"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sleep_polled_from_two_tasks_in_turn_wakes_the_last() {
    let timer = timer();
    let sleep = Arc::new(Mutex::new(timer.sleep(Duration::from_millis(50))));
    let woke = Arc::new(Mutex::new(Vec::new()));
    // Task A polls first, then task B takes over; only B should be woken at the tick.
    let poller = |name: &'static str| {
        let (sleep, woke) = (sleep.clone(), woke.clone());
        futures::future::poll_fn(move |cx| {
            let mut sleep = sleep.lock().unwrap();
            match std::pin::Pin::new(&mut *sleep).poll(cx) {
                std::task::Poll::Ready(()) => {
                    woke.lock().unwrap().push(name);
                    std::task::Poll::Ready(())
                }
                std::task::Poll::Pending => std::task::Poll::Pending,
            }
        })
    };
    let mut a = tokio_test::task::spawn(poller("a"));
    let mut b = tokio_test::task::spawn(poller("b"));
    assert!(a.poll().is_pending());
    assert!(b.poll().is_pending());
    assert_eq!(timer.pending(), 1, "one registration for both");
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(!a.is_woken(), "the replaced waker is not woken");
    assert!(b.is_woken());
    assert!(b.poll().is_ready());
    assert!(a.poll().is_ready(), "and A sees it elapsed when it polls");
    assert_eq!(*woke.lock().unwrap(), ["b", "a"]);
}

use std::future::Future as _;

/// A waker that panics when woken, as a user's own `Waker` may.
struct PanicsOnWake;

impl std::task::Wake for PanicsOnWake {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics (expected in this test)");
    }
}

/// A pending `Sleep` registered with a [`PanicsOnWake`] waker.
fn sleep_with_a_panicking_waker(timer: &Timer, after: Duration) -> Sleep {
    use std::future::Future;
    use std::task::{Context, Waker};
    let mut sleep = timer.sleep(after);
    let waker = Waker::from(Arc::new(PanicsOnWake));
    let polled = std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
    assert!(polled.is_pending());
    sleep
}

/// A task that sleeps `after` on `timer` and returns when it woke.
fn spawn_a_sleep(timer: &Timer, after: Duration) -> tokio::task::JoinHandle<Instant> {
    let timer = timer.clone();
    tokio::spawn(async move {
        timer.sleep(after).await;
        Instant::now()
    })
}

/// The driver wakes the tasks of the futures that fired after taking them out of the
/// wheel: a waker that panics there must not take the driver down with the timers
/// fired in the same turn (nothing could wake those tasks again).
#[tokio::test(start_paused = true)]
async fn a_waker_that_panics_when_its_timer_fires_strands_nothing() {
    let timer = timer();
    let start = Instant::now();
    let after = TICK * 5;
    let other = spawn_a_sleep(&timer, after);
    tokio::task::yield_now().await;
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    timer
        .schedule_detached(after, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let _panicking = sleep_with_a_panicking_waker(&timer, after);
    let woke = tokio::time::timeout(after * 10, other)
        .await
        .expect("the other sleep of that turn never completed")
        .unwrap();
    assert!(
        woke - start >= after && woke - start < after + TICK,
        "{:?}",
        woke - start
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the callback of that turn ran"
    );
    assert_eq!(timer.stats().callback_panics, 1);
    // The driver lives on: a later sleep is neither early nor lost.
    let later = Instant::now();
    timer.sleep(after).await;
    assert!(later.elapsed() >= after && later.elapsed() < after + TICK);
}

/// `shutdown` wakes every pending future, on the caller's thread, so that each goes
/// on to its deadline on another clock: one panicking waker must not leave the others
/// asleep for ever, nor unwind into the caller.
#[tokio::test(start_paused = true)]
async fn a_waker_that_panics_at_shutdown_strands_nothing() {
    let timer = timer();
    let t = timer.clone();
    let hour = Duration::from_secs(3600);
    let start = Instant::now();
    let other = tokio::spawn(async move { t.sleep(hour).await });
    tokio::task::yield_now().await;
    let _panicking = sleep_with_a_panicking_waker(&timer, hour);
    assert!(timer.shutdown().await.is_empty());
    tokio::time::timeout(hour + TICK, other)
        .await
        .expect("shutdown left a sleep pending")
        .unwrap();
    assert!(start.elapsed() >= hour, "early: {:?}", start.elapsed());
    assert_eq!(timer.stats().callback_panics, 1);
}

/// Past the end of the wheel's range (2^44 quarter ticks, 139 years at a 1 ms tick:
/// only the paused clock gets there), `schedule` says so rather than blaming capacity,
/// and a new sleep saturates as documented: its `deadline()` is the range's end,
/// already past, and it completes at once, never before that deadline.
#[tokio::test(start_paused = true)]
async fn past_the_end_of_the_range_schedule_says_so_and_sleeps_saturate() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    tokio::time::advance(Duration::from_secs(86_400 * 365 * 140)).await;
    timer.catch_up().await;
    let hour = Duration::from_secs(3600);
    assert_eq!(
        timer.schedule(hour, || unreachable!()).unwrap_err(),
        Error::OutOfRange
    );
    assert_eq!(
        timer
            .schedule_detached(hour, || unreachable!())
            .unwrap_err(),
        Error::OutOfRange
    );
    assert!(Error::OutOfRange.to_string().contains("build a new Timer"));
    assert_eq!(timer.pending(), 0, "refused callbacks are not counted");
    let sleep = timer.sleep(hour);
    let deadline = sleep.deadline();
    assert!(deadline <= Instant::now(), "saturated at the range's end");
    sleep.await;
    assert!(Instant::now() >= deadline);
}

/// Tasks in `catch_up` are woken at the end of every turn, all at once (tokio's
/// `Notify::notify_waiters`, which leaves the rest of its batch unwoken if one waker
/// panics): one with a panicking waker must neither end the driver (its sleeps would
/// then all complete at once, early) nor strand another `catch_up` caller.
#[tokio::test(start_paused = true)]
async fn a_waker_that_panics_in_catch_up_ends_nothing_and_strands_no_one() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let timer = timer();
    let start = Instant::now();
    let after = TICK * 50;
    let other = spawn_a_sleep(&timer, after);
    tokio::task::yield_now().await;
    let mut panicking = Box::pin(timer.catch_up());
    let waker = Waker::from(Arc::new(PanicsOnWake));
    let polled = panicking.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(polled.is_pending());
    let mut second = tokio_test::task::spawn(timer.catch_up());
    assert!(second.poll().is_pending());
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        second.is_woken(),
        "the other catch_up caller was never woken"
    );
    let woke = other.await.unwrap() - start;
    assert!(woke >= after && woke < after + TICK, "{woke:?}");
    assert!(!timer.is_shutdown());
}

/// `shutdown()` awaited with a panicking waker: the driver's end wakes the tasks
/// awaiting `shutdown`, then those in `catch_up`; the panic must not skip the latter.
#[tokio::test(start_paused = true)]
async fn a_waker_that_panics_awaiting_shutdown_leaves_no_catch_up_hanging() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let timer = timer();
    tokio::task::yield_now().await; // the driver has parked
    let mut waiter = tokio_test::task::spawn(timer.catch_up());
    assert!(waiter.poll().is_pending());
    let mut shutdown = Box::pin(timer.shutdown());
    let waker = Waker::from(Arc::new(PanicsOnWake));
    let polled = shutdown.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(polled.is_pending());
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(timer.is_shutdown());
    assert!(
        waiter.is_woken(),
        "a task waiting in catch_up was never woken"
    );
}

/// From a tick of about 4.2 ms on, the clock's steps (counted from `u64` nanoseconds)
/// end 584 years after the origin, before the wheel's last step: past that, a callback
/// would go to a step the clock never reaches, never run, and the driver would turn
/// without rest waiting for it (which also stops the paused clock's auto-advance).
#[tokio::test(start_paused = true)]
async fn past_584_years_at_a_10_ms_tick_schedule_says_so_and_the_driver_rests() {
    let timer = timer();
    tokio::time::advance(Duration::from_secs(86_400 * 365 * 600)).await;
    timer.catch_up().await;
    let refused = timer.schedule_detached(Duration::from_secs(1), || unreachable!());
    assert_eq!(refused, Err(Error::OutOfRange));
    let before = timer.stats().driver_wakeups;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(timer.stats().driver_wakeups - before, 0, "the driver spins");
    assert_eq!(timer.pending(), 0);
}

/// From a tick of about 2.1 ms on, deadlines saturate at i64 nanoseconds (292 years)
/// before the wheel's last step: past that, a callback asked for an hour ahead would
/// saturate to a step already processed and run at once, an hour early. It is refused
/// as past the range, as at a 1 ms tick past 139 years.
#[tokio::test(start_paused = true)]
async fn past_the_last_deadline_a_tick_can_name_schedule_says_out_of_range() {
    for (tick_ms, years) in [(1, 140), (10, 300)] {
        let timer = Timer::builder()
            .tick(Duration::from_millis(tick_ms))
            .build()
            .unwrap();
        tokio::time::advance(Duration::from_secs(86_400 * 365 * years)).await;
        timer.catch_up().await;
        let refused = timer.schedule_detached(Duration::from_secs(3600), || unreachable!());
        assert_eq!(
            refused,
            Err(Error::OutOfRange),
            "{tick_ms} ms, {years} years"
        );
    }
}

/// The same right after the paused clock's jump, before the driver has turned (an
/// idle driver is not woken by `advance`): the wheel has not processed the last step
/// yet, but the clock has passed it, and a callback saturated there would run at once.
#[tokio::test(start_paused = true)]
async fn past_the_last_deadline_schedule_is_refused_before_the_driver_turns() {
    for (tick_ms, years) in [(1, 140), (10, 300)] {
        let timer = Timer::builder()
            .tick(Duration::from_millis(tick_ms))
            .build()
            .unwrap();
        timer.catch_up().await; // the driver turns once, then parks: nothing pending
        tokio::time::advance(Duration::from_secs(86_400 * 365 * years)).await;
        let refused = timer.schedule_detached(Duration::from_secs(3600), || unreachable!());
        assert_eq!(
            refused,
            Err(Error::OutOfRange),
            "{tick_ms} ms, {years} years"
        );
    }
}

/// The ends of a timer's range on a grid of ticks and wheel sizes (which set the step:
/// a quarter tick, a whole one for 2^20 ticks): the paused clock just before and after
/// the last step a deadline can name, the last the wheel counts, and i64's and u64's
/// last nanosecond. Each time a callback asked for a second ahead is refused as past
/// the range or runs never before its `deadline()`, which is not already past; a sleep
/// completes never before its own; the driver rests.
#[test]
fn the_ends_of_the_range_on_a_grid_of_ticks_and_wheel_sizes() {
    const MAX_STEP: u64 = (1 << 44) - 1; // the wheel's, for choosing where to look
    let mut failures = Vec::new();
    for tick_ms in [1u64, 4, 5, 10, 1000] {
        for wheel in [1usize, 1024, 1 << 20] {
            let steps_per_tick = 4u64.min((1 << 20) / wheel as u64);
            let step_ns = tick_ms * 1_000_000 / steps_per_tick;
            let deadlines_end = (u128::from(MAX_STEP) * u128::from(step_ns)).min(i64::MAX as u128);
            let clock_end = (u64::MAX / step_ns).min(MAX_STEP) * step_ns;
            let mut points = Vec::new();
            for end in [deadlines_end as i128, clock_end as i128, i64::MAX as i128] {
                for delta in [-3 * i128::from(step_ns), -1, 0, 1, 3 * i128::from(step_ns)] {
                    let at = end + delta;
                    if at > 0 && at < i128::from(u64::MAX) {
                        points.push(at as u64);
                    }
                }
            }
            points.sort_unstable();
            points.dedup();
            for at in points {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .start_paused(true)
                    .build()
                    .unwrap();
                let wrong = rt.block_on(at_the_end_of_the_range(tick_ms, wheel, at));
                if !wrong.is_empty() {
                    failures.push(format!(
                        "{tick_ms} ms, wheel {wheel}, at {at} ns: {wrong:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// One point of the grid above: what went wrong there.
async fn at_the_end_of_the_range(tick_ms: u64, wheel: usize, at: u64) -> Vec<String> {
    use std::future::Future;
    use std::task::{Context, Waker};
    let timer = Timer::builder()
        .tick(Duration::from_millis(tick_ms))
        .wheel_size(wheel)
        .build()
        .unwrap();
    tokio::time::advance(Duration::from_nanos(at)).await;
    timer.catch_up().await;
    let now = Instant::now();
    let ran: Arc<Mutex<Option<Instant>>> = Default::default();
    let r = ran.clone();
    let second = Duration::from_secs(1);
    let scheduled = timer.schedule(second, move || *r.lock().unwrap() = Some(Instant::now()));
    let reported = scheduled.as_ref().ok().map(|handle| handle.deadline());
    let scheduled = scheduled.map(|handle| handle.detach());
    let mut sleep = timer.sleep(second);
    let sleep_deadline = sleep.deadline();
    let mut slept_at = None;
    let wakeups = timer.stats().driver_wakeups;
    for _ in 0..40 {
        let polled = std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(Waker::noop()));
        if slept_at.is_none() && polled.is_ready() {
            slept_at = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    timer.catch_up().await;
    let mut wrong = Vec::new();
    match (scheduled, reported, *ran.lock().unwrap()) {
        (Ok(()), _, None) => wrong.push("a callback accepted, never run".to_string()),
        (Ok(()), Some(deadline), Some(_)) if deadline < now => {
            wrong.push("accepted with its deadline already past: run early".into())
        }
        (Ok(()), Some(deadline), Some(t)) if t < deadline => wrong.push("run early".into()),
        (Err(Error::OutOfRange), _, None) | (Ok(()), _, Some(_)) => {}
        (other, _, ran) => wrong.push(format!("{other:?}, ran: {}", ran.is_some())),
    }
    match slept_at {
        None => wrong.push("the sleep never completed".into()),
        Some(t) if t < sleep_deadline => wrong.push("the sleep completed early".into()),
        Some(_) => {}
    }
    let turns = timer.stats().driver_wakeups - wakeups;
    if turns > 200 {
        wrong.push(format!("the driver spun: {turns} turns in 4 s"));
    }
    wrong
}

/// A waker whose clone panics: std's `Wake` cannot make one (its clone is an `Arc`'s),
/// so it is built from a vtable.
fn waker_that_panics_on_clone() -> std::task::Waker {
    use std::task::{RawWaker, RawWakerVTable, Waker};
    fn clone(_: *const ()) -> RawWaker {
        panic!("a waker that panics on clone (expected in this test)")
    }
    fn nothing(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, nothing, nothing, nothing);
    // SAFETY: no function of the vtable reads the data pointer, so a null one is
    // never dereferenced; the vtable is static.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

/// After shutdown a `Sleep` is timed by a fallback of its own; a waker that panics
/// while that fallback is polled (Tokio's sleep clones it) must not leave the `Sleep`
/// naming a fallback another `Sleep` may be given: it still waits its own deadline.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_waker_that_panics_polling_a_fallback_leaves_the_sleep_its_own_deadline() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::task::{Context, Waker};
    let timer = Timer::new();
    let _ = timer.shutdown().await;
    let start = Instant::now();
    let hour = Duration::from_secs(3600);
    let mut long = timer.sleep(hour);
    let noop = Waker::noop();
    assert!(std::pin::Pin::new(&mut long)
        .poll(&mut Context::from_waker(noop))
        .is_pending());
    let waker = waker_that_panics_on_clone();
    let polled = catch_unwind(AssertUnwindSafe(|| {
        std::pin::Pin::new(&mut long).poll(&mut Context::from_waker(&waker))
    }));
    assert!(polled.is_err(), "the waker's clone panicked");
    // Another sleep falls back after it, short.
    let mut short = timer.sleep(Duration::from_millis(10));
    assert!(std::pin::Pin::new(&mut short)
        .poll(&mut Context::from_waker(noop))
        .is_pending());
    (&mut long).await;
    let took = Instant::now() - start;
    assert!(
        took >= hour && took < hour + TICK + Duration::from_millis(1),
        "the long sleep ended at {took:?}, not at its own hour"
    );
    drop(short);
}
