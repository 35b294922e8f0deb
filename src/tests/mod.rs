//! Tests that need what only a build of the crate itself has, as tokio's
//! `runtime/time/tests/`: the wheel against a `BTreeMap` model (its insides; also the
//! fuzz target's body under `cfg(fuzzing)`), and the whole `Timer` against a model
//! (the public API, with the wheel's generations wrapping every three inserts as they
//! do under `cfg(test)`).

// On the paused clock, which timers follow with `test-util` only.
#[cfg(all(test, feature = "test-util"))]
mod timer_model;
pub(crate) mod wheel_model;
