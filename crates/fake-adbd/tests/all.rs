//! Integration tests of the fake ADB device, driven by the real `adb` client (one binary;
//! modules in `suite/`). Without `adb` on PATH every test fails with the install hint.

// Test helpers outside `#[test]` functions may panic on broken fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
