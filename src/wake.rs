//! Waking several wakers at once: every one is woken, whichever of them panics.
//!
//! A waker runs its executor's code, or a user's, and may panic. A loop that wakes
//! several and stops at the first panic strands the rest: they wait for an event that
//! has already happened, and a value that is due sits in its queue. [`wake_all`] goes
//! on to the rest, then hands the panics back, for the caller to report as its layer
//! does: the driver and a `DelayQueue` waking its consumers count them in the timer's
//! `Stats` (the panic is the woken task's executor's, not the caller's), and a waker
//! that wakes several resumes the first, being, to whoever woke it, one waker that
//! panicked.
//!
//! # Implementation
//!
//! Each wake is under `catch_unwind`: a waker is foreign code, the one place here a
//! panic cannot be ruled out, so catching it is not control flow. A drop guard that
//! woke the rest while unwinding would need no `catch_unwind`, but a second panicking
//! waker would then panic during unwinding, which aborts the process, and the panics
//! could not be counted; the catch is simpler and holds for any number of them.

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::task::Waker;

/// The panics of a [`wake_all`]: the first one's payload, and how many there were.
pub(crate) struct Panicked {
    first: Box<dyn Any + Send>,
    count: usize,
}

impl Panicked {
    /// How many wakers panicked (at least one).
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Resumes the first panic: for a caller that is itself woken as one waker.
    pub(crate) fn resume(self) -> ! {
        resume_unwind(self.first)
    }
}

impl fmt::Debug for Panicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Panicked")
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// Wakes each of `wakers`, in order, going on past any that panics.
///
/// # Errors
///
/// [`Panicked`] if any waker panicked; every one was woken all the same. Later
/// panics' payloads are dropped here.
#[inline]
pub(crate) fn wake_all(wakers: impl IntoIterator<Item = Waker>) -> Result<(), Panicked> {
    let mut panicked: Option<Panicked> = None;
    for waker in wakers {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || waker.wake())) {
            match &mut panicked {
                Some(panicked) => panicked.count += 1,
                None => {
                    panicked = Some(Panicked {
                        first: payload,
                        count: 1,
                    });
                }
            }
        }
    }
    panicked.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::wake_all;

    /// Counts its wakes; panics at each if `panics`.
    struct Counting {
        woken: AtomicUsize,
        panics: bool,
    }

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.woken.fetch_add(1, Ordering::SeqCst);
            assert!(!self.panics, "the waker panics");
        }
    }

    fn counting(panics: bool) -> (Arc<Counting>, Waker) {
        let counting = Arc::new(Counting {
            woken: AtomicUsize::new(0),
            panics,
        });
        (counting.clone(), Waker::from(counting))
    }

    #[test]
    fn every_waker_is_woken_past_panics_and_the_first_panic_comes_back() {
        let wakers: Vec<_> = [true, false, true, false]
            .into_iter()
            .map(counting)
            .collect();
        let panicked = wake_all(wakers.iter().map(|(_, waker)| waker.clone()))
            .expect_err("two wakers panicked");
        assert_eq!(panicked.count(), 2);
        for (counting, _) in &wakers {
            assert_eq!(counting.woken.load(Ordering::SeqCst), 1);
        }
        let resumed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || panicked.resume()))
                .unwrap_err();
        assert_eq!(resumed.downcast_ref::<&str>(), Some(&"the waker panics"));
        assert!(wake_all(std::iter::empty()).is_ok());
    }
}
