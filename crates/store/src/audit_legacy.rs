//! Records stored before schema 6 (form 1): one `audit_log` row per record, every field as
//! text, the policy proof as JSON and `prev_hash` stored. These rows are kept exactly as they
//! were written — never converted, never appended to — so they, the head and every anchor
//! taken before the upgrade verify as before:
//! `hash = sha256_hex(prev_hash + "\n" + canonical_json(record without hash))`, the record
//! including its `seq`, `prev_hash` and `policy_proof`.

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{ToolStatus, canonical_json};
use rusqlite::Row;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::wire::{Autonomy, col, parse_risk};
use openphone_protocol::endpoint::{
    AuditCaller as Caller, AuditConfirmation, AuditEntry, AuditKind, AuditRecord, PolicyDecision,
};

/// The hashed form: everything but `hash`.
#[derive(Serialize)]
struct Hashed<'a> {
    seq: i64,
    prev_hash: &'a str,
    #[serde(flatten)]
    entry: &'a AuditEntry,
}

/// The form-1 hash of a legacy row.
pub(crate) fn compute_hash(seq: i64, prev_hash: &str, entry: &AuditEntry) -> Result<String> {
    let id = seq.to_string();
    let value = serde_json::to_value(Hashed {
        seq,
        prev_hash,
        entry,
    })
    .map_err(|e| StoreError::corrupt("audit.hash", &id, e))?;
    let text = canonical_json(&value).map_err(|e| StoreError::corrupt("audit.hash", &id, e))?;
    Ok(sha256_hex(&format!("{prev_hash}\n{text}")))
}

pub(crate) const COLUMNS: &str = "seq, audit_id, kind, at_ms, runtime, caller_runtime, caller_transport, \
    caller_principal, phone_session_id, runtime_session_id, request_id, idempotency_key, tool, \
    risk, mutating, autonomy, decision, proof_digest, policy_proof, confirmation_id, \
    confirmation, status, error_code, duration_ms, params_hash, result_digest, prev_hash, hash";

/// Raw columns, read without interpretation (so verify can report what fails to decode).
pub(crate) struct RawRow {
    pub seq: i64,
    pub audit_id: String,
    pub prev_hash: String,
    pub hash: String,
    pub decoded: std::result::Result<AuditEntry, String>,
}

fn opt_enum<T>(
    text: Option<String>,
    parse: fn(&str) -> Option<T>,
    name: &str,
) -> std::result::Result<Option<T>, String> {
    text.map(|t| parse(&t).ok_or_else(|| format!("{name}: unknown value {t:?}")))
        .transpose()
}

fn decode(row: &Row<'_>) -> std::result::Result<AuditEntry, String> {
    let s = |name: &str| {
        row.get::<_, String>(name)
            .map_err(|e| format!("{name}: {e}"))
    };
    let o = |name: &str| {
        row.get::<_, Option<String>>(name)
            .map_err(|e| format!("{name}: {e}"))
    };
    let kind = s("kind")?;
    let risk = o("risk")?
        .map(|t| parse_risk(&t, "audit.read", "").map_err(|e| e.to_string()))
        .transpose()?;
    let status = o("status")?
        .map(|t| {
            serde_json::from_value::<ToolStatus>(Value::String(t.clone()))
                .map_err(|_| format!("status: unknown value {t:?}"))
        })
        .transpose()?;
    let policy_proof = o("policy_proof")?
        .map(|t| serde_json::from_str::<Value>(&t).map_err(|e| format!("policy_proof: {e}")))
        .transpose()?;
    Ok(AuditEntry {
        audit_id: s("audit_id")?,
        kind: AuditKind::parse(&kind).ok_or_else(|| format!("kind: unknown value {kind:?}"))?,
        at_ms: row.get("at_ms").map_err(|e| format!("at_ms: {e}"))?,
        runtime: s("runtime")?,
        caller: Caller {
            runtime: s("caller_runtime")?,
            transport: s("caller_transport")?,
            principal: s("caller_principal")?,
        },
        phone_session_id: o("phone_session_id")?,
        runtime_session_id: o("runtime_session_id")?,
        request_id: s("request_id")?,
        idempotency_key: o("idempotency_key")?,
        tool: o("tool")?,
        risk,
        mutating: row.get("mutating").map_err(|e| format!("mutating: {e}"))?,
        autonomy: opt_enum(o("autonomy")?, Autonomy::parse, "autonomy")?,
        decision: opt_enum(o("decision")?, PolicyDecision::parse, "decision")?,
        proof_digest: o("proof_digest")?,
        policy_proof,
        confirmation_id: o("confirmation_id")?,
        confirmation: opt_enum(o("confirmation")?, AuditConfirmation::parse, "confirmation")?,
        status,
        error_code: o("error_code")?,
        duration_ms: row
            .get("duration_ms")
            .map_err(|e| format!("duration_ms: {e}"))?,
        params_hash: o("params_hash")?,
        result_digest: o("result_digest")?,
        // Records before schema 6 were made before several phones existed.
        device_id: None,
    })
}

pub(crate) fn raw_row(row: &Row<'_>) -> Result<RawRow> {
    const OP: &str = "audit.read";
    Ok(RawRow {
        seq: col(row, "seq", OP)?,
        audit_id: row.get::<_, String>("audit_id").unwrap_or_default(),
        prev_hash: row.get::<_, String>("prev_hash").unwrap_or_default(),
        hash: row.get::<_, String>("hash").unwrap_or_default(),
        decoded: decode(row),
    })
}

pub(crate) fn into_record(raw: RawRow) -> Result<AuditRecord> {
    let entry = raw
        .decoded
        .map_err(|detail| StoreError::corrupt("audit.read", &raw.seq.to_string(), detail))?;
    Ok(AuditRecord {
        seq: raw.seq,
        entry,
        prev_hash: raw.prev_hash,
        hash: raw.hash,
    })
}
