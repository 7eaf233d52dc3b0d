//! OpenClaw's frames (`openclaw-node.md` §2): `req`/`res`/`event` JSON text frames.
//!
//! Outgoing objects are closed on the gateway side, so only documented fields are sent and
//! optional ones are omitted rather than `null`. Incoming objects grow: every decoder ignores
//! unknown fields, and unknown frame kinds decode to [`Incoming::Other`].

use serde::Deserialize;
use serde_json::{Value, json};

/// A frame from the gateway.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Incoming {
    /// The answer to one of our requests (correlate by `id` only: answers come out of order).
    Res {
        id: String,
        #[serde(default)]
        ok: bool,
        #[serde(default)]
        payload: Option<Value>,
        #[serde(default)]
        error: Option<WireError>,
    },
    /// A server event.
    Event {
        event: String,
        #[serde(default)]
        payload: Option<Value>,
        #[serde(default)]
        seq: Option<u64>,
    },
    /// A frame kind this adapter does not know.
    #[serde(other)]
    Other,
}

/// The gateway's error object.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct WireError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub details: Option<Value>,
    #[serde(default)]
    pub retryable: Option<bool>,
    #[serde(default, rename = "retryAfterMs")]
    pub retry_after_ms: Option<u64>,
}

impl WireError {
    /// `details.code`, the field to branch on.
    pub fn detail_code(&self) -> Option<&str> {
        self.details.as_ref()?.get("code")?.as_str()
    }

    /// A string field of `details`.
    pub fn detail_str(&self, key: &str) -> Option<&str> {
        self.details.as_ref()?.get(key)?.as_str()
    }

    /// `code` / `details.code`: message, for people.
    pub fn describe(&self) -> String {
        match self.detail_code() {
            Some(detail) => format!("{} ({detail}): {}", self.code, self.message),
            None => format!("{}: {}", self.code, self.message),
        }
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Decodes one text frame.
pub fn decode(text: &str) -> Result<Incoming, serde_json::Error> {
    serde_json::from_str(text)
}

/// A `req` frame.
pub fn request(id: &str, method: &str, params: Value) -> String {
    json!({"type": "req", "id": id, "method": method, "params": params}).to_string()
}

/// The client block, the command surface and the device proof of a node `connect`.
#[derive(Debug, Clone)]
pub struct ConnectFields<'a> {
    pub display_name: &'a str,
    pub version: &'a str,
    pub commands: &'a [String],
    /// `(field, credential)`: `token`, `password` or `bootstrapToken`.
    pub auth: Option<(&'a str, &'a str)>,
    pub device_id: &'a str,
    pub public_key: &'a str,
    pub signature: &'a str,
    pub signed_at_ms: u64,
    pub nonce: &'a str,
}

/// `client.id`: the gateway applies its Android command policy to this id (§3.2).
pub const CLIENT_ID: &str = "openclaw-android";
/// `client.mode`.
pub const CLIENT_MODE: &str = "node";
/// `client.platform` (signed, pinned at pairing: never changes).
pub const PLATFORM: &str = "android";
/// `role`.
pub const ROLE: &str = "node";
/// `caps`.
pub const CAPS: [&str; 1] = ["device"];

/// The params of the node `connect` request (§3.2).
pub fn connect_params(f: &ConnectFields<'_>) -> Value {
    let mut auth = serde_json::Map::new();
    if let Some((field, credential)) = f.auth {
        auth.insert(field.to_owned(), Value::String(credential.to_owned()));
    }
    json!({
        "minProtocol": 3,
        "maxProtocol": 4,
        "client": {
            "id": CLIENT_ID,
            "displayName": f.display_name,
            "version": f.version,
            "platform": PLATFORM,
            "deviceFamily": PLATFORM,
            "mode": CLIENT_MODE,
        },
        "role": ROLE,
        "scopes": [],
        "caps": CAPS,
        "commands": f.commands,
        "permissions": {},
        "auth": auth,
        "userAgent": format!("openphone-runtime/{}", f.version),
        "device": {
            "id": f.device_id,
            "publicKey": f.public_key,
            "signature": f.signature,
            "signedAt": f.signed_at_ms,
            "nonce": f.nonce,
        },
    })
}

/// The parts of `hello-ok` the adapter keeps per connection (§3.3).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hello {
    pub protocol: u64,
    pub server_version: String,
    pub conn_id: String,
    pub methods: Vec<String>,
    pub auth_method: String,
    pub device_token: Option<String>,
    pub scopes: Vec<String>,
    pub issued_at_ms: Option<i64>,
    pub tick_interval_ms: u64,
    pub max_payload: u64,
}

/// The tick interval assumed before `hello-ok` says otherwise.
pub const DEFAULT_TICK_MS: u64 = 30_000;

impl Hello {
    /// Reads a `hello-ok` payload; unknown fields are ignored.
    pub fn parse(payload: &Value) -> Hello {
        let str_at = |v: &Value, path: &[&str]| -> String {
            let mut cur = v;
            for key in path {
                match cur.get(key) {
                    Some(next) => cur = next,
                    None => return String::new(),
                }
            }
            cur.as_str().unwrap_or_default().to_owned()
        };
        let auth = payload.get("auth").cloned().unwrap_or(Value::Null);
        let policy = payload.get("policy").cloned().unwrap_or(Value::Null);
        Hello {
            protocol: payload.get("protocol").and_then(Value::as_u64).unwrap_or(0),
            server_version: str_at(payload, &["server", "version"]),
            conn_id: str_at(payload, &["server", "connId"]),
            methods: payload
                .pointer("/features/methods")
                .and_then(Value::as_array)
                .map(|m| {
                    m.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            auth_method: str_at(&auth, &["method"]),
            device_token: auth
                .get("deviceToken")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            scopes: auth
                .get("scopes")
                .and_then(Value::as_array)
                .map(|m| {
                    m.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            issued_at_ms: auth.get("issuedAtMs").and_then(Value::as_i64),
            tick_interval_ms: policy
                .get("tickIntervalMs")
                .and_then(Value::as_u64)
                .filter(|t| *t > 0)
                .unwrap_or(DEFAULT_TICK_MS),
            max_payload: policy
                .get("maxPayload")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        }
    }

    /// Whether the gateway advertised `method` (an empty list is taken as "all").
    pub fn has_method(&self, method: &str) -> bool {
        self.methods.is_empty() || self.methods.iter().any(|m| m == method)
    }
}

/// A `node.event` request's params: the payload goes as a JSON **string** (§10).
pub fn node_event(event: &str, payload: &Value) -> Value {
    json!({"event": event, "payloadJSON": payload.to_string()})
}
