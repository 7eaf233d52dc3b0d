//! Appending to a chain: [`prepare`] checks the entry and computes its body digest off the
//! writer; [`append_prepared`] locks the chain's head, inserts the record, moves the head and
//! anchors it, inside the caller's transaction.

use openphone_clock::{Clock, SystemClock};
use openphone_protocol::digest::sha256_hex;
use openphone_store::{AuditEntry, AuditRecord, GENESIS_HASH, Result, StoreError};
use postgres::types::Type;
use serde_json::Value;

use crate::PgContext;

/// A record made ready for the writer: checked, normalised (what reads back), its JSON text
/// and its body digest computed.
pub(crate) struct Prepared {
    /// The record as it reads back (the policy proof normalised through its JSON text).
    pub(crate) entry: AuditEntry,
    /// The stored JSON text of `entry`.
    pub(crate) text: String,
    /// `sha256_hex(canonical_json(body))` (form 2).
    pub(crate) body_digest: String,
}

/// Lowercase hex digit only, as SQLite's encoding accepts.
fn is_lower_hex64(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// A digest field must be `sha256:<64 hex>` or `<64 hex>`, never a raw value.
fn check_digest(what: &'static str, value: Option<&str>) -> Result<()> {
    match value {
        None => Ok(()),
        Some(text) if is_lower_hex64(text.strip_prefix("sha256:").unwrap_or(text)) => Ok(()),
        Some(_) => Err(StoreError::Invalid {
            what,
            detail: "must be a digest (sha256:<64 hex> or 64 hex), never a raw value".to_owned(),
        }),
    }
}

/// `sha256_hex(canonical_json(body))`: the body is the record as [`AuditEntry`] serialises it
/// without `policy_proof`, plus `policy_proof_sha256` (the hex SHA-256 of the proof's
/// canonical JSON, or `null`) — SQLite's form 2, byte for byte ([`AuditEntry::body_digest`]).
pub(crate) fn body_digest(entry: &AuditEntry) -> Result<String> {
    let proof_sha = match &entry.policy_proof {
        None | Some(Value::Null) => None,
        Some(proof) => Some(
            openphone_protocol::canonical_sha256_hex(proof).map_err(|e| StoreError::Invalid {
                what: "audit policy_proof",
                detail: e.to_string(),
            })?,
        ),
    };
    entry
        .body_digest(proof_sha.as_deref())
        .map_err(|e| StoreError::Corrupt {
            op: "audit.hash",
            id: entry.audit_id.clone(),
            detail: e.to_string(),
        })
}

/// The form-2 chain hash: `sha256_hex(prev_hash + "\n" + seq + "\n" + body_digest)`.
pub(crate) fn chain_hash(prev_hash: &str, seq: i64, body_digest: &str) -> String {
    sha256_hex(&format!("{prev_hash}\n{seq}\n{body_digest}"))
}

/// Checks `entry` (the audit id must not be empty, the digest fields must be digests) and
/// does the expensive part of an append: its JSON text, read back (so what is hashed is what
/// reads back), and its body digest.
pub(crate) fn prepare(entry: &AuditEntry) -> Result<Prepared> {
    if entry.audit_id.is_empty() {
        return Err(StoreError::Invalid {
            what: "audit_id",
            detail: "empty".to_owned(),
        });
    }
    check_digest("audit params_hash", entry.params_hash.as_deref())?;
    check_digest("audit result_digest", entry.result_digest.as_deref())?;
    check_digest("audit proof_digest", entry.proof_digest.as_deref())?;
    let invalid = |e: serde_json::Error| StoreError::Invalid {
        what: "audit record",
        detail: e.to_string(),
    };
    let text = serde_json::to_string(entry).map_err(invalid)?;
    let entry: AuditEntry = if entry.policy_proof.as_ref().is_none_or(reads_back_as_is) {
        entry.clone()
    } else {
        serde_json::from_str(&text).map_err(invalid)?
    };
    let body_digest = body_digest(&entry)?;
    Ok(Prepared {
        entry,
        text,
        body_digest,
    })
}

/// Whether a proof's JSON text parses back to this very value, so a record holding it reads
/// back as it is (every other field of a record does: strings, integers, booleans and wire
/// strings are written and parsed exactly) and need not be parsed from its text: no float
/// (parsed to within an ulp, not always to the value written) and nesting well inside the
/// parser's recursion limit (a deeper proof is parsed, and refused there as before). A `null`
/// proof reads back as no proof.
fn reads_back_as_is(proof: &Value) -> bool {
    fn walk(value: &Value, depth: usize) -> bool {
        match value {
            Value::Null | Value::Bool(_) | Value::String(_) => true,
            Value::Number(n) => !n.is_f64(),
            Value::Array(items) => depth < PROOF_DEPTH && items.iter().all(|v| walk(v, depth + 1)),
            Value::Object(map) => depth < PROOF_DEPTH && map.values().all(|v| walk(v, depth + 1)),
        }
    }
    !proof.is_null() && walk(proof, 0)
}

/// The nesting below which a proof is taken as it is (serde_json's parser refuses 128 levels;
/// a proof is one level inside its record).
const PROOF_DEPTH: usize = 64;

/// The head of `chain` (last seq and hash), locked for this transaction; `None` for a chain
/// with no record yet.
fn lock_head(
    tx: &mut postgres::Transaction<'_>,
    chain: &str,
    id: &str,
) -> Result<Option<(i64, String)>> {
    let row = tx
        .query_typed_opt(
            "SELECT seq, hash FROM audit_heads WHERE chain = $1 FOR UPDATE",
            &[(&chain, Type::TEXT)],
        )
        .ctx("audit.append", id)?;
    Ok(row.map(|row| (row.get(0), row.get(1))))
}

/// Appends a prepared record to `chain` inside the caller's transaction: locks the chain's
/// head row, inserts the record, moves the head and anchors it (`audit_anchors`, the latest
/// anchor per chain). `p` is borrowed: a retried transaction appends it again.
///
/// # Why the daemons' appends do not conflict
///
/// Every write transaction is SERIALIZABLE, and PostgreSQL's serializable snapshot isolation
/// takes a predicate lock on whatever a statement reads: a sequential scan of `audit_heads`
/// (the planner's choice for a table of a few rows) locks the whole table, so two daemons
/// each reading its own head and moving it would be a read/write cycle, one of them aborted
/// and retried, again and again (measured: ten failures in a row with two daemons appending).
/// So the statements here run with `enable_seqscan` off (index scans lock only the entries and
/// rows they read; the caller's setting is restored before returning), and a head or anchor that exists is moved by a
/// plain `UPDATE` of its row (the tables leave room for those to stay heap-only, see
/// `schema/audit.sql`), which touches no index page another daemon read.
pub(crate) fn append_prepared(
    tx: &mut postgres::Transaction<'_>,
    chain: &str,
    p: &Prepared,
) -> Result<AuditRecord> {
    const OP: &str = "audit.append";
    let id = p.entry.audit_id.as_str();
    // The caller's setting, put back before returning (the caller's transaction goes on).
    let seqscan: String = tx
        .query_typed_one(
            "SELECT current_setting('enable_seqscan'), set_config('enable_seqscan', 'off', true)",
            &[],
        )
        .ctx(OP, id)?
        .get(0);
    let head = lock_head(tx, chain, id)?;
    let (last_seq, prev_hash) = head.clone().unwrap_or_else(|| (0, GENESIS_HASH.to_owned()));
    let seq = last_seq + 1;
    let hash = chain_hash(&prev_hash, seq, &p.body_digest);
    let now_ms = SystemClock.now_ms();
    let moved = if head.is_some() {
        "head AS (UPDATE audit_heads SET seq = $2, hash = $6 WHERE chain = $1), \
         anchor AS (UPDATE audit_anchors SET seq = $2, hash = $6, anchored_at_ms = $7 \
             WHERE chain = $1 RETURNING 1) \
         INSERT INTO audit_anchors (chain, seq, hash, anchored_at_ms) \
         SELECT $1, $2, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM anchor)"
    } else {
        "head AS (INSERT INTO audit_heads (chain, seq, hash) VALUES ($1, $2, $6)) \
         INSERT INTO audit_anchors (chain, seq, hash, anchored_at_ms) VALUES ($1, $2, $6, $7) \
         ON CONFLICT (chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, \
             anchored_at_ms = excluded.anchored_at_ms"
    };
    // Typed: parsed, bound and run in one round trip (no separate prepare).
    tx.execute_typed(
        &format!(
            "WITH record AS ( \
                 INSERT INTO audit_records (chain, seq, audit_id, at_ms, entry, hash) \
                 VALUES ($1, $2, $3, $4, $5, $6)), \
             {moved}"
        ),
        &[
            (&chain, Type::TEXT),
            (&seq, Type::INT8),
            (&id, Type::TEXT),
            (&p.entry.at_ms, Type::INT8),
            (&p.text, Type::TEXT),
            (&hash, Type::TEXT),
            (&now_ms, Type::INT8),
        ],
    )
    .ctx(OP, id)?;
    tx.query_typed_one(
        "SELECT set_config('enable_seqscan', $1, true)",
        &[(&seqscan, Type::TEXT)],
    )
    .ctx(OP, id)?;
    Ok(AuditRecord {
        seq,
        entry: p.entry.clone(),
        prev_hash,
        hash,
    })
}
