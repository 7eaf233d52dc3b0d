#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One integration-test binary for the goals crate; the modules live in `tests/suite/`.

mod suite;
