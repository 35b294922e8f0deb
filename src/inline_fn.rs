//! [`InlineFn`]: a `FnOnce() + Send + 'static` kept in place, without an allocation,
//! when it fits in three words; the crate's only `unsafe` code.
//!
//! # Why `unsafe`
//!
//! A callback lives in its wheel entry from `schedule` to expiry. As a
//! `Box<dyn FnOnce()>` it costs a `malloc` on the scheduling thread and a `free` on the
//! driver task, the free landing in another thread's arena. Most callbacks capture an
//! `Arc`, a channel sender or a few integers, which fit in 24 bytes. Kept in place, a
//! scheduled and fired callback is measurably cheaper than boxed, by more than the
//! spread of the runs: the A/B, a build with a plain `Box<dyn FnOnce() + Send>` run
//! alternately with this one, is in docs/BENCHMARKS.md ("A callback's closure: in
//! place or boxed"). This module stays only while that gain does: re-run the A/B when
//! changing it, and replace it with the box if the gain falls within the noise.
//!
//! Auto traits are explicit: a marker removes `Send` and `Sync`, and `Send` alone is
//! restored, with its argument, below. `InlineFn` is not `Sync`: the closure need not
//! be.
//!
//! How: the closure is written into a `MaybeUninit` buffer of three words, with a
//! reference to a table of two functions monomorphised for its type: one moves it out
//! and calls it, the other drops it in place. A closure that is too large or too
//! aligned is boxed first, and the box (one word) is what is stored. An `InlineFn`
//! always holds its closure: `call` consumes it without running `Drop`, and `Drop` is
//! the only other way out. Each type has a second table, the same but marked
//! *unowned*: swapping to it is how a callback records, at no cost in size, that no
//! handle owns it.
//!
//! # How Miri checks it
//!
//! The tests below are this module's proof, and run under Miri (`cargo +nightly miri
//! test --lib inline_fn`; CI runs the stable toolchain only, so run it whenever this
//! file changes). Between them they take every path through the `unsafe` blocks:
//! in place and boxed (too large, too aligned), zero-sized and exactly three words,
//! called, dropped unrun, disowned then called or dropped, panicking while called, and
//! sent to another thread. Most count their captures' runs and drops, so that Miri's checks
//! (reads of uninitialised or moved-out memory, misaligned or dangling pointers, use
//! after free, leaks) and the counts (every capture dropped exactly once) cover the
//! two ways a closure leaves its storage.

use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

/// Room for a closure of up to three words, aligned as a word.
type Storage = MaybeUninit<[usize; 3]>;

/// A closure that runs at most once, stored in place when it fits; see the module docs.
pub(crate) struct InlineFn {
    storage: Storage,
    vtable: &'static VTable,
    /// Removes the auto traits the fields would give (`Send` and `Sync`): what
    /// `InlineFn` may be is decided by the closure it holds, not by `Storage`.
    _not_send_or_sync: PhantomData<*mut ()>,
}

/// What `InlineFn` needs to know about the type of the closure in its storage.
struct VTable {
    /// Moves the closure out of the storage and calls it.
    call: unsafe fn(*mut Storage),
    /// Drops the closure in place.
    drop: unsafe fn(*mut Storage),
    /// The same closure type's table marked *unowned*, or `None` if this is it: one
    /// bit that travels with the closure at no cost in size (see
    /// [`InlineFn::disown`]).
    unowned: Option<&'static VTable>,
}

/// Holds the vtable of closure type `F` as an associated constant, so that
/// `&VTables::<F>::VTABLE` is promoted to a `'static` reference, one per type.
struct VTables<F>(PhantomData<F>);

impl<F: FnOnce()> VTables<F> {
    const VTABLE: VTable = VTable {
        call: call::<F>,
        drop: drop_in_place::<F>,
        unowned: Some(&Self::UNOWNED),
    };
    const UNOWNED: VTable = VTable {
        call: call::<F>,
        drop: drop_in_place::<F>,
        unowned: None,
    };
}

/// # Safety
///
/// `storage` holds a value of type `F`, written by [`InlineFn::new`], that has been
/// neither moved out nor dropped, and is not used again after this call.
unsafe fn call<F: FnOnce()>(storage: *mut Storage) {
    // SAFETY: the caller guarantees an `F` lives at `storage`; `fits::<F>()` held when
    // it was written there, so the pointer is aligned for `F`. Reading moves it out,
    // and the caller never reads or drops it again, so it is dropped exactly once: by
    // the call, or while unwinding if it panics.
    let f = unsafe { storage.cast::<F>().read() };
    f();
}

/// # Safety
///
/// As for [`call`].
unsafe fn drop_in_place<F>(storage: *mut Storage) {
    // SAFETY: as in `call`; this drops the `F` in place instead of moving it out.
    unsafe { storage.cast::<F>().drop_in_place() }
}

/// Whether an `F` can live in `Storage` itself.
const fn fits<F>() -> bool {
    size_of::<F>() <= size_of::<Storage>() && align_of::<F>() <= align_of::<Storage>()
}

impl InlineFn {
    /// Stores `f`, in place if it fits in three words, else in a box.
    pub(crate) fn new<F: FnOnce() + Send + 'static>(f: F) -> InlineFn {
        if fits::<F>() {
            InlineFn::in_place(f)
        } else {
            InlineFn::in_place(Box::new(f))
        }
    }

    /// Whether `f`'s closure type is stored in place (for tests and docs).
    #[cfg(test)]
    fn is_in_place<F>(_: &F) -> bool {
        fits::<F>()
    }

    fn in_place<F: FnOnce() + Send + 'static>(f: F) -> InlineFn {
        // A check, not a `const` assertion: `new` names this function for every `F`,
        // including those it only ever passes boxed. The optimiser removes it.
        assert!(
            fits::<F>(),
            "InlineFn::in_place called with a closure that does not fit"
        );
        let mut storage = Storage::uninit();
        // SAFETY: `fits::<F>()` holds, so `storage` is large and aligned enough for an
        // `F`; it is uninitialised, so nothing is overwritten without being dropped.
        unsafe { storage.as_mut_ptr().cast::<F>().write(f) };
        InlineFn {
            storage,
            vtable: &VTables::<F>::VTABLE,
            _not_send_or_sync: PhantomData,
        }
    }

    /// Marks the closure as one that no handle owns (for the callback that holds it:
    /// see `Callback::disown`). Only the table changes: both run and drop the same
    /// closure type.
    pub(crate) fn disown(&mut self) {
        if let Some(unowned) = self.vtable.unowned {
            self.vtable = unowned;
        }
    }

    /// Whether [`disown`](InlineFn::disown) was called.
    pub(crate) fn is_unowned(&self) -> bool {
        self.vtable.unowned.is_none()
    }

    /// Runs the closure, consuming it. If it panics, the panic propagates, and the
    /// closure's captures are dropped once, while unwinding.
    pub(crate) fn call(self) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: an `InlineFn` always holds the closure its vtable was made for
        // (`in_place` wrote it; only `call` and `drop` take it out, and both consume
        // the `InlineFn`). `this` is never dropped, so after `call` moves the closure
        // out nothing touches the storage again.
        unsafe { (this.vtable.call)(&mut this.storage) }
    }
}

impl Drop for InlineFn {
    fn drop(&mut self) {
        // SAFETY: as in `call`: the storage holds the closure, and after this drop
        // nothing can use it.
        unsafe { (self.vtable.drop)(&mut self.storage) }
    }
}

// SAFETY: `new` takes only `F: Send` (and a boxed `F: Send` is `Send`), so the
// closure in the storage may move to another thread, and with it the `InlineFn` that
// owns it. No `Sync`: the closure need not be `Sync`.
unsafe impl Send for InlineFn {}

impl fmt::Debug for InlineFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InlineFn").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    /// Counts how often it is dropped; captured by the closures under test.
    struct Tracked(Arc<AtomicUsize>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)))
    }

    /// Compiles only while `InlineFn` is `Send` and not `Sync`: with a `Sync` type
    /// the call to `check` below would be ambiguous.
    #[test]
    fn inline_fn_is_send_and_not_sync() {
        fn send<T: Send>() {}
        trait AmbiguousIfSync<A> {
            fn check() {}
        }
        impl<T: ?Sized> AmbiguousIfSync<()> for T {}
        impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}
        send::<InlineFn>();
        <InlineFn as AmbiguousIfSync<_>>::check();
    }

    #[test]
    fn a_small_closure_is_in_place_and_runs_once_then_drops_its_captures_once() {
        let (ran, dropped) = counter();
        let tracked = Tracked(dropped.clone());
        let r = ran.clone();
        let f = move || {
            let _keep = &tracked;
            r.fetch_add(1, Ordering::SeqCst);
        };
        assert!(InlineFn::is_in_place(&f));
        let f = InlineFn::new(f);
        let moved = vec![f]; // moved around before it runs
        for f in moved {
            f.call();
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_large_or_overaligned_closure_is_boxed_and_runs_once() {
        let (ran, dropped) = counter();
        let tracked = Tracked(dropped.clone());
        let big = [7u64; 8];
        let r = ran.clone();
        let f = move || {
            let _keep = &tracked;
            r.fetch_add(big.iter().sum::<u64>() as usize, Ordering::SeqCst);
        };
        assert!(!InlineFn::is_in_place(&f));
        InlineFn::new(f).call();
        assert_eq!(ran.load(Ordering::SeqCst), 56);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);

        #[repr(align(32))]
        struct Aligned(u8);
        impl Aligned {
            fn get(&self) -> u8 {
                self.0
            }
        }
        let aligned = Aligned(3);
        let r = ran.clone();
        let f = move || {
            // A method call captures `aligned` whole (a field access would capture
            // just the `u8`).
            r.fetch_add(usize::from(aligned.get()), Ordering::SeqCst);
        };
        assert!(!InlineFn::is_in_place(&f));
        InlineFn::new(f).call();
        assert_eq!(ran.load(Ordering::SeqCst), 59);
    }

    /// A closure that holds a `Tracked` and runs `body`, in place or (`big`: 32 more
    /// bytes of captures) boxed; with the count of the `Tracked`'s drops.
    fn tracked(big: bool, body: impl FnOnce() + Send + 'static) -> (InlineFn, Arc<AtomicUsize>) {
        let dropped = Arc::new(AtomicUsize::new(0));
        let tracked = Tracked(dropped.clone());
        let f = if big {
            let padding = [0u64; 4];
            let f = move || {
                let _keep = (&tracked, padding);
                body();
            };
            assert!(!InlineFn::is_in_place(&f));
            InlineFn::new(f)
        } else {
            let f = move || {
                let _keep = &tracked;
                body();
            };
            assert!(InlineFn::is_in_place(&f));
            InlineFn::new(f)
        };
        (f, dropped)
    }

    #[test]
    fn a_closure_dropped_unrun_drops_its_captures_once() {
        for big in [false, true] {
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            let (f, dropped) = tracked(big, move || {
                r.fetch_add(1, Ordering::SeqCst);
            });
            drop(f);
            assert_eq!(ran.load(Ordering::SeqCst), 0);
            assert_eq!(dropped.load(Ordering::SeqCst), 1, "big: {big}");
        }
    }

    /// `disown` changes the mark and nothing else: the closure, in place or boxed,
    /// still runs once, or drops its captures once unrun.
    #[test]
    fn a_disowned_closure_is_marked_and_still_runs_or_drops_once() {
        for (big, run) in [(false, false), (false, true), (true, false), (true, true)] {
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            let (mut f, dropped) = tracked(big, move || {
                r.fetch_add(1, Ordering::SeqCst);
            });
            assert!(!f.is_unowned());
            f.disown();
            assert!(f.is_unowned());
            f.disown();
            assert!(f.is_unowned(), "disowning twice keeps the mark");
            if run {
                f.call();
            } else {
                drop(f);
            }
            assert_eq!(ran.load(Ordering::SeqCst), usize::from(run), "{big} {run}");
            assert_eq!(dropped.load(Ordering::SeqCst), 1, "{big} {run}");
        }
    }

    #[test]
    fn a_panicking_closure_drops_its_captures_once() {
        for big in [false, true] {
            let (f, dropped) = tracked(big, || panic!("callback panicked"));
            assert!(catch_unwind(AssertUnwindSafe(|| f.call())).is_err());
            assert_eq!(dropped.load(Ordering::SeqCst), 1, "big: {big}");
        }
    }

    #[test]
    fn zero_sized_and_exactly_three_word_closures_are_in_place() {
        static RAN: AtomicUsize = AtomicUsize::new(0);
        let zst = || {
            RAN.fetch_add(1, Ordering::SeqCst);
        };
        assert!(InlineFn::is_in_place(&zst));
        InlineFn::new(zst).call();
        let (a, b, c) = (1usize, 2usize, 3usize);
        let three = move || {
            RAN.fetch_add(a + b + c, Ordering::SeqCst);
        };
        assert!(InlineFn::is_in_place(&three));
        assert_eq!(size_of_val(&three), 24);
        InlineFn::new(three).call();
        assert_eq!(RAN.load(Ordering::SeqCst), 7);
    }

    #[test]
    fn runs_on_another_thread() {
        let (ran, dropped) = counter();
        let tracked = Tracked(dropped.clone());
        let r = ran.clone();
        let f = InlineFn::new(move || {
            let _keep = &tracked;
            r.fetch_add(1, Ordering::SeqCst);
        });
        std::thread::spawn(move || f.call()).join().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }
}
