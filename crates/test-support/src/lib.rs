//! Support code the workspace's tests share, instead of a copy in each crate's
//! `tests/suite/support.rs`. A dev-dependency only (the tidy rule `layers` refuses it anywhere
//! else); it depends on nothing above the protocol crate, so every crate's tests can use it.
//!
//! How to add a helper: when a function is copied into a second crate's tests, move it here
//! and import it (`pub use openphone_test_support::name;` in the crate's support module keeps
//! its callers as they are).

#![allow(clippy::expect_used)] // test support: a panic is a failed test

use openphone_protocol::Registry;

/// The shipped manifests, loaded once.
pub fn registry() -> &'static Registry {
    Registry::embedded().expect("the shipped manifests load")
}
