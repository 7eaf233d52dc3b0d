//! Integration tests of the protocol crate (one binary; modules in `suite/`).

mod suite;
