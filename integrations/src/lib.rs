//! Nothing to use: this package holds tokio-wheel's tests and examples behind real
//! hyper, hyper-util, axum and tower servers (`tests/`, `examples/`), apart from the
//! main package so that its own examples build without the HTTP stack.
