//! Helpers shared by the SQLite suite and the PostgreSQL conformance suite
//! (`crates/store-pg/tests/conformance.rs`): temporary directories, identity keys, confirmations.

use openphone_protocol::Risk;
use openphone_protocol::digest::sha256_hex;
use openphone_store::{IdentityKey, NewConfirmation};
use serde_json::json;
use tempfile::TempDir;

pub const T0: i64 = 1_760_000_000_000;

pub fn temp() -> TempDir {
    tempfile::tempdir().unwrap()
}

pub fn data_dir(dir: &TempDir) -> std::path::PathBuf {
    dir.path().join("data")
}

pub fn digest(text: &str) -> String {
    sha256_hex(text)
}

pub fn identity(tool: &str, params: &str, key: &str) -> IdentityKey {
    IdentityKey::new(
        "openclaw",
        "sess-1",
        tool,
        digest(params),
        key,
        "req-fallback",
    )
}

pub fn new_confirmation(
    id: &str,
    identity: &IdentityKey,
    created: i64,
    timeout: i64,
) -> NewConfirmation {
    NewConfirmation {
        confirmation_id: id.to_owned(),
        identity: identity.clone(),
        request_id: format!("req-{id}"),
        request: json!({"tool": identity.tool, "params": {"url": "https://example.org"}, "reason": "test"}),
        phone_session_id: Some("phone-sess-1".to_owned()),
        summary: format!("{}: test", identity.tool),
        risk: Risk::Medium,
        created_at_ms: created,
        expires_at_ms: created + timeout,
    }
}
