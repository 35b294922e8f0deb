//! The crate's error types: [`Error`] for the timer's own operations, [`Elapsed`] for
//! a [`Timeout`](crate::Timeout) whose deadline came first.
//!
//! Public at the path `tokio::time::error` has (`use tokio_wheel::error::Elapsed`), and
//! re-exported at the crate's root.

use std::fmt;

/// What can go wrong building a [`Timer`](crate::Timer) or scheduling on one.
///
/// Every message says what to do about it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio_wheel::{Error, Timer};
///
/// let err = Timer::builder().tick(Duration::ZERO).build().unwrap_err();
/// assert!(matches!(err, Error::InvalidConfig(_)));
/// println!("{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The timer was shut down (or its runtime was) and takes no new callbacks; from
    /// [`Builder::build`](crate::Builder::build) or
    /// [`build_on`](crate::Builder::build_on), the runtime has shut down.
    Shutdown,
    /// [`Builder::max_pending`](crate::Builder::max_pending) callbacks are pending already.
    AtCapacity {
        /// The configured limit.
        max: usize,
    },
    /// A [`Builder`](crate::Builder) setting is out of range, or there is no runtime to
    /// run the driver on; the text says which.
    InvalidConfig(String),
    /// The timer's clock has passed the last step a deadline can name (2^44 steps,
    /// or 292 years of i64 nanoseconds if sooner: 139 years after it was built at a
    /// 1 ms tick, 292 at the default 10 ms), which only Tokio's paused clock reaches;
    /// nothing can be scheduled on it any more.
    OutOfRange,
}

/// The constructors and predicates of `tokio::time::error::Error`, so that code using
/// them compiles after swapping `tokio::time` for this crate.
impl Error {
    /// [`Error::Shutdown`], as Tokio's `Error::shutdown()`.
    pub fn shutdown() -> Error {
        Error::Shutdown
    }

    /// An [`Error::AtCapacity`] whose limit is not known (`max: 0`), as Tokio's
    /// `Error::at_capacity()`.
    pub fn at_capacity() -> Error {
        Error::AtCapacity { max: 0 }
    }

    /// [`Error::OutOfRange`], as Tokio's `Error::invalid()` (a deadline past its
    /// timer's range).
    pub fn invalid() -> Error {
        Error::OutOfRange
    }

    /// Whether this is [`Error::Shutdown`].
    pub fn is_shutdown(&self) -> bool {
        matches!(self, Error::Shutdown)
    }

    /// Whether this is [`Error::AtCapacity`].
    pub fn is_at_capacity(&self) -> bool {
        matches!(self, Error::AtCapacity { .. })
    }

    /// Whether what was asked for is invalid: [`Error::InvalidConfig`], or
    /// [`Error::OutOfRange`] (Tokio's "invalid" is a deadline past its range).
    pub fn is_invalid(&self) -> bool {
        matches!(self, Error::InvalidConfig(_) | Error::OutOfRange)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shutdown => f.write_str(
                "the timer has been shut down (or its runtime has): build a new Timer on a running runtime",
            ),
            Error::AtCapacity { max } => write!(
                f,
                "the timer already holds {max} pending callbacks (Builder::max_pending): \
                 cancel some, wait for some to fire, or raise the limit"
            ),
            Error::InvalidConfig(why) => write!(f, "invalid timer configuration: {why}"),
            Error::OutOfRange => f.write_str(
                "the timer's clock has passed the end of its range (139 years or more \
                 after it was built): build a new Timer to schedule more",
            ),
        }
    }
}

impl std::error::Error for Error {}

/// The error of a [`Timeout`](crate::Timeout) whose deadline passed before its future
/// completed.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::{Elapsed, Timer};
///
/// let timer = Timer::new();
/// let result = timer.timeout(Duration::from_millis(50), std::future::pending::<()>()).await;
/// assert_eq!(result, Err(Elapsed::new()));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Elapsed(());

impl Elapsed {
    /// An `Elapsed`, for comparing against in tests and for wrapping errors.
    pub const fn new() -> Self {
        Elapsed(())
    }
}

impl Default for Elapsed {
    fn default() -> Self {
        Elapsed::new()
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> Self {
        std::io::ErrorKind::TimedOut.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_predicate_answers_for_its_variants_only() {
        let all = [
            Error::Shutdown,
            Error::AtCapacity { max: 1 },
            Error::InvalidConfig("tick".into()),
            Error::OutOfRange,
        ];
        let answers: Vec<[bool; 3]> = all
            .iter()
            .map(|e| [e.is_shutdown(), e.is_at_capacity(), e.is_invalid()])
            .collect();
        assert_eq!(
            answers,
            [
                [true, false, false],
                [false, true, false],
                [false, false, true],
                [false, false, true],
            ]
        );
    }
}
