//! The hash-chained audit log (`runtime-protocol.md` §15).
//!
//! Append: read the head, compute the new record's hash from the previous one, insert the row
//! and move the head, all inside one write. Verify: walk the records in `seq` order
//! recomputing every hash, then compare the last record with the head.
//!
//! Records live in two places: those written since schema 6 in the compact tables of
//! [`audit_storage`](crate::audit_storage) (shapes and proofs interned, digests as bytes,
//! hashed in *form 2*), those written before in the untouched `audit_log` table
//! ([`audit_legacy`](crate::audit_legacy), *form 1*). Readers see one log: `seq` continues
//! from the old rows into the new ones, and every record reads back as the
//! [`AuditRecord`] it was when written (`prev_hash` included).
//!
//! **Never raw values.** Callers pass digests (`params_hash`, `result_digest`,
//! `proof_digest`) and a policy proof made of verdicts and reasons; the digest fields are
//! checked to be `sha256:<64 hex>` or 64 hex, so a raw value cannot be stored there by mistake.

use std::collections::{BTreeMap, VecDeque};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::SqliteStore;
use crate::audit_legacy::{self as legacy, RawRow};
use crate::audit_storage::{self as storage, Interned, PreparedAudit, RECORD_COLUMNS};
use crate::error::{Result, SqlContext, StoreError};
use crate::wire::sql_limit;

/// `prev_hash` of the first record.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The audit record types are the endpoint's wire types (`audit.query` sends them as stored);
/// the chain hashes exactly their serialisation.
pub use openphone_protocol::endpoint::{
    AuditCaller as Caller, AuditConfirmation, AuditEntry, AuditKind, AuditRecord, PolicyDecision,
};

/// The first broken record and what is wrong with it: the endpoint's wire types (the
/// dashboard's audit check answers them).
pub use openphone_protocol::endpoint::{AuditProblem, BrokenRecord};

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

/// Pages through the log in `seq` order; yields errors instead of panicking.
pub struct AuditIter<'a> {
    store: &'a crate::Store,
    after_seq: i64,
    batch: usize,
    buffer: VecDeque<AuditRecord>,
    done: bool,
}

impl<'a> AuditIter<'a> {
    /// Every record after `after_seq`, fetched `batch` at a time (no connection is held
    /// between pages).
    pub(crate) fn new(store: &'a crate::Store, after_seq: i64, batch: usize) -> Self {
        AuditIter {
            store,
            after_seq,
            batch: batch.max(1),
            buffer: VecDeque::new(),
            done: false,
        }
    }
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

/// Prepares `entry` off the writer (checks, encodings, interning keys, body digest): the
/// expensive half of an append. Pass the result to [`append_prepared_in`] inside a write.
pub(crate) fn prepare(entry: AuditEntry) -> Result<PreparedAudit> {
    storage::prepare(entry)
}

/// Appends a prepared record to the chain inside the caller's write: reads the head, inserts
/// the row and moves the head. Callers that must write a record together with other rows
/// (the executing record of a direct execution and its attempt, a final result and its
/// outcome) use this, so both commit or neither does.
pub(crate) fn append_prepared_in(tx: &Connection, prepared: PreparedAudit) -> Result<AuditRecord> {
    storage::append_prepared(tx, prepared)
}

/// Whether the database has the compact audit tables (schema 6). A newer binary's offline
/// tools may read a database the running, older daemon has not migrated: it has only
/// `audit_log`.
fn has_compact(conn: &Connection) -> Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_records')",
    )
    .and_then(|mut s| s.query_row([], |row| row.get(0)))
    .ctx("audit.tables", "")
}

/// The hash of the record before `seq` (the nearest one, in either table), or the genesis
/// hash.
fn hash_before(conn: &Connection, seq: i64) -> Result<String> {
    let tail = "WHERE seq < ?1 ORDER BY seq DESC LIMIT 1";
    Ok(find_hash(conn, "audit.prev_hash", tail, seq)?.unwrap_or_else(|| GENESIS_HASH.to_owned()))
}

/// The stored hash of record `seq`, if there is one (anchors).
pub(crate) fn hash_at(conn: &Connection, seq: i64) -> Result<Option<String>> {
    find_hash(conn, "audit.anchor", "WHERE seq = ?1", seq)
}

/// The hash of the record `tail` (`WHERE …`, `?1` = `seq`) selects: in the compact table
/// (when the database has it), else in the legacy one.
fn find_hash(conn: &Connection, op: &'static str, tail: &str, seq: i64) -> Result<Option<String>> {
    let id = seq.to_string();
    if has_compact(conn)? {
        let compact: Option<Vec<u8>> = conn
            .prepare_cached(&format!("SELECT hash FROM audit_records {tail}"))
            .and_then(|mut s| s.query_row([seq], |row| row.get(0)).optional())
            .ctx(op, &id)?;
        if let Some(hash) = compact {
            return Ok(Some(storage::to_hex(&hash)));
        }
    }
    conn.prepare_cached(&format!("SELECT hash FROM audit_log {tail}"))
        .and_then(|mut s| s.query_row([seq], |row| row.get(0)).optional())
        .ctx(op, &id)
}

/// The compact rows `SELECT … FROM audit_records <sql_tail>` selects, decoded (their
/// `prev_hash` left empty: see [`link`]). A row that does not decode is an error.
fn compact_records(
    conn: &Connection,
    sql_tail: &str,
    args: &[&dyn rusqlite::ToSql],
    op: &'static str,
) -> Result<Vec<AuditRecord>> {
    if !has_compact(conn)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {RECORD_COLUMNS} FROM audit_records {sql_tail}"
        ))
        .ctx(op, "")?;
    let mut rows = stmt.query(args).ctx(op, "")?;
    let mut interned = Interned::new(conn);
    let mut out: Vec<AuditRecord> = Vec::new();
    while let Some(row) = rows.next().ctx(op, "")? {
        let compact = interned.decode(row)?;
        let decoded = compact
            .decoded
            .map_err(|detail| StoreError::corrupt(op, &compact.seq.to_string(), detail))?;
        out.push(AuditRecord {
            seq: compact.seq,
            entry: decoded.entry,
            prev_hash: String::new(),
            hash: compact.hash,
        });
    }
    Ok(out)
}

/// Fills in `prev_hash` of consecutive compact records (the first one's from the database).
fn link(conn: &Connection, records: &mut [AuditRecord]) -> Result<()> {
    let mut prev: Option<(i64, String)> = None;
    for record in records {
        record.prev_hash = match prev.take() {
            Some((seq, hash)) if seq < record.seq => hash,
            _ => hash_before(conn, record.seq)?,
        };
        prev = Some((record.seq, record.hash.clone()));
    }
    Ok(())
}

/// Chain-walk state: how far the chain verified.
struct Walk {
    checked: u64,
    last_seq: i64,
    last_hash: String,
}

impl Walk {
    fn broken(&self, first_broken: BrokenRecord) -> VerifyReport {
        VerifyReport {
            checked: self.checked,
            last_seq: self.last_seq,
            last_hash: self.last_hash.clone(),
            first_broken: Some(first_broken),
        }
    }

    /// Walks the legacy rows; `Some` at the first broken one.
    fn legacy(&mut self, conn: &Connection) -> Result<Option<VerifyReport>> {
        const OP: &str = "audit.verify";
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {} FROM audit_log ORDER BY seq",
                legacy::COLUMNS
            ))
            .ctx(OP, "")?;
        let mut rows = stmt.query([]).ctx(OP, "")?;
        let broken = |raw: &RawRow, problem| BrokenRecord {
            seq: raw.seq,
            audit_id: Some(raw.audit_id.clone()),
            problem,
        };
        while let Some(row) = rows.next().ctx(OP, "")? {
            let raw = legacy::raw_row(row)?;
            self.checked += 1;
            let problem = if raw.seq != self.last_seq + 1 {
                Some(AuditProblem::SeqGap {
                    expected: self.last_seq + 1,
                })
            } else if raw.prev_hash != self.last_hash {
                Some(AuditProblem::PrevHashMismatch {
                    expected: self.last_hash.clone(),
                    found: raw.prev_hash.clone(),
                })
            } else {
                match &raw.decoded {
                    Err(detail) => Some(AuditProblem::Undecodable {
                        detail: detail.clone(),
                    }),
                    Ok(entry) => {
                        let computed = legacy::compute_hash(raw.seq, &raw.prev_hash, entry)?;
                        (computed != raw.hash).then(|| AuditProblem::HashMismatch {
                            stored: raw.hash.clone(),
                            computed,
                        })
                    }
                }
            };
            if let Some(problem) = problem {
                return Ok(Some(self.broken(broken(&raw, problem))));
            }
            self.last_seq = raw.seq;
            self.last_hash = raw.hash;
        }
        Ok(None)
    }

    /// Walks the compact rows; `Some` at the first broken one.
    fn compact(&mut self, conn: &Connection) -> Result<Option<VerifyReport>> {
        const OP: &str = "audit.verify";
        if !has_compact(conn)? {
            return Ok(None);
        }
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {RECORD_COLUMNS} FROM audit_records ORDER BY seq"
            ))
            .ctx(OP, "")?;
        let mut rows = stmt.query([]).ctx(OP, "")?;
        let mut interned = Interned::new(conn);
        while let Some(row) = rows.next().ctx(OP, "")? {
            let row = interned.decode(row)?;
            self.checked += 1;
            let (audit_id, problem) = match row.decoded {
                _ if row.seq != self.last_seq + 1 => (
                    None,
                    Some(AuditProblem::SeqGap {
                        expected: self.last_seq + 1,
                    }),
                ),
                Err(detail) => (None, Some(AuditProblem::Undecodable { detail })),
                Ok(mut decoded) => {
                    let computed = decoded.hash_after(&self.last_hash, row.seq)?;
                    let problem = (computed != row.hash).then(|| AuditProblem::HashMismatch {
                        stored: row.hash.clone(),
                        computed,
                    });
                    (Some(decoded.entry.audit_id), problem)
                }
            };
            if let Some(problem) = problem {
                return Ok(Some(self.broken(BrokenRecord {
                    seq: row.seq,
                    audit_id,
                    problem,
                })));
            }
            self.last_seq = row.seq;
            self.last_hash = row.hash;
        }
        Ok(None)
    }
}

impl SqliteStore {
    /// Appends one record to the chain and returns it with its seq and hashes.
    pub fn append_audit(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        let prepared = prepare(entry.clone())?;
        let id = prepared.audit_id().to_owned();
        self.write("audit.append", &id, move |tx| {
            append_prepared_in(tx, prepared)
        })
    }

    /// [`Store::append_audit`](crate::AuditStore::append_audit) for async callers: awaits the group commit (many concurrent
    /// appends share one fsync) instead of blocking the thread.
    pub async fn append_audit_async(&self, entry: AuditEntry) -> Result<AuditRecord> {
        let prepared = prepare(entry)?;
        let id = prepared.audit_id().to_owned();
        self.write_async("audit.append", &id, move |tx| {
            append_prepared_in(tx, prepared)
        })
        .await
    }

    /// [`Store::append_audit_async`](crate::AuditStore::append_audit_async) for the audit record of an executed safe read (a
    /// read of the `safe_read` class, nothing changed on the phone): returns once the record
    /// is committed into the write-ahead log — a crash of the process keeps it — and before
    /// the fsync, which follows at once (docs/security.md, "What is durable when"). Never for
    /// a mutation's records or a private read's.
    pub async fn append_audit_relaxed_async(&self, entry: AuditEntry) -> Result<AuditRecord> {
        let prepared = prepare(entry)?;
        let id = prepared.audit_id().to_owned();
        self.write_async_relaxed("audit.append", &id, move |tx| {
            append_prepared_in(tx, prepared)
        })
        .await
    }

    /// [`Store::append_audit_proven_async`](crate::AuditStore::append_audit_proven_async):
    /// the proof's text and digest are taken as made ([`storage::AuditProof`]), and the
    /// record is dropped by the writer, only its seq coming back.
    pub async fn append_audit_proven_async(
        &self,
        entry: AuditEntry,
        proof: Option<storage::AuditProof>,
        durable: bool,
    ) -> Result<i64> {
        let prepared = match &proof {
            Some(proof) => storage::prepare_proven(entry, proof)?,
            None => prepare(entry)?,
        };
        let id = prepared.audit_id().to_owned();
        let append = move |tx: &Connection| append_prepared_in(tx, prepared).map(|r| r.seq);
        if durable {
            self.write_async("audit.append", &id, append).await
        } else {
            self.write_async_relaxed("audit.append", &id, append).await
        }
    }

    /// Up to `limit` records with `seq > after_seq`, in order (JSONL export pages).
    pub fn export_audit(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditRecord>> {
        const OP: &str = "audit.export";
        let conn = self.conn();
        let mut out = Vec::new();
        {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {} FROM audit_log WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                    legacy::COLUMNS
                ))
                .ctx(OP, "")?;
            let mut rows = stmt
                .query(params![after_seq, sql_limit(limit)])
                .ctx(OP, "")?;
            while let Some(row) = rows.next().ctx(OP, "")? {
                out.push(legacy::into_record(legacy::raw_row(row)?)?);
            }
        }
        if out.len() < limit {
            let after = out.last().map_or(after_seq, |r| r.seq.max(after_seq));
            let remaining = sql_limit(limit - out.len());
            let mut compact = compact_records(
                &conn,
                "WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                &[&after, &remaining],
                OP,
            )?;
            link(&conn, &mut compact)?;
            out.extend(compact);
        }
        Ok(out)
    }

    /// The records carrying one `audit_id`, oldest first.
    pub fn find_audit(&self, audit_id: &str) -> Result<Vec<AuditRecord>> {
        const OP: &str = "audit.find";
        let conn = self.conn();
        let mut found = BTreeMap::new();
        {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {} FROM audit_log WHERE audit_id = ?1 ORDER BY seq",
                    legacy::COLUMNS
                ))
                .ctx(OP, audit_id)?;
            let mut rows = stmt.query([audit_id]).ctx(OP, audit_id)?;
            while let Some(row) = rows.next().ctx(OP, audit_id)? {
                let record = legacy::into_record(legacy::raw_row(row)?)?;
                found.insert(record.seq, record);
            }
        }
        // Compact rows store an audit id only when it is not `runtime:<runtime>:<request id>`;
        // the derived ones are found through the request id (the runtime may itself hold a
        // colon, so every split is tried) and kept when they derive exactly this id.
        let mut candidates = compact_records(&conn, "WHERE audit_id = ?1", &[&audit_id], OP)?;
        if let Some(rest) = audit_id.strip_prefix("runtime:") {
            for (at, _) in rest.match_indices(':') {
                let request_id = storage::request_id_value(&rest[at + 1..]);
                candidates.extend(compact_records(
                    &conn,
                    "WHERE request_id = ?1",
                    &[&request_id],
                    OP,
                )?);
            }
        }
        let mut compact: Vec<AuditRecord> = candidates
            .into_iter()
            .filter(|r| r.entry.audit_id == audit_id)
            .map(|r| (r.seq, r))
            .collect::<BTreeMap<_, _>>()
            .into_values()
            .collect();
        compact.sort_by_key(|r| r.seq);
        for record in &mut compact {
            record.prev_hash = hash_before(&conn, record.seq)?;
        }
        found.extend(compact.into_iter().map(|r| (r.seq, r)));
        Ok(found.into_values().collect())
    }

    /// Walks the whole chain and reports the first broken record, if any. An `Err` means the
    /// database could not be read; a broken chain is an `Ok` report with `first_broken` set.
    pub fn verify_audit(&self) -> Result<VerifyReport> {
        let mut conn = self.conn();
        // One snapshot for the walk and the head: the writer commits on its own connection,
        // and an append between the two reads would look like a removed record.
        let conn = conn.transaction().ctx("audit.verify", "")?;
        let mut walk = Walk {
            checked: 0,
            last_seq: 0,
            last_hash: GENESIS_HASH.to_owned(),
        };
        if let Some(report) = walk.legacy(&conn)? {
            return Ok(report);
        }
        if let Some(report) = walk.compact(&conn)? {
            return Ok(report);
        }
        let (head_seq, head_hash) = storage::head(&conn)?.unwrap_or((0, GENESIS_HASH.to_owned()));
        let first_broken =
            (head_seq != walk.last_seq || head_hash != walk.last_hash).then(|| BrokenRecord {
                seq: head_seq.max(walk.last_seq + 1),
                audit_id: None,
                problem: AuditProblem::HeadMismatch {
                    head_seq,
                    head_hash,
                    last_seq: walk.last_seq,
                    last_hash: walk.last_hash.clone(),
                },
            });
        Ok(VerifyReport {
            checked: walk.checked,
            last_seq: walk.last_seq,
            last_hash: walk.last_hash,
            first_broken,
        })
    }
}
