// The service and its tests, included by `main.rs` into a module that has brought a
// `time` module into scope: `tokio::time` or `tokio_wheel`. Nothing here names either.

use std::future::Future;
use std::pin::Pin;

use time::error::Elapsed;
use tokio_test::{assert_pending, assert_ready, task};
use time::{Duration, Instant, Interval, MissedTickBehavior, Sleep, Timeout};

/// Both name the error types at the same paths.
const _: Option<(Elapsed, time::error::Error)> = None;

/// Both ask an `Error` the same questions.
const _: fn(&time::error::Error) -> [bool; 3] =
    |e| [e.is_shutdown(), e.is_at_capacity(), e.is_invalid()];

/// Both make an `Error` the same ways.
const _: fn() -> [time::error::Error; 3] =
    || [time::error::Error::shutdown(), time::error::Error::at_capacity(), time::error::Error::invalid()];

/// The same signatures, as function pointers: receivers, arguments and results.
const _: fn(Pin<&mut Sleep>, Instant) = Sleep::reset;
const _: fn(&Sleep) -> (Instant, bool) = |s| (s.deadline(), s.is_elapsed());
const _: fn(Duration) -> Sleep = time::sleep;
const _: fn(Instant) -> Sleep = time::sleep_until;
const _: fn(Duration) -> Interval = time::interval;
const _: fn(Instant, Duration) -> Interval = time::interval_at;
const _: fn(Duration, std::future::Ready<()>) -> Timeout<std::future::Ready<()>> = time::timeout;
const _: fn(Instant, std::future::Ready<()>) -> Timeout<std::future::Ready<()>> = time::timeout_at;
const _: fn(&mut Interval, &mut std::task::Context<'_>) -> std::task::Poll<Instant> = Interval::poll_tick;
const _: fn(&mut Interval) = Interval::reset;
const _: fn(&mut Interval) = Interval::reset_immediately;
const _: fn(&mut Interval, Duration) = Interval::reset_after;
const _: fn(&mut Interval, Instant) = Interval::reset_at;
const _: fn(&Interval) -> (Duration, MissedTickBehavior) = |i| (i.period(), i.missed_tick_behavior());
const _: fn(&mut Interval, MissedTickBehavior) = Interval::set_missed_tick_behavior;
const _: fn(&Timeout<std::future::Ready<()>>) -> &std::future::Ready<()> = Timeout::get_ref;
const _: fn(&mut Timeout<std::future::Ready<()>>) -> &mut std::future::Ready<()> = Timeout::get_mut;
const _: fn(Timeout<std::future::Ready<()>>) -> std::future::Ready<()> = Timeout::into_inner;
const _: fn(Elapsed) -> std::io::Error = std::io::Error::from;

/// A future a `Timeout` takes by `IntoFuture`, as Tokio's does.
struct Later;

impl std::future::IntoFuture for Later {
    type Output = u8;
    type IntoFuture = std::future::Ready<u8>;

    fn into_future(self) -> Self::IntoFuture {
        std::future::ready(7)
    }
}

/// What both types are, at least: `Send`, `Sync` and `Debug`; Tokio's `Sleep` is
/// `!Unpin`, the wheel's `Unpin`, so neither is asked.
fn _auto_traits() {
    fn is<T: Send + Sync + std::fmt::Debug>() {}
    is::<Sleep>();
    is::<Interval>();
    is::<Timeout<std::future::Ready<()>>>();
    is::<Elapsed>();
    is::<time::error::Error>();
}

/// The wheel's default tick: the lateness bound is this and a millisecond.
const TICK: Duration = Duration::from_millis(10);

/// Panics unless `at` is no earlier than `due` and late by less than a tick and a
/// millisecond.
#[track_caller]
fn assert_on_time(what: &str, at: Instant, due: Instant) {
    assert!(at >= due, "{what}: {:?} early", due - at);
    let late = at - due;
    assert!(late < TICK + Duration::from_millis(1), "{what}: {late:?} late");
}

/// Heartbeats every `period` on an [`Interval`] with `Delay`: a beat that overruns
/// pushes the next ones back rather than bursting. `work(n)` is beat `n`'s work.
/// Returns when each beat was taken and the instant it was scheduled for.
async fn heartbeats<W, F>(period: Duration, beats: usize, mut work: W) -> Vec<(Instant, Instant)>
where
    W: FnMut(usize) -> F,
    F: Future<Output = ()>,
{
    let mut ticker: Interval = time::interval(period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut taken = Vec::with_capacity(beats);
    for n in 0..beats {
        let scheduled = ticker.tick().await;
        taken.push((Instant::now(), scheduled));
        work(n).await;
    }
    taken
}

/// A call to a backend that answers after `latency`, under a deadline.
async fn call(latency: Duration, deadline: Duration) -> Result<&'static str, Elapsed> {
    let answer: Timeout<_> = time::timeout(deadline, async move {
        time::sleep(latency).await;
        "answer"
    });
    answer.await
}

/// Tries `attempt` up to `tries` times, sleeping `base`, `2 × base`, `4 × base`, ...
/// between tries. Returns the result and when each try started.
async fn with_retries<A, F>(tries: u32, base: Duration, mut attempt: A) -> (Result<u32, ()>, Vec<Instant>)
where
    A: FnMut(u32) -> F,
    F: Future<Output = Result<u32, ()>>,
{
    let mut started = Vec::new();
    for n in 0..tries {
        started.push(Instant::now());
        if let Ok(value) = attempt(n).await {
            return (Ok(value), started);
        }
        if n + 1 < tries {
            time::sleep(base * 2u32.pow(n)).await;
        }
    }
    (Err(()), started)
}

/// Watches a connection: each message on `activity` resets a pinned idle [`Sleep`];
/// returns when the connection was idle for `idle`, or `None` if `activity` closed
/// first.
async fn idle_watchdog(idle: Duration, mut activity: tokio::sync::mpsc::Receiver<()>) -> Option<Instant> {
    let mut deadline: Pin<Box<Sleep>> = Box::pin(time::sleep(idle));
    loop {
        tokio::select! {
            () = &mut deadline => return Some(Instant::now()),
            message = activity.recv() => match message {
                Some(()) => deadline.as_mut().reset(Instant::now() + idle),
                None => return None,
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// Collects values until none has come for `idle`: a stream adapter's shape, its
    /// deadline a pin-projected [`Sleep`] reset through the projection (`me` is not
    /// `mut`), as stream-adapter crates write it.
    struct UntilQuiet {
        #[pin]
        deadline: Sleep,
        idle: Duration,
        values: tokio::sync::mpsc::Receiver<u32>,
        got: Vec<u32>,
    }
}

impl Future for UntilQuiet {
    type Output = (Vec<u32>, Instant);

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let me = self.project();
        match me.values.poll_recv(cx) {
            std::task::Poll::Ready(Some(value)) => {
                me.got.push(value);
                me.deadline.reset(Instant::now() + *me.idle);
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
            std::task::Poll::Ready(None) => std::task::Poll::Ready((std::mem::take(me.got), Instant::now())),
            std::task::Poll::Pending => me
                .deadline
                .poll(cx)
                .map(|()| (std::mem::take(me.got), Instant::now())),
        }
    }
}

/// A batcher: waits for a first item, lingers `linger` for more, then flushes.
/// Returns when the first item came and when the batch was flushed.
async fn batch(linger: Duration, mut items: tokio::sync::mpsc::Receiver<u32>) -> (Vec<u32>, Instant, Instant) {
    let first = items.recv().await.unwrap();
    let started = Instant::now();
    let mut batch = vec![first];
    let flush = time::sleep(linger);
    tokio::pin!(flush);
    loop {
        tokio::select! {
            () = &mut flush => return (batch, started, Instant::now()),
            item = items.recv() => match item {
                Some(item) => batch.push(item),
                None => return (batch, started, Instant::now()),
            },
        }
    }
}

/// Waits for a window to open, then runs `work` with the window's close as deadline.
async fn in_window<F: Future<Output = u32>>(open: Instant, close: Instant, work: F) -> Result<u32, Elapsed> {
    time::sleep_until(open).await;
    time::timeout_at(close, work).await
}

/// Ticks every `period` from `start`, skipping the ticks a slow one ran over;
/// `work(n)` is tick `n`'s work. Returns when each tick was taken and its scheduled
/// instant.
async fn sampler<W, F>(start: Instant, period: Duration, ticks: usize, mut work: W) -> Vec<(Instant, Instant)>
where
    W: FnMut(usize) -> F,
    F: Future<Output = ()>,
{
    let mut ticker = time::interval_at(start, period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut taken = Vec::with_capacity(ticks);
    for n in 0..ticks {
        let scheduled = ticker.tick().await;
        taken.push((Instant::now(), scheduled));
        work(n).await;
    }
    taken
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_their_period_and_an_overrun_delays_the_next() {
    const PERIOD: Duration = Duration::from_millis(100);
    const OVERRUN: Duration = Duration::from_millis(250);
    let start = Instant::now();
    // Beat 2's work takes 250 ms, missing beat 3.
    let taken = heartbeats(PERIOD, 6, |n| async move {
        if n == 2 {
            time::sleep(OVERRUN).await;
        }
    })
    .await;
    for (n, &(at, scheduled)) in taken.iter().enumerate().take(3) {
        assert_eq!(scheduled, start + PERIOD * n as u32, "beat {n} scheduled");
        assert_on_time(&format!("beat {n}"), at, scheduled);
    }
    // Beat 3 was missed: it is taken as soon as beat 2's work ends...
    assert_on_time("missed beat 3", taken[3].0, taken[2].0 + OVERRUN);
    // ...and with Delay, the next ones are a period after it, not back on the grid.
    for n in 4..6 {
        assert_eq!(taken[n].1, taken[n - 1].0 + PERIOD, "beat {n} scheduled");
        assert_on_time(&format!("beat {n}"), taken[n].0, taken[n].1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_answered_in_time_returns_and_a_slow_one_times_out_on_time() {
    let start = Instant::now();
    assert_eq!(call(Duration::from_millis(50), Duration::from_millis(200)).await, Ok("answer"));
    assert_on_time("fast answer", Instant::now(), start + Duration::from_millis(50));

    let start = Instant::now();
    let slow = call(Duration::from_secs(5), Duration::from_millis(200)).await;
    assert_eq!(slow.unwrap_err().to_string(), "deadline has elapsed");
    assert_on_time("timeout", Instant::now(), start + Duration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially() {
    const BASE: Duration = Duration::from_millis(100);
    // Fails three times, then answers.
    let (result, started) = with_retries(5, BASE, |n| async move {
        if n < 3 {
            Err(())
        } else {
            Ok(n)
        }
    })
    .await;
    assert_eq!(result, Ok(3));
    assert_eq!(started.len(), 4);
    for n in 1..started.len() {
        let backoff = BASE * 2u32.pow(n as u32 - 1);
        assert_on_time(&format!("try {n}"), started[n], started[n - 1] + backoff);
    }
}

#[tokio::test(start_paused = true)]
async fn the_idle_watchdog_fires_idle_after_the_last_activity() {
    const IDLE: Duration = Duration::from_millis(300);
    let (active, activity) = tokio::sync::mpsc::channel(8);
    let watchdog = tokio::spawn(idle_watchdog(IDLE, activity));
    // Activity at 100, 250 and 450 ms, each within IDLE of the one before.
    let mut last = Instant::now();
    for gap in [100, 150, 200] {
        time::sleep(Duration::from_millis(gap)).await;
        last = Instant::now();
        active.send(()).await.unwrap();
    }
    let fired = watchdog.await.unwrap().expect("the watchdog fired");
    assert_on_time("idle", fired, last + IDLE);
    drop(active);

    // Closing the channel ends it without firing.
    let (active, activity) = tokio::sync::mpsc::channel(8);
    drop(active);
    assert_eq!(idle_watchdog(IDLE, activity).await, None);
}

#[tokio::test(start_paused = true)]
async fn work_in_a_window_starts_when_it_opens_and_is_cut_off_when_it_closes() {
    let open = Instant::now() + Duration::from_millis(100);
    let close = open + Duration::from_millis(200);
    let quick = in_window(open, close, async {
        time::sleep(Duration::from_millis(50)).await;
        7
    })
    .await;
    assert_eq!(quick, Ok(7));
    assert_on_time("quick work", Instant::now(), open + Duration::from_millis(50));

    let open = Instant::now() + Duration::from_millis(100);
    let close = open + Duration::from_millis(200);
    let slow = in_window(open, close, async {
        time::sleep(Duration::from_secs(1)).await;
        7
    })
    .await;
    assert!(slow.is_err());
    assert_on_time("window closed", Instant::now(), close);
}

#[tokio::test(start_paused = true)]
async fn a_sampler_from_a_start_skips_the_ticks_a_slow_one_ran_over() {
    const PERIOD: Duration = Duration::from_millis(100);
    let start = Instant::now() + Duration::from_millis(500);
    // Tick 1's work takes two and a half periods, running over ticks 2 and 3.
    let taken = sampler(start, PERIOD, 5, |n| async move {
        if n == 1 {
            time::sleep(PERIOD * 5 / 2).await;
        }
    })
    .await;
    let scheduled: Vec<Instant> = taken.iter().map(|&(_, scheduled)| scheduled).collect();
    // Tick 2 was missed and is taken late; Skip drops tick 3 and keeps the grid.
    let grid = |n: u32| start + PERIOD * n;
    assert_eq!(scheduled, [grid(0), grid(1), grid(2), grid(4), grid(5)]);
    assert_on_time("tick 0", taken[0].0, grid(0));
    assert_on_time("tick 1", taken[1].0, grid(1));
    assert_on_time("missed tick 2", taken[2].0, taken[1].0 + PERIOD * 5 / 2);
    assert_on_time("tick 4", taken[3].0, grid(4));
    assert_on_time("tick 5", taken[4].0, grid(5));
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_concurrent_sleeps_each_end_on_time() {
    let start = Instant::now();
    let sleepers: Vec<_> = (0..10_000u32)
        .map(|n| {
            // Spread over 0..1 s, a few hundred per millisecond-wide band.
            let duration = Duration::from_micros(u64::from(n % 1000) * 997);
            tokio::spawn(async move {
                time::sleep(duration).await;
                (Instant::now(), start + duration)
            })
        })
        .collect();
    for sleeper in sleepers {
        let (woke, due) = sleeper.await.unwrap();
        assert_on_time("sleep", woke, due);
    }
}

#[tokio::test]
async fn advancing_a_paused_clock_fires_the_sleeps_it_passes_and_no_others() {
    time::pause();
    let mut short = task::spawn(time::sleep(Duration::from_secs(1)));
    let mut long = task::spawn(time::sleep(Duration::from_secs(30)));
    assert_pending!(short.poll());
    assert_pending!(long.poll());
    time::advance(Duration::from_millis(999)).await;
    assert_pending!(short.poll(), "1 ms early");
    time::advance(Duration::from_millis(1) + TICK).await;
    assert_ready!(short.poll());
    assert_pending!(long.poll());
    time::advance(Duration::from_secs(29)).await;
    assert_ready!(long.poll());
    time::resume();
}

#[tokio::test(start_paused = true)]
async fn a_batch_lingers_exactly_its_linger_in_whole_milliseconds() {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let batcher = tokio::spawn(batch(Duration::from_millis(25), rx));
    time::sleep(Duration::from_millis(3)).await;
    tx.send(1).await.unwrap();
    time::sleep(Duration::from_millis(10)).await;
    tx.send(2).await.unwrap();
    let (batch, started, flushed) = batcher.await.unwrap();
    assert_eq!(batch, [1, 2]);
    // Exact, as a test written against Tokio's millisecond asserts it.
    assert_eq!(flushed - started, Duration::from_millis(25));
}

#[tokio::test(start_paused = true)]
async fn a_pin_projected_deadline_reset_through_the_projection_cuts_on_quiet() {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let idle = Duration::from_millis(40);
    let quiet = tokio::spawn(UntilQuiet {
        deadline: time::sleep(idle),
        idle,
        values: rx,
        got: Vec::new(),
    });
    let mut last = Instant::now();
    for value in 0..3 {
        time::sleep(Duration::from_millis(30)).await;
        tx.send(value).await.unwrap();
        last = Instant::now();
    }
    let (got, cut) = quiet.await.unwrap();
    assert_eq!(got, [0, 1, 2]);
    assert_on_time("quiet", cut, last + idle);
    drop(tx);
}

#[tokio::test(start_paused = true)]
async fn a_sleep_advanced_to_in_quarter_milliseconds_is_woken_and_ready_at_its_deadline() {
    let mut sleep = task::spawn(time::sleep(Duration::from_millis(1)));
    assert_pending!(sleep.poll());
    for _ in 0..3 {
        time::advance(Duration::from_micros(250)).await;
        assert_pending!(sleep.poll(), "early");
    }
    time::advance(Duration::from_micros(250)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn a_sleep_advanced_past_in_two_steps_is_woken_and_ready() {
    let mut sleep = task::spawn(time::sleep(Duration::from_millis(1)));
    assert_pending!(sleep.poll());
    time::advance(Duration::from_micros(250)).await;
    assert_pending!(sleep.poll(), "early");
    time::advance(Duration::from_micros(1500)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn a_timeout_takes_what_turns_into_a_future() {
    assert_eq!(time::timeout(Duration::from_secs(1), Later).await, Ok(7));
}
