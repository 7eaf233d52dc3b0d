//! Appending a compact record: [`prepare`] does the expensive part off the writer (checks,
//! encodings, shape, proof, body digest); [`append_prepared`] reads the head, inserts the row
//! (interning its shape and proof when the database lacks them) and moves the head.

use std::borrow::Cow;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use super::encoding::{DigestForm, encode_id, hex32, split_digest};
use super::hash::{body_digest, chain_hash};
use super::layout::{AuditIdForm, INSERT_RECORD_SQL, KeyForm, ProofDigestForm, Shape, shape_id};
use super::proofs::{AuditProof, StoredProof, checked_proof};
use crate::audit::{AuditEntry, AuditRecord};
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;

/// A record made ready for the writer: everything but its place in the chain is computed
/// (encodings, shape, proof digest, body digest), so the writer's work is small.
pub(crate) struct PreparedAudit {
    /// The record as it will read back (its proof normalised).
    entry: AuditEntry,
    pub(super) shape_id: i64,
    pub(super) shape_text: String,
    /// The interned proof and the `proof_digest` column.
    proof: Option<(StoredProof, Option<[u8; 32]>)>,
    request_id: SqlValue,
    phone_session_id: Option<SqlValue>,
    idempotency_key: Option<String>,
    audit_id: Option<String>,
    params_hash: Option<[u8; 32]>,
    result_digest: Option<[u8; 32]>,
    /// The `proof_digest` column (NULL when absent or the proof's own digest).
    proof_digest: Option<[u8; 32]>,
    body_digest: String,
}

impl PreparedAudit {
    /// The record's `audit_id` (for error contexts).
    pub(crate) fn audit_id(&self) -> &str {
        &self.entry.audit_id
    }

    /// The key under which the record interns its policy proof (`audit_proofs.digest`), if
    /// it carries one.
    pub(crate) fn proof_key(&self) -> Option<[u8; 32]> {
        self.proof.as_ref().map(|(stored, _)| stored.digest)
    }
}

fn digest_field(
    what: &'static str,
    value: Option<&str>,
    default: DigestForm,
) -> Result<(Option<[u8; 32]>, DigestForm)> {
    match value {
        None => Ok((None, default)),
        Some(text) => split_digest(text)
            .map(|(d, form)| (Some(d), form))
            .ok_or_else(|| StoreError::Invalid {
                what,
                detail: "must be a digest (sha256:<64 hex> or 64 hex), never a raw value"
                    .to_owned(),
            }),
    }
}

/// Prepares `entry` for [`append_prepared`]. Checks it (digest fields must be digests, the
/// audit id must not be empty) and does the expensive part of an append off the writer.
pub(crate) fn prepare(entry: AuditEntry) -> Result<PreparedAudit> {
    prepare_with(entry, |entry, claimed| {
        let Some(proof) = entry.policy_proof.take() else {
            return Ok(None);
        };
        let p = checked_proof(proof, claimed)?;
        let stored = StoredProof {
            digest: p.digest,
            text: p.text,
        };
        Ok(Some((stored, Some(p.value))))
    })
}

/// [`prepare`] of `entry` carrying `proof` (a proof already made ready: its text and digest
/// computed once), stored exactly as `entry` with `policy_proof: Some(proof.value())` would
/// be. The prepared record keeps no proof value (the caller does not read the record back).
/// A `policy_proof` inside `entry` is refused: the proof is given once.
pub(crate) fn prepare_proven(entry: AuditEntry, proof: &AuditProof) -> Result<PreparedAudit> {
    if entry.policy_proof.is_some() {
        return Err(StoreError::Invalid {
            what: "audit policy_proof",
            detail: "given both inside the entry and beside it".to_owned(),
        });
    }
    prepare_with(entry, |_, _| Ok(Some((proof.stored(), None))))
}

/// A prepared proof: what the writer interns, and the value put back into the record.
type ProofPart = Option<(StoredProof, Option<serde_json::Value>)>;

fn prepare_with(
    mut entry: AuditEntry,
    take_proof: impl FnOnce(&mut AuditEntry, Option<[u8; 32]>) -> Result<ProofPart>,
) -> Result<PreparedAudit> {
    if entry.audit_id.is_empty() {
        return Err(StoreError::Invalid {
            what: "audit_id",
            detail: "empty".to_owned(),
        });
    }
    let (params_hash, params_form) = digest_field(
        "audit params_hash",
        entry.params_hash.as_deref(),
        DigestForm::Prefixed,
    )?;
    let (result_digest, result_form) = digest_field(
        "audit result_digest",
        entry.result_digest.as_deref(),
        DigestForm::Prefixed,
    )?;
    let (claimed, claimed_form) = digest_field(
        "audit proof_digest",
        entry.proof_digest.as_deref(),
        DigestForm::Bare,
    )?;
    let proof = take_proof(&mut entry, claimed)?;
    let proof_key = proof.as_ref().map(|(p, _)| p.digest);
    let (proof_digest_form, proof_digest) = match (claimed, proof_key) {
        (None, _) => (ProofDigestForm::Absent, None),
        (Some(c), Some(k)) if c == k => (ProofDigestForm::Proof, None),
        (Some(c), _) => (ProofDigestForm::Stored, Some(c)),
    };
    let (audit_id_form, audit_id) = if is_derived_id(&entry) {
        (AuditIdForm::Derived, None)
    } else {
        (AuditIdForm::Stored, Some(entry.audit_id.clone()))
    };
    let (key_form, idempotency_key) = match &entry.idempotency_key {
        None => (KeyForm::Absent, None),
        Some(key) if *key == entry.request_id => (KeyForm::RequestId, None),
        Some(key) => (KeyForm::Stored, Some(key.clone())),
    };
    let shape = Shape {
        kind: entry.kind,
        runtime: Cow::Borrowed(&entry.runtime),
        caller: Cow::Borrowed(&entry.caller),
        runtime_session_id: entry.runtime_session_id.as_deref().map(Cow::Borrowed),
        tool: entry.tool.as_deref().map(Cow::Borrowed),
        risk: entry.risk,
        mutating: entry.mutating,
        autonomy: entry.autonomy,
        decision: entry.decision,
        confirmation: entry.confirmation,
        status: entry.status,
        error_code: entry.error_code.as_deref().map(Cow::Borrowed),
        audit_id: audit_id_form,
        idempotency_key: key_form,
        params_hash: params_form,
        result_digest: result_form,
        proof_digest: proof_digest_form,
        proof_digest_text: claimed_form,
        device_id: entry.device_id.as_deref().map(Cow::Borrowed),
    };
    let shape_text = serde_json::to_string(&shape)
        .map_err(|e| StoreError::corrupt("audit.append", &entry.audit_id, e))?;
    let body_digest = body_digest(&entry, proof_key.as_ref())?;
    // The proof value goes back into the record; the writer needs only its key and text.
    let proof = proof.map(|(stored, value)| {
        entry.policy_proof = value;
        (stored, proof_digest)
    });
    Ok(PreparedAudit {
        shape_id: shape_id(&shape_text),
        shape_text,
        request_id: encode_id(&entry.request_id),
        phone_session_id: entry.phone_session_id.as_deref().map(encode_id),
        idempotency_key,
        audit_id,
        params_hash,
        result_digest,
        proof_digest,
        proof,
        body_digest,
        entry,
    })
}

/// Whether the record's `audit_id` is [`openphone_protocol::audit_id`] of its runtime and
/// request id (compared in place, without formatting that id for every record).
pub(super) fn is_derived_id(entry: &AuditEntry) -> bool {
    entry
        .audit_id
        .strip_prefix("runtime:")
        .and_then(|rest| rest.strip_prefix(entry.runtime.as_str()))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(entry.request_id.as_str())
}

fn is_foreign_key_failure(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.code == ErrorCode::ConstraintViolation
            && f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
}

fn insert_row(
    conn: &Connection,
    seq: i64,
    p: &PreparedAudit,
    hash: &[u8; 32],
) -> rusqlite::Result<()> {
    let e = &p.entry;
    let mut stmt = conn.prepare_cached(INSERT_RECORD_SQL)?;
    stmt.execute(params![
        seq,
        p.shape_id,
        e.at_ms,
        p.request_id,
        p.phone_session_id,
        p.idempotency_key,
        p.audit_id,
        e.confirmation_id,
        e.duration_ms,
        p.params_hash.as_ref().map(|d| &d[..]),
        p.result_digest.as_ref().map(|d| &d[..]),
        p.proof.as_ref().map(|(proof, _)| &proof.digest[..]),
        p.proof_digest.as_ref().map(|d| &d[..]),
        &hash[..],
    ])?;
    Ok(())
}

/// Writes the shape and the proof of `p` unless they are there.
fn intern(conn: &Connection, p: &PreparedAudit) -> Result<()> {
    const OP: &str = "audit.intern";
    let id = p.audit_id();
    conn.prepare_cached(
        "INSERT INTO audit_shapes (id, shape) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
    )
    .and_then(|mut s| s.execute(params![p.shape_id, p.shape_text]))
    .ctx(OP, id)?;
    let stored: String = conn
        .row_cached(
            "SELECT shape FROM audit_shapes WHERE id = ?1",
            [p.shape_id],
            |row| row.get(0),
        )
        .ctx(OP, id)?;
    if stored != p.shape_text {
        return Err(StoreError::corrupt(
            OP,
            id,
            format!("shape id {} already names another shape", p.shape_id),
        ));
    }
    if let Some((proof, _)) = &p.proof {
        conn.prepare_cached(
            "INSERT INTO audit_proofs (digest, proof) VALUES (?1, ?2) ON CONFLICT (digest) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![&proof.digest[..], &*proof.text]))
        .ctx(OP, id)?;
    }
    Ok(())
}

/// Whether the shape stored with this id is `text` (`None`: no shape has this id). Compared
/// inside SQLite, so the stored text is not copied out on every append.
fn stored_shape_is(conn: &Connection, id: i64, text: &str) -> Result<Option<bool>> {
    conn.prepare_cached("SELECT shape = ?2 FROM audit_shapes WHERE id = ?1")
        .and_then(|mut s| s.query_row(params![id, text], |row| row.get(0)).optional())
        .ctx("audit.append", "shape")
}

/// The chain's head: the last seq and its hash (`None` for an empty log).
pub(crate) fn head(conn: &Connection) -> Result<Option<(i64, String)>> {
    conn.prepare_cached("SELECT seq, hash FROM audit_head WHERE id = 1")
        .and_then(|mut s| {
            s.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .ctx("audit.head", "")
}

/// Appends a prepared record to the chain inside the caller's transaction: reads the head,
/// inserts the row (interning its shape and proof when the database lacks them) and moves the
/// head.
pub(crate) fn append_prepared(conn: &Connection, p: PreparedAudit) -> Result<AuditRecord> {
    const OP: &str = "audit.append";
    let (last_seq, prev_hash) = head(conn)?.unwrap_or((0, crate::audit::GENESIS_HASH.to_owned()));
    let seq = last_seq + 1;
    let hash = chain_hash(&prev_hash, seq, &p.body_digest);
    let hash_bytes = hex32(&hash)
        .ok_or_else(|| StoreError::corrupt(OP, p.audit_id(), "hash is not 64 hex digits"))?;
    // The shape id is a 64-bit prefix of a digest of free text (a runtime session id, a tool
    // name a client chose): a colliding shape could be found by search. So the stored shape
    // must be this record's, byte for byte, before a row points at it (found in review: a
    // colliding record read back as another one and broke verification for good).
    match stored_shape_is(conn, p.shape_id, &p.shape_text)? {
        Some(false) => {
            return Err(StoreError::Invalid {
                what: "audit record",
                detail: format!(
                    "its shape collides with a different stored shape (id {}); refused",
                    p.shape_id
                ),
            });
        }
        Some(true) => {}
        None => intern(conn, &p)?,
    }
    match insert_row(conn, seq, &p, &hash_bytes) {
        Ok(()) => {}
        Err(e) if is_foreign_key_failure(&e) => {
            intern(conn, &p)?;
            insert_row(conn, seq, &p, &hash_bytes).ctx(OP, p.audit_id())?;
        }
        Err(e) => return Err(e).ctx(OP, p.audit_id()),
    }
    conn.prepare_cached(
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2) \
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
    )
    .and_then(|mut s| s.execute(params![seq, hash]))
    .ctx(OP, p.audit_id())?;
    Ok(AuditRecord {
        seq,
        entry: p.entry,
        prev_hash,
        hash,
    })
}
