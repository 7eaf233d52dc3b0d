//! Protocol version range and its advertisement.

use serde::{Deserialize, Serialize};

/// The name peers negotiate under.
pub const PROTOCOL_NAME: &str = "openphone-runtime-protocol";
/// Lowest supported protocol version (inclusive).
pub const MIN_VERSION: u32 = 1;
/// Highest supported protocol version (inclusive).
pub const MAX_VERSION: u32 = 1;

/// `{"name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1}`, placed wherever
/// a peer negotiates (endpoint `hello`, MCP handshake, `openphone info --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VersionAdvertisement {
    pub name: String,
    pub min_version: u32,
    pub max_version: u32,
}

impl VersionAdvertisement {
    /// The advertisement of this implementation.
    pub fn current() -> Self {
        Self {
            name: PROTOCOL_NAME.to_owned(),
            min_version: MIN_VERSION,
            max_version: MAX_VERSION,
        }
    }
}

/// Whether a JSON value is a supported version: a number with an integral value inside the
/// range. Strings, booleans, null, fractions and out-of-range values are not.
pub fn is_supported_version(value: Option<&serde_json::Value>) -> bool {
    let Some(n) = value.and_then(serde_json::Value::as_f64) else {
        return false;
    };
    n.fract() == 0.0 && n >= f64::from(MIN_VERSION) && n <= f64::from(MAX_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn version_support_follows_the_spec_list() {
        assert!(is_supported_version(Some(&json!(1))));
        assert!(is_supported_version(Some(&json!(1.0))));
        for bad in [
            json!(0),
            json!(2),
            json!("1"),
            json!(true),
            json!(null),
            json!(1.5),
        ] {
            assert!(
                !is_supported_version(Some(&bad)),
                "{bad} must be unsupported"
            );
        }
        assert!(!is_supported_version(None));
    }

    #[test]
    fn advertisement_wire_shape() {
        let v = serde_json::to_value(VersionAdvertisement::current()).unwrap();
        assert_eq!(
            v,
            json!({"name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1})
        );
    }
}
