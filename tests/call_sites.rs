//! Pending timers by call site (`Builder::track_call_sites`, `Timer::pending_by_site`,
//! the free `pending_by_site`): each entry point names its caller's line; a timer
//! leaves its line's count when it fires, is cancelled, dropped or reset into the
//! past; the earliest deadline is the earliest pending; the most pending come first;
//! nothing is listed when tracking is off; the free functions are tracked when the
//! environment says so; counts stay exact with many threads. A `DelayQueue`'s values
//! are listed at the lines that inserted them, until removed, taken or cleared, or
//! the queue is dropped.
//!
//! Futures are polled by hand (tokio-test's mock task) on the paused clock, so that a
//! timer registers exactly when the test polls it. Lines are taken with `line!()` in
//! the statement that makes the timer, kept on one line.

use std::collections::BTreeMap;
use std::future::pending;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;
use tokio_test::assert_ready;
use tokio_test::task::{spawn, Spawn};
use tokio_wheel::{DelayQueue, Interval, MissedTickBehavior, Sleep, Timer};

mod common;
use common::{assert_child_ok, is_child, TICK};

const HOUR: Duration = Duration::from_secs(3600);

/// A deadline on neither a step's end nor Tokio's whole millisecond.
const ODD: Duration = Duration::from_micros(13_370);

/// A timer that tracks call sites, driven on the current runtime.
fn tracking() -> Timer {
    Timer::builder()
        .tick(TICK)
        .track_call_sites(true)
        .build()
        .unwrap()
}

/// What `pending_by_site` lists, in its order, as (line, pending, earliest deadline);
/// checks that every line is in this file and that the counts add up to `pending()`.
#[track_caller]
fn listed(timer: &Timer) -> Vec<(u32, usize, Option<Instant>)> {
    let sites = timer.pending_by_site();
    for site in &sites {
        assert_eq!(site.location().file(), file!(), "{site}");
    }
    let total: usize = sites.iter().map(|site| site.pending()).sum();
    assert_eq!(total, timer.pending(), "every pending timer has its line");
    sites
        .iter()
        .map(|site| {
            let line = site.location().line();
            (line, site.pending(), site.earliest_deadline())
        })
        .collect()
}

/// Lines and their counts, whatever the order.
#[track_caller]
fn counts(timer: &Timer) -> BTreeMap<u32, usize> {
    listed(timer).into_iter().map(|(l, n, _)| (l, n)).collect()
}

/// What `pending_by_site` lists at this file's lines, in its order, as (line, pending,
/// earliest deadline), with `held` values in the timer's queues: checks that the
/// counts of every line listed (a queue's wakeup is at the crate's) add up to the
/// timer's pending timers and those values.
#[track_caller]
fn listed_with(timer: &Timer, held: usize) -> Vec<(u32, usize, Option<Instant>)> {
    let sites = timer.pending_by_site();
    let total: usize = sites.iter().map(|site| site.pending()).sum();
    assert_eq!(
        total,
        timer.pending() + held,
        "every timer and value has its line"
    );
    sites
        .iter()
        .filter(|site| site.location().file() == file!())
        .map(|site| {
            let line = site.location().line();
            (line, site.pending(), site.earliest_deadline())
        })
        .collect()
}

/// Polls a mock task once, expecting it to wait.
#[track_caller]
fn waits<F: std::future::Future>(task: &mut Spawn<F>) {
    assert!(task.poll().is_pending());
}

/// An interval's tick, polled once: the first is due at once; a later one waits,
/// which registers the interval's sleep.
fn tick(interval: &mut Interval) -> std::task::Poll<Instant> {
    let mut task = spawn(());
    task.enter(|cx, _| interval.poll_tick(cx))
}

#[tokio::test(start_paused = true)]
async fn each_entry_point_of_a_timer_names_its_callers_line() {
    let t = tracking();
    let (d, at) = (HOUR, Instant::now() + HOUR);
    let (l1, mut s1) = (line!(), spawn(t.sleep(d)));
    let (l2, mut s2) = (line!(), spawn(t.sleep_until(at)));
    let (l3, mut s3) = (line!(), spawn(t.timeout(d, pending::<()>())));
    let (l4, mut s4) = (line!(), spawn(t.timeout_at(at, pending::<()>())));
    let (l5, mut i5) = (line!(), t.interval(d));
    let (l6, mut i6) = (line!(), t.interval_at(Instant::now(), d));
    let (l7, _c7) = (line!(), t.schedule(d, || {}).unwrap());
    let (l8, _c8) = (line!(), t.schedule_at(at, || {}).unwrap());
    let (l9, ()) = (line!(), t.schedule_detached(d, || {}).unwrap());
    let (l10, ()) = (line!(), t.schedule_detached_at(at, || {}).unwrap());
    // Futures register on their first poll: only the callbacks so far.
    let callbacks = BTreeMap::from([(l7, 1), (l8, 1), (l9, 1), (l10, 1)]);
    assert_eq!(counts(&t), callbacks);
    waits(&mut s1);
    waits(&mut s2);
    waits(&mut s3);
    waits(&mut s4);
    for interval in [&mut i5, &mut i6] {
        assert!(tick(interval).is_ready(), "the first tick, at once");
        assert!(tick(interval).is_pending());
    }
    let mut all = callbacks;
    all.extend([(l1, 1), (l2, 1), (l3, 1), (l4, 1), (l5, 1), (l6, 1)]);
    assert_eq!(counts(&t), all);
    assert_eq!(t.pending(), 10);
}

#[tokio::test(start_paused = true)]
async fn a_sleep_keeps_its_line_when_it_registers_again() {
    let t = tracking();
    let (interval_line, mut beat) = (line!(), t.interval(ODD));
    let (sleep_line, mut sleep) = (line!(), spawn(t.sleep(ODD)));
    // Each round waits past a tick: the next tick a period after that one.
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    assert!(tick(&mut beat).is_ready());
    for round in 0..3 {
        assert!(tick(&mut beat).is_pending(), "round {round}");
        waits(&mut sleep);
        let expected = BTreeMap::from([(interval_line, 1), (sleep_line, 1)]);
        assert_eq!(counts(&t), expected, "round {round}");
        // Both fire, leave the wheel, and register afresh when polled again: the
        // sleep after a reset, the interval for its next tick. (A step is processed
        // once the clock has passed its end: a tick on is past it.)
        tokio::time::advance(ODD + TICK).await;
        t.catch_up().await;
        assert_eq!(counts(&t), BTreeMap::new(), "round {round}: fired");
        assert!(tick(&mut beat).is_ready());
        assert_ready!(sleep.poll());
        let next = Instant::now() + ODD;
        Pin::new(&mut *sleep).reset(next);
    }
}

#[tokio::test(start_paused = true)]
async fn a_timer_leaves_its_line_when_it_fires() {
    let t = tracking();
    let mut sleeps: Vec<Spawn<Sleep>> = Vec::new();
    let mut handles = Vec::new();
    let mut sleep_line = 0;
    let mut callback_line = 0;
    for n in 1..=3 {
        let (line, sleep) = (line!(), spawn(t.sleep(ODD * n)));
        sleep_line = line;
        sleeps.push(sleep);
        let (line, handle) = (line!(), t.schedule(ODD * n, || {}).unwrap());
        callback_line = line;
        handles.push(handle);
    }
    sleeps.iter_mut().for_each(waits);
    assert_eq!(
        counts(&t),
        BTreeMap::from([(sleep_line, 3), (callback_line, 3)])
    );
    // Past the first deadline's step (less than a tick on), then a deadline at a time.
    tokio::time::advance(TICK).await;
    for left in (0..3).rev() {
        tokio::time::advance(ODD).await;
        t.catch_up().await;
        let expected: BTreeMap<u32, usize> = if left == 0 {
            BTreeMap::new()
        } else {
            BTreeMap::from([(sleep_line, left), (callback_line, left)])
        };
        assert_eq!(counts(&t), expected, "{left} left of each");
    }
    assert!(handles.iter().all(|handle| handle.is_expired()));
}

#[tokio::test(start_paused = true)]
async fn a_timer_leaves_its_line_when_cancelled_or_dropped() {
    let t = tracking();
    let (l1, mut sleep) = (line!(), spawn(t.sleep(HOUR)));
    let (l2, mut timeout) = (line!(), spawn(t.timeout(HOUR, pending::<()>())));
    let (l3, mut interval) = (line!(), t.interval_at(Instant::now() + HOUR, HOUR));
    let (l4, cancelled) = (line!(), t.schedule(HOUR, || {}).unwrap());
    let (l5, dropped) = (line!(), t.schedule(HOUR, || {}).unwrap());
    waits(&mut sleep);
    waits(&mut timeout);
    assert!(tick(&mut interval).is_pending());
    let mut expected = BTreeMap::from([(l1, 1), (l2, 1), (l3, 1), (l4, 1), (l5, 1)]);
    assert_eq!(counts(&t), expected);
    assert!(cancelled.cancel());
    expected.remove(&l4);
    assert_eq!(counts(&t), expected, "cancelled");
    drop(dropped);
    expected.remove(&l5);
    assert_eq!(counts(&t), expected, "handle dropped");
    drop(sleep);
    expected.remove(&l1);
    assert_eq!(counts(&t), expected, "sleep dropped");
    drop(timeout);
    expected.remove(&l2);
    assert_eq!(counts(&t), expected, "timeout dropped");
    drop(interval);
    assert_eq!(counts(&t), BTreeMap::new(), "interval dropped");
}

#[tokio::test(start_paused = true)]
async fn a_sleep_reset_into_the_past_leaves_its_line() {
    let t = tracking();
    let start = Instant::now();
    let (line, mut sleep) = (line!(), spawn(t.sleep(HOUR)));
    waits(&mut sleep);
    tokio::time::advance(ODD).await;
    assert_eq!(counts(&t), BTreeMap::from([(line, 1)]));
    // Into the past: out of the wheel at once, ready on the next poll.
    Pin::new(&mut *sleep).reset(start);
    assert_eq!(counts(&t), BTreeMap::new());
    assert_ready!(sleep.poll());
    assert_eq!(t.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_earliest_deadline_is_the_earliest_pending_and_follows_resets() {
    let t = tracking();
    let start = Instant::now();
    let deadlines = [3, 1, 2].map(|n| start + ODD * n);
    let mut sleeps = Vec::new();
    let mut sleep_line = 0;
    for deadline in deadlines {
        let (line, sleep) = (line!(), spawn(t.sleep_until(deadline)));
        sleep_line = line;
        sleeps.push(sleep);
    }
    sleeps.iter_mut().for_each(waits);
    let (callback_line, callback) = (line!(), t.schedule_at(start + HOUR, || {}).unwrap());
    let earliest = |t: &Timer, line: u32| {
        let found = listed(t).into_iter().find(|(l, _, _)| *l == line);
        found.and_then(|(_, _, earliest)| earliest)
    };
    assert_eq!(earliest(&t, sleep_line), Some(start + ODD));
    assert_eq!(earliest(&t, callback_line), Some(start + HOUR));
    // The earliest moved later: the next one is the earliest now.
    Pin::new(&mut *sleeps[1]).reset(start + ODD * 5);
    assert_eq!(earliest(&t, sleep_line), Some(start + ODD * 2));
    // And earlier: it is the earliest again, exactly.
    Pin::new(&mut *sleeps[1]).reset(start + ODD / 2);
    assert_eq!(earliest(&t, sleep_line), Some(start + ODD / 2));
    assert!(callback.reset_at(start + ODD * 7));
    assert_eq!(earliest(&t, callback_line), Some(start + ODD * 7));
    // The earliest fires: the one after it is the earliest.
    tokio::time::advance(ODD).await;
    t.catch_up().await;
    assert_eq!(earliest(&t, sleep_line), Some(start + ODD * 2));
    let (_, pending, _) = listed(&t)[0];
    assert_eq!(pending, 2);
}

#[tokio::test(start_paused = true)]
async fn the_lines_with_the_most_pending_come_first() {
    let t = tracking();
    let start = Instant::now();
    let mut held = Vec::new();
    let mut lines = [0; 4];
    // One due soon, three and two due in an hour, and two due sooner than those two
    // (as many: listed before them).
    for n in 0..8 {
        let (group, (line, callback)) = match n {
            0 => (0, (line!(), t.schedule_at(start + ODD, || {}))),
            1..=3 => (1, (line!(), t.schedule_at(start + HOUR, || {}))),
            4 | 5 => (2, (line!(), t.schedule_at(start + HOUR, || {}))),
            _ => (3, (line!(), t.schedule_at(start + ODD * 2, || {}))),
        };
        lines[group] = line;
        held.push(callback.unwrap());
    }
    let order: Vec<(u32, usize)> = listed(&t).into_iter().map(|(l, n, _)| (l, n)).collect();
    assert_eq!(
        order,
        [(lines[1], 3), (lines[3], 2), (lines[2], 2), (lines[0], 1)]
    );
    assert_eq!(held.len(), 8);
}

#[tokio::test(start_paused = true)]
async fn a_timer_that_does_not_track_lists_nothing() {
    let t = common::timer();
    let mut sleep = spawn(t.sleep(HOUR));
    waits(&mut sleep);
    let _callback = t.schedule(HOUR, || {}).unwrap();
    assert_eq!(t.pending(), 2);
    assert!(t.pending_by_site().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_queues_inserts_name_their_callers_lines() {
    let t = tracking();
    let queue = DelayQueue::with_timer(&t);
    let start = Instant::now();
    let (l1, k1) = (line!(), queue.insert(1, HOUR));
    let (l2, k2) = (line!(), queue.insert_at(2, start + ODD));
    let (l3, k3) = (line!(), queue.try_insert(3, ODD * 2).unwrap());
    let (l4, k4) = (line!(), queue.try_insert_at(4, start + ODD * 3).unwrap());
    let mut l5 = 0;
    for n in [5, 4, 6] {
        let (line, _) = (line!(), queue.insert(n, ODD * n));
        l5 = line;
    }
    let at = |n: u32| Some(start + ODD * n);
    assert_eq!(queue.deadline(&k1), Some(start + HOUR));
    assert_eq!(
        [&k2, &k3, &k4].map(|key| queue.deadline(key)),
        [at(1), at(2), at(3)]
    );
    // Most pending first, then earliest deadline first.
    let expected = [
        (l5, 3, at(4)),
        (l2, 1, at(1)),
        (l3, 1, at(2)),
        (l4, 1, at(3)),
        (l1, 1, Some(start + HOUR)),
    ];
    assert_eq!(listed_with(&t, 7), expected);
    assert_eq!(t.pending(), 0, "values are the queue's, not the timer's");
}

#[tokio::test(start_paused = true)]
async fn a_queue_value_leaves_its_line_when_removed_taken_or_cleared() {
    let t = tracking();
    let queue = DelayQueue::with_timer(&t);
    let start = Instant::now();
    let mut keys = Vec::new();
    let mut line = 0;
    for n in 1..=4 {
        let (l, key) = (line!(), queue.insert(n, ODD * n));
        line = l;
        keys.push(key);
    }
    let (other, _kept) = (line!(), queue.insert(0, HOUR));
    let at = |n: u32| Some(start + ODD * n);
    let hour = (other, 1, Some(start + HOUR));
    assert_eq!(listed_with(&t, 5), [(line, 4, at(1)), hour]);
    // Removed: the earliest leaves; the next is the earliest.
    assert_eq!(queue.remove(&keys[0]), Some(1));
    assert_eq!(listed_with(&t, 4), [(line, 3, at(2)), hour]);
    // Reset later: the next is the earliest; reset earlier: it is, exactly.
    assert!(queue.reset(&keys[1], ODD * 5));
    assert_eq!(listed_with(&t, 4), [(line, 3, at(3)), hour]);
    assert!(queue.reset_at(&keys[1], start + ODD / 2));
    let half = Some(start + ODD / 2);
    assert_eq!(listed_with(&t, 4), [(line, 3, half), hour]);
    // Due, it is the queue's until a consumer takes it.
    tokio::time::advance(ODD).await;
    assert_eq!(listed_with(&t, 4), [(line, 3, half), hour]);
    let taken = queue.next_expired().await.unwrap();
    assert_eq!((taken.key(), taken.into_inner()), (keys[1], 2));
    assert_eq!(listed_with(&t, 3), [(line, 2, at(3)), hour]);
    // Cleared: nothing left; a value inserted after it has its own line.
    queue.clear();
    assert_eq!(listed_with(&t, 0), []);
    let (again, _) = (line!(), queue.insert(9, ODD));
    assert_eq!(listed_with(&t, 1), [(again, 1, Some(start + ODD * 2))]);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_queue_leaves_no_lines() {
    let t = tracking();
    let queue = DelayQueue::with_timer(&t);
    let (line, _) = (line!(), queue.insert(1, HOUR));
    let deadline = Some(Instant::now() + HOUR);
    let handle = queue.clone();
    {
        // A consumer waits: the queue's one sleep is the timer's, at the crate's line.
        let mut consumer = spawn(handle.next_expired());
        waits(&mut consumer);
        assert_eq!(t.pending(), 1);
        assert_eq!(listed_with(&t, 1), [(line, 1, deadline)]);
    }
    drop(queue);
    assert_eq!(
        listed_with(&t, 1),
        [(line, 1, deadline)],
        "a handle is left"
    );
    drop(handle);
    assert_eq!(t.pending(), 0);
    assert!(t.pending_by_site().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_queue_on_a_timer_that_does_not_track_lists_nothing() {
    let t = common::timer();
    let queue = DelayQueue::with_timer(&t);
    queue.insert(1, HOUR);
    queue.try_insert_at(2, Instant::now() + HOUR).unwrap();
    assert_eq!(queue.len(), 2);
    assert!(t.pending_by_site().is_empty());
}

/// Many threads making, dropping and keeping timers at once, on several shards: the
/// lines' counts are exact, and add up to `pending()`.
#[test]
fn counts_stay_exact_with_many_threads() {
    const TASKS: usize = 8;
    const KEPT: usize = 50;
    let runtime = common::multi_thread_runtime(4);
    let t = runtime.block_on(async { tracking() });
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let t = t.clone();
        tasks.push(runtime.spawn(async move {
            let mut kept = Vec::new();
            let mut kept_line = 0;
            for n in 0..1000 {
                if n % 20 == 0 {
                    let (line, mut sleep) = (line!(), spawn(t.sleep(HOUR)));
                    waits(&mut sleep);
                    kept.push(sleep);
                    kept_line = line;
                }
                let mut churned = spawn(t.sleep(HOUR));
                waits(&mut churned);
                tokio::task::yield_now().await;
            }
            (kept_line, kept)
        }));
    }
    let kept: Vec<(u32, Vec<Spawn<Sleep>>)> = runtime.block_on(async {
        let mut kept = Vec::new();
        for task in tasks {
            kept.push(task.await.unwrap());
        }
        kept
    });
    let kept_line = kept[0].0;
    assert_eq!(counts(&t), BTreeMap::from([(kept_line, TASKS * KEPT)]));
    drop(kept);
    assert_eq!(counts(&t), BTreeMap::new());
}

/// The environment variable that turns tracking on for the default timers.
const VAR: &str = "TOKIO_WHEEL_TRACK_CALL_SITES";

/// Re-runs the test `name` in a child process with `VAR` set to `value`, or unset.
fn in_child(name: &str, value: Option<&str>) -> std::process::Output {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(common::CHILD, "1");
    match value {
        Some(value) => child.env(VAR, value),
        None => child.env_remove(VAR),
    };
    child.output().expect("run the test binary again")
}

/// The free functions' default timer tracks when the process starts with the
/// variable set, without any other change: each free function names its caller's
/// line, and the free `pending_by_site` lists them. (In a child process: the variable
/// is read once per process, when the default timer is built.)
#[test]
fn the_free_functions_are_tracked_when_the_environment_says_so() {
    const NAME: &str = "the_free_functions_are_tracked_when_the_environment_says_so";
    if !is_child() {
        return assert_child_ok(&in_child(NAME, Some("1")), "child: tracked");
    }
    // The real clock (a paused one needs the feature `test-util`); nothing here
    // waits for a deadline.
    let runtime = common::current_thread_runtime();
    runtime.block_on(async {
        let at = Instant::now() + HOUR;
        let (l1, mut s1) = (line!(), spawn(tokio_wheel::sleep(HOUR)));
        let (l2, mut s2) = (line!(), spawn(tokio_wheel::sleep_until(at)));
        let (l3, mut s3) = (line!(), spawn(tokio_wheel::timeout(HOUR, pending::<()>())));
        let (l4, mut s4) = (line!(), spawn(tokio_wheel::timeout_at(at, pending::<()>())));
        let (l5, mut i5) = (line!(), tokio_wheel::interval(HOUR));
        let (l6, mut i6) = (line!(), tokio_wheel::interval_at(Instant::now(), HOUR));
        waits(&mut s1);
        waits(&mut s2);
        waits(&mut s3);
        waits(&mut s4);
        for interval in [&mut i5, &mut i6] {
            assert!(tick(interval).is_ready(), "the first tick, at once");
            assert!(tick(interval).is_pending());
        }
        let sites: BTreeMap<u32, usize> = tokio_wheel::pending_by_site()
            .iter()
            .filter(|site| site.location().file() == file!())
            .map(|site| (site.location().line(), site.pending()))
            .collect();
        let expected = [l1, l2, l3, l4, l5, l6].map(|line| (line, 1));
        assert_eq!(sites, BTreeMap::from(expected));
        drop((s1, s2, s3, s4, i5, i6));
        let left = tokio_wheel::pending_by_site();
        assert!(left.iter().all(|site| site.location().file() != file!()));
    });
    println!("child: tracked");
}

/// Without the variable, or with it `0` or empty, the default timer does not track.
#[test]
fn the_free_functions_are_not_tracked_otherwise() {
    const NAME: &str = "the_free_functions_are_not_tracked_otherwise";
    if !is_child() {
        for value in [None, Some("0"), Some("")] {
            assert_child_ok(&in_child(NAME, value), "child: not tracked");
        }
        return;
    }
    let runtime = common::current_thread_runtime();
    runtime.block_on(async {
        let mut sleep = spawn(tokio_wheel::sleep(HOUR));
        waits(&mut sleep);
        let queue = DelayQueue::new();
        queue.insert(1, HOUR);
        assert!(tokio_wheel::pending_by_site().is_empty());
    });
    println!("child: not tracked");
}

/// A queue on the default timer (`DelayQueue::new`) is tracked with it, when the
/// process starts with the variable set: its values at the lines that inserted them,
/// until the queue is dropped.
#[test]
fn the_default_timers_queues_are_tracked_when_the_environment_says_so() {
    const NAME: &str = "the_default_timers_queues_are_tracked_when_the_environment_says_so";
    if !is_child() {
        return assert_child_ok(&in_child(NAME, Some("1")), "child: queue tracked");
    }
    let runtime = common::current_thread_runtime();
    runtime.block_on(async {
        let here = || -> BTreeMap<u32, usize> {
            tokio_wheel::pending_by_site()
                .iter()
                .filter(|site| site.location().file() == file!())
                .map(|site| (site.location().line(), site.pending()))
                .collect()
        };
        let queue = DelayQueue::new();
        let (l1, _) = (line!(), queue.insert(1, HOUR));
        let (l2, _) = (line!(), queue.insert_at(2, Instant::now() + HOUR));
        let (l3, _) = (line!(), queue.insert(3, HOUR));
        assert_eq!(here(), BTreeMap::from([(l1, 1), (l2, 1), (l3, 1)]));
        drop(queue);
        assert_eq!(here(), BTreeMap::new());
    });
    println!("child: queue tracked");
}
