//! The driver: idle parking and wakeups, catch-up, exact `pending()`, its lifetime,
//! building it (configuration errors, runtimes without time or shut down) and
//! lateness. (Its clock against other runtimes' is `clocks.rs`; the loss of its
//! runtime, `shutdown_futures.rs` and `shutdown_callbacks.rs`.)

use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Error, Sleep, Timer};

mod common;
use common::{current_thread_runtime, timer, TICK};

#[tokio::test(start_paused = true)]
async fn pending_is_exact() {
    let timer = timer();
    let mut tasks = Vec::new();
    for i in 1..=10u64 {
        let t = timer.clone();
        tasks.push(tokio::spawn(async move {
            t.sleep(Duration::from_millis(i * 100)).await
        }));
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(timer.pending(), 10);
    for expected in (0..10).rev() {
        // Same timer, so this fires in the same driver turn as the next sleeper.
        timer.sleep(Duration::from_millis(100)).await;
        assert_eq!(timer.pending(), expected);
    }
    tasks[0].abort(); // already finished: no effect
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn idle_timer_never_wakes() {
    let timer = timer();
    timer.sleep(Duration::from_millis(10)).await; // driver has run and gone idle
    tokio::time::sleep(Duration::from_secs(20)).await; // let it settle past any stale deadline
    let before = timer.stats().driver_wakeups;
    for _ in 0..10 {
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        timer.stats().driver_wakeups,
        before,
        "no wakeups while idle"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lone_long_sleep_wakes_the_driver_only_to_fire() {
    let timer = timer();
    let start = Instant::now();
    timer.sleep(Duration::from_secs(10)).await;
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(10) && took < Duration::from_secs(10) + TICK);
    // The driver's first run, the registration's notice, the firing: not 1000 (one
    // per tick), nor one more per revolution of the wheel.
    let wakeups = timer.stats().driver_wakeups;
    assert!(wakeups <= 3, "{wakeups} driver wakeups for one 10 s sleep");
}

/// The driver parks until the earliest deadline, or until a far deadline moves down a
/// level of the wheel: a handful of wakeups however far away, not one per revolution
/// of a level (parking only until that level's next occupied slot).
#[tokio::test(start_paused = true)]
async fn far_sleeps_complete_on_time_in_a_handful_of_wakeups() {
    const DAY: u64 = 86_400;
    for requested in [
        Duration::from_secs(DAY),
        Duration::from_secs(10 * 365 * DAY),
        Duration::MAX,
    ] {
        let timer = timer();
        let sleep = timer.sleep(requested);
        // Saturated for `Duration::MAX` (about 30 years), exact otherwise.
        let deadline = sleep.deadline();
        assert!(deadline >= Instant::now() + requested.min(Duration::from_secs(29 * 365 * DAY)));
        sleep.await;
        let now = Instant::now();
        assert!(
            now >= deadline,
            "{requested:?}: early by {:?}",
            deadline - now
        );
        assert!(
            now < deadline + TICK,
            "{requested:?}: late by {:?}",
            now - deadline
        );
        // Levels of the wheel (about six moves), plus Tokio's own longest sleep
        // (2.2 years, so a few more for the longest), plus the registration.
        let wakeups = timer.stats().driver_wakeups;
        assert!(wakeups <= 12, "{requested:?}: {wakeups} driver wakeups");
    }
}

#[tokio::test(start_paused = true)]
async fn a_late_driver_catches_up_on_every_skipped_tick() {
    let timer = timer();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..500u64 {
        let t = timer.clone();
        let requested = Duration::from_millis(i * 20 + 1); // 1 ms ..= 10 s: many slots, two revolutions
        tasks.spawn(async move {
            t.sleep(requested).await;
            let took = start.elapsed();
            assert!(took >= requested, "early: {requested:?} at {took:?}");
            took
        });
    }
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    let wakeups = timer.stats().driver_wakeups;
    // The runtime is "blocked" for 30 s: the clock jumps in one step.
    tokio::time::advance(Duration::from_secs(30)).await;
    let mut done = 0;
    while let Some(took) = tasks.join_next().await {
        assert!(took.unwrap() <= Duration::from_secs(30) + TICK);
        done += 1;
    }
    assert_eq!(done, 500);
    assert_eq!(timer.pending(), 0);
    assert!(
        timer.stats().driver_wakeups - wakeups <= 3,
        "one turn caught up"
    );
}

/// A 1 ms timer built half a millisecond into its runtime, so that every tick ends
/// halfway between two of the whole milliseconds Tokio's own timer counts (from the
/// runtime's start; it rounds each deadline up to one): tick 1 ends 1.5 ms into the
/// runtime, tick 2 at 2.5 ms. A tick's end is its last step's: the sleeps below, of
/// whole ticks, are due there, and the driver wakes for that step's end.
async fn a_timer_half_a_millisecond_into_its_runtime() -> Timer {
    tokio::time::advance(Duration::from_micros(500)).await;
    Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap()
}

/// A sleep of `micros` on `timer`, polled once, and the driver parked after seeing it.
async fn registered_sleep(timer: &Timer, micros: u64) -> tokio_test::task::Spawn<Sleep> {
    let mut sleep = tokio_test::task::spawn(timer.sleep(Duration::from_micros(micros)));
    assert!(sleep.poll().is_pending());
    advance_and_settle(Duration::ZERO).await;
    assert!(!sleep.is_woken());
    sleep
}

/// Moves the paused clock on by `d` and lets the driver run if Tokio woke it. Not
/// `Timer::catch_up`, which would ask the driver to turn: these tests are about when
/// it wakes by itself.
async fn advance_and_settle(d: Duration) {
    tokio::time::advance(d).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

/// The step (here a tick's last) must fire as soon as the runtime's clock has passed
/// its end, as Tokio's sleeps do, not wait for Tokio's next whole millisecond (up to
/// 1 ms later).
#[tokio::test(start_paused = true)]
async fn a_tick_ending_between_tokios_milliseconds_fires_once_the_clock_passes_its_end() {
    let timer = a_timer_half_a_millisecond_into_its_runtime().await;
    // Due at the end of tick 1, 1.5 ms into the runtime.
    let mut sleep = registered_sleep(&timer, 1000).await;
    // The runtime wakes (for whatever reason) 1.6 ms in: 0.1 ms past the tick's end,
    // before Tokio's next whole millisecond.
    advance_and_settle(Duration::from_micros(1100)).await;
    assert!(sleep.is_woken(), "not woken 0.1 ms after its tick ended");
    assert!(sleep.poll().is_ready());
}

/// A deadline early in a tick fires at the first wakeup after it (to a quarter tick),
/// as a Tokio sleep would, not only once the whole tick has ended.
#[tokio::test(start_paused = true)]
async fn a_deadline_early_in_a_tick_fires_at_the_first_wakeup_after_it() {
    let timer = a_timer_half_a_millisecond_into_its_runtime().await;
    let mut sleep = registered_sleep(&timer, 700).await; // 1.2 ms in; tick 1 ends at 1.5
    let start = Instant::now();
    // Tokio, asked for its millisecond 1 (the one tick 1 ends in), wakes the driver
    // late, 1.3 ms in.
    advance_and_settle(Duration::from_micros(800)).await;
    assert!(sleep.is_woken(), "not woken 0.1 ms after its deadline");
    assert!(sleep.poll().is_ready());
    assert!(start.elapsed() >= Duration::from_micros(700));
}

/// Asking Tokio for the millisecond a step ends in (here a tick's last) can wake the
/// driver before the step's end: then what is not yet due stays, and the driver waits
/// once more, for Tokio's next millisecond.
#[tokio::test(start_paused = true)]
async fn a_wakeup_before_the_ticks_end_fires_nothing_and_waits_once_more() {
    let timer = a_timer_half_a_millisecond_into_its_runtime().await;
    let mut sleep = registered_sleep(&timer, 1000).await; // the end of tick 1: 1.5 ms in
    let start = Instant::now();
    let wakeups = timer.stats().driver_wakeups;
    // 1.3 ms in: Tokio's first whole millisecond has passed, the deadline has not.
    advance_and_settle(Duration::from_micros(800)).await;
    assert_eq!(
        timer.stats().driver_wakeups,
        wakeups + 1,
        "woken by the first try"
    );
    assert!(!sleep.is_woken(), "fired 0.2 ms before its deadline");
    // Tokio's next whole millisecond, 2 ms in, is the first it can wake us at after
    // the deadline.
    advance_and_settle(Duration::from_micros(699)).await;
    assert!(!sleep.is_woken(), "fired before Tokio's next millisecond");
    advance_and_settle(Duration::from_micros(1)).await;
    assert!(sleep.is_woken());
    assert!(sleep.poll().is_ready());
    assert_eq!(start.elapsed(), Duration::from_micros(1500));
    assert_eq!(
        timer.stats().driver_wakeups,
        wakeups + 2,
        "one wakeup per try"
    );
}

/// When the millisecond a tick ends in has already passed, the driver asks Tokio for
/// the next one straight away: one wakeup, not a first one that Tokio fires at once.
#[tokio::test(start_paused = true)]
async fn a_tick_whose_millisecond_has_passed_costs_one_wakeup() {
    let timer = a_timer_half_a_millisecond_into_its_runtime().await;
    let first = registered_sleep(&timer, 1000).await; // the end of tick 1: 1.5 ms in
    let second = registered_sleep(&timer, 2000).await; // the end of tick 2: 2.5 ms in
    let wakeups = timer.stats().driver_wakeups;
    // Woken late, 2.2 ms in: tick 1 fires; Tokio's millisecond 2, the one tick 2 ends
    // in, has passed.
    advance_and_settle(Duration::from_micros(1700)).await;
    assert!(first.is_woken());
    advance_and_settle(Duration::from_micros(799)).await;
    assert!(!second.is_woken());
    assert_eq!(
        timer.stats().driver_wakeups,
        wakeups + 1,
        "woken again for a millisecond that had passed"
    );
    advance_and_settle(Duration::from_micros(1)).await; // 3 ms in
    assert!(second.is_woken());
    assert_eq!(timer.stats().driver_wakeups, wakeups + 2);
}

fn alive_tasks(rt: &tokio::runtime::Runtime) -> usize {
    rt.metrics().num_alive_tasks()
}

#[test]
fn the_driver_ends_when_every_handle_is_gone() {
    let rt = current_thread_runtime();
    let base = alive_tasks(&rt);
    let timer = rt.block_on(async { timer() });
    assert_eq!(alive_tasks(&rt), base + 1, "the driver task");
    let sleep = timer.sleep(Duration::from_secs(1));
    let clone = timer.clone();
    drop(timer);
    rt.block_on(async { tokio::task::yield_now().await });
    assert_eq!(alive_tasks(&rt), base + 1, "a clone and a sleep keep it");
    drop(clone);
    rt.block_on(async { tokio::task::yield_now().await });
    assert_eq!(alive_tasks(&rt), base + 1, "the sleep keeps it");
    drop(sleep);
    rt.block_on(async {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(alive_tasks(&rt), base, "the driver ended by itself");
}

#[test]
fn configuration_errors_are_clear() {
    let rt = current_thread_runtime();
    let _enter = rt.enter();
    let invalid = |r: Result<Timer, Error>| match r {
        Err(Error::InvalidConfig(why)) => why,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    assert!(invalid(Timer::builder().tick(Duration::ZERO).build()).contains("tick"));
    assert!(invalid(Timer::builder().wheel_size(0).build()).contains("wheel_size"));
    assert!(invalid(Timer::builder().wheel_size((1 << 20) + 1).build()).contains("wheel_size"));
    assert!(invalid(Timer::builder().wheel_size(1 << 21).build()).contains("wheel_size"));
    let rounded = Timer::builder().wheel_size(1000).build().unwrap();
    assert!(
        format!("{rounded:?}").contains("wheel_size: 1024"),
        "{rounded:?}"
    );
    let max = Timer::builder().wheel_size(1 << 20).build().unwrap();
    assert!(format!("{max:?}").contains("wheel_size: 1048576"));
}

/// A runtime that has shut down would drop the driver's task unrun: `build_on` says
/// so rather than hand back a timer whose every sleep completes at once.
#[test]
fn build_on_a_shut_down_runtime_is_an_error() {
    for multi_thread in [false, true] {
        let runtime = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        .unwrap();
        let handle = runtime.handle().clone();
        assert!(Timer::builder().build_on(&handle).is_ok(), "running");
        drop(runtime);
        let err = Timer::builder().build_on(&handle).unwrap_err();
        assert!(matches!(err, Error::Shutdown), "{err:?}");
    }
}

#[test]
fn build_needs_a_runtime_with_time() {
    let err = Timer::builder().build().unwrap_err();
    assert!(
        matches!(err, Error::InvalidConfig(ref why)
            if why.contains("runtime") && why.contains("build_on")),
        "{err}"
    );
    // `Timer::new()` panics with the same text (documented).
    let panic = std::panic::catch_unwind(Timer::new).expect_err("Timer::new outside a runtime");
    let text = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    assert!(text.contains("build_on"), "{text}");
    let no_time = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = Timer::builder().build_on(no_time.handle()).unwrap_err();
    assert!(
        matches!(err, Error::InvalidConfig(ref why) if why.contains("time driver")),
        "{err}"
    );
}

/// The lateness bound, off Tokio's millisecond grid: the driver wakes at the end of
/// the step (a quarter tick; half or all of it for the largest wheels) that holds the
/// next timer, and can only wake on Tokio's whole milliseconds, which a timer built
/// 0.3 ms past one of them never shares with its steps. While the paused clock keeps
/// that phase (it advances by whole milliseconds), a whole-millisecond step's ends
/// fall on Tokio's wakeups and a timer fires less than one step late; a step that is
/// not a whole number of milliseconds can be up to one millisecond later. Never
/// early. (Off that phase, see the next test but one.) With wakeups at the ends of
/// ticks, as before, a timer is up to a tick late and this fails.
#[tokio::test(start_paused = true)]
async fn lateness_stays_within_a_step_or_a_millisecond_more_off_whole_milliseconds() {
    let ms = Duration::from_millis(1);
    for (tick, wheel_size) in [
        (ms * 10, 1024),
        (ms, 1024),
        (ms * 3, 1024),
        (ms * 10, 1 << 19), // two steps a tick
        (ms * 10, 1 << 20), // one step a tick
        (Duration::from_micros(1_500), 1024),
        (Duration::from_micros(7_300), 1024),
        (Duration::from_micros(1_500), 1 << 20),
    ] {
        // Off the grid: Tokio's whole milliseconds count from the runtime's start.
        tokio::time::advance(Duration::from_micros(300)).await;
        let timer = Timer::builder()
            .tick(tick)
            .wheel_size(wheel_size)
            .build()
            .unwrap();
        let steps_per_tick = match wheel_size {
            1_048_576 => 1,
            524_288 => 2,
            _ => 4,
        };
        let step = tick / steps_per_tick;
        let bound = if step.subsec_nanos() % 1_000_000 == 0 {
            step
        } else {
            step + ms
        };
        let mut worst = Duration::ZERO;
        // Deadlines 37 µs further apart each time, over three ticks.
        for i in 0..(3 * tick.as_micros() / 37) as u32 {
            let deadline = Instant::now() + Duration::from_micros(37) * i;
            timer.sleep_until(deadline).await;
            let late = Instant::now()
                .checked_duration_since(deadline)
                .unwrap_or_else(|| panic!("{tick:?}/{wheel_size}: early at {deadline:?}"));
            assert!(late < bound, "{tick:?}/{wheel_size}: {late:?} late");
            worst = worst.max(late);
        }
        // The bound is near what happens, not loose.
        assert!(
            worst + ms >= bound,
            "{tick:?}/{wheel_size}: at most {worst:?}"
        );
    }
}

/// The driver wakes at the end of each step that holds a timer, not once a tick: one
/// pass wakes a step's worth of tasks, a quarter of a tick's (on a busy multi-thread
/// runtime a tick's burst sends twice Tokio's share of them to the global queue; see
/// `Builder::tick`). Sleeps spread over two 10 ms ticks wake at eight instants, each at
/// Tokio's millisecond at or after its step's end, never before its deadline. With
/// wakeups at the ends of ticks this sees two instants, up to 10 ms after a deadline.
#[tokio::test(start_paused = true)]
async fn the_driver_wakes_each_step_that_holds_a_timer_not_once_a_tick() {
    let origin = Instant::now();
    let timer = timer();
    let step = TICK / 4;
    let mut sleeps = tokio::task::JoinSet::new();
    // Every 0.5 ms from 0.1 ms on, over two ticks: every step holds some.
    for i in 0..40u32 {
        let deadline = origin + Duration::from_micros(100) + Duration::from_micros(500) * i;
        let timer = timer.clone();
        sleeps.spawn(async move {
            timer.sleep_until(deadline).await;
            (deadline, Instant::now())
        });
    }
    let mut woken_at = std::collections::BTreeSet::new();
    while let Some(sleep) = sleeps.join_next().await {
        let (deadline, woke) = sleep.unwrap();
        let steps = (deadline - origin).as_nanos().div_ceil(step.as_nanos()) as u32;
        let step_end = origin + step * steps;
        assert!(woke >= deadline, "early: {deadline:?} at {woke:?}");
        assert!(
            woke >= step_end && woke < step_end + Duration::from_millis(1),
            "due at {:?}, its step ends at {:?}, woken at {:?}",
            deadline - origin,
            step_end - origin,
            woke - origin
        );
        woken_at.insert(woke);
    }
    assert_eq!(woken_at.len(), 8, "one wakeup a step: {woken_at:?}");
}

/// Cancelling a sleep does not withdraw the wakeup the driver asked Tokio for: the
/// driver wakes once more, then never again, and a paused runtime that goes idle
/// meanwhile auto-advances its clock to that wakeup (as to a pending Tokio sleep).
#[tokio::test(start_paused = true)]
async fn after_the_last_cancel_the_driver_wakes_once_more_then_rests() {
    let timer = timer();
    let mut sleep = tokio_test::task::spawn(timer.sleep(Duration::from_secs(1)));
    assert!(sleep.poll().is_pending());
    tokio::task::yield_now().await; // the driver parks, asking Tokio for ~1 s
    let wakeups = timer.stats().driver_wakeups;
    drop(sleep);
    let start = Instant::now();
    // Idle but for another thread, which answers once the driver has woken (or after
    // 10 s, failing the test rather than hanging it): meanwhile Tokio's clock
    // auto-advances to the driver's wakeup.
    let (done, waited) = tokio::sync::oneshot::channel();
    let watched = timer.clone();
    std::thread::spawn(move || {
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while watched.stats().driver_wakeups == wakeups && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = done.send(());
    });
    waited.await.unwrap();
    let advanced = start.elapsed();
    assert!(
        advanced > Duration::from_millis(900) && advanced <= Duration::from_secs(1) + TICK,
        "advanced {advanced:?}"
    );
    assert_eq!(timer.stats().driver_wakeups, wakeups + 1, "once more");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(timer.stats().driver_wakeups, wakeups + 1, "then rests");
}

/// Whole-millisecond ticks too, once the clock's sub-millisecond phase is no longer the
/// one the timer was built at (a sub-millisecond `advance` here; the real clock's
/// wakeups fall anywhere): Tokio can only land the driver whole milliseconds from
/// where the clock stands, which misses the step's end, so a timer due early in a tick
/// of one step (a 2^20-slot wheel), or in the last quarter of a 1 ms tick, waits up to
/// a millisecond past its step's end. More than a tick late, less than a millisecond
/// more; never early.
#[tokio::test(start_paused = true)]
async fn a_whole_millisecond_tick_can_be_a_millisecond_more_late_off_the_clocks_phase() {
    let ms = Duration::from_millis(1);
    for (tick, wheel_size) in [(ms * 10, 1 << 20), (ms, 1024)] {
        tokio::time::advance(Duration::from_micros(300)).await;
        let timer = Timer::builder()
            .tick(tick)
            .wheel_size(wheel_size)
            .build()
            .unwrap();
        tokio::time::advance(Duration::from_micros(800)).await;
        let mut worst = Duration::ZERO;
        for i in 0..(3 * tick.as_micros() / 37) as u32 {
            let deadline = Instant::now() + Duration::from_micros(37) * i;
            timer.sleep_until(deadline).await;
            let late = Instant::now()
                .checked_duration_since(deadline)
                .unwrap_or_else(|| panic!("{tick:?}/{wheel_size}: early at {deadline:?}"));
            assert!(late < tick + ms, "{tick:?}/{wheel_size}: {late:?} late");
            worst = worst.max(late);
        }
        assert!(worst > tick, "{tick:?}/{wheel_size}: at most {worst:?}");
    }
}

/// Callbacks due in the past, scheduled in a burst while the driver lags, arm its
/// wakeup once (at Tokio's next millisecond, as a past-due Tokio sleep fires), rather
/// than each running a turn of the driver inside `schedule`; each still runs once, no
/// earlier than its deadline.
#[tokio::test(start_paused = true)]
async fn past_due_callbacks_scheduled_in_a_burst_cost_no_turn_each() {
    let timer = common::timer();
    let mut far = timer.sleep(Duration::from_secs(3600));
    assert!(common::poll(&mut far, std::task::Waker::noop()).is_pending());
    // The driver task takes its first turn now; then the clock moves on while it is
    // parked for the far sleep: the steps it passes end unprocessed.
    tokio::task::yield_now().await;
    tokio::time::advance(Duration::from_millis(50)).await;
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let before = timer.stats().driver_wakeups;
    let deadline = Instant::now() - Duration::from_millis(10);
    let handles: Vec<_> = (0..100)
        .map(|_| {
            let ran = ran.clone();
            timer
                .schedule_at(deadline, move || {
                    assert!(Instant::now() >= deadline, "early");
                    ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                })
                .unwrap()
        })
        .collect();
    let turns = timer.stats().driver_wakeups - before;
    assert!(
        turns <= 1,
        "{turns} turns of the driver inside 100 schedules"
    );
    tokio::time::sleep(common::TICK * 2).await;
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 100);
    assert!(handles.iter().all(|h| h.is_expired()));
}
