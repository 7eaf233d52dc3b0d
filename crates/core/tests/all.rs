//! Integration tests of the trusted core: a real SQLite file and the simulated phone.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

mod suite;
