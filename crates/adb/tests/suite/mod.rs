mod e2e;
mod manifest;
mod parity;
pub mod support;
