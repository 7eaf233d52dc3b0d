//! The tidy tests: every rule on the real tree (`suite/real.rs`), and each rule failing on a
//! planted violation (`suite/planted.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

mod suite;
