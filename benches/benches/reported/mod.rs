//! [`Reported`]: a criterion measurement of a figure the workload reports itself. A
//! module of the bench files that use it (and of `tests/reported.rs`), not of the
//! library: `compare` and its alt-timer copy build without criterion.

use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{Criterion, Throughput};

/// A criterion [`Measurement`] whose values the workload computes and hands back through
/// `Bencher::iter_custom`: CPU ns per callback, bytes per sleep, ms of lateness.
///
/// criterion's default measurement is the wall time around the routine, which is not
/// what these workloads are about (the callbacks workload lasts about a second whatever
/// it costs). With this one, criterion still samples, bootstraps, compares against the
/// saved baseline and prints its usual report, of the figure the workload reports, in
/// `unit`. (Its report calls every figure `time:`.)
///
/// Only `iter_custom` produces values: `start` and `end` panic, so a benchmark that
/// uses `iter` by mistake fails loudly instead of reporting zeros.
#[derive(Debug, Clone, Copy)]
pub struct Reported {
    unit: &'static str,
}

impl Reported {
    /// Figures in `unit` (shown after every value, e.g. `"ns CPU"`).
    pub const fn new(unit: &'static str) -> Reported {
        Reported { unit }
    }

    /// The configuration every `Reported` bench file uses: figures in `unit`, ten
    /// samples, the least warm-up (one run), and `measurement_time` about ten runs'
    /// time, so that each sample is one whole run. Set `SamplingMode::Flat` on the
    /// group too (criterion has it per group only): the linear mode would make the
    /// later samples ten runs long.
    pub fn criterion(unit: &'static str, measurement_time: Duration) -> Criterion<Reported> {
        Criterion::default()
            .with_measurement(Reported::new(unit))
            .sample_size(10)
            .warm_up_time(Duration::from_millis(1))
            .measurement_time(measurement_time)
    }
}

impl Measurement for Reported {
    type Intermediate = ();
    type Value = f64;

    fn start(&self) -> Self::Intermediate {
        panic!("a Reported figure comes from iter_custom; use Bencher::iter_custom")
    }

    fn end(&self, (): Self::Intermediate) -> Self::Value {
        panic!("a Reported figure comes from iter_custom; use Bencher::iter_custom")
    }

    fn add(&self, v1: &f64, v2: &f64) -> f64 {
        v1 + v2
    }

    fn zero(&self) -> f64 {
        0.0
    }

    fn to_f64(&self, value: &f64) -> f64 {
        *value
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        self
    }
}

impl ValueFormatter for Reported {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        self.unit
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        _throughput: &Throughput,
        _values: &mut [f64],
    ) -> &'static str {
        self.unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        self.unit
    }
}
