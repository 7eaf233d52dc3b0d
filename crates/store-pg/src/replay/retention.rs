//! Retention of stored results on PostgreSQL (the SQLite store's `retention.rs`: the same
//! policy, floor, batches and tombstones; see its module docs).
//!
//! One prune is one statement: the final results past the policy are chosen (newest first by
//! a window over `recorded_at_ms`, `seq`), deleted, and their tombstones written from the
//! deleted rows (`status`/`error_code` were copied out when the result was recorded), then the
//! request-id entries past the age limit are deleted, oldest first, at most [`PRUNE_BATCH`] of
//! each.
//!
//! # Several daemons at once
//!
//! Every daemon of a fleet prunes on its housekeeping tick. A prune first takes a transaction
//! advisory lock of the schema without waiting: while one daemon prunes, another's prune
//! returns an empty report at once (no wait on the writer, no double counting, no error), and
//! the rows are pruned once. The prune statement runs after the lock is taken, at READ
//! COMMITTED, so it sees every earlier prune's commit.

use openphone_protocol::{ErrorCode, ToolResult};
use openphone_store::{FinalResult, IdentityKey, PRUNE_BATCH, PruneReport, Result, Retention};
use postgres::types::Type;
use serde_json::{Map, Value};

use super::{corrupt, get};
use crate::PgStore;
use crate::error::PgContext;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// The §10.3 floor: entries younger than this are never pruned.
const MIN_RETENTION_MS: i64 = DAY_MS;
/// The §10.3 floor: this many of the most recent entries are never pruned.
const MIN_RETAINED: usize = 128;

const OP: &str = "replay.prune";

/// What is left of a pruned final result.
#[derive(Debug)]
pub(super) struct Tombstone {
    pub(super) status: Option<String>,
    pub(super) error_code: Option<String>,
    pub(super) recorded_at_ms: i64,
    pub(super) pruned_at_ms: i64,
}

impl Tombstone {
    /// The answer for a tombstoned identity, as a stored final result: status `error`, code
    /// `execution_result_unknown`, saying the request was answered and its result discarded.
    pub(super) fn answer(self, identity: &IdentityKey, request_id: String) -> Result<FinalResult> {
        let outcome = match (&self.status, &self.error_code) {
            (Some(s), Some(c)) => format!("status {s}, {c}"),
            (Some(s), None) => format!("status {s}"),
            _ => "status unknown".to_owned(),
        };
        let mut details = Map::new();
        details.insert("result_discarded".to_owned(), Value::Bool(true));
        details.insert("original_status".to_owned(), self.status.into());
        details.insert("original_error_code".to_owned(), self.error_code.into());
        details.insert("recorded_at_ms".to_owned(), self.recorded_at_ms.into());
        details.insert("discarded_at_ms".to_owned(), self.pruned_at_ms.into());
        let answer = ToolResult::failure(
            &identity.runtime,
            &request_id,
            ErrorCode::ExecutionResultUnknown,
            format!(
                "this request was already answered ({outcome}); its stored result was \
                 discarded after the retention period, so it is not run again"
            ),
        )
        .with_details(details);
        let result = serde_json::to_value(answer)
            .map_err(|e| corrupt("final_tombstones.find", &request_id, e))?;
        Ok(FinalResult {
            identity: identity.clone(),
            request_id,
            result,
            recorded_at_ms: self.recorded_at_ms,
        })
    }
}

/// `$1` keep, `$2` floor cutoff, `$3` age cutoff, `$4` max bytes, `$5` batch, `$6` now.
const PRUNE_SQL: &str = "
WITH ranked AS (
    SELECT seq, recorded_at_ms,
           ROW_NUMBER() OVER w AS rank,
           SUM(octet_length(result_json)) OVER w AS running
    FROM final_results
    WINDOW w AS (ORDER BY recorded_at_ms DESC, seq DESC ROWS UNBOUNDED PRECEDING)
),
doomed AS (
    SELECT seq FROM ranked
    WHERE rank > $1 AND recorded_at_ms < $2 AND (recorded_at_ms < $3 OR running > $4)
    ORDER BY recorded_at_ms, seq
    LIMIT $5
),
gone AS (
    DELETE FROM final_results f USING doomed d WHERE f.seq = d.seq
    RETURNING f.identity, f.request_id, f.status, f.error_code, f.recorded_at_ms,
              octet_length(f.result_json) AS bytes
),
tombs AS (
    INSERT INTO final_tombstones (identity, request_id, status, error_code, recorded_at_ms,
                                  pruned_at_ms)
    SELECT identity, request_id, status, error_code, recorded_at_ms, $6 FROM gone
    ON CONFLICT (identity) DO UPDATE SET request_id = excluded.request_id,
        status = excluded.status, error_code = excluded.error_code,
        recorded_at_ms = excluded.recorded_at_ms, pruned_at_ms = excluded.pruned_at_ms
),
kept_ids AS (
    SELECT seq FROM request_ids ORDER BY recorded_at_ms DESC, seq DESC LIMIT $1
),
old_ids AS (
    SELECT seq FROM request_ids
    WHERE recorded_at_ms < $3 AND seq NOT IN (SELECT seq FROM kept_ids)
    ORDER BY recorded_at_ms, seq
    LIMIT $5
),
ids AS (
    DELETE FROM request_ids r USING old_ids o WHERE r.seq = o.seq RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS final_results,
       (SELECT coalesce(sum(bytes), 0)::bigint FROM gone) AS result_bytes,
       (SELECT count(*) FROM ids) AS request_ids";

/// Prunes under `retention` raised to the §10.3 floor (see the module docs).
pub(super) fn prune(store: &PgStore, now_ms: i64, retention: Retention) -> Result<PruneReport> {
    let keep = i64::try_from(retention.keep_at_least.max(MIN_RETAINED)).unwrap_or(i64::MAX);
    let floor_cutoff = now_ms.saturating_sub(MIN_RETENTION_MS);
    let age_cutoff = now_ms.saturating_sub(retention.max_age_ms.max(MIN_RETENTION_MS));
    let max_bytes = i64::try_from(retention.max_bytes).unwrap_or(i64::MAX);
    let batch = i64::try_from(PRUNE_BATCH).unwrap_or(i64::MAX);
    store.write(OP, "", move |tx| {
        // Prunes exclude each other by the lock; the hot path's writes only add rows a prune
        // leaves alone (too young), so READ COMMITTED is enough and takes no read locks.
        super::read_committed(tx, OP)?;
        let locked: bool = tx
            .query_one(
                "SELECT pg_try_advisory_xact_lock(\
                 hashtextextended('openphone:replay.prune:' || current_schema(), 0))",
                &[],
            )
            .ctx(OP, "lock")?
            .try_get(0)
            .ctx(OP, "lock")?;
        if !locked {
            // Another daemon is pruning these tables right now.
            return Ok(PruneReport::default());
        }
        let row = tx
            .query_typed_one(
                PRUNE_SQL,
                &[
                    (&keep, Type::INT8),
                    (&floor_cutoff, Type::INT8),
                    (&age_cutoff, Type::INT8),
                    (&max_bytes, Type::INT8),
                    (&batch, Type::INT8),
                    (&now_ms, Type::INT8),
                ],
            )
            .ctx(OP, "final_results")?;
        let count = |column: &str| -> Result<usize> {
            let n: i64 = get(&row, column, OP, "")?;
            Ok(usize::try_from(n).unwrap_or(0))
        };
        let (final_results, request_ids) = (count("final_results")?, count("request_ids")?);
        let bytes: i64 = get(&row, "result_bytes", OP, "")?;
        Ok(PruneReport {
            final_results,
            result_bytes: u64::try_from(bytes).unwrap_or(0),
            request_ids,
            more: final_results == PRUNE_BATCH || request_ids == PRUNE_BATCH,
        })
    })
}
