mod e2e;
mod manifest;
mod parity;
mod safety;
pub mod support;
