//! [`Callback`]: a scheduled closure as the wheel holds it, owned by its entry and
//! moved out of it exactly once, under the wheel's lock: by the driver (the closure
//! then runs), by a handle's cancel (it is dropped) or by shutdown (it is returned
//! unrun). That one move is why "cancel returned `true`" and "the callback ran" can
//! never both happen, nor neither.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::inline_fn::InlineFn;

/// A callback in the wheel: its closure and deadline, with the closure in place
/// when it fits in three words (see [`InlineFn`]).
pub(crate) struct Callback {
    /// The deadline, as an offset from the timer's origin (`Clock::offset_of`).
    deadline: i64,
    f: InlineFn,
}

impl Callback {
    /// The deadline, as an offset from the timer's origin (`Clock::offset_of`).
    pub(crate) fn deadline(&self) -> i64 {
        self.deadline
    }

    /// Moves the deadline (the callback's entry moved with it).
    pub(crate) fn set_deadline(&mut self, offset: i64) {
        self.deadline = offset;
    }

    /// Records that no handle owns the callback (scheduled detached, or its handle
    /// detached). The driver's loss drops such callbacks rather than keep them for
    /// `shutdown` to return: nothing else could reach them, and one may hold the
    /// timer itself (a `Timer` clone), which would keep both alive for ever.
    pub(crate) fn disown(&mut self) {
        self.f.disown();
    }

    /// Whether [`disown`](Callback::disown) was called.
    pub(crate) fn is_unowned(&self) -> bool {
        self.f.is_unowned()
    }

    /// Runs the closure.
    pub(crate) fn call(self) {
        self.f.call();
    }
}

impl fmt::Debug for Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// A callback due at the deadline `offset` (see `Clock::offset_of`).
pub(crate) fn callback<F: FnOnce() + Send + 'static>(offset: i64, f: F) -> Callback {
    Callback {
        deadline: offset,
        f: InlineFn::new(f),
    }
}

/// Runs a callback, catching a panic. Returns `false` if it panicked.
pub(crate) fn run_caught(callback: Callback) -> bool {
    catch_unwind(AssertUnwindSafe(move || callback.call())).is_ok()
}
