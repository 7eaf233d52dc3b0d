//! The built-in runtime with the real bridge, manager, store and simulated phone, and a
//! scripted fake model on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

mod suite;
