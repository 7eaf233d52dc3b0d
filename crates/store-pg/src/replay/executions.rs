//! Direct executions in flight on PostgreSQL (the SQLite store's `executions.rs`): the
//! durable "executing" record of a mutating request that runs without a confirmation, written
//! with the audit record of the attempt before the side effect and removed with the final
//! result and the outcome's audit record.
//!
//! Each row names the daemon running it (`host_id`). A daemon that restarts settles only its
//! own interrupted executions ([`ReplayStore::list_executions`](openphone_store::ReplayStore)
//! lists this daemon's); a retry of an identity in flight on another daemon still finds it
//! ([`find_in`] is fleet-wide) and is answered `execution_result_unknown`, never run again.

use openphone_store::{
    AuditEntry, AuditRecord, Execution, FinalResult, IdentityKey, Result, StoreError,
};
use postgres::GenericClient;
use postgres::types::Type;

use super::{
    NewFinal, Param, check_identity, corrupt, get, identity_digest, read_committed,
    record_final_sql,
};
use crate::PgStore;
use crate::error::{from_pg, is_unique_violation};

pub(super) const BEGIN: &str = "executions.begin";
pub(super) const FINISH: &str = "executions.finish";

const COLUMNS: &str = "runtime, runtime_session_id, tool, params_digest, idempotency_key, \
    request_id, attempt_json, started_at_ms, host_id";

fn from_row(row: &postgres::Row, op: &'static str) -> Result<(String, Execution)> {
    let identity = IdentityKey {
        runtime: get(row, "runtime", op, "")?,
        runtime_session_id: get(row, "runtime_session_id", op, "")?,
        tool: get(row, "tool", op, "")?,
        params_digest: get(row, "params_digest", op, "")?,
        idempotency_key: get(row, "idempotency_key", op, "")?,
    };
    let id = identity.describe();
    let text: String = get(row, "attempt_json", op, &id)?;
    let attempt = serde_json::from_str(&text).map_err(|e| corrupt(op, &id, e))?;
    let host_id = get(row, "host_id", op, &id)?;
    Ok((
        host_id,
        Execution {
            request_id: get(row, "request_id", op, &id)?,
            attempt,
            started_at_ms: get(row, "started_at_ms", op, &id)?,
            identity,
        },
    ))
}

/// The execution in flight under `identity`, whichever daemon runs it.
pub(super) fn find_in(
    client: &mut impl GenericClient,
    identity: &IdentityKey,
) -> Result<Option<Execution>> {
    const OP: &str = "executions.find";
    let key = identity_digest(identity)?;
    let rows = client
        .query_typed(
            &format!("SELECT {COLUMNS} FROM executions WHERE identity = $1"),
            &[(&key, Type::BYTEA)],
        )
        .map_err(|e| from_pg(OP, &identity.describe(), &e))?;
    rows.first()
        .map(|row| from_row(row, OP).map(|(_, e)| e))
        .transpose()
}

/// Executions in flight, oldest first, with the daemon running each: of `host_id` only, or
/// of the whole fleet.
pub(super) fn list_in(
    client: &mut impl GenericClient,
    host_id: Option<&str>,
) -> Result<Vec<(String, Execution)>> {
    const OP: &str = "executions.list";
    let rows = client
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM executions WHERE $1::text IS NULL OR host_id = $1 \
                 ORDER BY started_at_ms, request_id"
            ),
            &[(&host_id, Type::TEXT)],
        )
        .map_err(|e| from_pg(OP, host_id.unwrap_or(""), &e))?;
    rows.iter().map(|row| from_row(row, OP)).collect()
}

impl PgStore {
    /// Every execution without a recorded outcome in the whole fleet, oldest first, each with
    /// the `host_id` of the daemon that began it (operator views). The trait's
    /// `list_executions` lists only this daemon's: those are the ones it settles after a
    /// restart; another daemon's may be running right now.
    pub fn list_fleet_executions(&self) -> Result<Vec<(String, Execution)>> {
        self.read("executions.list", "", |client| list_in(client, None))
    }
}

/// Inserts the executing record unless the identity has a final result, a tombstone or an
/// execution in flight; reports which (1: a result or tombstone, 2: an execution) and whether
/// it inserted, in one statement.
const BEGIN_SQL: &str = "\
    WITH blocked AS ( \
        SELECT 1 AS why FROM final_results WHERE identity = $1 \
        UNION ALL SELECT 1 FROM final_tombstones WHERE identity = $1 \
        UNION ALL SELECT 2 FROM executions WHERE identity = $1), \
    inserted AS ( \
        INSERT INTO executions (identity, runtime, runtime_session_id, tool, params_digest, \
            idempotency_key, request_id, attempt_json, started_at_ms, host_id) \
        SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 \
        WHERE NOT EXISTS (SELECT 1 FROM blocked) \
        RETURNING 1) \
    SELECT (SELECT min(why) FROM blocked) AS why, (SELECT count(*) FROM inserted) AS inserted";

/// The write of `begin_execution`, checked and encoded before it is queued.
#[derive(Debug)]
pub(super) struct Begin {
    execution: Execution,
    key: Vec<u8>,
    attempt_json: String,
    host_id: String,
}

impl Begin {
    pub(super) fn new(execution: Execution, host_id: &str) -> Result<Begin> {
        check_identity(&execution.identity)?;
        let id = execution.identity.describe();
        let attempt_json =
            serde_json::to_string(&execution.attempt).map_err(|e| corrupt(BEGIN, &id, e))?;
        Ok(Begin {
            key: identity_digest(&execution.identity)?,
            execution,
            attempt_json,
            host_id: host_id.to_owned(),
        })
    }

    pub(super) fn id(&self) -> String {
        self.execution.identity.describe()
    }

    /// Refused with [`StoreError::AlreadyExists`] (`final_results` or `executions`, as the
    /// SQLite store) when the identity was answered or is in flight, here or on another daemon.
    pub(super) fn run(&self, tx: &mut postgres::Transaction<'_>) -> Result<AuditRecord> {
        read_committed(tx, BEGIN)?;
        let (e, id) = (&self.execution, self.id());
        let i = &e.identity;
        let params: [Param<'_>; 10] = [
            (&self.key, Type::BYTEA),
            (&i.runtime, Type::TEXT),
            (&i.runtime_session_id, Type::TEXT),
            (&i.tool, Type::TEXT),
            (&i.params_digest, Type::TEXT),
            (&i.idempotency_key, Type::TEXT),
            (&e.request_id, Type::TEXT),
            (&self.attempt_json, Type::TEXT),
            (&e.started_at_ms, Type::INT8),
            (&self.host_id, Type::TEXT),
        ];
        let rows = tx.query_typed(BEGIN_SQL, &params).map_err(|err| {
            // Another daemon began it after this statement's snapshot: its row lock made this
            // insert wait, and its commit makes it a duplicate.
            if is_unique_violation(&err) {
                already("executions", &id)
            } else {
                from_pg(BEGIN, &id, &err)
            }
        })?;
        let row = rows
            .first()
            .ok_or_else(|| corrupt(BEGIN, &id, "no answer"))?;
        match get::<Option<i32>>(row, "why", BEGIN, &id)? {
            Some(1) => return Err(already("final_results", &id)),
            Some(_) => return Err(already("executions", &id)),
            None => {}
        }
        if get::<i64>(row, "inserted", BEGIN, &id)? != 1 {
            return Err(corrupt(BEGIN, &id, "the executing record was not written"));
        }
        crate::audit::append_in(tx, &self.host_id, &e.attempt)
    }
}

fn already(table: &'static str, id: &str) -> StoreError {
    StoreError::AlreadyExists {
        table,
        id: id.to_owned(),
    }
}

/// The write of `finish_execution`: the final result (first wins), read back, and the removal
/// of the executing record (whichever daemon began it: settling another daemon's interrupted
/// execution removes it too) in one statement, then the outcome's audit record.
#[derive(Debug)]
pub(super) struct Finish {
    new: NewFinal,
    outcome: AuditEntry,
    host_id: String,
    sql: String,
}

impl Finish {
    pub(super) fn new(new: NewFinal, outcome: AuditEntry, host_id: &str) -> Finish {
        Finish {
            new,
            outcome,
            host_id: host_id.to_owned(),
            sql: record_final_sql(", removed AS (DELETE FROM executions WHERE identity = $1)"),
        }
    }

    pub(super) fn run(&self, tx: &mut postgres::Transaction<'_>) -> Result<FinalResult> {
        read_committed(tx, FINISH)?;
        let stored = self.new.run(tx, FINISH, &self.sql)?;
        crate::audit::append_in(tx, &self.host_id, &self.outcome)?;
        Ok(stored)
    }
}
