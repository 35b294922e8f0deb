//! loom models of the races that decide exactly-once and no-lost-wakeup.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --test loom`. Under
//! `--cfg loom` the timer's `Mutex` and atomics are loom's, and `loom_hooks` gives a
//! timer with no driver task whose turns the model takes by hand on another thread,
//! so loom explores every interleaving of the two sides.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;
use tokio_wheel::loom_hooks::{
    alarmed_timer, capped_timer, kept_alive, lose_driver, parked_until, ring, shutdown, step_end,
    timer, tracking_timer, turn,
};
use tokio_wheel::{DelayQueue, Error, Expired, Instant, Scheduled, Sleep, Timer};

/// An hour: the models' deadlines, steps of a quarter hour apart, are decided by the
/// turns the models take by hand, never by the real clock (which a `Sleep` and a
/// `DelayQueue` read to tell whether a deadline has passed), however slow an
/// iteration is.
const TICK: Duration = Duration::from_secs(3600);

/// A waker that records being woken, visibly to loom.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn flag() -> (Arc<Flag>, Waker) {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    (flag.clone(), Waker::from(flag))
}

/// A sleep of `timer` due in `step`, polled once (pending), with the flag its waker
/// sets.
fn registered(timer: &Timer, step: u64) -> (Sleep, Arc<Flag>, Waker) {
    let mut sleep = timer.sleep_until(in_step(timer, step));
    let (woken, waker) = flag();
    assert!(poll(&mut sleep, &waker).is_pending());
    (sleep, woken, waker)
}

fn poll(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(waker))
}

/// A deadline inside step `step` of `timer`: 1 ms before the step ends. Taken from the
/// timer's own step grid, not from `Instant::now()`, which a slow machine (CI) can push
/// past a step boundary between building the timer and computing the deadline.
fn in_step(timer: &Timer, step: u64) -> Instant {
    step_end(timer, step) - Duration::from_millis(1)
}

/// A callback due in `step` of `timer` that counts its runs, and the count.
fn counting_callback(timer: &Timer, step: u64) -> (Scheduled, Arc<AtomicUsize>) {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let handle = timer
        .schedule_at(in_step(timer, step), move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    (handle, ran)
}

/// The driver's alarm going off for the end of `step` (if armed), on a thread of its
/// own, as Tokio's timer would fire it.
fn ring_on_a_thread(timer: &Timer, step: u64) -> thread::JoinHandle<()> {
    let timer = timer.clone();
    thread::spawn(move || ring(&timer, step))
}

/// A driver turn to the end of `step`, on a thread of its own.
fn turn_on_a_thread(timer: &Timer, step: u64) -> thread::JoinHandle<()> {
    let timer = timer.clone();
    thread::spawn(move || turn(&timer, step))
}

#[test]
fn cancel_vs_fire_exactly_once() {
    loom::model(|| {
        let timer = timer(TICK);
        let (handle, ran) = counting_callback(&timer, 1);
        let driver = turn_on_a_thread(&timer, 1);
        let cancelled = handle.cancel();
        driver.join().unwrap();
        let ran = ran.load(Ordering::SeqCst);
        assert!(ran <= 1);
        assert!(cancelled != (ran == 1), "cancelled {cancelled}, ran {ran}");
        assert_eq!(handle.is_cancelled(), cancelled);
        assert_eq!(handle.is_expired(), !cancelled);
        assert_eq!(timer.pending(), 0);
    });
}

/// A handle reads its callback's state from the wheel, and `cancel` sets the
/// handle's flag under the lock that takes the entry out: no moment where the entry is
/// gone and the flag not yet set, which `is_expired` would report as expired.
#[test]
fn state_vs_cancel_never_looks_expired() {
    loom::model(|| {
        let timer = timer(TICK);
        let handle = Arc::new(timer.schedule_at(in_step(&timer, 1), || ()).unwrap());
        let canceller = {
            let handle = handle.clone();
            thread::spawn(move || handle.cancel())
        };
        let expired = handle.is_expired();
        assert!(canceller.join().unwrap());
        assert!(!expired, "a callback being cancelled looked expired");
        assert!(handle.is_cancelled() && !handle.is_expired());
    });
}

#[test]
fn registration_vs_turn_loses_no_wakeup() {
    loom::model(|| {
        let timer = timer(TICK);
        let mut sleep = timer.sleep_until(in_step(&timer, 1));
        let driver = turn_on_a_thread(&timer, 1);
        let (woken, waker) = flag();
        let first = poll(&mut sleep, &waker);
        driver.join().unwrap();
        // Either it saw the step already processed, or the turn woke it.
        assert!(first.is_ready() || woken.0.load(Ordering::SeqCst));
        assert!(poll(&mut sleep, &waker).is_ready());
        assert_eq!(timer.pending(), 0);
    });
}

/// A registration racing the driver's park: after both, the driver is either due to
/// wake by the entry's step or was notified (the registration lowered `parked_until`).
#[test]
fn registration_vs_park_loses_no_wakeup() {
    loom::model(|| {
        let timer = timer(TICK);
        // Something pending at step 5 so that the driver parks until 5.
        let (_anchor, _, waker) = registered(&timer, 5);
        let driver = turn_on_a_thread(&timer, 1);
        let mut early = timer.sleep_until(in_step(&timer, 3));
        assert!(poll(&mut early, &waker).is_pending());
        driver.join().unwrap();
        assert!(
            parked_until(&timer) <= 3,
            "driver parked past step 3: {}",
            parked_until(&timer)
        );
    });
}

#[test]
fn reset_vs_fire_moves_or_refires() {
    loom::model(|| {
        let timer = timer(TICK);
        let (mut sleep, woken, waker) = registered(&timer, 1);
        let driver = turn_on_a_thread(&timer, 1);
        Pin::new(&mut sleep).reset(in_step(&timer, 3));
        driver.join().unwrap();
        // Whatever the order, the sleep now waits for step 3, and completes there.
        let before = poll(&mut sleep, &waker);
        assert!(before.is_pending(), "completed before its new deadline");
        woken.0.store(false, Ordering::SeqCst);
        turn(&timer, 3);
        assert!(woken.0.load(Ordering::SeqCst), "lost wakeup after reset");
        assert!(poll(&mut sleep, &waker).is_ready());
        assert_eq!(timer.pending(), 0);
    });
}

/// `Scheduled::reset` racing the callback's expiry: either the reset moved it (and it
/// runs once, at the new step) or it had fired (and the reset says so); never both,
/// never neither.
#[test]
fn scheduled_reset_vs_fire_exactly_once() {
    loom::model(|| {
        let timer = timer(TICK);
        let (handle, ran) = counting_callback(&timer, 1);
        let driver = turn_on_a_thread(&timer, 1);
        let moved = handle.reset_at(in_step(&timer, 3));
        driver.join().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), usize::from(!moved));
        assert_eq!(handle.is_expired(), !moved);
        turn(&timer, 2);
        assert_eq!(ran.load(Ordering::SeqCst), usize::from(!moved), "early");
        turn(&timer, 3);
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert!(handle.is_expired());
        assert!(!handle.cancel());
        assert_eq!(timer.pending(), 0);
    });
}

/// `Scheduled::cancel` racing a `reset` of the same handle on another thread: the
/// cancel reads the step the entry is at under the lock that moves it, so it always
/// finds the entry, whichever goes first, and the callback never runs.
#[test]
fn scheduled_reset_vs_cancel_cancels() {
    loom::model(|| {
        let timer = timer(TICK);
        let (handle, ran) = counting_callback(&timer, 1);
        let handle = Arc::new(handle);
        let canceller = {
            let handle = handle.clone();
            thread::spawn(move || handle.cancel())
        };
        let moved = handle.reset_at(in_step(&timer, 3));
        let cancelled = canceller.join().unwrap();
        assert!(cancelled, "cancel missed the moved entry (moved: {moved})");
        assert!(handle.is_cancelled());
        turn(&timer, 3);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(timer.pending(), 0);
    });
}

/// A consumer's poll: the value it took, if any. The queue ends like a channel, so
/// `None` is also what a handle left alone with an empty queue gets; a queue that
/// holds values never ends.
fn take<T>(queue: &DelayQueue<T>, waker: &Waker) -> Option<T> {
    match queue.poll_expired(&mut Context::from_waker(waker)) {
        Poll::Ready(Some(expired)) => Some(expired.into_inner()),
        Poll::Ready(None) => {
            assert!(queue.is_empty(), "a queue holding values ended");
            None
        }
        Poll::Pending => None,
    }
}

/// A consumer polling an empty `DelayQueue` races another thread that inserts a value
/// and turns the driver past its deadline: the consumer either takes the value on that
/// poll or is woken, and then takes it; never both, never a lost wakeup.
#[test]
fn delay_queue_consumer_vs_insert_and_expiry_loses_no_wakeup() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue = DelayQueue::with_timer(&timer);
        let producer = {
            let (queue, timer) = (queue.clone(), timer.clone());
            thread::spawn(move || {
                queue.insert_at(7u8, in_step(&timer, 1));
                turn(&timer, 1);
            })
        };
        let (woken, waker) = flag();
        let first = take(&queue, &waker);
        producer.join().unwrap();
        if first.is_none() {
            assert!(woken.0.load(Ordering::SeqCst), "lost wakeup");
            assert_eq!(take(&queue, &waker), Some(7), "woken for nothing");
        } else {
            assert_eq!(first, Some(7));
        }
        assert!(queue.is_empty());
        assert_eq!(timer.pending(), 0, "the queue's sleep stood down");
    });
}

/// A consumer that waits, its value pending, races the driver's turn to the value's
/// step: the queue's sleep fires before or after the consumer aims it; the consumer
/// takes the value on that poll or is woken for it.
#[test]
fn delay_queue_consumer_vs_turn_loses_no_wakeup() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue = DelayQueue::with_timer(&timer);
        queue.insert_at(7u8, in_step(&timer, 1));
        let driver = turn_on_a_thread(&timer, 1);
        let (woken, waker) = flag();
        let first = take(&queue, &waker);
        driver.join().unwrap();
        if first.is_none() {
            assert!(woken.0.load(Ordering::SeqCst), "lost wakeup");
            assert_eq!(take(&queue, &waker), Some(7), "woken for nothing");
        }
        assert!(queue.is_empty());
    });
}

/// Two consumers race for one value as it expires: exactly one gets it.
#[test]
fn delay_queue_two_consumers_take_a_value_once() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue = DelayQueue::with_timer(&timer);
        queue.insert_at(7u8, in_step(&timer, 1));
        let driver = turn_on_a_thread(&timer, 1);
        // The other consumer's handle comes back to drop after the race: its drop's
        // own race is `delay_queue_consumer_vs_last_other_handle_drop_loses_no_wakeup`.
        let other = {
            let queue = queue.clone();
            thread::spawn(move || (take(&queue, &flag().1).is_some(), queue))
        };
        let here = take(&queue, &flag().1).is_some();
        let (there, other) = other.join().unwrap();
        drop(other);
        driver.join().unwrap();
        let after = take(&queue, &flag().1).is_some();
        assert_eq!(
            usize::from(here) + usize::from(there) + usize::from(after),
            1,
            "taken {here} {there} {after}"
        );
    });
}

/// `DelayQueue::reset` racing a consumer that takes the value once its step has
/// passed: either the consumer took it (the reset says `false`, the key names
/// nothing) or the reset moved it (the consumer found nothing, and takes it at its new
/// step); exactly once either way.
#[test]
fn delay_queue_reset_vs_take_exactly_once() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue = DelayQueue::with_timer(&timer);
        let key = queue.insert_at(7u8, in_step(&timer, 1));
        turn(&timer, 1);
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || take(&queue, &flag().1))
        };
        let moved = queue.reset_at(&key, in_step(&timer, 3));
        let taken = consumer.join().unwrap();
        assert_eq!(taken.is_some(), !moved, "moved {moved}, taken {taken:?}");
        assert_eq!(queue.deadline(&key).is_some(), moved);
        turn(&timer, 3);
        let later = take(&queue, &flag().1);
        assert_eq!(
            usize::from(taken.is_some()) + usize::from(later.is_some()),
            1
        );
        assert!(queue.is_empty());
    });
}

/// One consumer's `next_expired` future is dropped (it gave up) while the value's
/// step is processed; another consumer waits too. The one left is woken: the drop
/// takes only its own registration, and the wake takes them all.
#[test]
fn delay_queue_consumer_giving_up_vs_turn_wakes_the_other() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue = DelayQueue::with_timer(&timer);
        queue.insert_at(7u8, in_step(&timer, 1));
        let (stays, stays_waker) = flag();
        assert_eq!(take(&queue, &stays_waker), None);
        let gives_up = {
            let queue = queue.clone();
            thread::spawn(move || {
                let mut next = Box::pin(queue.next_expired());
                let (_, waker) = flag();
                let polled = next.as_mut().poll(&mut Context::from_waker(&waker));
                drop(next);
                polled.is_ready()
            })
        };
        turn(&timer, 1);
        let took = gives_up.join().unwrap();
        if !took {
            assert!(stays.0.load(Ordering::SeqCst), "lost wakeup");
            assert_eq!(take(&queue, &stays_waker), Some(7));
        }
        assert!(format!("{queue:?}").contains("waiting: 0"), "{queue:?}");
    });
}

/// A consumer's first poll, `first`, of a queue that has ended since (empty, nothing
/// can insert): `None` then, or `Pending` and woken, and `None` on the poll after.
fn assert_told_it_ended<T>(
    queue: &DelayQueue<T>,
    first: Poll<Option<Expired<T>>>,
    woken: &Flag,
    waker: &Waker,
) {
    match first {
        Poll::Ready(None) => {}
        Poll::Pending => {
            assert!(woken.0.load(Ordering::SeqCst), "lost wakeup");
            let again = queue.poll_expired(&mut Context::from_waker(waker));
            assert!(matches!(again, Poll::Ready(None)), "woken, yet waits");
        }
        Poll::Ready(Some(_)) => panic!("a value out of a queue that ended"),
    }
}

/// A consumer polls an empty `DelayQueue` while the second-to-last handle drops on
/// another thread: the consumer gets `None` on that poll (the drop came first), or
/// waits and is woken by the drop, and then gets `None`; never a lost wakeup.
#[test]
fn delay_queue_consumer_vs_last_other_handle_drop_loses_no_wakeup() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue: DelayQueue<u8> = DelayQueue::with_timer(&timer);
        let other = queue.clone();
        let dropper = thread::spawn(move || drop(other));
        let (woken, waker) = flag();
        let first = queue.poll_expired(&mut Context::from_waker(&waker));
        dropper.join().unwrap();
        assert_told_it_ended(&queue, first, &woken, &waker);
        assert!(format!("{queue:?}").contains("waiting: 0"), "{queue:?}");
    });
}

/// The removal that empties a queue with one handle (shared by two threads) races a
/// consumer of that handle: the consumer is told the queue ended (`None`), on its poll
/// or by a wake; never left waiting. (`remove` looks for consumers to end only if one
/// is counted: the count is made under the shard's lock, which the removal takes.)
#[test]
fn delay_queue_consumer_vs_the_removal_that_ends_a_sole_queue_loses_no_wakeup() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue: Arc<DelayQueue<u8>> = Arc::new(DelayQueue::with_timer(&timer));
        let key = queue.insert_at(7, in_step(&timer, 1));
        let remover = {
            let queue = queue.clone();
            thread::spawn(move || queue.remove(&key))
        };
        let (woken, waker) = flag();
        let first = queue.poll_expired(&mut Context::from_waker(&waker));
        assert_eq!(remover.join().unwrap(), Some(7));
        assert_told_it_ended(&queue, first, &woken, &waker);
    });
}

/// A consumer waits on the queue's sleep while the driver's turn fires it and a
/// shutdown drains it, in any order: the consumer is woken either way. (A `DelayQueue`
/// poll reads no shutdown flag; after a shutdown its sleep is timed by the fallback,
/// which these models, having no Tokio runtime, do not poll.)
#[test]
fn delay_queue_waiting_consumer_vs_turn_and_shutdown_is_woken() {
    loom::model(|| {
        let timer = timer(TICK);
        let queue = DelayQueue::with_timer(&timer);
        queue.insert_at(7u8, in_step(&timer, 1));
        let (woken, waker) = flag();
        assert_eq!(take(&queue, &waker), None);
        let driver = turn_on_a_thread(&timer, 1);
        let unfired = shutdown(&timer);
        driver.join().unwrap();
        assert!(unfired.is_empty(), "a queue value came back as a callback");
        assert!(woken.0.load(Ordering::SeqCst), "lost wakeup");
        assert_eq!(queue.len(), 1);
    });
}

#[test]
fn drop_vs_fire_frees_the_entry() {
    loom::model(|| {
        let timer = timer(TICK);
        let (sleep, _woken, waker) = registered(&timer, 1);
        // Another timer whose entry could reuse the freed slot: a stale key must not
        // remove it.
        let mut other = timer.sleep_until(in_step(&timer, 5));
        let driver = turn_on_a_thread(&timer, 1);
        drop(sleep);
        assert!(poll(&mut other, &waker).is_pending());
        driver.join().unwrap();
        assert_eq!(timer.pending(), 1, "exactly the other sleep remains");
        drop(other);
        assert_eq!(timer.pending(), 0);
    });
}

#[test]
fn shutdown_vs_schedule_loses_nothing() {
    loom::model(|| {
        let timer = timer(TICK);
        let ran = Arc::new(AtomicUsize::new(0));
        let scheduler = {
            let timer = timer.clone();
            let ran = ran.clone();
            thread::spawn(move || {
                timer
                    .schedule_at(in_step(&timer, 2), move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                    })
                    .map(|handle| handle.detach())
            })
        };
        let unfired = shutdown(&timer);
        let scheduled = scheduler.join().unwrap();
        let was_scheduled = scheduled.is_ok();
        match scheduled {
            // Scheduled before the shutdown: returned by it.
            Ok(()) => assert_eq!(unfired.len(), 1),
            // After: refused, and nothing to return.
            Err(e) => {
                assert_eq!(e, Error::Shutdown);
                assert!(unfired.is_empty());
            }
        }
        for u in unfired {
            u.run();
        }
        assert_eq!(ran.load(Ordering::SeqCst), usize::from(was_scheduled));
        assert_eq!(timer.pending(), 0);
    });
}

/// The last pending callback leaving (it fires) while another is scheduled and
/// detached: the new one must find the timer kept alive, or it would be lost once every
/// `Timer` clone is dropped.
#[test]
fn detach_vs_last_callback_keeps_the_timer_alive() {
    detached_vs_last_callback(|timer, at| timer.schedule_at(at, || {}).unwrap().detach());
}

/// As above, with the callbacks scheduled without a handle (`schedule_detached_at`),
/// which takes the same keep-alive path.
#[test]
fn schedule_detached_vs_last_callback_keeps_the_timer_alive() {
    detached_vs_last_callback(|timer, at| timer.schedule_detached_at(at, || {}).unwrap());
}

/// The model of the two tests above; `detached` schedules a detached callback.
fn detached_vs_last_callback(detached: fn(&Timer, Instant)) {
    loom::model(move || {
        let timer = timer(TICK);
        detached(&timer, in_step(&timer, 1));
        assert!(kept_alive(&timer));
        let driver = turn_on_a_thread(&timer, 1);
        detached(&timer, in_step(&timer, 5));
        driver.join().unwrap();
        assert_eq!(timer.pending(), 1);
        assert!(kept_alive(&timer), "a detached callback is pending unkept");
        // Let it go, so the model's timer is freed.
        turn(&timer, 5);
        assert!(!kept_alive(&timer));
    });
}

/// A handle detached while the driver's runtime drops it: the callback is dropped
/// unrun (by the loss, or by the detach once the loss has visited its shard), and
/// must be counted in `stranded_callbacks` either way. The loss read the global count
/// after visiting every shard, so a detach between the two (it sees the loss and drops
/// the callback) went uncounted.
#[test]
fn detach_vs_driver_lost_counts_the_callback_stranded() {
    loom::model(|| {
        let timer = timer(TICK);
        let handle = timer.schedule_at(in_step(&timer, 100), || {}).unwrap();
        let lost = {
            let timer = timer.clone();
            thread::spawn(move || lose_driver(&timer))
        };
        handle.detach();
        lost.join().unwrap();
        assert_eq!(timer.stats().stranded_callbacks, 1);
        assert_eq!(timer.pending(), 0);
    });
}

/// `max_pending(1)`: one thread cancels its only callback and schedules again while
/// another schedules too. Exactly one of the two gets the room: a refused `schedule`
/// never holds it, not even for a moment (counted, then taken back, it refused the
/// other with nothing pending).
#[test]
fn schedule_vs_schedule_at_capacity_refuses_only_for_a_pending_callback() {
    loom::model(|| {
        let timer = capped_timer(TICK, 1);
        let first = timer.schedule_at(in_step(&timer, 1), || ()).unwrap();
        let other = {
            let timer = timer.clone();
            thread::spawn(move || timer.schedule_at(in_step(&timer, 1), || ()))
        };
        assert!(first.cancel());
        let again = timer.schedule_at(in_step(&timer, 1), || ());
        let other = other.join().unwrap();
        assert!(
            again.is_ok() != other.is_ok(),
            "again {:?}, other {:?}",
            again.as_ref().err(),
            other.as_ref().err()
        );
        assert_eq!(timer.pending(), 1);
    });
}

/// Call sites: a timer's storage index is reused at once by the next timer of its
/// shard, whose line is written beside it in the same critical section as the
/// insert, so a count taken meanwhile never names the line of a timer that is gone.
#[test]
fn pending_by_site_vs_a_reused_index_never_names_a_gone_timer() {
    loom::model(|| {
        let timer = tracking_timer(TICK);
        let (_, waker) = flag();
        let mut gone = timer.sleep_until(in_step(&timer, 3));
        assert!(poll(&mut gone, &waker).is_pending());
        let gone_line = timer.pending_by_site()[0].location().line();
        drop(gone); // its index is free, its tag stale
        let other = timer.clone();
        let registers = thread::spawn(move || {
            let (_, waker) = flag();
            let mut sleep = other.sleep_until(in_step(&other, 5));
            assert!(poll(&mut sleep, &waker).is_pending());
            sleep
        });
        let seen = timer.pending_by_site();
        assert!(seen.len() <= 1, "{seen:?}");
        for site in &seen {
            assert_ne!(site.location().line(), gone_line, "a gone timer's line");
            assert_eq!(site.pending(), 1);
        }
        let sleep = registers.join().unwrap();
        let now = timer.pending_by_site();
        assert_eq!(now.len(), 1);
        assert_ne!(now[0].location().line(), gone_line);
        drop(sleep);
        assert!(timer.pending_by_site().is_empty());
    });
}

/// A loom model's builder, bounded to three preemptions: the alarm's models take many
/// locks on each side (a registration, a pass over the wheels), and unbounded they run
/// for many minutes; each race they check needs one or two.
fn bounded() -> loom::model::Builder {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model
}

/// Tokio's timer firing the driver's alarm on one thread while the driver task turns
/// on another: the due future is woken once and the inline callback runs once, on the
/// task's turn (the alarm leaves callbacks that run inline to the task).
#[test]
fn alarm_vs_task_turn_fires_each_once() {
    bounded().check(|| {
        let timer = alarmed_timer(TICK);
        let (mut sleep, woken, waker) = registered(&timer, 1);
        let (_handle, ran) = counting_callback(&timer, 1);
        let alarm = ring_on_a_thread(&timer, 1);
        turn(&timer, 1);
        alarm.join().unwrap();
        assert!(
            woken.0.load(Ordering::SeqCst),
            "the due sleep was not woken"
        );
        assert!(poll(&mut sleep, &waker).is_ready());
        assert_eq!(ran.load(Ordering::SeqCst), 1, "the callback ran once");
        assert_eq!(timer.pending(), 0);
    });
}

/// A reset racing the alarm's pass: the sleep waits for its new step whatever the
/// order, and the alarm going off there completes it.
#[test]
fn alarm_vs_reset_moves_or_refires() {
    bounded().check(|| {
        let timer = alarmed_timer(TICK);
        let (mut sleep, woken, waker) = registered(&timer, 1);
        let alarm = ring_on_a_thread(&timer, 1);
        Pin::new(&mut sleep).reset(in_step(&timer, 3));
        alarm.join().unwrap();
        assert!(
            poll(&mut sleep, &waker).is_pending(),
            "completed before its new deadline"
        );
        woken.0.store(false, Ordering::SeqCst);
        ring(&timer, 3);
        assert!(woken.0.load(Ordering::SeqCst), "lost wakeup after reset");
        assert!(poll(&mut sleep, &waker).is_ready());
        assert_eq!(timer.pending(), 0);
    });
}

/// A drop racing the alarm's pass frees the entry, and a stale key never removes the
/// other timer's.
#[test]
fn alarm_vs_drop_frees_the_entry() {
    bounded().check(|| {
        let timer = alarmed_timer(TICK);
        let (sleep, _woken, waker) = registered(&timer, 1);
        let mut other = timer.sleep_until(in_step(&timer, 5));
        let alarm = ring_on_a_thread(&timer, 1);
        drop(sleep);
        assert!(poll(&mut other, &waker).is_pending());
        alarm.join().unwrap();
        assert_eq!(timer.pending(), 1, "exactly the other sleep remains");
        drop(other);
        assert_eq!(timer.pending(), 0);
    });
}

/// The alarm going off while a registration holds it (arming it for its own, earlier,
/// step): the registration passes for it after letting it go, so the ring is not
/// lost and the due sleep is woken, or found due at once.
#[test]
fn alarm_while_armed_by_a_registration_is_answered() {
    bounded().check(|| {
        let timer = alarmed_timer(TICK);
        let alarm = ring_on_a_thread(&timer, 2);
        let mut sleep = timer.sleep_until(in_step(&timer, 2));
        let (woken, waker) = flag();
        let first = poll(&mut sleep, &waker);
        alarm.join().unwrap();
        // Tokio's later passes: the alarm goes off if it is armed (a ring kept from
        // passing re-arms it). A lost ring leaves it unarmed, and the sleep unwoken.
        ring(&timer, 2);
        assert!(
            first.is_ready() || woken.0.load(Ordering::SeqCst),
            "the alarm's pass was lost: pending {}, parked until {}",
            timer.pending(),
            parked_until(&timer)
        );
        assert!(poll(&mut sleep, &waker).is_ready());
        assert_eq!(timer.pending(), 0);
    });
}

/// The alarm going off while the driver's runtime drops it: the sleep is woken (fired
/// by the pass, or drained by the loss) and nothing stays in the wheel.
#[test]
fn alarm_vs_driver_lost_completes_the_sleep() {
    bounded().check(|| {
        let timer = alarmed_timer(TICK);
        let (sleep, woken, _waker) = registered(&timer, 1);
        let alarm = ring_on_a_thread(&timer, 1);
        lose_driver(&timer);
        alarm.join().unwrap();
        assert!(woken.0.load(Ordering::SeqCst), "the sleep was never woken");
        assert_eq!(timer.pending(), 0);
        drop(sleep);
    });
}

/// The alarm going off before the end of the step it is armed for (the driver asks
/// Tokio for its millisecond before a step's end, which the clock can reach first),
/// while another sleep registers in that step: that pass fires nothing and re-arms,
/// whichever comes first, and the ring at the step's end wakes both sleeps. Never
/// early, no ring lost.
#[test]
fn alarm_before_its_steps_end_vs_a_registration_wakes_both_at_the_end() {
    bounded().check(|| {
        let timer = alarmed_timer(TICK);
        let (mut first, first_woken, first_waker) = registered(&timer, 2);
        // Tokio's clock at the end of step 1, not yet at step 2's.
        let early = ring_on_a_thread(&timer, 1);
        let mut second = timer.sleep_until(in_step(&timer, 2));
        let (second_woken, second_waker) = flag();
        let polled = poll(&mut second, &second_waker);
        early.join().unwrap();
        assert!(polled.is_pending(), "ready before its step ended");
        assert!(
            !first_woken.0.load(Ordering::SeqCst) && !second_woken.0.load(Ordering::SeqCst),
            "woken before the step ended"
        );
        ring(&timer, 2);
        assert!(
            first_woken.0.load(Ordering::SeqCst) && second_woken.0.load(Ordering::SeqCst),
            "a ring was lost: pending {}, parked until {}",
            timer.pending(),
            parked_until(&timer)
        );
        assert!(poll(&mut first, &first_waker).is_ready());
        assert!(poll(&mut second, &second_waker).is_ready());
        assert_eq!(timer.pending(), 0);
    });
}

/// A registration that finds, under the alarm's lock, that another armed it earlier
/// backs off; a ring that came while it held the lock is still answered (here by
/// Tokio's next pass, which it re-arms the alarm for), and both sleeps are woken.
#[test]
fn alarm_while_a_registration_backs_off_is_answered() {
    bounded().check(|| {
        let timer = alarmed_timer(TICK);
        let alarm = ring_on_a_thread(&timer, 2);
        let other = {
            let timer = timer.clone();
            thread::spawn(move || {
                let mut sleep = timer.sleep_until(in_step(&timer, 2));
                let (woken, waker) = flag();
                let first = poll(&mut sleep, &waker);
                (first.is_ready(), woken, sleep)
            })
        };
        let mut sleep = timer.sleep_until(in_step(&timer, 2));
        let (woken, waker) = flag();
        let first = poll(&mut sleep, &waker);
        alarm.join().unwrap();
        let (other_first, other_woken, other_sleep) = other.join().unwrap();
        ring(&timer, 2);
        assert!(
            first.is_ready() || woken.0.load(Ordering::SeqCst),
            "here: the alarm's pass was lost: pending {}, parked until {}",
            timer.pending(),
            parked_until(&timer)
        );
        assert!(
            other_first || other_woken.0.load(Ordering::SeqCst),
            "there: the alarm's pass was lost: pending {}, parked until {}",
            timer.pending(),
            parked_until(&timer)
        );
        drop(other_sleep);
        drop(sleep);
    });
}
