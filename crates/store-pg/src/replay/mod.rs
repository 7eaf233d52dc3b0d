//! [`ReplayStore`] on PostgreSQL: final results for replay, the request-id index
//! (`runtime-protocol.md` §10.2, §10.3), direct executions in flight ([`executions`]) and
//! retention with tombstones ([`retention`]); the port of the SQLite store's `replay.rs`,
//! `executions.rs` and `retention.rs`, with the same behaviour and errors.
//!
//! # In a fleet
//!
//! Replay is shared by the fleet: rows are keyed by the request's identity key (as its
//! SHA-256, [`identity_digest`]), so a retry that reaches another daemon finds the same final
//! result, tombstone or execution in flight, and is answered from it, never run a second time.
//! Two daemons beginning one identity at once cannot both begin: the second's transaction
//! sees the first's row (or is aborted by PostgreSQL's serializable isolation and run again,
//! and then sees it) and is refused as the SQLite store refuses a second begin.
//!
//! # One round of statements
//!
//! The bridge calls these on every mutating request, so each is one statement (plus the audit
//! append where it audits), sent with `query_typed` (parse, bind and execute in one round trip,
//! no prepared statement to keep): the checks and the write of `begin_execution`, the final
//! result, its read-back and the removal of the execution of `finish_execution`, the lookup and
//! the insert of `remember_request` are each a single statement with data-modifying `WITH`
//! clauses.
//!
//! # READ COMMITTED
//!
//! These writes run at READ COMMITTED ([`read_committed`]), not the writer's default
//! SERIALIZABLE: each is one statement whose reads and writes share one snapshot, and what
//! must be unique is unique by a primary key, so two daemons racing for one identity are
//! ordered by the key's row lock (the second one's insert waits, then finds the first's row,
//! or fails with a unique violation answered as the SQLite store answers a second begin).
//! SERIALIZABLE would add only false conflicts: its read locks on index pages are page-wide,
//! so two daemons beginning *different* identities on one index page abort each other and run
//! again (once, in an early run of `benches/replay.rs`, until a write ran out of the writer's
//! 10 retries). Where a concurrent insert committed after the statement's snapshot (the insert
//! did nothing and the read found nothing), the row is read again in a second statement, the
//! only case with two.

mod executions;
mod retention;

use openphone_store::{
    AuditEntry, AuditRecord, BoxFuture, Execution, FinalResult, IdentityKey, PruneReport,
    RememberRequest, ReplayStore, RequestCheck, RequestEntry, Result, Retention, Scope, StoreError,
};
use postgres::GenericClient;
use postgres::Row;
use postgres::types::{ToSql, Type};
use serde_json::Value;

use crate::PgStore;
use crate::error::{PgContext, from_pg};

/// A typed parameter of a `query_typed` statement.
pub(crate) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// Rejects empty parts and a digest that is not 64 lowercase hex ([`IdentityKey::check`]).
pub(crate) fn check_identity(identity: &IdentityKey) -> Result<()> {
    identity.check()
}

/// The key of an identity's rows: SHA-256 of `canonical_json([runtime, runtime_session_id,
/// tool, params_digest, idempotency_key])`, the SQLite store's tombstone key.
pub(crate) fn identity_digest(identity: &IdentityKey) -> Result<Vec<u8>> {
    openphone_store::identity_digest(identity).map(Vec::from)
}

/// Runs the rest of the transaction at READ COMMITTED (see the module docs); the first
/// statement of a write.
pub(crate) fn read_committed(tx: &mut postgres::Transaction<'_>, op: &'static str) -> Result<()> {
    tx.batch_execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .ctx(op, "")
}

/// [`StoreError::Corrupt`]: a stored value that does not decode.
pub(crate) fn corrupt(op: &'static str, id: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        op,
        id: id.to_owned(),
        detail: detail.to_string(),
    }
}

/// One column of a row, its decoding failure named.
pub(crate) fn get<'a, T: postgres::types::FromSql<'a>>(
    row: &'a Row,
    column: &str,
    op: &'static str,
    id: &str,
) -> Result<T> {
    row.try_get(column).ctx(op, id)
}

/// The stored final result (or the tombstone's answer) under `key`: one statement over both
/// tables, the result first (a result recorded again takes precedence over a tombstone).
const FIND_FINAL: &str = "\
    SELECT 0 AS src, request_id, result_json, recorded_at_ms, NULL::text AS status, \
           NULL::text AS error_code, NULL::bigint AS pruned_at_ms \
    FROM final_results WHERE identity = $1 \
    UNION ALL \
    SELECT 1, request_id, NULL, recorded_at_ms, status, error_code, pruned_at_ms \
    FROM final_tombstones WHERE identity = $1 \
    ORDER BY 1 LIMIT 1";

pub(crate) fn find_final_in(
    client: &mut impl GenericClient,
    identity: &IdentityKey,
) -> Result<Option<FinalResult>> {
    const OP: &str = "final_results.find";
    let key = identity_digest(identity)?;
    let id = identity.describe();
    let row = client
        .query_typed(FIND_FINAL, &[(&key, Type::BYTEA)])
        .ctx(OP, &id)?
        .into_iter()
        .next();
    let Some(row) = row else {
        return Ok(None);
    };
    let request_id: String = get(&row, "request_id", OP, &id)?;
    let recorded_at_ms: i64 = get(&row, "recorded_at_ms", OP, &id)?;
    if get::<i32>(&row, "src", OP, &id)? == 0 {
        let text: String = get(&row, "result_json", OP, &id)?;
        let result = serde_json::from_str(&text).map_err(|e| corrupt(OP, &id, e))?;
        return Ok(Some(FinalResult {
            identity: identity.clone(),
            request_id,
            result,
            recorded_at_ms,
        }));
    }
    let tombstone = retention::Tombstone {
        status: get(&row, "status", OP, &id)?,
        error_code: get(&row, "error_code", OP, &id)?,
        recorded_at_ms,
        pruned_at_ms: get(&row, "pruned_at_ms", OP, &id)?,
    };
    tombstone.answer(identity, request_id).map(Some)
}

/// Inserts a final result unless one is already recorded under the key (the first final
/// result wins) and returns the stored one, in one statement; `also` is appended to its `WITH`
/// list (a further data-modifying clause of the caller's, e.g. the removal of the execution).
fn record_final_sql(also: &str) -> String {
    format!(
        "WITH inserted AS ( \
             INSERT INTO final_results (identity, runtime, runtime_session_id, tool, \
                 params_digest, idempotency_key, request_id, result_json, status, error_code, \
                 recorded_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (identity) DO NOTHING \
             RETURNING request_id, result_json, recorded_at_ms){also} \
         SELECT request_id, result_json, recorded_at_ms FROM inserted \
         UNION ALL \
         SELECT request_id, result_json, recorded_at_ms FROM final_results WHERE identity = $1 \
         LIMIT 1"
    )
}

/// A final result to record, checked and encoded before the write is queued.
#[derive(Debug, Clone)]
pub(crate) struct NewFinal {
    pub(crate) identity: IdentityKey,
    key: Vec<u8>,
    request_id: String,
    text: String,
    status: Option<String>,
    error_code: Option<String>,
    now_ms: i64,
}

impl NewFinal {
    pub(crate) fn new(
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        now_ms: i64,
    ) -> Result<NewFinal> {
        check_identity(identity)?;
        Ok(NewFinal {
            key: identity_digest(identity)?,
            identity: identity.clone(),
            request_id: request_id.to_owned(),
            text: result.to_string(),
            status: result
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_owned),
            error_code: result
                .pointer("/error/code")
                .and_then(Value::as_str)
                .map(str::to_owned),
            now_ms,
        })
    }

    /// The parameters `$1`..`$11` of [`record_final_sql`].
    fn params(&self) -> [Param<'_>; 11] {
        let i = &self.identity;
        [
            (&self.key, Type::BYTEA),
            (&i.runtime, Type::TEXT),
            (&i.runtime_session_id, Type::TEXT),
            (&i.tool, Type::TEXT),
            (&i.params_digest, Type::TEXT),
            (&i.idempotency_key, Type::TEXT),
            (&self.request_id, Type::TEXT),
            (&self.text, Type::TEXT),
            (&self.status, Type::TEXT),
            (&self.error_code, Type::TEXT),
            (&self.now_ms, Type::INT8),
        ]
    }

    /// Records it with `sql` (from [`record_final_sql`]) and reads back the stored result.
    fn run(
        &self,
        tx: &mut postgres::Transaction<'_>,
        op: &'static str,
        sql: &str,
    ) -> Result<FinalResult> {
        let id = self.identity.describe();
        let mut rows = tx.query_typed(sql, &self.params()).ctx(op, &id)?;
        if rows.is_empty() {
            // Recorded by another daemon after this statement's snapshot (READ COMMITTED):
            // the insert did nothing, and a new statement sees that row.
            rows = tx
                .query_typed(
                    "SELECT request_id, result_json, recorded_at_ms FROM final_results \
                     WHERE identity = $1",
                    &[(&self.key, Type::BYTEA)],
                )
                .ctx(op, &id)?;
        }
        let row = rows.first().ok_or_else(|| StoreError::NotFound {
            table: "final_results",
            id: id.clone(),
        })?;
        let text: String = get(row, "result_json", op, &id)?;
        Ok(FinalResult {
            identity: self.identity.clone(),
            request_id: get(row, "request_id", op, &id)?,
            result: serde_json::from_str(&text).map_err(|e| corrupt(op, &id, e))?,
            recorded_at_ms: get(row, "recorded_at_ms", op, &id)?,
        })
    }
}

/// Records a final result inside the caller's transaction (the first final result under the
/// key wins) and returns the stored one: for the confirmations domain, which records the
/// result of an approved request in its own write, as the SQLite store's `record_final_in`.
#[allow(dead_code)] // Called by the confirmations domain.
pub(crate) fn record_final_in(
    tx: &mut postgres::Transaction<'_>,
    identity: &IdentityKey,
    request_id: &str,
    result: &Value,
    now_ms: i64,
) -> Result<FinalResult> {
    NewFinal::new(identity, request_id, result, now_ms)?.run(
        tx,
        "final_results.record",
        &record_final_sql(""),
    )
}

/// The request-id index: insert unless present, and read what was there before, in one
/// statement (the `SELECT` sees the table as it was before the insert).
const REMEMBER_SQL: &str = "\
    WITH inserted AS ( \
        INSERT INTO request_ids (runtime, runtime_session_id, request_id, tool, params_digest, \
            recorded_at_ms) \
        VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING 1) \
    SELECT false AS is_new, tool, params_digest, recorded_at_ms FROM request_ids \
    WHERE runtime = $1 AND runtime_session_id = $2 AND request_id = $3 \
    UNION ALL \
    SELECT true, NULL, NULL, NULL FROM inserted";

const REMEMBER: &str = "request_ids.remember";

/// The write of `remember_request` (its arguments checked by [`RememberRequest::new`]).
fn remember_in(job: &RememberRequest, tx: &mut postgres::Transaction<'_>) -> Result<RequestCheck> {
    read_committed(tx, REMEMBER)?;
    let rows = tx
        .query_typed(
            REMEMBER_SQL,
            &[
                (&job.scope.runtime, Type::TEXT),
                (&job.scope.runtime_session_id, Type::TEXT),
                (&job.request_id, Type::TEXT),
                (&job.tool, Type::TEXT),
                (&job.params_digest, Type::TEXT),
                (&job.now_ms, Type::INT8),
            ],
        )
        .ctx(REMEMBER, &job.request_id)?;
    let entry = match rows.first() {
        Some(row) if get::<bool>(row, "is_new", REMEMBER, &job.request_id)? => {
            return Ok(RequestCheck::New);
        }
        Some(row) => RequestEntry {
            scope: job.scope.clone(),
            request_id: job.request_id.clone(),
            tool: get(row, "tool", REMEMBER, &job.request_id)?,
            params_digest: get(row, "params_digest", REMEMBER, &job.request_id)?,
            recorded_at_ms: get(row, "recorded_at_ms", REMEMBER, &job.request_id)?,
        },
        // Remembered by another daemon after this statement's snapshot: read it now.
        None => find_request_in(tx, &job.scope, &job.request_id)?.ok_or_else(|| {
            StoreError::NotFound {
                table: "request_ids",
                id: job.request_id.clone(),
            }
        })?,
    };
    Ok(job.against(entry))
}

fn find_request_in(
    client: &mut impl GenericClient,
    scope: &Scope,
    request_id: &str,
) -> Result<Option<RequestEntry>> {
    const OP: &str = "request_ids.find";
    let rows = client
        .query_typed(
            "SELECT tool, params_digest, recorded_at_ms FROM request_ids \
             WHERE runtime = $1 AND runtime_session_id = $2 AND request_id = $3",
            &[
                (&scope.runtime, Type::TEXT),
                (&scope.runtime_session_id, Type::TEXT),
                (&request_id, Type::TEXT),
            ],
        )
        .ctx(OP, request_id)?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    Ok(Some(RequestEntry {
        scope: scope.clone(),
        request_id: request_id.to_owned(),
        tool: get(row, "tool", OP, request_id)?,
        params_digest: get(row, "params_digest", OP, request_id)?,
        recorded_at_ms: get(row, "recorded_at_ms", OP, request_id)?,
    }))
}

impl ReplayStore for PgStore {
    fn begin_execution(&self, execution: &Execution) -> Result<AuditRecord> {
        let begin = executions::Begin::new(execution.clone(), self.host_id())?;
        let id = begin.id();
        self.write(executions::BEGIN, &id, move |tx| begin.run(tx))
    }

    fn begin_execution_async<'a>(
        &'a self,
        execution: Execution,
    ) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async move {
            let begin = executions::Begin::new(execution, self.host_id())?;
            let id = begin.id();
            self.write_async(executions::BEGIN, &id, move |tx| begin.run(tx))
                .await
        })
    }

    fn finish_execution(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        outcome: &AuditEntry,
        now_ms: i64,
    ) -> Result<FinalResult> {
        let finish = executions::Finish::new(
            NewFinal::new(identity, request_id, result, now_ms)?,
            outcome.clone(),
            self.host_id(),
        );
        self.write(executions::FINISH, &identity.describe(), move |tx| {
            finish.run(tx)
        })
    }

    fn finish_execution_async<'a>(
        &'a self,
        identity: IdentityKey,
        request_id: String,
        result: Value,
        outcome: AuditEntry,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<FinalResult>> {
        Box::pin(async move {
            let finish = executions::Finish::new(
                NewFinal::new(&identity, &request_id, &result, now_ms)?,
                outcome,
                self.host_id(),
            );
            self.write_async(executions::FINISH, &identity.describe(), move |tx| {
                finish.run(tx)
            })
            .await
        })
    }

    fn find_execution(&self, identity: &IdentityKey) -> Result<Option<Execution>> {
        let identity = identity.clone();
        self.read("executions.find", &identity.describe(), move |client| {
            executions::find_in(client, &identity)
        })
    }

    /// This daemon's executions without a recorded outcome, oldest first: at start-up, the
    /// ones it died during. Other daemons' executions are theirs to settle (they may be
    /// running them now); see [`PgStore::list_fleet_executions`].
    fn list_executions(&self) -> Result<Vec<Execution>> {
        let host_id = self.host_id().to_owned();
        self.read("executions.list", self.host_id(), move |client| {
            executions::list_in(client, Some(&host_id))
                .map(|found| found.into_iter().map(|(_, e)| e).collect())
        })
    }

    fn record_final(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        now_ms: i64,
    ) -> Result<FinalResult> {
        const OP: &str = "final_results.record";
        let new = NewFinal::new(identity, request_id, result, now_ms)?;
        let sql = record_final_sql("");
        self.write(OP, &identity.describe(), move |tx| {
            read_committed(tx, OP)?;
            new.run(tx, OP, &sql)
        })
    }

    fn find_final(&self, identity: &IdentityKey) -> Result<Option<FinalResult>> {
        let identity = identity.clone();
        self.read("final_results.find", &identity.describe(), move |client| {
            find_final_in(client, &identity)
        })
    }

    fn remember_request(
        &self,
        scope: &Scope,
        request_id: &str,
        tool: &str,
        params_digest: &str,
        now_ms: i64,
    ) -> Result<RequestCheck> {
        let job = RememberRequest::new(scope, request_id, tool, params_digest, now_ms)?;
        self.write(REMEMBER, request_id, move |tx| remember_in(&job, tx))
    }

    fn remember_request_async<'a>(
        &'a self,
        scope: &'a Scope,
        request_id: &'a str,
        tool: &'a str,
        params_digest: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<RequestCheck>> {
        Box::pin(async move {
            let job = RememberRequest::new(scope, request_id, tool, params_digest, now_ms)?;
            self.write_async(REMEMBER, request_id, move |tx| remember_in(&job, tx))
                .await
        })
    }

    fn find_request(&self, scope: &Scope, request_id: &str) -> Result<Option<RequestEntry>> {
        let (scope, request_id) = (scope.clone(), request_id.to_owned());
        self.read("request_ids.find", &request_id.clone(), move |client| {
            find_request_in(client, &scope, &request_id)
        })
    }

    fn count_final_results(&self) -> Result<usize> {
        self.read("final_results.count", "", |client| {
            let row = client
                .query_one("SELECT count(*) FROM final_results", &[])
                .map_err(|e| from_pg("final_results.count", "", &e))?;
            let n: i64 = get(&row, "count", "final_results.count", "")?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
    }

    fn prune_replay(&self, now_ms: i64, retention: Retention) -> Result<PruneReport> {
        retention::prune(self, now_ms, retention)
    }
}
