//! The ADB backend's tests: parsing real output formats, and end to end with the real `adb`
//! client against the fake device.

mod suite;
