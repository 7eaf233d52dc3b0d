//! The hash-chained audit log (`runtime-protocol.md` §15).
//!
//! Append: read the head, `hash = sha256_hex(prev_hash + "\n" + canonical_json(row without
//! hash))`, insert the row and move the head, all in one transaction. Verify: walk the rows in
//! `seq` order recomputing every link, then compare the last row with the head.
//!
//! **Never raw values.** Callers pass digests (`params_hash`, `result_digest`,
//! `proof_digest`) and a policy proof made of verdicts and reasons; the digest fields are
//! checked to be `sha256:<64 hex>` or 64 hex, so a raw value cannot be stored there by mistake.

use std::collections::VecDeque;

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Risk, ToolStatus, canonical_json};
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Store;
use crate::error::{Result, SqlContext, StoreError};
use crate::wire::{Autonomy, col, is_hex64, parse_risk, sql_limit};

/// `prev_hash` of the first record.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The audit record types are the endpoint's wire types (`audit.query` sends them as stored);
/// the chain hashes exactly their serialisation.
pub use openphone_protocol::endpoint::{
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

fn compute_hash(seq: i64, prev_hash: &str, entry: &AuditEntry) -> Result<String> {
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

/// What is wrong with the first broken record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum AuditProblem {
    /// The row's content does not hash to its stored hash (edited in place).
    HashMismatch { stored: String, computed: String },
    /// The row's `prev_hash` is not the previous row's hash (a row before it was removed or
    /// replaced).
    PrevHashMismatch { expected: String, found: String },
    /// Sequence numbers jump: records `expected..seq` are missing.
    SeqGap { expected: i64 },
    /// The newest rows are missing or the head was altered: the head names this seq / hash.
    HeadMismatch {
        head_seq: i64,
        head_hash: String,
        last_seq: i64,
        last_hash: String,
    },
    /// The row cannot be decoded (bad enum string or JSON).
    Undecodable { detail: String },
}

impl std::fmt::Display for AuditProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditProblem::HashMismatch { stored, computed } => {
                write!(
                    f,
                    "content does not match its hash (stored {stored}, computed {computed})"
                )
            }
            AuditProblem::PrevHashMismatch { expected, found } => write!(
                f,
                "prev_hash {found} is not the previous record's hash {expected}"
            ),
            AuditProblem::SeqGap { expected } => {
                write!(f, "sequence gap: expected seq {expected}, records missing")
            }
            AuditProblem::HeadMismatch {
                head_seq,
                head_hash,
                last_seq,
                last_hash,
            } => write!(
                f,
                "chain head is seq {head_seq} ({head_hash}) but the last record is seq \
                 {last_seq} ({last_hash}): newest records removed or head altered"
            ),
            AuditProblem::Undecodable { detail } => write!(f, "undecodable record: {detail}"),
        }
    }
}

/// The first broken record found by [`Store::verify_audit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokenRecord {
    pub seq: i64,
    /// `None` when the record itself is missing (head mismatch).
    pub audit_id: Option<String>,
    #[serde(flatten)]
    pub problem: AuditProblem,
}

impl std::fmt::Display for BrokenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.audit_id {
            Some(id) => write!(f, "record seq {} ({id}): {}", self.seq, self.problem),
            None => write!(f, "record seq {}: {}", self.seq, self.problem),
        }
    }
}

/// The outcome of a chain walk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Records checked (up to and including the first broken one).
    pub checked: u64,
    /// The last record's seq (0 when the log is empty).
    pub last_seq: i64,
    /// The last record's hash ([`GENESIS_HASH`] when the log is empty).
    pub last_hash: String,
    /// `None` when the whole chain is intact.
    pub first_broken: Option<BrokenRecord>,
}

impl VerifyReport {
    /// True when every link and the head check out.
    pub fn is_intact(&self) -> bool {
        self.first_broken.is_none()
    }
}

const COLUMNS: &str = "seq, audit_id, kind, at_ms, runtime, caller_runtime, caller_transport, \
    caller_principal, phone_session_id, runtime_session_id, request_id, idempotency_key, tool, \
    risk, mutating, autonomy, decision, proof_digest, policy_proof, confirmation_id, \
    confirmation, status, error_code, duration_ms, params_hash, result_digest, prev_hash, hash";

/// Raw columns, read without interpretation (so verify can report what fails to decode).
struct RawRow {
    seq: i64,
    audit_id: String,
    prev_hash: String,
    hash: String,
    decoded: std::result::Result<AuditEntry, String>,
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
    })
}

fn raw_row(row: &Row<'_>) -> Result<RawRow> {
    const OP: &str = "audit.read";
    Ok(RawRow {
        seq: col(row, "seq", OP)?,
        audit_id: row.get::<_, String>("audit_id").unwrap_or_default(),
        prev_hash: row.get::<_, String>("prev_hash").unwrap_or_default(),
        hash: row.get::<_, String>("hash").unwrap_or_default(),
        decoded: decode(row),
    })
}

fn into_record(raw: RawRow) -> Result<AuditRecord> {
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

fn head(conn: &Connection) -> Result<Option<(i64, String)>> {
    conn.query_row("SELECT seq, hash FROM audit_head WHERE id = 1", [], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })
    .optional()
    .ctx("audit.head", "")
}

fn is_digest(s: &str) -> bool {
    is_hex64(s.strip_prefix("sha256:").unwrap_or(s))
}

fn check_entry(entry: &AuditEntry) -> Result<()> {
    for (what, value) in [
        ("audit params_hash", &entry.params_hash),
        ("audit result_digest", &entry.result_digest),
        ("audit proof_digest", &entry.proof_digest),
    ] {
        if let Some(v) = value
            && !is_digest(v)
        {
            return Err(StoreError::Invalid {
                what,
                detail: "must be a digest (sha256:<64 hex> or 64 hex), never a raw value"
                    .to_owned(),
            });
        }
    }
    if entry.audit_id.is_empty() {
        return Err(StoreError::Invalid {
            what: "audit_id",
            detail: "empty".to_owned(),
        });
    }
    Ok(())
}

/// Pages through the log in `seq` order; yields errors instead of panicking.
pub struct AuditIter<'a> {
    store: &'a Store,
    after_seq: i64,
    batch: usize,
    buffer: VecDeque<AuditRecord>,
    done: bool,
}

impl Iterator for AuditIter<'_> {
    type Item = Result<AuditRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() && !self.done {
            match self.store.export_audit(self.after_seq, self.batch) {
                Ok(page) => {
                    if page.len() < self.batch {
                        self.done = true;
                    }
                    if let Some(last) = page.last() {
                        self.after_seq = last.seq;
                    }
                    self.buffer.extend(page);
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        self.buffer.pop_front().map(Ok)
    }
}

/// Appends one record to the chain inside the caller's transaction: reads the head, inserts
/// the row and moves the head. Callers that must write a record together with other rows
/// (the executing record of a direct execution and its attempt, a final result and its
/// outcome) use this, so both commit or neither does.
pub(crate) fn append_in(tx: &Connection, entry: &AuditEntry) -> Result<AuditRecord> {
    const OP: &str = "audit.append";
    check_entry(entry)?;
    // Normalise the proof through its stored text form so that the hash computed now is
    // the one recomputed from the row later.
    let proof_text = entry.policy_proof.as_ref().map(Value::to_string);
    let mut entry = entry.clone();
    entry.policy_proof = proof_text
        .as_deref()
        .map(serde_json::from_str::<Value>)
        .transpose()
        .map_err(|e| StoreError::corrupt(OP, &entry.audit_id, e))?;
    let (last_seq, prev_hash) = head(tx)?.unwrap_or((0, GENESIS_HASH.to_owned()));
    let seq = last_seq + 1;
    let hash = compute_hash(seq, &prev_hash, &entry)?;
    tx.execute(
        &format!(
            "INSERT INTO audit_log ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
             ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, \
             ?24, ?25, ?26, ?27, ?28)"
        ),
        params![
            seq,
            entry.audit_id,
            entry.kind.as_str(),
            entry.at_ms,
            entry.runtime,
            entry.caller.runtime,
            entry.caller.transport,
            entry.caller.principal,
            entry.phone_session_id,
            entry.runtime_session_id,
            entry.request_id,
            entry.idempotency_key,
            entry.tool,
            entry.risk.map(Risk::as_str),
            entry.mutating,
            entry.autonomy.map(Autonomy::as_str),
            entry.decision.map(PolicyDecision::as_str),
            entry.proof_digest,
            proof_text,
            entry.confirmation_id,
            entry.confirmation.map(AuditConfirmation::as_str),
            entry.status.map(ToolStatus::as_str),
            entry.error_code,
            entry.duration_ms,
            entry.params_hash,
            entry.result_digest,
            prev_hash,
            hash,
        ],
    )
    .ctx(OP, &entry.audit_id)?;
    tx.execute(
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2) \
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        params![seq, hash],
    )
    .ctx(OP, &entry.audit_id)?;
    Ok(AuditRecord {
        seq,
        entry,
        prev_hash,
        hash,
    })
}

impl Store {
    /// Appends one record to the chain and returns it with its seq and hashes.
    pub fn append_audit(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        check_entry(entry)?;
        let entry = entry.clone();
        self.write("audit.append", &entry.audit_id.clone(), move |tx| {
            append_in(tx, &entry)
        })
    }

    /// [`Store::append_audit`] for async callers: awaits the group commit (many concurrent
    /// appends share one fsync) instead of blocking the thread.
    pub async fn append_audit_async(&self, entry: AuditEntry) -> Result<AuditRecord> {
        check_entry(&entry)?;
        let id = entry.audit_id.clone();
        self.write_async("audit.append", &id, move |tx| append_in(tx, &entry))
            .await
    }

    /// Up to `limit` records with `seq > after_seq`, in order (JSONL export pages).
    pub fn export_audit(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditRecord>> {
        const OP: &str = "audit.export";
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM audit_log WHERE seq > ?1 ORDER BY seq LIMIT ?2"
            ))
            .ctx(OP, "")?;
        let mut rows = stmt
            .query(params![after_seq, sql_limit(limit)])
            .ctx(OP, "")?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().ctx(OP, "")? {
            out.push(into_record(raw_row(row)?)?);
        }
        Ok(out)
    }

    /// Every record after `after_seq`, fetched `batch` at a time (the mutex is released
    /// between pages).
    pub fn audit_iter(&self, after_seq: i64, batch: usize) -> AuditIter<'_> {
        AuditIter {
            store: self,
            after_seq,
            batch: batch.max(1),
            buffer: VecDeque::new(),
            done: false,
        }
    }

    /// The records carrying one `audit_id`, oldest first.
    pub fn find_audit(&self, audit_id: &str) -> Result<Vec<AuditRecord>> {
        const OP: &str = "audit.find";
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM audit_log WHERE audit_id = ?1 ORDER BY seq"
            ))
            .ctx(OP, audit_id)?;
        let mut rows = stmt.query([audit_id]).ctx(OP, audit_id)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().ctx(OP, audit_id)? {
            out.push(into_record(raw_row(row)?)?);
        }
        Ok(out)
    }

    /// Walks the whole chain and reports the first broken record, if any. An `Err` means the
    /// database could not be read; a broken chain is an `Ok` report with `first_broken` set.
    pub fn verify_audit(&self) -> Result<VerifyReport> {
        const OP: &str = "audit.verify";
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!("SELECT {COLUMNS} FROM audit_log ORDER BY seq"))
            .ctx(OP, "")?;
        let mut rows = stmt.query([]).ctx(OP, "")?;
        let mut checked = 0u64;
        let mut last_seq = 0i64;
        let mut last_hash = GENESIS_HASH.to_owned();
        let broken = |raw: &RawRow, problem| BrokenRecord {
            seq: raw.seq,
            audit_id: Some(raw.audit_id.clone()),
            problem,
        };
        while let Some(row) = rows.next().ctx(OP, "")? {
            let raw = raw_row(row)?;
            checked += 1;
            let first_broken = if raw.seq != last_seq + 1 {
                Some(broken(
                    &raw,
                    AuditProblem::SeqGap {
                        expected: last_seq + 1,
                    },
                ))
            } else if raw.prev_hash != last_hash {
                Some(broken(
                    &raw,
                    AuditProblem::PrevHashMismatch {
                        expected: last_hash.clone(),
                        found: raw.prev_hash.clone(),
                    },
                ))
            } else {
                match &raw.decoded {
                    Err(detail) => Some(broken(
                        &raw,
                        AuditProblem::Undecodable {
                            detail: detail.clone(),
                        },
                    )),
                    Ok(entry) => {
                        let computed = compute_hash(raw.seq, &raw.prev_hash, entry)?;
                        (computed != raw.hash).then(|| {
                            broken(
                                &raw,
                                AuditProblem::HashMismatch {
                                    stored: raw.hash.clone(),
                                    computed,
                                },
                            )
                        })
                    }
                }
            };
            if first_broken.is_some() {
                return Ok(VerifyReport {
                    checked,
                    last_seq,
                    last_hash,
                    first_broken,
                });
            }
            last_seq = raw.seq;
            last_hash = raw.hash;
        }
        let (head_seq, head_hash) = head(&conn)?.unwrap_or((0, GENESIS_HASH.to_owned()));
        let first_broken = (head_seq != last_seq || head_hash != last_hash).then(|| BrokenRecord {
            seq: head_seq.max(last_seq + 1),
            audit_id: None,
            problem: AuditProblem::HeadMismatch {
                head_seq,
                head_hash,
                last_seq,
                last_hash: last_hash.clone(),
            },
        });
        Ok(VerifyReport {
            checked,
            last_seq,
            last_hash,
            first_broken,
        })
    }
}
