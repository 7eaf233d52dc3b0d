//! The OpenClaw adapter offline: the Appendix C identity vector, configuration, the surface
//! derived from the manifest, the reply-stream mapping, and the whole node against a fake
//! gateway on loopback with the real bridge, store and simulated phone.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

mod suite;
