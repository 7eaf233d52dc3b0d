//! A record's policy proof, interned: its digest checked (or computed through its stored
//! text), with the one in-memory cache, a pure one (digest → proof, valid for any database).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use rusqlite::OptionalExtension;
use serde_json::Value;

use super::encoding::{hex32, to_hex};
use crate::error::{Result, SqlContext, StoreError};

/// How many checked proofs the process keeps (a daemon sees a handful: one per distinct
/// combination of caller, tool class and configuration).
const PROOF_CACHE_CAP: usize = 256;
/// A proof whose digest was checked, shared by every store of the process.
struct CheckedProof {
    value: Value,
    text: Arc<str>,
}

static PROOFS: LazyLock<Mutex<HashMap<[u8; 32], Arc<CheckedProof>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A record's proof, ready to store: its content digest, the text stored, the value read back.
pub(super) struct Proof {
    pub(super) digest: [u8; 32],
    pub(super) text: Arc<str>,
    pub(super) value: Value,
}

/// What the writer needs of a proof: its key and the text to intern.
pub(super) struct StoredProof {
    pub(super) digest: [u8; 32],
    pub(super) text: Arc<str>,
}

/// The digest of a proof's canonical JSON.
pub(super) fn proof_digest(value: &Value) -> std::result::Result<[u8; 32], String> {
    let hex = openphone_protocol::canonical_sha256_hex(value).map_err(|e| e.to_string())?;
    hex32(&hex).ok_or_else(|| "sha256_hex is not 64 hex digits".to_owned())
}

/// A proof as the store keeps it: its stored text, the value that text reads back as (what is
/// hashed is what is read back), and that value's digest.
fn read_back(proof: &Value) -> Result<(Arc<str>, Value, [u8; 32])> {
    let invalid = |detail: String| StoreError::Invalid {
        what: "audit policy_proof",
        detail,
    };
    let text: Arc<str> = proof.to_string().into();
    let value: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    let digest = proof_digest(&value).map_err(invalid)?;
    Ok((text, value, digest))
}

/// Interns `proof` given the digest the caller claims for it: a cached proof with that
/// digest that is equal by value is taken as is; otherwise the proof is normalised through
/// its stored text (so what is hashed now is what is read back) and its digest computed.
pub(super) fn checked_proof(proof: Value, claimed: Option<[u8; 32]>) -> Result<Proof> {
    let cache = || PROOFS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(claimed) = claimed
        && let Some(hit) = cache().get(&claimed).cloned()
        && hit.value == proof
    {
        return Ok(Proof {
            digest: claimed,
            text: Arc::clone(&hit.text),
            value: proof,
        });
    }
    let (text, value, digest) = read_back(&proof)?;
    if claimed == Some(digest) {
        let mut cache = cache();
        if cache.len() >= PROOF_CACHE_CAP {
            cache.clear();
        }
        cache.insert(
            digest,
            Arc::new(CheckedProof {
                value: value.clone(),
                text: Arc::clone(&text),
            }),
        );
    }
    Ok(Proof {
        digest,
        text,
        value,
    })
}

/// The interned proof stored under `key`, read back and checked against it. `Err` only when
/// the database cannot be read; a proof that is missing, unreadable or edited is the inner
/// `Err`, saying which.
pub(crate) fn load_interned(
    conn: &rusqlite::Connection,
    key: [u8; 32],
) -> Result<std::result::Result<Value, String>> {
    let hex = to_hex(&key);
    let text: Option<String> = conn
        .prepare_cached("SELECT proof FROM audit_proofs WHERE digest = ?1")
        .and_then(|mut s| s.query_row([&key[..]], |row| row.get(0)).optional())
        .ctx("audit.read_proof", &hex)?;
    Ok(match text {
        None => Err(format!("interned policy proof {hex} is missing")),
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Err(e) => Err(format!("interned policy proof {hex}: {e}")),
            Ok(value) => match proof_digest(&value) {
                Ok(d) if d == key => Ok(value),
                Ok(_) => Err(format!(
                    "interned policy proof {hex} does not match its digest (edited)"
                )),
                Err(e) => Err(format!("interned policy proof {hex}: {e}")),
            },
        },
    })
}

/// A policy proof made ready for the audit once and shared by every record that carries it
/// ([`AuditStore::append_audit_proven_async`](crate::AuditStore::append_audit_proven_async)):
/// its stored text and its digest are computed here, from the proof itself, exactly as an
/// append computes them for a proof inside an entry (the text, read back, digested), so an
/// append with it skips that work and stores the same bytes. Cloning it is cheap (shared).
///
/// Its fields are private: the digest is always the proof's own, never a caller's claim.
#[derive(Clone)]
pub struct AuditProof(Arc<ProofParts>);

struct ProofParts {
    value: Value,
    text: Arc<str>,
    digest: [u8; 32],
    digest_hex: String,
}

impl AuditProof {
    /// Makes `proof` ready for the audit: its stored text and its digest. Fails as an append
    /// of an entry with this proof would (a proof whose text does not read back).
    pub fn new(proof: Value) -> Result<AuditProof> {
        let (text, value, digest) = read_back(&proof)?;
        Ok(AuditProof(Arc::new(ProofParts {
            value,
            text,
            digest,
            digest_hex: to_hex(&digest),
        })))
    }

    /// The proof, as the audit reads it back.
    pub fn value(&self) -> &Value {
        &self.0.value
    }

    /// Its digest (lowercase hex of `SHA-256(canonical_json(proof))`).
    pub fn digest_hex(&self) -> &str {
        &self.0.digest_hex
    }

    /// What the writer interns: the key and the text.
    pub(super) fn stored(&self) -> StoredProof {
        StoredProof {
            digest: self.0.digest,
            text: Arc::clone(&self.0.text),
        }
    }
}

impl std::fmt::Debug for AuditProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditProof")
            .field("digest", &self.0.digest_hex)
            .finish_non_exhaustive()
    }
}
