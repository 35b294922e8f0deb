//! The process-wide background runtime: a current-thread Tokio runtime with its time
//! driver, on a dedicated thread, that follows the real clock.
//!
//! The [default timer](crate#default-timer) runs its driver here, and a timer that
//! was shut down or lost its runtime times its futures here ([`driver`](crate::driver)'s
//! fallback), so that they still complete no earlier than their deadline. No runtime is
//! ever dropped on the caller's thread and nothing enters Tokio's context there: the
//! runtime is built, and lives, on its own thread, so asking for it is safe where
//! Tokio's context is borrowed or torn down (a future dropped by `tokio::spawn` on a
//! runtime that has shut down, a thread-local's destructor), and never panics.

use std::sync::{Mutex, OnceLock, PoisonError};

use tokio::runtime::Handle;

/// The background runtime's handle, or `None` if the thread or the runtime could not be
/// created (the next call tries again).
pub(crate) fn runtime() -> Option<&'static Handle> {
    static RUNTIME: OnceLock<Handle> = OnceLock::new();
    static STARTING: Mutex<()> = Mutex::new(());
    if let Some(handle) = RUNTIME.get() {
        return Some(handle);
    }
    // One thread at a time starts it; the others wait and find it set.
    let _starting = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = RUNTIME.get() {
        return Some(handle);
    }
    let handle = start()?;
    Some(RUNTIME.get_or_init(|| handle))
}

/// Spawns the thread, which builds the runtime, sends back its handle and runs it for
/// the rest of the process.
fn start() -> Option<Handle> {
    let (send, receive) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("tokio-wheel".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
            else {
                return;
            };
            if send.send(runtime.handle().clone()).is_ok() {
                runtime.block_on(std::future::pending::<()>());
            }
        })
        .ok()?;
    // An error means the thread ended without a runtime.
    receive.recv().ok()
}
