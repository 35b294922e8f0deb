//! Running code inside a Tokio runtime's context from wherever the caller is, without
//! the panics of `Handle::enter`.
//!
//! `Handle::enter` panics in two places a correct program reaches: in a thread-local's
//! destructor, once the thread's Tokio context is torn down, and while Tokio holds the
//! context borrowed (it drops a future there when `tokio::spawn` finds its runtime shut
//! down, and the future's drop may build a timer). Tokio offers no query for the
//! second, but it can only happen while some runtime's context is set on the thread.
//! So [`enter`] enters directly only where it cannot panic (no context set), runs the
//! code as is where the context already is the runtime's, and otherwise runs it on a
//! short-lived thread of its own, whose context is fresh: a thread spawn (tens of
//! microseconds), paid only by what is rare (building a timer, a shut-down timer's
//! futures).

use tokio::runtime::Handle;

/// Runs `f` inside `runtime`'s context. `None` only if it had to be run on a thread of
/// its own and no thread could be started, or `f` panicked there.
pub(crate) fn enter<R: Send>(runtime: &Handle, f: impl FnOnce() -> R + Send) -> Option<R> {
    match Handle::try_current() {
        Ok(current) if current.id() == runtime.id() => Some(f()),
        Err(e) if e.is_missing_context() => {
            let _enter = runtime.enter();
            Some(f())
        }
        // Another runtime's context, which Tokio may hold borrowed, or a context torn
        // down.
        _ => on_own_thread(runtime, f),
    }
}

/// Runs `f` inside `runtime`'s context on a new thread, waiting for it.
pub(crate) fn on_own_thread<R: Send>(runtime: &Handle, f: impl FnOnce() -> R + Send) -> Option<R> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("tokio-wheel-enter".into())
            .spawn_scoped(scope, || {
                let _enter = runtime.enter();
                f()
            })
            .ok()?
            .join()
            .ok()
    })
}
