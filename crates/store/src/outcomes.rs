//! The outbox of deferred outcomes (`openclaw-node.md` §8.5 step 5, R3.3, R3.4): requests a
//! remote runtime was answered with a pending receipt, whose outcome is posted back into the
//! runtime's conversation once it is known and the connection is up.
//!
//! One row per request (its confirmation id), moving forward only:
//! `waiting` (outcome not known yet) → `ready` (outcome known, not posted) → `posting` (a
//! post was sent, its answer not recorded) → `posted` or `failed` (could not be posted; the
//! reason is kept). Each move is a conditional `UPDATE … WHERE state = '<expected>'`, so a
//! row is posted at most once even with two posters; a row found in `posting` after a
//! restart is never sent again (its delivery is unknown) and becomes `failed`. The one step
//! back, `posting` → `ready`, is for a post the runtime refused without handling it.

use rusqlite::{Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::rows::collect;
use crate::wire::{col, parse_enum, parse_json, to_json, wire_enum};

wire_enum!(
    /// Where a deferred outcome stands.
    OutcomeState {
        /// The request still waits (for the user, or for its work).
        Waiting = "waiting",
        /// The outcome is known and waits for a connection to be posted.
        Ready = "ready",
        /// A post was sent; whether it arrived is not recorded yet.
        Posting = "posting",
        /// Posted once.
        Posted = "posted",
        /// Could not be posted (no conversation, refused, delivery unknown after a restart).
        Failed = "failed",
    }
);

// The backend-neutral rules of the outbox, shared with the PostgreSQL store.
impl OutcomeState {
    /// Refuses a move that is not forward (`waiting` → `failed`; `ready` → `posting`/`failed`;
    /// `posting` → `posted`/`failed`/`ready`).
    #[doc(hidden)]
    pub fn check_move(from: Self, to: Self) -> Result<()> {
        let forward = matches!(
            (from, to),
            (Self::Waiting, Self::Failed)
                | (Self::Ready, Self::Posting | Self::Failed)
                | (Self::Posting, Self::Posted | Self::Failed | Self::Ready)
        );
        if !forward {
            return Err(StoreError::Invalid {
                what: "deferred outcome state",
                detail: format!("cannot move from {} to {}", from.as_str(), to.as_str()),
            });
        }
        Ok(())
    }
}

impl NewDeferredOutcome {
    /// Refuses an empty runtime, request id or command.
    #[doc(hidden)]
    pub fn check(&self) -> Result<()> {
        if self.runtime.is_empty() || self.request_id.is_empty() || self.command.is_empty() {
            return Err(StoreError::Invalid {
                what: "deferred outcome",
                detail: "runtime, request_id and command must not be empty".into(),
            });
        }
        Ok(())
    }

    /// The refusal of a second record of the same request id.
    #[doc(hidden)]
    #[must_use]
    pub fn already_recorded(&self) -> StoreError {
        StoreError::Invalid {
            what: "deferred outcome",
            detail: format!("request {:?} is already recorded", self.request_id),
        }
    }
}

/// A request answered with a pending receipt, as the runtime adapter records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewDeferredOutcome {
    /// The runtime that was answered (`openclaw`).
    pub runtime: String,
    /// The request id the receipt carries (the confirmation id).
    pub request_id: String,
    /// The command.
    pub command: String,
    /// The canonical params (a retry with the same ones attaches).
    pub params_digest: String,
    /// The runtime's conversation to post the outcome into (`None`: nothing is posted).
    pub session_key: Option<String>,
    /// The receipt the runtime got.
    pub receipt: Value,
    /// The bridge's first answer (what the outcome is waited on with).
    pub first_result: Value,
}

/// One row of the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeferredOutcome {
    #[serde(flatten)]
    pub request: NewDeferredOutcome,
    pub state: OutcomeState,
    /// The outcome once known.
    pub outcome: Option<Value>,
    /// Why it failed (empty otherwise).
    pub note: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

const OP_INSERT: &str = "deferred_outcomes.insert";
const OP_READ: &str = "deferred_outcomes.read";
const OP_MOVE: &str = "deferred_outcomes.move";

const COLUMNS: &str = "runtime, request_id, command, params_digest, session_key, receipt_json, \
                       first_result_json, state, outcome_json, note, created_at_ms, updated_at_ms";

fn from_row(row: &Row<'_>) -> Result<DeferredOutcome> {
    let id: String = col(row, "request_id", OP_READ)?;
    let receipt: String = col(row, "receipt_json", OP_READ)?;
    let first: String = col(row, "first_result_json", OP_READ)?;
    let outcome: Option<String> = col(row, "outcome_json", OP_READ)?;
    let state: String = col(row, "state", OP_READ)?;
    Ok(DeferredOutcome {
        state: parse_enum(OutcomeState::parse, &state, OP_READ, &id)?,
        outcome: outcome.map(|t| parse_json(&t, OP_READ, &id)).transpose()?,
        note: col(row, "note", OP_READ)?,
        created_at_ms: col(row, "created_at_ms", OP_READ)?,
        updated_at_ms: col(row, "updated_at_ms", OP_READ)?,
        request: NewDeferredOutcome {
            runtime: col(row, "runtime", OP_READ)?,
            command: col(row, "command", OP_READ)?,
            params_digest: col(row, "params_digest", OP_READ)?,
            session_key: col(row, "session_key", OP_READ)?,
            receipt: parse_json(&receipt, OP_READ, &id)?,
            first_result: parse_json(&first, OP_READ, &id)?,
            request_id: id,
        },
    })
}

impl SqliteStore {
    /// Records a request answered with a pending receipt (state `waiting`). Recording the same
    /// request id again is [`StoreError::Invalid`].
    pub fn insert_deferred_outcome(&self, new: &NewDeferredOutcome, now_ms: i64) -> Result<()> {
        new.check()?;
        let new = new.clone();
        let id = new.request_id.clone();
        self.write(OP_INSERT, &id, move |tx| {
            let inserted = tx
                .exec_cached(
                    "INSERT INTO deferred_outcomes (runtime, request_id, command, params_digest, \
                     session_key, receipt_json, first_result_json, state, note, created_at_ms, \
                     updated_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'waiting', '', ?8, ?8) \
                     ON CONFLICT (request_id) DO NOTHING",
                    params![
                        new.runtime,
                        new.request_id,
                        new.command,
                        new.params_digest,
                        new.session_key,
                        to_json(&new.receipt),
                        to_json(&new.first_result),
                        now_ms
                    ],
                )
                .ctx(OP_INSERT, &new.request_id)?;
            if inserted == 0 {
                return Err(new.already_recorded());
            }
            Ok(())
        })
    }

    /// One row, if recorded.
    pub fn get_deferred_outcome(&self, request_id: &str) -> Result<Option<DeferredOutcome>> {
        let sql = format!("SELECT {COLUMNS} FROM deferred_outcomes WHERE request_id = ?1");
        Ok(
            collect(&self.conn(), OP_READ, &sql, [request_id], from_row)?
                .into_iter()
                .next(),
        )
    }

    /// A runtime's rows in the given states, oldest first (every state when `states` is
    /// empty).
    pub fn list_deferred_outcomes(
        &self,
        runtime: &str,
        states: &[OutcomeState],
    ) -> Result<Vec<DeferredOutcome>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM deferred_outcomes WHERE runtime = ?1 \
             ORDER BY created_at_ms, request_id"
        );
        let rows = collect(&self.conn(), OP_READ, &sql, [runtime], from_row)?;
        Ok(rows
            .into_iter()
            .filter(|r| states.is_empty() || states.contains(&r.state))
            .collect())
    }

    /// `waiting` → `ready` with the outcome. False when the row was not waiting.
    pub fn deferred_outcome_known(
        &self,
        request_id: &str,
        outcome: &Value,
        now_ms: i64,
    ) -> Result<bool> {
        let owned = (request_id.to_owned(), to_json(outcome));
        self.write(OP_MOVE, request_id, move |tx| {
            tx.exec_cached(
                "UPDATE deferred_outcomes SET state = 'ready', outcome_json = ?2, \
                 updated_at_ms = ?3 WHERE request_id = ?1 AND state = 'waiting'",
                params![owned.0, owned.1, now_ms],
            )
            .map(|n| n == 1)
            .ctx(OP_MOVE, &owned.0)
        })
    }

    /// Moves a row from `from` to `to` (with a note for `failed`). False when it was not in
    /// `from`: someone else moved it first. Only forward moves are accepted, and `posting` →
    /// `ready` (a post the runtime refused before handling it, to be posted again).
    pub fn move_deferred_outcome(
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
            tx.exec_cached(
                "UPDATE deferred_outcomes SET state = ?3, note = ?4, updated_at_ms = ?5 \
                 WHERE request_id = ?1 AND state = ?2",
                params![owned.0, from.as_str(), to.as_str(), owned.1, now_ms],
            )
            .map(|n| n == 1)
            .ctx(OP_MOVE, &owned.0)
        })
    }
}
