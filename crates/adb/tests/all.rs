//! The ADB backend's tests: parsing real output formats, and end to end with the real `adb`
//! client (`/usr/bin/adb`, or `$ADB`) against the fake device, each test on its own adb server
//! port (never the default 5037).

// Test helpers outside `#[test]` functions may panic on broken fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
