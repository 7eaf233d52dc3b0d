//! [`OutcomeStore`] on PostgreSQL: the outbox of deferred outcomes (`openclaw-node.md` §8.5).
//!
//! A port of the SQLite store's `outcomes.rs`: one row per request, moving forward only
//! (`waiting` → `ready` → `posting` → `posted` / `failed`, and `posting` → `ready` for a post
//! the runtime refused unhandled), each move one conditional `UPDATE … WHERE state =
//! '<expected>'`, so a row is posted at most once even with two posters on two daemons.
//!
//! # Fleet semantics
//!
//! Each row names the daemon whose runtime connection got the pending receipt (`host_id`).
//! [`OutcomeStore::list_deferred_outcomes`] lists only this daemon's rows: its outbox task waits
//! on the outcome in this process and posts into its own runtime connection, and at start it
//! fails the rows it finds left `posting` (their delivery is unknown) — which must never touch
//! a row another live daemon is posting right now. Reads and moves by request id work on any
//! row.

use openphone_store::{
    DeferredOutcome, NewDeferredOutcome, OutcomeState, OutcomeStore, Result, StoreError,
};
use serde_json::Value;

use crate::confirmations::read_committed;
use crate::{PgContext, PgStore};

const OP_INSERT: &str = "deferred_outcomes.insert";
const OP_READ: &str = "deferred_outcomes.read";
const OP_MOVE: &str = "deferred_outcomes.move";

const COLUMNS: &str = "runtime, request_id, command, params_digest, session_key, receipt_json, \
                       first_result_json, state, outcome_json, note, created_at_ms, updated_at_ms";

fn corrupt(id: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        op: OP_READ,
        id: id.to_owned(),
        detail: detail.to_string(),
    }
}

fn parse_json(text: &str, id: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| corrupt(id, e))
}

fn from_row(row: &postgres::Row) -> Result<DeferredOutcome> {
    let col = |name: &str| -> Result<String> { row.try_get(name).ctx(OP_READ, name) };
    let opt = |name: &str| -> Result<Option<String>> { row.try_get(name).ctx(OP_READ, name) };
    let num = |name: &str| -> Result<i64> { row.try_get(name).ctx(OP_READ, name) };
    let id = col("request_id")?;
    let state = col("state")?;
    Ok(DeferredOutcome {
        state: OutcomeState::parse(&state)
            .ok_or_else(|| corrupt(&id, format!("unknown value {state:?}")))?,
        outcome: opt("outcome_json")?
            .map(|t| parse_json(&t, &id))
            .transpose()?,
        note: col("note")?,
        created_at_ms: num("created_at_ms")?,
        updated_at_ms: num("updated_at_ms")?,
        request: NewDeferredOutcome {
            runtime: col("runtime")?,
            command: col("command")?,
            params_digest: col("params_digest")?,
            session_key: opt("session_key")?,
            receipt: parse_json(&col("receipt_json")?, &id)?,
            first_result: parse_json(&col("first_result_json")?, &id)?,
            request_id: id,
        },
    })
}

impl OutcomeStore for PgStore {
    fn insert_deferred_outcome(&self, new: &NewDeferredOutcome, now_ms: i64) -> Result<()> {
        new.check()?;
        let new = new.clone();
        let host_id = self.host_id().to_owned();
        let id = new.request_id.clone();
        self.write(OP_INSERT, &id, move |tx| {
            read_committed(tx, OP_INSERT)?;
            let inserted = tx
                .execute(
                    "INSERT INTO deferred_outcomes (host_id, runtime, request_id, command, \
                     params_digest, session_key, receipt_json, first_result_json, state, note, \
                     created_at_ms, updated_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'waiting', '', $9, $9) \
                     ON CONFLICT (request_id) DO NOTHING",
                    &[
                        &host_id,
                        &new.runtime,
                        &new.request_id,
                        &new.command,
                        &new.params_digest,
                        &new.session_key,
                        &new.receipt.to_string(),
                        &new.first_result.to_string(),
                        &now_ms,
                    ],
                )
                .ctx(OP_INSERT, &new.request_id)?;
            if inserted == 0 {
                return Err(new.already_recorded());
            }
            Ok(())
        })
    }

    fn get_deferred_outcome(&self, request_id: &str) -> Result<Option<DeferredOutcome>> {
        let id = request_id.to_owned();
        self.read(OP_READ, request_id, move |conn| {
            let sql = format!("SELECT {COLUMNS} FROM deferred_outcomes WHERE request_id = $1");
            conn.query_opt(sql.as_str(), &[&id])
                .ctx(OP_READ, &id)?
                .as_ref()
                .map(from_row)
                .transpose()
        })
    }

    /// This daemon's rows of `runtime` in the given states (every state when `states` is
    /// empty), oldest first.
    fn list_deferred_outcomes(
        &self,
        runtime: &str,
        states: &[OutcomeState],
    ) -> Result<Vec<DeferredOutcome>> {
        let (host_id, runtime) = (self.host_id().to_owned(), runtime.to_owned());
        let states: Vec<&'static str> = states.iter().map(|s| s.as_str()).collect();
        self.read(OP_READ, "", move |conn| {
            let sql = format!(
                "SELECT {COLUMNS} FROM deferred_outcomes WHERE host_id = $1 AND runtime = $2 \
                 AND (cardinality($3::text[]) = 0 OR state = ANY($3)) \
                 ORDER BY created_at_ms, request_id"
            );
            conn.query(sql.as_str(), &[&host_id, &runtime, &states])
                .ctx(OP_READ, &runtime)?
                .iter()
                .map(from_row)
                .collect()
        })
    }

    fn deferred_outcome_known(
        &self,
        request_id: &str,
        outcome: &Value,
        now_ms: i64,
    ) -> Result<bool> {
        let owned = (request_id.to_owned(), outcome.to_string());
        self.write(OP_MOVE, request_id, move |tx| {
            read_committed(tx, OP_MOVE)?;
            tx.execute(
                "UPDATE deferred_outcomes SET state = 'ready', outcome_json = $2, \
                 updated_at_ms = $3 WHERE request_id = $1 AND state = 'waiting'",
                &[&owned.0, &owned.1, &now_ms],
            )
            .map(|n| n == 1)
            .ctx(OP_MOVE, &owned.0)
        })
    }

    fn move_deferred_outcome(
        &self,
        request_id: &str,
        from: OutcomeState,
        to: OutcomeState,
        note: &str,
        now_ms: i64,
    ) -> Result<bool> {
        OutcomeState::check_move(from, to)?;
        let owned = (request_id.to_owned(), note.to_owned());
        self.write(OP_MOVE, request_id, move |tx| {
            read_committed(tx, OP_MOVE)?;
            tx.execute(
                "UPDATE deferred_outcomes SET state = $3, note = $4, updated_at_ms = $5 \
                 WHERE request_id = $1 AND state = $2",
                &[&owned.0, &from.as_str(), &to.as_str(), &owned.1, &now_ms],
            )
            .map(|n| n == 1)
            .ctx(OP_MOVE, &owned.0)
        })
    }
}
