//! The alarm of a suspend-aware driver on the real clock (Linux, Android): a
//! `CLOCK_BOOTTIME` timerfd, which runs on while the machine is suspended.
//!
//! Tokio's timer follows `CLOCK_MONOTONIC`, which stops during a suspend: a `Sleep`
//! armed before one goes off late by the suspend's length, and a deadline that passed
//! while the machine slept would wait that long after the resume. A timerfd on the
//! boot clock goes off at its deadline counting the suspend, so at resume if it passed
//! meanwhile.
//!
//! A thread of its own waits on it, blocked in `read` (no wakeup while idle), and
//! wakes the alarm's waker, which turns the wheels from there as it does from Tokio's
//! timer pass (`task::Wakeup`; only a driver on the real clock has this alarm, so its
//! clock is read the same from any thread). Registering the descriptor with Tokio's
//! reactor instead (`AsyncFd`) would need `unsafe` (its sound constructor is one) and
//! Tokio's `net` feature; a thread per suspend-aware timer on the real clock needs
//! neither. The thread ends when the alarm is dropped: the flag is set, then the
//! timerfd armed to go off at once, so the thread's `read` returns and it sees the
//! flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use rustix::fd::OwnedFd;
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

/// Tokio's timer rounds a deadline up to its next whole millisecond, and the driver
/// asks for the millisecond's start accordingly (`parking::wake_at`): the timerfd,
/// which does not round, goes off where Tokio would, at most this much after the
/// instant asked for.
const TOKIO_ROUNDING: Duration = Duration::from_nanos(999_999);

/// A `CLOCK_BOOTTIME` timerfd and the thread that waits on it.
#[derive(Debug)]
pub(super) struct BootAlarm {
    fd: Arc<OwnedFd>,
    /// Set when the alarm is dropped: the thread ends at its next wakeup. Also set by
    /// the thread if it ends for an error: the alarm is then refused.
    stop: Arc<AtomicBool>,
}

impl BootAlarm {
    /// A boot-clock alarm whose thread wakes `waker`; `None` where the kernel has no
    /// boot-clock timerfd (or a sandbox refuses it) or no thread can be started.
    pub(super) fn new(waker: Waker) -> Option<BootAlarm> {
        let fd = Arc::new(timerfd_create(TimerfdClockId::Boottime, TimerfdFlags::CLOEXEC).ok()?);
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_fd, thread_stop) = (fd.clone(), stop.clone());
        std::thread::Builder::new()
            .name("tokio-wheel-boot-alarm".into())
            // The default stack, not a small one: a ring here passes over the wheels
            // on this thread, waking user wakers and handing callbacks to a `Custom`
            // executor that may run them in place.
            .spawn(move || wait(&thread_fd, &thread_stop, &waker))
            .ok()?;
        Some(BootAlarm { fd, stop })
    }

    /// Arms the alarm to go off `after` from now on the boot clock, plus Tokio's
    /// rounding. `false` if the kernel refused, or the thread is gone: the caller arms
    /// another alarm.
    pub(super) fn arm(&self, after: Duration) -> bool {
        let after = after.saturating_add(TOKIO_ROUNDING);
        set(&self.fd, after).is_ok() && !self.stop.load(Ordering::SeqCst)
    }
}

impl Drop for BootAlarm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Goes off at once: the thread's `read` returns and it sees the flag.
        let _ = set(&self.fd, Duration::from_nanos(1));
    }
}

/// Arms `fd` to go off once, `after` from now (a zero would disarm it: at least 1 ns).
fn set(fd: &OwnedFd, after: Duration) -> rustix::io::Result<()> {
    let after = after.max(Duration::from_nanos(1));
    let value = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(after.subsec_nanos()),
        },
    };
    timerfd_settime(fd, TimerfdTimerFlags::empty(), &value).map(drop)
}

/// The thread's body: wakes `waker` each time the timerfd goes off, until `stop`.
fn wait(fd: &OwnedFd, stop: &AtomicBool, waker: &Waker) {
    let mut expirations = [0u8; 8];
    loop {
        match rustix::io::read(fd, &mut expirations) {
            Ok(_) if stop.load(Ordering::SeqCst) => return,
            Ok(_) => waker.wake_by_ref(),
            Err(rustix::io::Errno::INTR) => {}
            // The descriptor is unusable: refused from now on, and one last wakeup so
            // that the driver turns and arms its other alarm.
            Err(_) => {
                stop.store(true, Ordering::SeqCst);
                waker.wake_by_ref();
                return;
            }
        }
    }
}
