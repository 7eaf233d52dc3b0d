//! Integration tests of the protocol crate (one binary; modules in `suite/`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

mod suite;
