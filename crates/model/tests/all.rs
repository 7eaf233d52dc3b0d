//! The model client against the fake provider (`openphone-fake-model`), over real HTTP on
//! loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
