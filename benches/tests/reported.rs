//! The bench files' `Reported` measurement, which is not part of the library (see its
//! module docs), tested here: a test target gets the dev-dependencies it needs.

#[allow(dead_code)] // the benches use the rest
#[path = "../benches/reported/mod.rs"]
mod reported;

use criterion::measurement::Measurement;
use reported::Reported;

#[test]
fn values_are_shown_unscaled_in_the_unit() {
    let m = Reported::new("B/sleep");
    let mut values = [58.0, 120.0];
    assert_eq!(m.formatter().scale_values(58.0, &mut values), "B/sleep");
    assert_eq!(values, [58.0, 120.0]);
    assert_eq!(m.add(&m.zero(), &58.5), 58.5);
}

#[test]
#[should_panic(expected = "iter_custom")]
fn iter_instead_of_iter_custom_fails_loudly() {
    Reported::new("ns").start();
}
