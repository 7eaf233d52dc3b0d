//! The `openphone-fake-model` binary, run as a process. (The fake's behaviour is tested
//! through the model client, in `crates/model/tests/`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
