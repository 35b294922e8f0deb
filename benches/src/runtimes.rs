//! The Tokio runtime configurations the workloads run on, one name each.
//!
//! What a Tokio timer costs depends on the runtime around it: with the I/O driver
//! enabled (`enable_all()`, what `#[tokio::main]` with `full` gives a server), a
//! registration that must wake the parked driver writes to an eventfd; on a time-only
//! runtime it does not; and Tokio's alternative timer keeps a wheel per worker. Every
//! workload names the configuration it runs on, and so does every report.

use tokio::runtime::{Builder, Runtime};

/// A runtime configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `enable_all()` with Tokio's `net` feature: the I/O driver and the time driver.
    Io,
    /// `enable_time()` only.
    TimeOnly,
    /// `enable_all()` plus `enable_alt_timer()`: the I/O driver and Tokio's per-worker
    /// timer. Needs a build with `RUSTFLAGS="--cfg tokio_unstable"` and a multi-thread
    /// runtime (Tokio ignores it on a current-thread one).
    AltTimer,
}

impl Flavor {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Io => "I/O runtime",
            Flavor::TimeOnly => "time-only runtime",
            Flavor::AltTimer => "alt timer + I/O",
        }
    }

    fn configure(self, builder: &mut Builder) {
        match self {
            Flavor::Io => {
                builder.enable_all();
            }
            Flavor::TimeOnly => {
                builder.enable_time();
            }
            Flavor::AltTimer => {
                builder.enable_all();
                enable_alt_timer(builder);
            }
        }
    }
}

/// Whether this build can run [`Flavor::AltTimer`].
pub const ALT_TIMER_AVAILABLE: bool = cfg!(tokio_unstable);

#[cfg(tokio_unstable)]
fn enable_alt_timer(builder: &mut Builder) {
    builder.enable_alt_timer();
}

#[cfg(not(tokio_unstable))]
fn enable_alt_timer(_: &mut Builder) {
    panic!("Tokio's alt timer needs a build with RUSTFLAGS=\"--cfg tokio_unstable\"");
}

/// A multi-thread runtime of `flavor` with `workers` worker threads.
pub fn multi_thread(flavor: Flavor, workers: usize) -> Runtime {
    let mut builder = Builder::new_multi_thread();
    builder.worker_threads(workers);
    flavor.configure(&mut builder);
    builder.build().expect("runtime")
}

/// A multi-thread runtime of `flavor` with Tokio's default worker count (one per
/// core), as `#[tokio::main]` builds.
pub fn multi_thread_default(flavor: Flavor) -> Runtime {
    let mut builder = Builder::new_multi_thread();
    flavor.configure(&mut builder);
    builder.build().expect("runtime")
}

/// A current-thread runtime of `flavor`.
///
/// # Panics
///
/// For [`Flavor::AltTimer`], which only a multi-thread runtime has.
pub fn current_thread(flavor: Flavor) -> Runtime {
    assert_ne!(
        flavor,
        Flavor::AltTimer,
        "Tokio's alt timer is for multi-thread runtimes only"
    );
    let mut builder = Builder::new_current_thread();
    flavor.configure(&mut builder);
    builder.build().expect("runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_runtimes_have_the_io_driver_and_time_only_ones_do_not() {
        // Registering a socket needs the I/O driver: it fails on a time-only runtime.
        let bind = |rt: Runtime| {
            rt.block_on(async { tokio::net::TcpListener::bind("127.0.0.1:0").await })
                .is_ok()
        };
        assert!(bind(current_thread(Flavor::Io)));
        assert!(bind(multi_thread(Flavor::Io, 1)));
        let time_only = std::panic::catch_unwind(|| bind(current_thread(Flavor::TimeOnly)));
        assert!(!matches!(time_only, Ok(true)));
    }

    #[test]
    fn the_alt_timer_is_there_only_in_an_unstable_build() {
        let built = std::panic::catch_unwind(|| multi_thread(Flavor::AltTimer, 1));
        assert_eq!(built.is_ok(), ALT_TIMER_AVAILABLE);
    }
}
