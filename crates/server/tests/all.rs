//! Integration tests of the runtime endpoint (one test binary; modules in `suite/`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

mod suite;
