//! The `toolRequest` wire shape (`runtime-protocol.md` §3.2).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool request as a runtime sends it. Only `request_id`, `tool` and `params` are needed in
/// practice; the runtime identity comes from the authenticated connection, and a `runtime`
/// member, when present, must equal it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    #[serde(default)]
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default)]
    pub runtime_session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_session_id: Option<String>,
    #[serde(default)]
    pub tool: String,
    /// Must be a JSON object; anything else is `invalid_params`.
    #[serde(default = "empty_object")]
    pub params: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Raw autonomy (legacy synonyms allowed; normalised by the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Absent, 0 or negative → 30000; clamped to 600000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Default tool-request timeout (ms).
pub const DEFAULT_TIMEOUT_MS: i64 = 30_000;
/// Largest accepted tool-request timeout (ms); larger values are clamped.
pub const MAX_TIMEOUT_MS: i64 = 600_000;

/// The effective timeout of a request: absent, zero or negative → 30000; above 600000 → 600000.
pub fn effective_timeout_ms(requested: Option<i64>) -> i64 {
    match requested {
        Some(t) if t > 0 => t.min(MAX_TIMEOUT_MS),
        _ => DEFAULT_TIMEOUT_MS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timeout_defaults_and_clamps() {
        assert_eq!(effective_timeout_ms(None), 30_000);
        assert_eq!(effective_timeout_ms(Some(0)), 30_000);
        assert_eq!(effective_timeout_ms(Some(-5)), 30_000);
        assert_eq!(effective_timeout_ms(Some(1)), 1);
        assert_eq!(effective_timeout_ms(Some(10_000_000)), 600_000);
    }

    #[test]
    fn minimal_request_parses_with_defaults() {
        let r: ToolRequest = serde_json::from_value(json!({
            "request_id": "r1", "tool": "openphone.screen.get", "params": {"reason": "look"}
        }))
        .unwrap();
        assert_eq!(r.runtime_session_id, "");
        assert_eq!(r.runtime, None);
        assert_eq!(r.params, json!({"reason": "look"}));
        let empty: ToolRequest = serde_json::from_value(json!({})).unwrap();
        assert_eq!(empty.params, json!({}));
    }
}
