//! Integration tests of the watchers (one binary; modules in `suite/`): a real store in a
//! temporary directory, the real bridge, the simulated phone and the job scheduler, on a
//! manual clock.

// Test helpers outside `#[test]` functions may panic on broken fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
