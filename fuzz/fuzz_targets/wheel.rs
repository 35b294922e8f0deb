//! The wheel's operation sequences against its `BTreeMap` model (the same check as the
//! proptest in `src/tests/wheel_model.rs`), with coverage guidance.
//!
//! `cargo +nightly fuzz run wheel -- -max_total_time=300`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tokio_wheel::fuzzing::wheel(data);
});
