//! The hashed form (form 2) of a compact record: the body digest, computed by the caller's
//! thread, and the chain hash over it.

use openphone_protocol::digest::sha256_hex;
use serde_json::Value;

use super::encoding::to_hex;
use crate::audit::AuditEntry;
use crate::error::{Result, StoreError};

/// `sha256_hex(canonical_json(body))`, the body being the record without `policy_proof`,
/// with `policy_proof_sha256`. `entry.policy_proof` is left as it was.
pub(super) fn body_digest(entry: &mut AuditEntry, proof: Option<&[u8; 32]>) -> Result<String> {
    let held = entry.policy_proof.take();
    let value = serde_json::to_value(&*entry);
    entry.policy_proof = held;
    let id = &entry.audit_id;
    let mut value = value.map_err(|e| StoreError::corrupt("audit.hash", id, e))?;
    let Value::Object(map) = &mut value else {
        return Err(StoreError::corrupt(
            "audit.hash",
            id,
            "a record does not serialise to an object",
        ));
    };
    map.remove("policy_proof");
    map.insert(
        "policy_proof_sha256".to_owned(),
        proof.map_or(Value::Null, |d| Value::String(to_hex(d))),
    );
    openphone_protocol::canonical_sha256_hex(&value)
        .map_err(|e| StoreError::corrupt("audit.hash", id, e))
}

/// The form-2 chain hash.
pub(crate) fn chain_hash(prev_hash: &str, seq: i64, body_digest: &str) -> String {
    sha256_hex(&format!("{prev_hash}\n{seq}\n{body_digest}"))
}
