//! `Sleep` with the paused clock: never early, late by less than a tick.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_wheel::{Sleep, Timer};

mod common;
use common::{assert_at, assert_on_time, poll, timer, TICK};

struct Counter(AtomicUsize);
impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
fn counting_waker() -> (Arc<Counter>, Waker) {
    let c = Arc::new(Counter(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}

#[test]
fn sleep_is_unpin_send_sync() {
    fn check<T: Unpin + Send + Sync + 'static>() {}
    check::<Sleep>();
    check::<Timer>();
}

#[tokio::test(start_paused = true)]
async fn single_sleeps_are_on_time() {
    let timer = timer();
    for ms in [1, 5, 9, 10, 11, 15, 99, 100, 1234, 10_240, 10_241, 60_000] {
        let requested = Duration::from_millis(ms);
        let start = Instant::now();
        timer.sleep(requested).await;
        assert_on_time(requested, start.elapsed());
    }
    // Odd sub-millisecond offsets too.
    tokio::time::advance(Duration::from_micros(1234)).await;
    let start = Instant::now();
    timer.sleep(Duration::from_micros(25_500)).await;
    assert_on_time(Duration::from_micros(25_500), start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn thousands_of_concurrent_sleeps_are_on_time() {
    let timer = timer();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..5000u64 {
        let timer = timer.clone();
        let requested = Duration::from_millis((i * 37) % 20_000 + 1);
        tasks.spawn(async move {
            timer.sleep(requested).await;
            assert_on_time(requested, start.elapsed());
        });
    }
    for _ in 0..1000 {
        if timer.pending() == 5000 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        timer.pending(),
        5000,
        "every task registered, none fired yet"
    );
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(timer.pending(), 0);
    assert_eq!(timer.stats().fired, 5000);
}

#[tokio::test(start_paused = true)]
async fn zero_and_past_deadlines_complete_by_the_next_tick() {
    let timer = timer();
    tokio::time::advance(Duration::from_secs(5)).await;
    let start = Instant::now();
    timer.sleep(Duration::ZERO).await;
    assert!(start.elapsed() <= TICK, "{:?}", start.elapsed());
    let start = Instant::now();
    timer.sleep_until(start - Duration::from_secs(1)).await;
    assert!(start.elapsed() <= TICK, "{:?}", start.elapsed());
    let start = Instant::now();
    timer.sleep_until(start).await;
    assert!(start.elapsed() <= TICK, "{:?}", start.elapsed());
}

/// A deadline whose tick the driver has already processed completes on its first
/// poll, without registering: it does not wait for the next tick.
#[tokio::test(start_paused = true)]
async fn a_deadline_already_processed_is_ready_on_the_first_poll() {
    let timer = timer();
    tokio::time::advance(Duration::from_secs(5)).await;
    timer.catch_up().await; // every tick up to now is processed
    let (woken, waker) = counting_waker();
    let now = Instant::now();
    let mut sleeps = vec![
        timer.sleep(Duration::ZERO),
        timer.sleep_until(now),
        timer.sleep_until(now - TICK),
        timer.sleep_until(now - Duration::from_secs(1)),
    ];
    for sleep in &mut sleeps {
        assert!(poll(sleep, &waker).is_ready(), "{sleep:?}");
        assert!(sleep.is_elapsed());
    }
    assert_eq!(timer.pending(), 0, "none registered");
    assert_eq!(Instant::now(), now, "no time passed");
    assert_eq!(woken.0.load(Ordering::SeqCst), 0);
}

/// A pending `Sleep` costs its own size plus a 32-byte wheel entry; the deadline is
/// stored as an offset from the timer's origin, yet comes back exactly.
#[cfg(target_pointer_width = "64")]
#[tokio::test(start_paused = true)]
async fn a_sleep_is_24_bytes_and_keeps_its_exact_deadline() {
    assert_eq!(std::mem::size_of::<Sleep>(), 24);
    let timer = timer();
    let now = Instant::now();
    let at = |d: Duration| now + d;
    for deadline in [
        now,
        at(Duration::from_nanos(1)),
        at(Duration::from_millis(1234)),
        at(Duration::from_secs(86_400 * 365 * 100)),
        now - Duration::from_nanos(1),
        now - Duration::from_secs(3600),
    ] {
        let mut sleep = timer.sleep_until(deadline);
        assert_eq!(sleep.deadline(), deadline);
        Pin::new(&mut sleep).reset(deadline + Duration::from_nanos(7));
        assert_eq!(sleep.deadline(), deadline + Duration::from_nanos(7));
    }
    assert_eq!(
        timer.sleep(Duration::from_millis(5)).deadline(),
        at(Duration::from_millis(5))
    );
}

#[tokio::test(start_paused = true)]
async fn huge_deadlines_saturate_without_panicking() {
    let timer = timer();
    let (_, waker) = counting_waker();
    let now = Instant::now();
    let mut max = timer.sleep(Duration::MAX);
    // About 30 years, as tokio's: not 292 (where an `i64` of nanoseconds ends).
    assert!(max.deadline() > now + Duration::from_secs(86_400 * 365 * 29));
    assert!(max.deadline() < now + Duration::from_secs(86_400 * 365 * 31));
    let mut far = timer.sleep_until(now + Duration::from_secs(86_400 * 365 * 200));
    let mut odd = timer.sleep(Duration::from_secs(u64::MAX / 2));
    for s in [&mut max, &mut far, &mut odd] {
        assert!(poll(s, &waker).is_pending());
    }
    assert_eq!(timer.pending(), 3);
    tokio::time::advance(Duration::from_secs(3600)).await;
    for s in [&mut max, &mut far, &mut odd] {
        assert!(poll(s, &waker).is_pending());
        assert!(!s.is_elapsed());
    }
    assert_eq!(timer.pending(), 3);
    // Other timers still work around them.
    let start = Instant::now();
    timer.sleep(Duration::from_millis(30)).await;
    assert_on_time(Duration::from_millis(30), start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn registers_on_first_poll_and_drop_cancels() {
    let timer = timer();
    let (_, waker) = counting_waker();
    let mut sleeps: Vec<Sleep> = (0..100)
        .map(|i| timer.sleep(Duration::from_secs(i + 1)))
        .collect();
    assert_eq!(timer.pending(), 0, "creating touches nothing");
    for s in &mut sleeps[..60] {
        assert!(poll(s, &waker).is_pending());
    }
    assert_eq!(timer.pending(), 60);
    // Polling again does not register twice.
    assert!(poll(&mut sleeps[0], &waker).is_pending());
    assert_eq!(timer.pending(), 60);
    sleeps.truncate(30);
    assert_eq!(timer.pending(), 30, "drop frees at once");
    drop(sleeps);
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn reset_earlier_later_and_after_completion() {
    let timer = timer();
    let (_, waker) = counting_waker();

    // Later.
    let start = Instant::now();
    let mut sleep = timer.sleep(Duration::from_millis(100));
    assert!(poll(&mut sleep, &waker).is_pending());
    Pin::new(&mut sleep).reset(start + Duration::from_millis(300));
    assert_eq!(sleep.deadline(), start + Duration::from_millis(300));
    assert_eq!(timer.pending(), 1);
    (&mut sleep).await;
    assert_on_time(Duration::from_millis(300), start.elapsed());
    assert!(sleep.is_elapsed());

    // After completion: pending again.
    let start = Instant::now();
    Pin::new(&mut sleep).reset(start + Duration::from_millis(50));
    assert!(!sleep.is_elapsed());
    (&mut sleep).await;
    assert_on_time(Duration::from_millis(50), start.elapsed());

    // Earlier.
    let start = Instant::now();
    let mut sleep = timer.sleep(Duration::from_secs(60));
    assert!(poll(&mut sleep, &waker).is_pending());
    Pin::new(&mut sleep).reset(start + Duration::from_millis(20));
    (&mut sleep).await;
    assert_on_time(Duration::from_millis(20), start.elapsed());

    // Into the past: completes by the next tick.
    let start = Instant::now();
    let mut sleep = timer.sleep(Duration::from_secs(60));
    assert!(poll(&mut sleep, &waker).is_pending());
    Pin::new(&mut sleep).reset(start - Duration::from_millis(20));
    (&mut sleep).await;
    assert!(start.elapsed() <= TICK);
    assert_eq!(timer.pending(), 0);

    // Before the first poll.
    let start = Instant::now();
    let mut sleep = timer.sleep(Duration::from_secs(60));
    Pin::new(&mut sleep).reset(start + Duration::from_millis(40));
    (&mut sleep).await;
    assert_on_time(Duration::from_millis(40), start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn only_the_latest_waker_is_woken() {
    let timer = timer();
    let (a, waker_a) = counting_waker();
    let (b, waker_b) = counting_waker();
    let mut sleep = timer.sleep(Duration::from_millis(50));
    assert!(poll(&mut sleep, &waker_a).is_pending());
    assert!(poll(&mut sleep, &waker_b).is_pending());
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(a.0.load(Ordering::SeqCst), 0);
    assert_eq!(b.0.load(Ordering::SeqCst), 1);
    assert!(sleep.is_elapsed());
    assert!(poll(&mut sleep, &waker_b).is_ready());
    // Ready stays ready.
    assert!(poll(&mut sleep, &waker_a).is_ready());
}

#[tokio::test(start_paused = true)]
async fn is_elapsed_tells_the_truth() {
    let timer = timer();
    let (_, waker) = counting_waker();
    let mut sleep = timer.sleep(Duration::from_millis(30));
    assert!(!sleep.is_elapsed());
    assert!(poll(&mut sleep, &waker).is_pending());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!sleep.is_elapsed());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(sleep.is_elapsed(), "fired, even before being polled again");
}

/// After a `reset` that leaves it out of the wheel (never polled, reset to a passed
/// deadline, or reset after firing), a `Sleep` that is not polled again reports what
/// tokio's does (its `reset` registers): not elapsed before the new deadline, elapsed
/// once the driver has passed it, and then polling it is `Ready`.
#[tokio::test(start_paused = true)]
async fn is_elapsed_after_a_reset_without_a_poll_is_tokios() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let (_, waker) = counting_waker();
    let start = Instant::now();
    let second = Duration::from_secs(1);
    let pair = |d| (timer.sleep(d), Box::pin(tokio::time::sleep(d)));
    let (mut never_polled, mut never_polled_tokio) = pair(second);
    let (mut into_past, mut into_past_tokio) = pair(second);
    let (mut after_firing, mut after_firing_tokio) = pair(Duration::ZERO);
    assert!(poll(&mut into_past, &waker).is_pending());
    (&mut after_firing).await;
    after_firing_tokio.as_mut().await;
    let later = start + Duration::from_millis(5);
    Pin::new(&mut never_polled).reset(later);
    never_polled_tokio.as_mut().reset(later);
    Pin::new(&mut into_past).reset(start);
    into_past_tokio.as_mut().reset(start);
    Pin::new(&mut after_firing).reset(later);
    after_firing_tokio.as_mut().reset(later);
    let elapsed = |ours: &[&Sleep; 3]| ours.map(|s| s.is_elapsed());
    tokio::time::sleep(Duration::from_millis(4)).await;
    timer.catch_up().await;
    let ours = elapsed(&[&never_polled, &into_past, &after_firing]);
    assert_eq!(
        ours,
        [false, true, false],
        "at 4 ms: never before the deadline"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    timer.catch_up().await;
    let ours = elapsed(&[&never_polled, &into_past, &after_firing]);
    let tokio = [
        never_polled_tokio.is_elapsed(),
        into_past_tokio.is_elapsed(),
        after_firing_tokio.is_elapsed(),
    ];
    assert_eq!(ours, tokio, "past every deadline");
    assert_eq!(ours, [true; 3]);
    for sleep in [&mut never_polled, &mut into_past, &mut after_firing] {
        assert!(poll(sleep, &waker).is_ready());
    }
}

/// The same with nothing else pending: the driver stays parked (a `Sleep` out of the
/// wheel gives it nothing to wake for), so `is_elapsed` reads the clock as well.
#[tokio::test(start_paused = true)]
async fn is_elapsed_after_a_reset_reads_the_clock_while_the_driver_is_parked() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let (_, waker) = counting_waker();
    let deadline = Instant::now() + Duration::from_millis(5);
    let mut ours = timer.sleep(Duration::from_secs(1));
    let mut tokios = Box::pin(tokio::time::sleep(Duration::from_secs(1)));
    Pin::new(&mut ours).reset(deadline);
    tokios.as_mut().reset(deadline);
    tokio::time::advance(Duration::from_millis(4)).await;
    assert!(!ours.is_elapsed(), "never before the deadline");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(tokios.is_elapsed());
    assert!(ours.is_elapsed(), "45 ms past its deadline, unpolled");
    assert!(poll(&mut ours, &waker).is_ready());
}

#[tokio::test(start_paused = true)]
async fn wakes_its_task_exactly_at_the_tick() {
    use tokio_test::{assert_pending, assert_ready, task};
    let timer = timer();
    let mut sleep = task::spawn(timer.sleep(Duration::from_millis(25)));
    assert_pending!(sleep.poll());
    tokio::time::advance(Duration::from_millis(20)).await;
    assert!(!sleep.is_woken(), "not woken before its tick");
    assert_pending!(sleep.poll());
    tokio::time::advance(Duration::from_millis(10)).await; // 30 ms: the tick after 25 ms
    timer.catch_up().await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

/// A sleep that fired but was not polled again keeps its key. After 2^20 - 2 more
/// registrations through its slab index (the generation's whole period), the next
/// one gets that index and generation back. Resetting, polling or dropping the stale
/// sleep must still never move, rewake or cancel the new one.
#[tokio::test(start_paused = true)]
async fn a_stale_sleep_never_touches_the_timer_that_reused_its_key() {
    let timer = timer();
    let (_, waker) = counting_waker();
    let mut stale = timer.sleep(TICK);
    assert!(poll(&mut stale, &waker).is_pending());
    tokio::time::sleep(TICK * 3).await; // `stale` fires; nobody polls it
    assert_eq!(timer.pending(), 0);
    for _ in 0..(1 << 20) - 2 {
        // Each takes the index the last one freed and frees it again on drop.
        let mut churn = timer.sleep(Duration::from_secs(3600));
        assert!(poll(&mut churn, &waker).is_pending());
    }
    let start = Instant::now();
    let (woken, victim_waker) = counting_waker();
    let mut victim = timer.sleep(Duration::from_secs(5));
    assert!(poll(&mut victim, &victim_waker).is_pending());

    // Still ahead when polled below (a passed deadline would be Ready at once).
    Pin::new(&mut stale).reset(start + Duration::from_millis(200));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        woken.0.load(Ordering::SeqCst),
        0,
        "the reset moved another sleep"
    );
    assert_eq!(timer.pending(), 1);
    assert!(
        poll(&mut stale, &waker).is_pending(),
        "re-registers for its new deadline"
    );
    drop(stale); // cancels its own new entry, and nothing else
    assert_eq!(timer.pending(), 1, "the drop cancelled another sleep");

    std::future::poll_fn(|cx| Pin::new(&mut victim).poll(cx)).await;
    assert_on_time(Duration::from_secs(5), start.elapsed());
}

/// After `tokio::time::advance`, Tokio's own sleeps are woken but this timer's driver
/// may not have run yet; `catch_up` waits for a turn that has processed every tick
/// that has ended. Then every sleep due by the end of the last quarter tick is woken.
#[tokio::test(start_paused = true)]
async fn catch_up_wakes_every_sleep_the_clock_has_passed() {
    let timer = timer();
    for ms in [1u64, 5, 9, 10, 11, 25, 30, 99, 100, 101, 1000] {
        for step in [0, 1, 2, 5, 10, 20] {
            let start = Instant::now();
            let mut sleep = tokio_test::task::spawn(timer.sleep(Duration::from_millis(ms)));
            assert!(sleep.poll().is_pending());
            tokio::time::advance(Duration::from_millis(ms + step)).await;
            timer.catch_up().await;
            // Due by the last quarter-tick boundary at or before now: fired.
            let quarter = TICK / 4;
            let due_by = start + Duration::from_millis(ms);
            let boundary_passed = (Instant::now() - due_by) >= quarter;
            if boundary_passed {
                assert!(sleep.is_woken(), "{ms} ms, {step} ms past: not woken");
                assert!(sleep.poll().is_ready());
            }
            drop(sleep);
            assert_eq!(timer.pending(), 0);
        }
    }
}

/// An instant beyond the wheel's range (2^44 steps: 139 years at a 1 ms tick) saturates
/// to the range's end, and the sleep reports that deadline and never fires before it
/// (a deadline kept exactly, here 200 years, while its step saturated would have it
/// fire 61 years before the deadline it reports).
#[tokio::test(start_paused = true)]
async fn an_instant_beyond_the_wheels_range_saturates_and_never_fires_early() {
    const YEAR: Duration = Duration::from_secs(86_400 * 365);
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let start = Instant::now();
    let sleep = timer.sleep_until(start + YEAR * 200);
    let deadline = sleep.deadline();
    assert!(deadline > start + YEAR * 139 && deadline < start + YEAR * 140);
    let callback = timer.schedule_at(start + YEAR * 200, || ()).unwrap();
    assert_eq!(callback.deadline(), deadline, "callbacks saturate alike");
    sleep.await;
    assert_at(Instant::now(), deadline, Duration::from_millis(1));
}
