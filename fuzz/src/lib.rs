//! Fuzz targets for the parsers that read untrusted text (`docs/fuzzing.md`).
//!
//! Each target is a module with one `run(&[u8])`: it feeds the bytes to a parser the daemon
//! or the simulated phone exposes, and panics only when a property of that parser is broken,
//! so a panic is always a finding. The same functions are driven by libFuzzer
//! (`fuzz_targets/`, built by `cargo fuzz` on nightly) and by [`stable`], a coverage-blind
//! mutation loop over the committed seeds for machines without a nightly compiler.
//!
//! - [`endpoint_request`]: a WebSocket text frame → [`parse_request`] → every method's typed
//!   params, and the daemon's error answer for a refused frame.
//! - [`canonical_params`]: strict JSON parsing, canonical JSON and
//!   [`Registry::validate_params`] against a command of the shipped manifests.
//! - [`manifest_load`]: the registry's parse and load-time rules over arbitrary manifest
//!   text.
//! - [`scenario_load`]: the simulated phone's scenario parser and validator, and the phone
//!   rendering what they accepted.
//!
//! [`parse_request`]: openphone_protocol::endpoint::parse_request
//! [`Registry::validate_params`]: openphone_protocol::Registry::validate_params
#![forbid(unsafe_code)]

pub mod canonical_params;
pub mod endpoint_request;
pub mod manifest_load;
pub mod scenario_load;
pub mod stable;

/// One fuzz target: its name (the directory of its seeds) and its entry point.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("endpoint_request", endpoint_request::run),
    ("canonical_params", canonical_params::run),
    ("manifest_load", manifest_load::run),
    ("scenario_load", scenario_load::run),
];

/// The entry point of the target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, run)| *run)
}
