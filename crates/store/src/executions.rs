//! Direct executions in flight (`executions`): the durable "executing" record of a mutating
//! request that runs without a confirmation (`trusted_actions`, a standing approval, the
//! operator's own invoke).
//!
//! The bridge writes the record **and** the audit record of the attempt in one transaction
//! ([`Store::begin_execution`](crate::ReplayStore::begin_execution), committed with `synchronous = FULL`, so fsynced) before the
//! side effect, and removes it in the transaction that records the final result and the
//! outcome's audit record ([`Store::finish_execution`](crate::ReplayStore::finish_execution)). A record still there at start-up (the
//! process died between the side effect and its record) is settled the same way, with an
//! `execution_result_unknown` result: the request is never run again, and a keyed retry gets
//! that result. The confirmation path has the same rule through the `approved` state.

use std::borrow::Cow;

use rusqlite::{Connection, Row, params};
use serde_json::Value;

use crate::SqliteStore;
use crate::audit::{AuditEntry, AuditRecord, append_prepared_in, prepare};
use crate::audit_storage::load_interned;
use crate::error::{Result, SqlContext, StoreError};
use crate::replay::{FinalResult, IdentityKey, find_final_in, record_final_owned};
use crate::rows::Cached;
use crate::wire::{col, to_json};

/// A direct execution that has begun and has no recorded outcome yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// The request's identity key (§10.2): at most one execution per key.
    pub identity: IdentityKey,
    pub request_id: String,
    /// The audit record of the attempt (digests only), written with this record; the record
    /// that settles an interrupted execution is made from it.
    pub attempt: AuditEntry,
    pub started_at_ms: i64,
}

/// The columns, as a macro so the statements below are `concat!`ed once, not formatted per call.
macro_rules! columns {
    () => {
        "runtime, runtime_session_id, tool, params_digest, idempotency_key, \
         request_id, attempt_json, started_at_ms, attempt_proof"
    };
}

/// The identity key's columns (`?1`..`?5`).
macro_rules! where_identity {
    () => {
        "runtime = ?1 AND runtime_session_id = ?2 AND tool = ?3 \
         AND params_digest = ?4 AND idempotency_key = ?5"
    };
}

const FIND_SQL: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM executions WHERE ",
    where_identity!()
);
const LIST_SQL: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM executions ORDER BY started_at_ms, request_id"
);
const INSERT_SQL: &str = concat!(
    "INSERT INTO executions (",
    columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
);
const EXISTS_SQL: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM executions WHERE ",
    where_identity!(),
    ")"
);
const DELETE_SQL: &str = concat!("DELETE FROM executions WHERE ", where_identity!());

/// A row as read: the execution, and the key of its attempt's proof when the row names it
/// instead of carrying it.
struct Stored {
    execution: Execution,
    proof: Option<[u8; 32]>,
}

fn from_row(row: &Row<'_>) -> Result<Stored> {
    const OP: &str = "executions.read";
    let identity = IdentityKey {
        runtime: col(row, "runtime", OP)?,
        runtime_session_id: col(row, "runtime_session_id", OP)?,
        tool: col(row, "tool", OP)?,
        params_digest: col(row, "params_digest", OP)?,
        idempotency_key: col(row, "idempotency_key", OP)?,
    };
    let text: String = col(row, "attempt_json", OP)?;
    let attempt = serde_json::from_str(&text)
        .map_err(|e| StoreError::corrupt(OP, &identity.describe(), e))?;
    let proof: Option<Vec<u8>> = col(row, "attempt_proof", OP)?;
    let proof = match proof {
        None => None,
        Some(bytes) => Some(<[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
            StoreError::corrupt(OP, &identity.describe(), "attempt_proof is not 32 bytes")
        })?),
    };
    Ok(Stored {
        execution: Execution {
            request_id: col(row, "request_id", OP)?,
            attempt,
            started_at_ms: col(row, "started_at_ms", OP)?,
            identity,
        },
        proof,
    })
}

impl Stored {
    /// The execution with its attempt's proof put back from `audit_proofs` when the row
    /// names it.
    fn hydrate(self, conn: &Connection) -> Result<Execution> {
        const OP: &str = "executions.read";
        let Stored {
            mut execution,
            proof,
        } = self;
        let Some(key) = proof else {
            return Ok(execution);
        };
        let id = || execution.identity.describe();
        if execution.attempt.policy_proof.is_some() {
            return Err(StoreError::corrupt(
                OP,
                &id(),
                "the attempt carries a policy proof and names one",
            ));
        }
        let value = load_interned(conn, key)?.map_err(|e| StoreError::corrupt(OP, &id(), e))?;
        execution.attempt.policy_proof = Some(value);
        Ok(execution)
    }
}

fn find_in(conn: &Connection, identity: &IdentityKey) -> Result<Option<Execution>> {
    crate::rows::first(
        conn,
        "executions.find",
        FIND_SQL,
        &identity.sql_params()[..],
        from_row,
    )?
    .map(|stored| stored.hydrate(conn))
    .transpose()
}

/// Whether an execution is in flight under the key (its row is not read).
fn exists_in(conn: &Connection, identity: &IdentityKey) -> Result<bool> {
    conn.row_cached(EXISTS_SQL, &identity.sql_params()[..], |row| row.get(0))
        .ctx_with("executions.find", || identity.describe())
}

impl SqliteStore {
    /// Marks a direct execution as begun and appends the audit record of its attempt, in one
    /// transaction; call it before the side effect, and run nothing when it fails. Refused
    /// with [`StoreError::AlreadyExists`] when the identity already has a final result or an
    /// execution in flight (the caller answers from those instead).
    pub fn begin_execution(&self, execution: &Execution) -> Result<AuditRecord> {
        let (id, job) = begin_job(execution.clone())?;
        self.write(BEGIN, &id, job)
    }

    /// [`Store::begin_execution`](crate::ReplayStore::begin_execution) for async callers (awaits the group commit).
    pub async fn begin_execution_async(&self, execution: Execution) -> Result<AuditRecord> {
        let (id, job) = begin_job(execution)?;
        self.write_async(BEGIN, &id, job).await
    }

    /// Ends a direct execution: records its final result for replay (the first final result
    /// under the key wins), appends the audit record of the outcome and removes the executing
    /// record, in one transaction. Also settles an interrupted execution (with an
    /// `execution_result_unknown` result). Returns the stored final result.
    pub fn finish_execution(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        outcome: &AuditEntry,
        now_ms: i64,
    ) -> Result<FinalResult> {
        let finish = Finish {
            identity: identity.clone(),
            request_id: request_id.to_owned(),
            result_json: to_json(result),
            result: result.clone(),
            outcome: prepare(outcome.clone())?,
            now_ms,
        };
        let id = identity.describe();
        self.write(FINISH, &id, move |tx| finish.run(tx))
            .map(|(stored, _record)| stored)
    }

    /// [`Store::finish_execution`](crate::ReplayStore::finish_execution) for async callers (awaits the group commit).
    pub async fn finish_execution_async(
        &self,
        identity: IdentityKey,
        request_id: String,
        result: Value,
        outcome: AuditEntry,
        now_ms: i64,
    ) -> Result<FinalResult> {
        let id = identity.describe();
        let finish = Finish {
            identity,
            request_id,
            result_json: to_json(&result),
            result,
            outcome: prepare(outcome)?,
            now_ms,
        };
        let (stored, record) = self
            .write_async(FINISH, &id, move |tx| finish.run(tx))
            .await?;
        drop(record);
        Ok(stored)
    }

    /// The execution in flight (or interrupted) under an identity key, if any.
    pub fn find_execution(&self, identity: &IdentityKey) -> Result<Option<Execution>> {
        find_in(&self.conn(), identity)
    }

    /// Every execution without a recorded outcome, oldest first. At start-up these are the
    /// ones the previous process died during.
    pub fn list_executions(&self) -> Result<Vec<Execution>> {
        let conn = self.conn();
        crate::rows::collect(&conn, "executions.list", LIST_SQL, [], from_row)?
            .into_iter()
            .map(|stored| stored.hydrate(&conn))
            .collect()
    }
}

const BEGIN: &str = "executions.begin";
const FINISH: &str = "executions.finish";

/// The write of [`Store::begin_execution`](crate::ReplayStore::begin_execution) (checked first), with the id it is known by.
fn begin_job(
    execution: Execution,
) -> Result<(
    String,
    impl FnOnce(&Connection) -> Result<AuditRecord> + Send + 'static,
)> {
    const OP: &str = BEGIN;
    let Execution {
        identity,
        request_id,
        mut attempt,
        started_at_ms,
    } = execution;
    identity.check()?;
    let id = identity.describe();
    // The row carries the attempt without its proof; the attempt's audit record interns the
    // proof in the same transaction, and the row names it by that key (`attempt_proof`).
    let proof = attempt.policy_proof.take();
    let attempt_json =
        serde_json::to_string(&attempt).map_err(|e| StoreError::corrupt(OP, &id, e))?;
    attempt.policy_proof = proof;
    // The audit record's costly half is done here, before the write is queued; the attempt
    // is moved into it (it is stored as `attempt_json` above).
    let record = prepare(attempt)?;
    let attempt_proof = record.proof_key();
    let job = move |tx: &Connection| {
        if find_final_in(tx, &identity)?.is_some() {
            return Err(StoreError::AlreadyExists {
                table: "final_results",
                id: identity.describe(),
            });
        }
        if exists_in(tx, &identity)? {
            return Err(StoreError::AlreadyExists {
                table: "executions",
                id: identity.describe(),
            });
        }
        tx.exec_cached(
            INSERT_SQL,
            params![
                identity.runtime,
                identity.runtime_session_id,
                identity.tool,
                identity.params_digest,
                identity.idempotency_key,
                request_id,
                attempt_json,
                started_at_ms,
                attempt_proof.as_ref().map(<[u8; 32]>::as_slice),
            ],
        )
        .ctx_with(OP, || identity.describe())?;
        append_prepared_in(tx, record)
    };
    Ok((id, job))
}

/// The write of [`Store::finish_execution`](crate::ReplayStore::finish_execution) (its audit record prepared before queueing).
struct Finish {
    identity: IdentityKey,
    request_id: String,
    result: Value,
    /// `result` as stored, written before the job is queued.
    result_json: String,
    outcome: crate::audit_storage::PreparedAudit,
    now_ms: i64,
}

impl Finish {
    /// Returns the stored final result, and the outcome's audit record so that the caller's
    /// thread, not the writer's, frees it.
    fn run(self, tx: &Connection) -> Result<(FinalResult, AuditRecord)> {
        const OP: &str = FINISH;
        let identity = &self.identity;
        let stored = record_final_owned(
            tx,
            identity,
            &self.request_id,
            Cow::Owned(self.result),
            &self.result_json,
            self.now_ms,
        )?;
        let record = append_prepared_in(tx, self.outcome)?;
        tx.exec_cached(DELETE_SQL, &identity.sql_params()[..])
            .ctx_with(OP, || identity.describe())?;
        Ok((stored, record))
    }
}
