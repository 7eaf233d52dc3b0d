//! Integration tests of the device layer (one binary; modules in `suite/`).

// Test helpers outside `#[test]` functions may panic on broken fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
