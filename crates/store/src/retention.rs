//! Retention of stored results: how long final results (for replay) and the request-id index
//! are kept, and what is left of a result once it is pruned.
//!
//! # Policy
//!
//! [`Store::prune_replay`](crate::ReplayStore::prune_replay) removes, oldest first and at most [`PRUNE_BATCH`] of each per call:
//!
//! - final results older than [`Retention::max_age_ms`] (default 7 days);
//! - the oldest final results beyond [`Retention::max_bytes`] (default 64 MiB, counted as the
//!   bytes of their stored result JSON, newest first);
//! - request-id index entries older than `max_age_ms`;
//!
//! but never an entry younger than 24 hours nor one of the [`Retention::keep_at_least`] most
//! recent (at least 128): the `runtime-protocol.md` §10.3 floor, which a weaker policy is
//! raised to (so under a burst of more than 64 MiB in a day the cap is exceeded until the
//! results age). It never touches the audit log: the chain, `verify` and `export` are the
//! same before and after.
//!
//! # Tombstones: a pruned result is never run again
//!
//! The bridge replays a keyed retry (and any retry of a mutating request) from its final
//! result, found by identity key with [`Store::find_final`](crate::ReplayStore::find_final); without one it would execute the
//! request again. So pruning a final result leaves a **tombstone** in `final_tombstones`: the
//! SHA-256 of the identity key (`canonical_json([runtime, runtime_session_id, tool,
//! params_digest, idempotency_key])`), the request id, the original status and error code, and
//! when it was recorded and pruned (~100 bytes). [`Store::find_final`](crate::ReplayStore::find_final) answers a tombstoned
//! identity with a final result of status `error`, code `execution_result_unknown`, whose
//! message says the request was already answered and its result discarded, and whose
//! `details` carry `original_status`, `original_error_code`, `recorded_at_ms`,
//! `discarded_at_ms` and `result_discarded: true`. The bridge replays that like any recorded
//! result (`replayed: true`): the retry is answered and nothing executes. A direct execution
//! cannot begin under a tombstoned identity either. Tombstones are kept as long as the audit
//! log (each is smaller than the audit record of the request it stands for); a final result
//! recorded again under the same identity takes precedence over its tombstone.
//!
//! The request-id index only detects a request id reused for another body
//! (`idempotency_conflict`); once an entry is pruned such a request is new, as §10.3 allows
//! ("conflict detection covers what is retained"). It is not a re-execution: a different body
//! has a different identity key.

use openphone_protocol::{ErrorCode, ToolResult, canonical_sha256_hex};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value, json};

use crate::SqliteStore;
use crate::audit_storage::hex32;
use crate::error::{Result, SqlContext, StoreError};
use crate::records::{FinalResult, IdentityKey};
use crate::rows::Cached;
use crate::wire::sql_limit;

const HOUR_MS: i64 = 60 * 60 * 1000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// The §10.3 floor: entries younger than this are never pruned.
pub const MIN_RETENTION_MS: i64 = DAY_MS;
/// The §10.3 floor: this many of the most recent entries are never pruned.
pub const MIN_RETAINED: usize = 128;

/// How long stored results are kept (see the module docs of `retention.rs`). Values below the
/// §10.3 floor (24 h, 128 entries) are raised to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Entries older than this are pruned (default 7 days; at least 24 h).
    pub max_age_ms: i64,
    /// When the stored results' bytes exceed this, the oldest are pruned until they fit
    /// (default 64 MiB), within the floor.
    pub max_bytes: u64,
    /// The most recent entries always kept (default and at least 128).
    pub keep_at_least: usize,
}

impl Default for Retention {
    /// 7 days, 64 MiB, the 128 most recent entries.
    fn default() -> Retention {
        Retention {
            max_age_ms: 7 * DAY_MS,
            max_bytes: 64 * 1024 * 1024,
            keep_at_least: MIN_RETAINED,
        }
    }
}

impl Retention {
    /// Never below the §10.3 floor.
    fn floor(self) -> Retention {
        Retention {
            max_age_ms: self.max_age_ms.max(MIN_RETENTION_MS),
            max_bytes: self.max_bytes,
            keep_at_least: self.keep_at_least.max(MIN_RETAINED),
        }
    }
}

/// At most this many final results and as many request-id entries go in one prune (one
/// write: the writer is not held up for long; call again while [`PruneReport::more`]).
pub const PRUNE_BATCH: usize = 2_000;

/// What a prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Final results removed (each leaves a tombstone).
    pub final_results: usize,
    /// Bytes of result JSON they held.
    pub result_bytes: u64,
    /// Request-id index entries removed.
    pub request_ids: usize,
    /// A batch was full: more may be due (prune again).
    pub more: bool,
}

/// The key of an identity's tombstone (and of all its rows on PostgreSQL): SHA-256 of
/// `canonical_json([runtime, runtime_session_id, tool, params_digest, idempotency_key])`.
#[doc(hidden)]
pub fn identity_digest(identity: &IdentityKey) -> Result<[u8; 32]> {
    let parts = json!([
        identity.runtime,
        identity.runtime_session_id,
        identity.tool,
        identity.params_digest,
        identity.idempotency_key,
    ]);
    // The digest of the canonical JSON, written into the hash (no intermediate text).
    let hex = canonical_sha256_hex(&parts).map_err(|e| StoreError::Invalid {
        what: "identity key",
        detail: e.to_string(),
    })?;
    hex32(&hex).ok_or_else(|| {
        StoreError::corrupt("final_tombstones.key", &identity.describe(), "not a digest")
    })
}

/// The answer for a tombstoned identity, as a stored final result.
pub(crate) fn find_tombstone_in(
    conn: &Connection,
    identity: &IdentityKey,
) -> Result<Option<FinalResult>> {
    const OP: &str = "final_tombstones.find";
    // Until retention has pruned something there is no tombstone: one cheap probe spares the
    // identity digest on every miss (every new request looks here twice).
    let any: bool = conn
        .row_cached(
            "SELECT EXISTS (SELECT 1 FROM final_tombstones)",
            [],
            |row| row.get(0),
        )
        .ctx_with(OP, || identity.describe())?;
    if !any {
        return Ok(None);
    }
    let key = identity_digest(identity)?;
    let found = conn
        .prepare_cached(
            "SELECT request_id, status, error_code, recorded_at_ms, pruned_at_ms \
             FROM final_tombstones WHERE identity = ?1",
        )
        .and_then(|mut s| {
            s.query_row([&key[..]], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            })
            .optional()
        })
        .ctx_with(OP, || identity.describe())?;
    let Some((request_id, status, error_code, recorded_at_ms, pruned_at_ms)) = found else {
        return Ok(None);
    };
    let outcome = match (&status, &error_code) {
        (Some(s), Some(c)) => format!("status {s}, {c}"),
        (Some(s), None) => format!("status {s}"),
        _ => "status unknown".to_owned(),
    };
    let mut details = Map::new();
    details.insert("result_discarded".to_owned(), Value::Bool(true));
    details.insert("original_status".to_owned(), status.into());
    details.insert("original_error_code".to_owned(), error_code.into());
    details.insert("recorded_at_ms".to_owned(), recorded_at_ms.into());
    details.insert("discarded_at_ms".to_owned(), pruned_at_ms.into());
    let answer = ToolResult::failure(
        &identity.runtime,
        &request_id,
        ErrorCode::ExecutionResultUnknown,
        format!(
            "this request was already answered ({outcome}); its stored result was discarded \
             after the retention period, so it is not run again"
        ),
    )
    .with_details(details);
    let result =
        serde_json::to_value(answer).map_err(|e| StoreError::corrupt(OP, &request_id, e))?;
    Ok(Some(FinalResult {
        identity: identity.clone(),
        request_id,
        result,
        recorded_at_ms,
    }))
}

/// One final result chosen for pruning.
struct Doomed {
    rowid: i64,
    identity: IdentityKey,
    request_id: String,
    status: Option<String>,
    error_code: Option<String>,
    recorded_at_ms: i64,
    bytes: i64,
}

/// The final results the policy prunes: ranked newest first, an entry goes when it is past
/// the floor and either too old or beyond the byte budget. Only the chosen rows' JSON is
/// read (`octet_length` reads a value's size from the record header).
const DOOMED_SQL: &str = "
WITH ranked AS (
    SELECT rowid AS id, recorded_at_ms,
           ROW_NUMBER() OVER w AS rank,
           SUM(octet_length(result_json)) OVER w AS running
    FROM final_results
    WINDOW w AS (ORDER BY recorded_at_ms DESC, rowid DESC ROWS UNBOUNDED PRECEDING)
)
SELECT f.rowid, f.runtime, f.runtime_session_id, f.tool, f.params_digest, f.idempotency_key,
       f.request_id,
       CASE WHEN json_valid(f.result_json) THEN json_extract(f.result_json, '$.status') END,
       CASE WHEN json_valid(f.result_json) THEN json_extract(f.result_json, '$.error.code') END,
       f.recorded_at_ms, octet_length(f.result_json)
FROM ranked JOIN final_results f ON f.rowid = ranked.id
WHERE ranked.rank > ?1 AND ranked.recorded_at_ms < ?2
  AND (ranked.recorded_at_ms < ?3 OR ranked.running > ?4)
ORDER BY f.recorded_at_ms, f.rowid
LIMIT ?5";

fn doomed(
    conn: &Connection,
    keep: i64,
    floor_cutoff: i64,
    age_cutoff: i64,
    max_bytes: i64,
) -> Result<Vec<Doomed>> {
    const OP: &str = "replay.prune";
    let mut stmt = conn.prepare(DOOMED_SQL).ctx(OP, "final_results")?;
    let rows = stmt
        .query_map(
            params![
                keep,
                floor_cutoff,
                age_cutoff,
                max_bytes,
                sql_limit(PRUNE_BATCH)
            ],
            |row| {
                Ok(Doomed {
                    rowid: row.get(0)?,
                    identity: IdentityKey {
                        runtime: row.get(1)?,
                        runtime_session_id: row.get(2)?,
                        tool: row.get(3)?,
                        params_digest: row.get(4)?,
                        idempotency_key: row.get(5)?,
                    },
                    request_id: row.get(6)?,
                    status: row.get(7)?,
                    error_code: row.get(8)?,
                    recorded_at_ms: row.get(9)?,
                    bytes: row.get(10)?,
                })
            },
        )
        .ctx(OP, "final_results")?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .ctx(OP, "final_results")
}

fn prune_final_results(
    conn: &Connection,
    now_ms: i64,
    retention: Retention,
) -> Result<(usize, u64)> {
    const OP: &str = "replay.prune";
    let keep = sql_limit(retention.keep_at_least);
    let max_bytes = i64::try_from(retention.max_bytes).unwrap_or(i64::MAX);
    let doomed = doomed(
        conn,
        keep,
        now_ms.saturating_sub(MIN_RETENTION_MS),
        now_ms.saturating_sub(retention.max_age_ms),
        max_bytes,
    )?;
    let mut bytes = 0u64;
    for d in &doomed {
        let key = identity_digest(&d.identity)?;
        conn.prepare_cached(
            "INSERT INTO final_tombstones (identity, request_id, status, error_code, \
             recorded_at_ms, pruned_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
             ON CONFLICT (identity) DO UPDATE SET request_id = excluded.request_id, \
             status = excluded.status, error_code = excluded.error_code, \
             recorded_at_ms = excluded.recorded_at_ms, pruned_at_ms = excluded.pruned_at_ms",
        )
        .and_then(|mut s| {
            s.execute(params![
                &key[..],
                d.request_id,
                d.status,
                d.error_code,
                d.recorded_at_ms,
                now_ms
            ])
        })
        .ctx(OP, &d.identity.describe())?;
        conn.prepare_cached("DELETE FROM final_results WHERE rowid = ?1")
            .and_then(|mut s| s.execute([d.rowid]))
            .ctx(OP, &d.identity.describe())?;
        bytes += u64::try_from(d.bytes).unwrap_or(0);
    }
    Ok((doomed.len(), bytes))
}

fn prune_request_ids(conn: &Connection, cutoff: i64, keep: i64) -> Result<usize> {
    conn.exec_cached(
        "DELETE FROM request_ids WHERE rowid IN (SELECT rowid FROM request_ids \
         WHERE recorded_at_ms < ?1 AND rowid NOT IN \
         (SELECT rowid FROM request_ids ORDER BY recorded_at_ms DESC, rowid DESC LIMIT ?2) \
         ORDER BY recorded_at_ms, rowid LIMIT ?3)",
        params![cutoff, keep, sql_limit(PRUNE_BATCH)],
    )
    .ctx("replay.prune", "request_ids")
}

impl SqliteStore {
    /// Prunes stored results and the request-id index under `retention` (raised to the §10.3
    /// floor), oldest first, leaving a tombstone for every final result removed; at most
    /// [`PRUNE_BATCH`] of each in one write (call again while the report says
    /// [`more`](PruneReport::more)). The audit log is not touched. The daemon calls this
    /// periodically with its configured [`Retention`].
    pub fn prune_replay(&self, now_ms: i64, retention: Retention) -> Result<PruneReport> {
        let retention = retention.floor();
        let id_cutoff = now_ms.saturating_sub(retention.max_age_ms);
        let keep = sql_limit(retention.keep_at_least);
        self.write("replay.prune", "", move |tx| {
            let (final_results, result_bytes) = prune_final_results(tx, now_ms, retention)?;
            let request_ids = prune_request_ids(tx, id_cutoff, keep)?;
            Ok(PruneReport {
                final_results,
                result_bytes,
                request_ids,
                more: final_results == PRUNE_BATCH || request_ids == PRUNE_BATCH,
            })
        })
    }
}
