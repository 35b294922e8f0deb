//! Suspend-aware timers on the paused clock: `simulate_suspend` makes time pass for a
//! suspend-aware timer only; what fell due fires at once, the rest on the boot clock,
//! never early, less than a tick late.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{DelayQueue, Executor, MissedTickBehavior, Timer};

mod common;
use common::{assert_at, assert_on_time, poll, LATE, TICK};

const MINUTE: Duration = Duration::from_secs(60);

fn suspend_aware() -> Timer {
    Timer::builder()
        .tick(TICK)
        .suspend_aware(true)
        .build()
        .unwrap()
}

struct Counter(AtomicUsize);
impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn an_hour_with_fifty_minutes_suspended_completes_ten_minutes_later() {
    let timer = suspend_aware();
    let start = Instant::now();
    let sleeping = tokio::spawn({
        let timer = timer.clone();
        async move { timer.sleep(60 * MINUTE).await }
    });
    // Registered, and the alarm armed for it, before the suspend.
    tokio::task::yield_now().await;
    timer.simulate_suspend(50 * MINUTE);
    sleeping.await.unwrap();
    assert_on_time(10 * MINUTE, start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_deadline_passed_while_suspended_is_ready_at_once_and_its_task_woken() {
    let timer = suspend_aware();
    let start = Instant::now();
    let mut sleep = timer.sleep(10 * MINUTE);
    let counter = Arc::new(Counter(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    assert!(poll(&mut sleep, &waker).is_pending());
    // Less than the deadline: still pending, nobody woken.
    timer.simulate_suspend(10 * MINUTE - TICK);
    assert!(poll(&mut sleep, &waker).is_pending());
    assert_eq!(counter.0.load(Ordering::SeqCst), 0);
    // Past it: the driver turns from here and wakes the task, with Tokio's clock
    // where it was.
    timer.simulate_suspend(TICK);
    assert_eq!(counter.0.load(Ordering::SeqCst), 1, "woken at once");
    assert!(poll(&mut sleep, &waker).is_ready());
    assert_eq!(Instant::now(), start);
}

/// The ticks of an interval of a minute, taken 10 s in, 150 s of suspend after the
/// first: when each completed on Tokio's clock, from the start.
async fn ticks_across_a_suspend(behavior: MissedTickBehavior) -> Vec<Duration> {
    let timer = suspend_aware();
    let start = Instant::now();
    let mut interval = timer.interval(MINUTE);
    interval.set_missed_tick_behavior(behavior);
    let first = interval.tick().await;
    assert_eq!(first, start);
    tokio::time::advance(Duration::from_secs(10)).await;
    timer.simulate_suspend(Duration::from_secs(150));
    let mut ticks = Vec::new();
    for _ in 0..4 {
        let tick = interval.tick().await;
        // Reported on Tokio's clock: the instant it was due, passed or just now.
        assert!(tick <= Instant::now(), "{tick:?}");
        ticks.push(start.elapsed());
    }
    ticks
}

#[track_caller]
fn assert_ticks(ticks: &[Duration], expected: &[u64]) {
    assert_eq!(ticks.len(), expected.len());
    for (took, secs) in ticks.iter().zip(expected) {
        assert_on_time(Duration::from_secs(*secs), *took);
    }
}

// On the timer's clock the suspend takes it from 10 s to 160 s: the ticks due at 60 s
// and 120 s were missed. Tokio's clock is 150 s behind it from then on.
#[tokio::test(start_paused = true)]
async fn missed_ticks_burst() {
    let ticks = ticks_across_a_suspend(MissedTickBehavior::Burst).await;
    // 60 and 120 at once; 180, 240 on schedule (Tokio's 30, 90).
    assert_ticks(&ticks, &[10, 10, 30, 90]);
}

#[tokio::test(start_paused = true)]
async fn missed_ticks_delay() {
    let ticks = ticks_across_a_suspend(MissedTickBehavior::Delay).await;
    // One at once, then a period from it: 220, 280, 340 (Tokio's 70, 130, 190).
    assert_ticks(&ticks, &[10, 70, 130, 190]);
}

#[tokio::test(start_paused = true)]
async fn missed_ticks_skip() {
    let ticks = ticks_across_a_suspend(MissedTickBehavior::Skip).await;
    // One at once, then the schedule's next: 180, 240, 300 (Tokio's 30, 90, 150).
    assert_ticks(&ticks, &[10, 30, 90, 150]);
}

#[tokio::test(start_paused = true)]
async fn a_delay_queue_value_counts_the_suspend() {
    let timer = suspend_aware();
    let start = Instant::now();
    let queue = DelayQueue::with_timer(&timer);
    queue.insert("hour", 60 * MINUTE);
    // A Tokio instant, converted when given: 20 minutes from now on Tokio's clock, as
    // on the timer's before any suspend.
    queue.insert_at("twenty", start + 20 * MINUTE);
    timer.simulate_suspend(50 * MINUTE);
    let twenty = queue.next_expired().await.unwrap();
    assert_eq!(*twenty.get_ref(), "twenty");
    assert!(start.elapsed() < LATE, "due during the suspend: at once");
    // Its deadline, reported on Tokio's clock: 30 minutes ago.
    assert_at(start + 20 * MINUTE, twenty.deadline() + 50 * MINUTE, LATE);
    let hour = queue.next_expired().await.unwrap();
    assert_eq!(*hour.get_ref(), "hour");
    assert_on_time(10 * MINUTE, start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn callbacks_count_the_suspend() {
    let timer = Timer::builder()
        .tick(TICK)
        .executor(Executor::Inline)
        .suspend_aware(true)
        .build()
        .unwrap();
    let start = Instant::now();
    let ran: Arc<Mutex<Vec<(&str, Duration)>>> = Arc::default();
    let record = |name: &'static str| {
        let ran = ran.clone();
        move || ran.lock().unwrap().push((name, start.elapsed()))
    };
    let _thirty = timer.schedule(30 * MINUTE, record("thirty")).unwrap();
    let _hour = timer.schedule(60 * MINUTE, record("hour")).unwrap();
    tokio::task::yield_now().await;
    timer.simulate_suspend(50 * MINUTE);
    tokio::time::sleep(20 * MINUTE).await;
    let ran = ran.lock().unwrap();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert_eq!(ran[0].0, "thirty");
    assert!(ran[0].1 < LATE, "due during the suspend: at once, {ran:?}");
    assert_eq!(ran[1].0, "hour");
    assert_on_time(10 * MINUTE, ran[1].1);
}

#[tokio::test(start_paused = true)]
async fn an_ordinary_timer_beside_it_does_not_see_the_suspend() {
    let aware = suspend_aware();
    let ordinary = common::timer();
    let start = Instant::now();
    let aware_sleep = tokio::spawn({
        let aware = aware.clone();
        async move {
            aware.sleep(60 * MINUTE).await;
            start.elapsed()
        }
    });
    let ordinary_sleep = tokio::spawn({
        let ordinary = ordinary.clone();
        async move {
            ordinary.sleep(60 * MINUTE).await;
            start.elapsed()
        }
    });
    tokio::task::yield_now().await;
    aware.simulate_suspend(50 * MINUTE);
    // Simulated on the ordinary timer: nothing, as for any timer not suspend-aware.
    ordinary.simulate_suspend(50 * MINUTE);
    assert_on_time(10 * MINUTE, aware_sleep.await.unwrap());
    assert_on_time(60 * MINUTE, ordinary_sleep.await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn instants_given_are_tokios_and_converted_when_given() {
    let timer = suspend_aware();
    timer.simulate_suspend(5 * MINUTE);
    let start = Instant::now();
    // After a suspend, an hour from now on Tokio's clock is an hour away.
    let sleep = timer.sleep_until(start + 60 * MINUTE);
    assert_eq!(sleep.deadline(), start + 60 * MINUTE, "reported as given");
    sleep.await;
    assert_on_time(60 * MINUTE, start.elapsed());
    // A timeout's deadline, reset in place: the same.
    let mut interval = timer.interval_at(Instant::now() + MINUTE, MINUTE);
    let now = Instant::now();
    assert_at(interval.tick().await, now + MINUTE, Duration::from_nanos(1));
    assert_on_time(MINUTE, now.elapsed());
}

#[path = "../examples/token_refresher.rs"]
#[allow(dead_code)]
mod token_refresher;

/// The example's loop: a token of an hour refreshed 5 minutes early; 10 minutes in,
/// 50 minutes of suspend pass its refresh (due at 55): it refreshes at resume, and
/// the next one is 55 minutes after that. An ordinary timer would wait until 55
/// minutes on Tokio's clock, 45 minutes with an expired token.
#[tokio::test(start_paused = true)]
async fn the_token_refresher_refreshes_at_resume() {
    let timer = suspend_aware();
    let refresher = token_refresher::Refresher::spawn(timer.clone(), 5 * MINUTE, || 60 * MINUTE);
    tokio::time::sleep(10 * MINUTE).await;
    assert_eq!(refresher.fetched(), 1);
    timer.simulate_suspend(50 * MINUTE);
    tokio::time::sleep(TICK).await;
    assert_eq!(refresher.fetched(), 2, "refreshed at resume");
    tokio::time::sleep(55 * MINUTE - 2 * TICK).await;
    assert_eq!(refresher.fetched(), 2, "not before 55 minutes after that");
    tokio::time::sleep(2 * TICK).await;
    assert_eq!(refresher.fetched(), 3);
}

/// A suspend-aware timer on the paused clock whose suspended time grows, on another
/// thread, while its alarm is armed (Tokio may then fire the alarm on the spot): its
/// alarm stays on the paused clock, so an hour's sleep still completes at the hour,
/// by auto-advance, not on a real-clock runtime the paused test never reaches.
#[tokio::test(start_paused = true)]
async fn a_paused_suspend_aware_timers_alarm_stays_on_its_clock_while_suspends_grow() {
    let timer = suspend_aware();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let suspends = {
        let (timer, stop) = (timer.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                timer.simulate_suspend(Duration::from_millis(5));
            }
        })
    };
    // Registrations and parks racing the suspends, for a bounded while.
    let racing = std::time::Instant::now();
    while racing.elapsed() < Duration::from_millis(300) {
        timer.sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    suspends.join().unwrap();
    let start = Instant::now();
    let hour = tokio::spawn({
        let timer = timer.clone();
        async move {
            timer.sleep(Duration::from_secs(3600)).await;
            Instant::now()
        }
    });
    // Far later, on Tokio's timer: auto-advance stops at the hour's wakeup first.
    tokio::time::sleep(Duration::from_secs(10 * 3600)).await;
    assert!(
        hour.is_finished(),
        "the hour's sleep never fired on the paused clock"
    );
    let took = hour.await.unwrap() - start;
    assert_on_time(Duration::from_secs(3600), took);
}

/// `simulate_suspend` rings a real-clock suspend-aware timer's alarm before the
/// instant it was armed for: that says nothing of Tokio's clock, so the alarm stays
/// where it is (no wakeups moved to the process-wide runtime, whose thread would
/// start). In a child process, whose threads are its own.
#[cfg(target_os = "linux")]
#[test]
fn simulate_suspend_leaves_a_real_clock_alarm_where_it_is() {
    const NAME: &str = "simulate_suspend_leaves_a_real_clock_alarm_where_it_is";
    if !common::is_child() {
        return common::assert_child_ok(&common::run_in_child(NAME), "child: stayed");
    }
    let runtime = common::multi_thread_runtime(2);
    runtime.block_on(async {
        let timer = suspend_aware();
        let mut sleep = timer.sleep(MINUTE);
        assert!(poll(&mut sleep, &Waker::noop().clone()).is_pending());
        timer.simulate_suspend(Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            common::threads_named("tokio-wheel"),
            0,
            "the alarm moved to the process-wide runtime"
        );
        println!("child: stayed");
    });
}
