//! `hello`: version negotiation, authentication by token, and what the daemon offers.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::version::VersionAdvertisement;

crate::wire_enum!(
    /// The caller's role.
    Role {
        /// The user's own surfaces (CLI, dashboard, phone); no autonomy ceiling.
        Operator = "operator",
        /// An agent runtime (remote or `builtin`).
        Runtime = "runtime",
    }
);

/// An inclusive range of protocol versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VersionRange {
    pub min: u32,
    pub max: u32,
}

/// What the client says it is (recorded, never trusted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientInfo {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// `hello` params. Unknown fields are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HelloParams {
    /// The versions the client speaks.
    pub protocol: VersionRange,
    #[serde(default)]
    pub client: ClientInfo,
    /// The credential, for clients that cannot send an `Authorization` header. The daemon
    /// reads it before it checks the rest of the params; a value that is not a string counts
    /// as no token.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "string_or_none"
    )]
    pub token: Option<String>,
}

fn string_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => {
            None
        }
    })
}

/// The phone the daemon fronts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhoneProfile {
    /// Backend platform, e.g. `simulated`, `android`.
    pub platform: String,
    pub model: String,
    pub os_version: String,
    /// Screen width in pixels.
    pub screen_width: u32,
    /// Screen height in pixels.
    pub screen_height: u32,
    /// Canonical names of the commands this daemon runs: the device's, and in `hello` also
    /// the runtime-owned ones its services serve (memory, watchers, jobs).
    pub supported_tools: Vec<String>,
}

/// The loaded manifests, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ManifestSummary {
    pub commands_version: u32,
    /// Canonical command names.
    pub commands: Vec<String>,
    /// Event names.
    pub events: Vec<String>,
    /// Capability ids.
    pub capabilities: Vec<String>,
}

/// `hello` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HelloResult {
    /// The chosen version: the highest in both ranges.
    pub protocol_version: u32,
    pub role: Role,
    /// The caller's runtime id (`operator` for the operator).
    pub runtime: String,
    pub runtime_protocol: VersionAdvertisement,
    pub phone: PhoneProfile,
    pub manifests: ManifestSummary,
    /// On a daemon with several phones (`[[devices]]`): each phone the caller may act on, by
    /// id, with its profile (`phone` stays the first, default, phone's). Absent with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<HelloDevice>,
}

/// One phone of a daemon with several, in `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HelloDevice {
    /// What `device_id` names in requests (`[[devices]] id`).
    pub id: String,
    /// Its profile as the phone reports it (`supported_tools`: the phone's own commands).
    pub profile: PhoneProfile,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_token_that_is_not_a_string_counts_as_none() {
        let p: HelloParams =
            serde_json::from_value(json!({"protocol": {"min": 1, "max": 1}, "token": 5})).unwrap();
        assert_eq!(p.token, None);
        assert_eq!(p.client, ClientInfo::default());
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            json!({"protocol": {"min": 1, "max": 1}, "client": {"name": "", "version": ""}})
        );
    }

    #[test]
    fn the_protocol_range_is_required() {
        assert!(serde_json::from_value::<HelloParams>(json!({"client": {}})).is_err());
    }
}
