//! The hashed form (form 2) of a compact record: the body digest, computed by the caller's
//! thread, and the chain hash over it.

use openphone_protocol::digest::sha256_hex;

use super::encoding::to_hex;
use crate::audit::AuditEntry;
use crate::error::{Result, StoreError};

/// `sha256_hex(canonical_json(body))`, the body being the record without `policy_proof`,
/// with `policy_proof_sha256` (`proof`, the interned proof's digest, in hex):
/// [`AuditEntry::body_digest`].
pub(super) fn body_digest(entry: &AuditEntry, proof: Option<&[u8; 32]>) -> Result<String> {
    let proof = proof.map(|d| to_hex(d));
    entry
        .body_digest(proof.as_deref())
        .map_err(|e| StoreError::corrupt("audit.hash", &entry.audit_id, e))
}

/// The form-2 chain hash.
pub(crate) fn chain_hash(prev_hash: &str, seq: i64, body_digest: &str) -> String {
    sha256_hex(&format!("{prev_hash}\n{seq}\n{body_digest}"))
}
