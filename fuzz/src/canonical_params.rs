//! Target: tool params as the bridge checks them — strict JSON, canonical JSON, the params
//! rules and a command's input schema from the shipped manifests.
//!
//! The input is one selector byte (which command: its index in the shipped commands
//! manifest, modulo their number) followed by the params text. Properties:
//!
//! - [`parse_json_strict`] never panics, accepts only what `serde_json` accepts, and refuses
//!   what `serde_json` accepts only for a duplicate key;
//! - the canonical form of a parsed value exists, parses again, and is a fixed point (writing
//!   the re-parsed value gives the same text), and the params hash is the same for both;
//! - [`Registry::validate_params`] never panics; when it accepts, the protocol's params rules
//!   ([`check_params`]) hold and the params hash exists; when it refuses, it names at least
//!   one problem, and every field error renders (as text and as a JSON pointer).

use openphone_protocol::canonical::check_params;
use openphone_protocol::{
    CanonicalError, Registry, canonical_json, params_hash, parse_json_strict,
};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let plain = serde_json::from_str::<serde_json::Value>(text);
    let value = match parse_json_strict(text) {
        Ok(value) => value,
        Err(e) => {
            if plain.is_ok() {
                assert!(
                    matches!(e, CanonicalError::DuplicateKey { .. }),
                    "strict parsing refused plain JSON for another reason than a duplicate key: {e}"
                );
            }
            return;
        }
    };
    match &plain {
        Ok(plain) => assert_eq!(plain, &value, "strict and plain parsing disagree"),
        Err(e) => panic!("strict parsing accepted what serde_json refuses: {e}"),
    }
    fixed_point(&value);
    let registry = match Registry::embedded() {
        Ok(registry) => registry,
        Err(e) => panic!("the shipped manifests do not load: {e}"),
    };
    let count = registry.commands().len();
    if count == 0 {
        return;
    }
    let Some(command) = registry.commands().nth(usize::from(selector) % count) else {
        return;
    };
    match registry.validate_params(command, &value) {
        Ok(()) => {
            if let Err(e) = check_params(&value) {
                panic!(
                    "{}: params accepted that break a params rule: {e}",
                    command.name
                );
            }
            if let Err(e) = params_hash(&value) {
                panic!("{}: accepted params have no hash: {e}", command.name);
            }
        }
        Err(errors) => {
            assert!(
                !errors.is_empty(),
                "{}: refused without a reason",
                command.name
            );
            for error in &errors {
                let _ = error.to_string();
                let _ = error.pointer();
            }
        }
    }
}

/// Canonical form: exists, parses, and writing the re-parsed value changes nothing.
fn fixed_point(value: &serde_json::Value) {
    let canonical = match canonical_json(value) {
        Ok(text) => text,
        Err(e) => panic!("a parsed value has no canonical form: {e}"),
    };
    let again = match parse_json_strict(&canonical) {
        Ok(again) => again,
        Err(e) => panic!("canonical text does not parse: {e}: {canonical}"),
    };
    match canonical_json(&again) {
        Ok(twice) => assert_eq!(twice, canonical, "canonical form is not a fixed point"),
        Err(e) => panic!("re-parsed canonical text has no canonical form: {e}"),
    }
    if value.is_object() {
        let first = params_hash(value);
        let second = params_hash(&again);
        assert_eq!(
            first.is_ok(),
            second.is_ok(),
            "params hash differs after a canonical round trip"
        );
        if let (Ok(a), Ok(b)) = (first, second) {
            assert_eq!(a, b, "params hash differs after a canonical round trip");
        }
    }
}
