//! Model test of the wheel (filled in by the tests work).
