//! [`Builder`]: every setting a [`Timer`] has, checked once at [`Builder::build`].

use std::time::Duration;

use crate::driver;
use crate::{Error, Timer};

/// The largest wheel: 2^20 slots (4 MiB of list heads).
const MAX_WHEEL_SIZE: usize = 1 << 20;

/// Configures and starts a [`Timer`].
///
/// | setting | default | range |
/// |---|---|---|
/// | [`tick`](Builder::tick) | 10 ms | > 0 and < 584 years |
/// | [`wheel_size`](Builder::wheel_size) | 1024 slots | 1 ..= 2^20, rounded up to a power of two |
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), wheel_timer::Error> {
/// use std::time::Duration;
/// use wheel_timer::Timer;
///
/// let timer = Timer::builder()
///     .tick(Duration::from_millis(1))
///     .wheel_size(4096) // one revolution: 4.096 s
///     .build()?;
/// assert_eq!(timer.tick(), Duration::from_millis(1));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a Builder does nothing until build() is called"]
pub struct Builder {
    tick: Duration,
    wheel_size: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            tick: Duration::from_millis(10),
            wheel_size: 1024,
        }
    }
}

impl Builder {
    /// The wheel's resolution: timers fire on the first tick at or after their
    /// deadline, so up to one tick late. Default 10 ms.
    ///
    /// Tokio's own timer, which wakes the driver, has 1 ms resolution: a tick below
    /// 1 ms is honoured (nothing fires early) but adds up to 1 ms of lateness.
    ///
    /// # Errors
    ///
    /// [`Builder::build`] fails with [`Error::InvalidConfig`] for a zero tick, or one
    /// too long to count in nanoseconds in a `u64` (over 584 years).
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// How many slots the wheel has, rounded up to a power of two. Default 1024.
    ///
    /// A deadline more than `wheel_size` ticks away waits in its slot for later
    /// revolutions and costs a look each time the slot comes round; size the wheel so
    /// that one revolution (`tick × wheel_size`) covers your common timeouts.
    ///
    /// # Errors
    ///
    /// [`Builder::build`] fails with [`Error::InvalidConfig`] for 0 or more than 2^20.
    pub fn wheel_size(mut self, slots: usize) -> Self {
        self.wheel_size = slots;
        self
    }

    /// Checks the settings and spawns the driver on the current Tokio runtime.
    ///
    /// The runtime must have its time driver enabled (`enable_time()` or
    /// `enable_all()`, as `#[tokio::main]` does).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if a setting is out of range, if this is not called
    /// from within a Tokio runtime, or if that runtime has no time driver.
    pub fn build(self) -> Result<Timer, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::InvalidConfig(
                "Builder::build must be called from within a Tokio runtime; \
                 use Builder::build_on(&handle) elsewhere"
                    .into(),
            )
        })?;
        self.build_on(&runtime)
    }

    /// Like [`build`](Builder::build), but spawns the driver on `runtime`, which may be
    /// any Tokio runtime with its time driver enabled; the timer's futures can then be
    /// awaited from any runtime or executor.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if a setting is out of range or `runtime` has no time
    /// driver.
    pub fn build_on(self, runtime: &tokio::runtime::Handle) -> Result<Timer, Error> {
        let (tick, wheel_size) = self.validate()?;
        let shared = driver::start(tick, wheel_size, runtime)?;
        Ok(Timer::from_shared(shared))
    }

    fn validate(&self) -> Result<(Duration, usize), Error> {
        if self.tick.is_zero() {
            return Err(Error::InvalidConfig(
                "tick must be greater than zero (the default is 10 ms)".into(),
            ));
        }
        if u64::try_from(self.tick.as_nanos()).is_err() {
            return Err(Error::InvalidConfig(format!(
                "tick {:?} is too long: it must fit in u64 nanoseconds",
                self.tick
            )));
        }
        if self.wheel_size == 0 || self.wheel_size > MAX_WHEEL_SIZE {
            return Err(Error::InvalidConfig(format!(
                "wheel_size must be between 1 and {MAX_WHEEL_SIZE} slots, not {}",
                self.wheel_size
            )));
        }
        Ok((self.tick, self.wheel_size.next_power_of_two()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        let ok = |b: Builder| b.validate().unwrap();
        let err = |b: Builder| b.validate().unwrap_err();
        assert_eq!(ok(Builder::default()), (Duration::from_millis(10), 1024));
        assert_eq!(ok(Builder::default().wheel_size(1000)).1, 1024);
        assert_eq!(ok(Builder::default().wheel_size(1)).1, 1);
        assert_eq!(ok(Builder::default().wheel_size(1 << 20)).1, 1 << 20);
        assert!(matches!(
            err(Builder::default().wheel_size(0)),
            Error::InvalidConfig(_)
        ));
        assert!(matches!(
            err(Builder::default().wheel_size((1 << 20) + 1)),
            Error::InvalidConfig(_)
        ));
        assert!(matches!(
            err(Builder::default().tick(Duration::ZERO)),
            Error::InvalidConfig(_)
        ));
        assert!(matches!(
            err(Builder::default().tick(Duration::MAX)),
            Error::InvalidConfig(_)
        ));
    }
}
