//! Reading compact rows back: [`Interned`] loads each shape and proof once (checking it
//! against its id) and puts row, shape and proof together into the record written; a row whose
//! columns contradict its shape's forms does not decode, and says why.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};
use serde_json::Value;

use super::encoding::{decode_id, join_digest, to_hex};
use super::hash::{body_digest, chain_hash};
use super::layout::{AuditIdForm, KeyForm, ProofDigestForm, Shape, shape_id};
use super::proofs::load_interned;
use crate::audit::AuditEntry;
use crate::error::{Result, SqlContext};

/// A compact row as read: its seq and hash, and the record it decodes to (or why not).
pub(crate) struct CompactRow {
    pub seq: i64,
    /// Lowercase hex (empty when the column is not 32 bytes; `decoded` says why).
    pub hash: String,
    pub decoded: std::result::Result<Decoded, String>,
}

/// A decoded compact row.
pub(crate) struct Decoded {
    pub entry: AuditEntry,
    /// The `proof` column: the interned proof's digest, bound by the hash.
    proof_key: Option<[u8; 32]>,
}

impl Decoded {
    /// The form-2 hash of this record at `seq` after `prev_hash`.
    pub(crate) fn hash_after(&mut self, prev_hash: &str, seq: i64) -> Result<String> {
        let body = body_digest(&self.entry, self.proof_key.as_ref())?;
        Ok(chain_hash(prev_hash, seq, &body))
    }
}

/// Decodes compact rows, loading each shape and proof once (and checking it against its id).
pub(crate) struct Interned<'c> {
    conn: &'c Connection,
    shapes: HashMap<i64, std::result::Result<Arc<Shape<'static>>, String>>,
    proofs: HashMap<[u8; 32], std::result::Result<Arc<Value>, String>>,
}

fn digest_col(
    row: &Row<'_>,
    idx: usize,
    name: &str,
) -> std::result::Result<Option<[u8; 32]>, String> {
    match row.get_ref(idx).map_err(|e| format!("{name}: {e}"))? {
        ValueRef::Null => Ok(None),
        ValueRef::Blob(b) => <[u8; 32]>::try_from(b)
            .map(Some)
            .map_err(|_| format!("{name}: {} bytes, not 32", b.len())),
        other => Err(format!("{name}: unexpected {:?} value", other.data_type())),
    }
}

fn text_col(row: &Row<'_>, idx: usize, name: &str) -> std::result::Result<Option<String>, String> {
    row.get::<_, Option<String>>(idx)
        .map_err(|e| format!("{name}: {e}"))
}

fn int_col(row: &Row<'_>, idx: usize, name: &str) -> std::result::Result<Option<i64>, String> {
    row.get::<_, Option<i64>>(idx)
        .map_err(|e| format!("{name}: {e}"))
}

/// A column that must be NULL under its form.
fn must_be_null<T>(value: Option<T>, name: &str) -> std::result::Result<(), String> {
    match value {
        None => Ok(()),
        Some(_) => Err(format!(
            "{name}: a value where the shape says none is stored"
        )),
    }
}

fn required<T>(value: Option<T>, name: &str) -> std::result::Result<T, String> {
    value.ok_or_else(|| format!("{name}: missing, but the shape says it is stored"))
}

impl<'c> Interned<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Interned<'c> {
        Interned {
            conn,
            shapes: HashMap::new(),
            proofs: HashMap::new(),
        }
    }

    fn shape(&mut self, id: i64) -> Result<std::result::Result<Arc<Shape<'static>>, String>> {
        if let Some(found) = self.shapes.get(&id) {
            return Ok(found.clone());
        }
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT shape FROM audit_shapes WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |row| row.get(0)).optional())
            .ctx("audit.read_shape", &id.to_string())?;
        let loaded = match text {
            None => Err(format!("interned shape {id} is missing")),
            Some(text) if shape_id(&text) != id => Err(format!(
                "interned shape {id} does not match its content (edited)"
            )),
            Some(text) => serde_json::from_str::<Shape<'static>>(&text)
                .map(Arc::new)
                .map_err(|e| format!("interned shape {id}: {e}")),
        };
        self.shapes.insert(id, loaded.clone());
        Ok(loaded)
    }

    fn proof(&mut self, key: [u8; 32]) -> Result<std::result::Result<Arc<Value>, String>> {
        if let Some(found) = self.proofs.get(&key) {
            return Ok(found.clone());
        }
        let loaded = load_interned(self.conn, key)?.map(Arc::new);
        self.proofs.insert(key, loaded.clone());
        Ok(loaded)
    }

    /// Reads one row of `SELECT {RECORD_COLUMNS} FROM audit_records`. `Err` only when the
    /// database cannot be read; a row that does not decode has `decoded: Err`.
    pub(crate) fn decode(&mut self, row: &Row<'_>) -> Result<CompactRow> {
        let seq: i64 = row.get(0).ctx("audit.read", "seq")?;
        let hash = match digest_col(row, 13, "hash") {
            Ok(Some(h)) => Ok(to_hex(&h)),
            Ok(None) => Err("hash: missing".to_owned()),
            Err(e) => Err(e),
        };
        Ok(match hash {
            Err(e) => CompactRow {
                seq,
                hash: String::new(),
                decoded: Err(e),
            },
            Ok(hash) => CompactRow {
                seq,
                hash,
                decoded: self.decode_entry(row)?,
            },
        })
    }

    fn decode_entry(&mut self, row: &Row<'_>) -> Result<std::result::Result<Decoded, String>> {
        let shape_id = match int_col(row, 1, "shape") {
            Ok(Some(id)) => id,
            Ok(None) => return Ok(Err("shape: missing".to_owned())),
            Err(e) => return Ok(Err(e)),
        };
        let shape = match self.shape(shape_id)? {
            Ok(shape) => shape,
            Err(e) => return Ok(Err(e)),
        };
        let proof_key = match digest_col(row, 11, "proof") {
            Ok(key) => key,
            Err(e) => return Ok(Err(e)),
        };
        let proof = match proof_key {
            None => None,
            Some(key) => match self.proof(key)? {
                Ok(value) => Some(value),
                Err(e) => return Ok(Err(e)),
            },
        };
        Ok(assemble(row, &shape, proof_key, proof.as_deref()))
    }
}

/// Puts a row, its shape and its proof back together into the record.
fn assemble(
    row: &Row<'_>,
    shape: &Shape<'_>,
    proof_key: Option<[u8; 32]>,
    proof: Option<&Value>,
) -> std::result::Result<Decoded, String> {
    let at_ms = required(int_col(row, 2, "at_ms")?, "at_ms")?;
    let request_id = decode_id(
        row.get_ref(3).map_err(|e| format!("request_id: {e}"))?,
        "request_id",
    )?;
    let phone_session_id = match row
        .get_ref(4)
        .map_err(|e| format!("phone_session_id: {e}"))?
    {
        ValueRef::Null => None,
        value => Some(decode_id(value, "phone_session_id")?),
    };
    let key_col = text_col(row, 5, "idempotency_key")?;
    let idempotency_key = match shape.idempotency_key {
        KeyForm::Absent => must_be_null(key_col, "idempotency_key").map(|()| None)?,
        KeyForm::RequestId => {
            must_be_null(key_col, "idempotency_key")?;
            Some(request_id.clone())
        }
        KeyForm::Stored => Some(required(key_col, "idempotency_key")?),
    };
    let id_col = text_col(row, 6, "audit_id")?;
    let audit_id = match shape.audit_id {
        AuditIdForm::Derived => {
            must_be_null(id_col, "audit_id")?;
            openphone_protocol::audit_id(&shape.runtime, &request_id)
        }
        AuditIdForm::Stored => required(id_col, "audit_id")?,
    };
    let confirmation_id = text_col(row, 7, "confirmation_id")?;
    let duration_ms = int_col(row, 8, "duration_ms")?;
    let params_hash =
        digest_col(row, 9, "params_hash")?.map(|d| join_digest(&d, shape.params_hash));
    let result_digest =
        digest_col(row, 10, "result_digest")?.map(|d| join_digest(&d, shape.result_digest));
    let digest_col_value = digest_col(row, 12, "proof_digest")?;
    let proof_digest = match shape.proof_digest {
        ProofDigestForm::Absent => must_be_null(digest_col_value, "proof_digest").map(|()| None)?,
        ProofDigestForm::Proof => {
            must_be_null(digest_col_value, "proof_digest")?;
            let key = required(proof_key, "proof")?;
            Some(join_digest(&key, shape.proof_digest_text))
        }
        ProofDigestForm::Stored => Some(join_digest(
            &required(digest_col_value, "proof_digest")?,
            shape.proof_digest_text,
        )),
    };
    Ok(Decoded {
        entry: AuditEntry {
            audit_id,
            kind: shape.kind,
            at_ms,
            runtime: shape.runtime.clone().into_owned(),
            caller: shape.caller.clone().into_owned(),
            phone_session_id,
            runtime_session_id: shape.runtime_session_id.as_deref().map(str::to_owned),
            request_id,
            idempotency_key,
            tool: shape.tool.as_deref().map(str::to_owned),
            risk: shape.risk,
            mutating: shape.mutating,
            autonomy: shape.autonomy,
            decision: shape.decision,
            proof_digest,
            policy_proof: proof.cloned(),
            confirmation_id,
            confirmation: shape.confirmation,
            status: shape.status,
            error_code: shape.error_code.as_deref().map(str::to_owned),
            duration_ms,
            params_hash,
            result_digest,
            device_id: shape.device_id.as_deref().map(str::to_owned),
        },
        proof_key,
    })
}
