#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One integration-test binary for the policy crate; the suites live in `tests/suite/`.

mod suite;
