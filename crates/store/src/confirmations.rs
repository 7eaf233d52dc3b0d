//! Durable confirmations (`runtime-protocol.md` §10.1).
//!
//! Every state change is one `UPDATE … WHERE state = '<from>'`; the affected-row count decides
//! whether this caller won the transition. No transition ever executes anything.

use openphone_protocol::Risk;
use rusqlite::{Connection, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::error::{NotPending, Result, SqlContext, StoreError};
pub use crate::records::{ConfirmationRecord, ConfirmationState};
use crate::replay::{IdentityKey, record_final_in};
use crate::rows::Cached;
use crate::wire::{col, parse_enum, parse_json, parse_risk, sql_limit, to_json};

/// A resolution decision for [`Store::resolve`](crate::ConfirmationStore::resolve).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    Approve,
    Deny,
    /// Time out now, whatever `expires_at_ms` says (e.g. the caller's timer fired).
    Timeout,
}

impl Resolution {
    /// The state the confirmation moves to.
    pub fn target(self) -> ConfirmationState {
        match self {
            Resolution::Approve => ConfirmationState::Approved,
            Resolution::Deny => ConfirmationState::Denied,
            Resolution::Timeout => ConfirmationState::Timeout,
        }
    }
}

/// `resolved_by` written by [`Store::expire_due`](crate::ConfirmationStore::expire_due), [`Store::recover_after_restart`](crate::ConfirmationStore::recover_after_restart) and the
/// lazy expiry inside [`Store::resolve`](crate::ConfirmationStore::resolve).
pub const RESOLVED_BY_EXPIRY: &str = "system:expiry";

/// §8.2 step 4: at most this many pending confirmations per runtime.
pub const MAX_PENDING_PER_RUNTIME: usize = 32;

/// What the caller supplies for a new pending confirmation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewConfirmation {
    pub confirmation_id: String,
    pub identity: IdentityKey,
    pub request_id: String,
    pub request: Value,
    pub phone_session_id: Option<String>,
    pub summary: String,
    pub risk: Risk,
    pub created_at_ms: i64,
    /// `created_at_ms + timeout_ms`.
    pub expires_at_ms: i64,
}

/// Outcome of [`Store::insert_pending`](crate::ConfirmationStore::insert_pending).
#[derive(Debug, Clone, PartialEq)]
pub enum PendingInsert {
    /// Stored as a new pending confirmation.
    Created(ConfirmationRecord),
    /// A pending, unexpired confirmation with the same identity key already exists; nothing
    /// was stored. Answer `needs_confirmation` with its id (expiry not extended).
    Existing(ConfirmationRecord),
    /// The runtime already has `pending` unexpired confirmations, at or above the cap; nothing
    /// was stored (`rate_limited`).
    TooMany { pending: usize },
}

/// Filters for [`Store::list_confirmations`](crate::ConfirmationStore::list_confirmations): pending first, then newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfirmationFilter {
    pub state: Option<ConfirmationState>,
    pub runtime: Option<String>,
    /// `None` = no limit.
    pub limit: Option<usize>,
}

/// What [`Store::recover_after_restart`](crate::ConfirmationStore::recover_after_restart) changed and found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovery {
    /// Were `approved` (executing) when the previous process stopped; now `result_unknown`.
    /// The caller records their final result (`error` / `execution_result_unknown`) with
    /// [`Store::attach_final_result`](crate::ConfirmationStore::attach_final_result) and never executes them.
    pub result_unknown: Vec<ConfirmationRecord>,
    /// Were pending past their expiry; now `timeout`.
    pub timed_out: Vec<ConfirmationRecord>,
    /// Still pending within their time; they can be approved.
    pub still_pending: Vec<ConfirmationRecord>,
}

/// The columns, as a macro so every statement is `concat!`ed once, not formatted per call.
macro_rules! columns {
    () => {
        "confirmation_id, runtime, runtime_session_id, tool, params_digest, \
         idempotency_key, request_id, request_json, phone_session_id, summary, risk, \
         created_at_ms, expires_at_ms, state, resolved_at_ms, resolved_by, final_result_json"
    };
}

/// `SELECT <columns> FROM confirmations <tail>`.
macro_rules! select {
    ($tail:expr) => {
        concat!("SELECT ", columns!(), " FROM confirmations ", $tail)
    };
}

fn from_row(row: &Row<'_>) -> Result<ConfirmationRecord> {
    const OP: &str = "confirmations.read";
    let id: String = col(row, "confirmation_id", OP)?;
    let request: String = col(row, "request_json", OP)?;
    let risk: String = col(row, "risk", OP)?;
    let state: String = col(row, "state", OP)?;
    let final_result: Option<String> = col(row, "final_result_json", OP)?;
    Ok(ConfirmationRecord {
        identity: IdentityKey {
            runtime: col(row, "runtime", OP)?,
            runtime_session_id: col(row, "runtime_session_id", OP)?,
            tool: col(row, "tool", OP)?,
            params_digest: col(row, "params_digest", OP)?,
            idempotency_key: col(row, "idempotency_key", OP)?,
        },
        request_id: col(row, "request_id", OP)?,
        request: parse_json(&request, OP, &id)?,
        phone_session_id: col(row, "phone_session_id", OP)?,
        summary: col(row, "summary", OP)?,
        risk: parse_risk(&risk, OP, &id)?,
        created_at_ms: col(row, "created_at_ms", OP)?,
        expires_at_ms: col(row, "expires_at_ms", OP)?,
        state: parse_enum(ConfirmationState::parse, &state, OP, &id)?,
        resolved_at_ms: col(row, "resolved_at_ms", OP)?,
        resolved_by: col(row, "resolved_by", OP)?,
        final_result: final_result
            .map(|text| parse_json(&text, OP, &id))
            .transpose()?,
        confirmation_id: id,
        host: None,
    })
}

fn query(
    conn: &Connection,
    op: &'static str,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<ConfirmationRecord>> {
    crate::rows::collect(conn, op, sql, args, from_row)
}

fn get_in(conn: &Connection, id: &str) -> Result<Option<ConfirmationRecord>> {
    crate::rows::first(
        conn,
        "confirmations.get",
        select!("WHERE confirmation_id = ?1"),
        [id],
        from_row,
    )
}

/// Moves an `approved` confirmation to `completed` with its final result, recorded for replay
/// under its identity key; any other state is [`StoreError::WrongState`].
fn complete_in(
    tx: &Connection,
    id: &str,
    final_result: &Value,
    now_ms: i64,
) -> Result<ConfirmationRecord> {
    const OP: &str = "confirmations.complete";
    let n = tx
        .exec_cached(
            "UPDATE confirmations SET state = 'completed', final_result_json = ?2 \
             WHERE confirmation_id = ?1 AND state = 'approved'",
            params![id, to_json(final_result)],
        )
        .ctx(OP, id)?;
    let record = require(tx, id)?;
    if n == 0 {
        return Err(StoreError::WrongState {
            confirmation_id: id.to_owned(),
            state: record.state,
            expected: "approved",
        });
    }
    record_final_in(
        tx,
        &record.identity,
        &record.request_id,
        final_result,
        now_ms,
    )?;
    Ok(record)
}

fn require(conn: &Connection, id: &str) -> Result<ConfirmationRecord> {
    get_in(conn, id)?.ok_or_else(|| StoreError::NotFound {
        table: "confirmations",
        id: id.to_owned(),
    })
}

/// The oldest pending, unexpired confirmation under the key. The oldest is picked here rather
/// than with `ORDER BY created_at_ms LIMIT 1`, whose sorter SQLite opened on every call (a
/// temporary b-tree, seen in profiles), though there is at most one such row in practice.
fn find_pending_in(
    conn: &Connection,
    identity: &IdentityKey,
    now_ms: i64,
) -> Result<Option<ConfirmationRecord>> {
    const OP: &str = "confirmations.find_pending";
    let mut stmt = conn
        .prepare_cached(select!(
            "WHERE runtime = ?1 AND runtime_session_id = ?2 AND tool = ?3 \
             AND params_digest = ?4 AND idempotency_key = ?5 AND state = 'pending' \
             AND expires_at_ms > ?6"
        ))
        .ctx(OP, "")?;
    let mut rows = stmt
        .query(params![
            identity.runtime,
            identity.runtime_session_id,
            identity.tool,
            identity.params_digest,
            identity.idempotency_key,
            now_ms,
        ])
        .ctx(OP, "")?;
    let mut oldest: Option<ConfirmationRecord> = None;
    while let Some(row) = rows.next().ctx(OP, "")? {
        let created_at_ms: i64 = col(row, "created_at_ms", OP)?;
        if oldest
            .as_ref()
            .is_none_or(|o| created_at_ms < o.created_at_ms)
        {
            oldest = Some(from_row(row)?);
        }
    }
    Ok(oldest)
}

/// [`ConfirmationStore::find_approved`](crate::ConfirmationStore::find_approved) through the
/// identity index.
fn find_approved_in(
    conn: &Connection,
    identity: &IdentityKey,
) -> Result<Option<ConfirmationRecord>> {
    crate::rows::first(
        conn,
        "confirmations.find_approved",
        select!(
            "WHERE runtime = ?1 AND runtime_session_id = ?2 AND tool = ?3 \
             AND params_digest = ?4 AND idempotency_key = ?5 AND state = 'approved' \
             ORDER BY created_at_ms DESC, confirmation_id LIMIT 1"
        ),
        &identity.sql_params()[..],
        from_row,
    )
}

fn count_pending_in(conn: &Connection, runtime: &str, now_ms: i64) -> Result<usize> {
    conn.row_cached(
        "SELECT COUNT(*) FROM confirmations WHERE runtime = ?1 AND state = 'pending' \
         AND expires_at_ms > ?2",
        params![runtime, now_ms],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| usize::try_from(n).unwrap_or(0))
    .ctx("confirmations.count_pending", runtime)
}

/// Moves every pending confirmation with `expires_at_ms <= now_ms` to `timeout`.
fn expire_due_in(conn: &Connection, now_ms: i64) -> Result<Vec<ConfirmationRecord>> {
    const OP: &str = "confirmations.expire_due";
    let due = query(
        conn,
        OP,
        select!(
            "WHERE state = 'pending' AND expires_at_ms <= ?1 ORDER BY expires_at_ms, confirmation_id"
        ),
        [now_ms],
    )?;
    let mut out = Vec::with_capacity(due.len());
    for record in due {
        let n = conn
            .exec_cached(
                "UPDATE confirmations SET state = 'timeout', resolved_at_ms = ?2, \
                 resolved_by = ?3 WHERE confirmation_id = ?1 AND state = 'pending'",
                params![record.confirmation_id, now_ms, RESOLVED_BY_EXPIRY],
            )
            .ctx(OP, &record.confirmation_id)?;
        if n == 1 {
            out.push(require(conn, &record.confirmation_id)?);
        }
    }
    Ok(out)
}

impl ConfirmationRecord {
    /// Refuses ([`StoreError::WrongState`]) a confirmation that did not end without executing
    /// (`denied`, `timeout`, `result_unknown`): only those are given a final result after the
    /// fact.
    #[doc(hidden)]
    pub fn require_ended_unexecuted(&self) -> Result<()> {
        match self.state {
            ConfirmationState::Denied
            | ConfirmationState::Timeout
            | ConfirmationState::ResultUnknown => Ok(()),
            ConfirmationState::Pending
            | ConfirmationState::Approved
            | ConfirmationState::Completed => Err(StoreError::WrongState {
                confirmation_id: self.confirmation_id.clone(),
                state: self.state,
                expected: "denied, timeout or result_unknown",
            }),
        }
    }
}

impl SqliteStore {
    /// Stores a new pending confirmation, atomically with the duplicate and cap checks: a
    /// pending unexpired confirmation with the same identity key wins
    /// ([`PendingInsert::Existing`]); otherwise, if the runtime already has
    /// `max_pending_per_runtime` pending ones, nothing is stored ([`PendingInsert::TooMany`]).
    /// "Now" is `new.created_at_ms`. A duplicate `confirmation_id` is
    /// [`StoreError::AlreadyExists`].
    pub fn insert_pending(
        &self,
        new: &NewConfirmation,
        max_pending_per_runtime: usize,
    ) -> Result<PendingInsert> {
        const OP: &str = "confirmations.insert_pending";
        new.identity.check()?;
        if new.expires_at_ms < new.created_at_ms {
            return Err(StoreError::Invalid {
                what: "expires_at_ms",
                detail: format!(
                    "{} is before created_at_ms {}",
                    new.expires_at_ms, new.created_at_ms
                ),
            });
        }
        let now_ms = new.created_at_ms;
        let new = new.clone();
        self.write(OP, &new.confirmation_id.clone(), move |tx| {
            let id = new.confirmation_id.as_str();
            if let Some(existing) = find_pending_in(tx, &new.identity, now_ms)? {
                return Ok(PendingInsert::Existing(existing));
            }
            let pending = count_pending_in(tx, &new.identity.runtime, now_ms)?;
            if pending >= max_pending_per_runtime {
                return Ok(PendingInsert::TooMany { pending });
            }
            if get_in(tx, id)?.is_some() {
                return Err(StoreError::AlreadyExists {
                    table: "confirmations",
                    id: id.to_owned(),
                });
            }
            tx.exec_cached(
                "INSERT INTO confirmations (confirmation_id, runtime, runtime_session_id, tool, \
                 params_digest, idempotency_key, request_id, request_json, phone_session_id, \
                 summary, risk, created_at_ms, expires_at_ms, state) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'pending')",
                params![
                    id,
                    new.identity.runtime,
                    new.identity.runtime_session_id,
                    new.identity.tool,
                    new.identity.params_digest,
                    new.identity.idempotency_key,
                    new.request_id,
                    to_json(&new.request),
                    new.phone_session_id,
                    new.summary,
                    new.risk.as_str(),
                    new.created_at_ms,
                    new.expires_at_ms,
                ],
            )
            .ctx(OP, id)?;
            Ok(PendingInsert::Created(require(tx, id)?))
        })
    }

    /// One confirmation, in whatever state.
    pub fn get_confirmation(&self, confirmation_id: &str) -> Result<Option<ConfirmationRecord>> {
        get_in(&self.conn(), confirmation_id)
    }

    /// The pending, unexpired (`now_ms < expires_at_ms`) confirmation for an identity key.
    /// An expired one still marked pending is not returned; run [`Store::expire_due`](crate::ConfirmationStore::expire_due) first
    /// to settle (and announce) those.
    pub fn find_pending(
        &self,
        identity: &IdentityKey,
        now_ms: i64,
    ) -> Result<Option<ConfirmationRecord>> {
        find_pending_in(&self.conn(), identity, now_ms)
    }

    /// The confirmations of one runtime session and tool that a retry may join (the bridge's
    /// `retry.rs`): pending and unexpired at `now_ms`, approved (executing), or resolved by a
    /// decision (`completed`, `denied`, `result_unknown`) at or after `resolved_since_ms`;
    /// oldest first. Timed-out ones are not listed. The bridge matches principal, phone
    /// session and parameters itself.
    ///
    /// Read through the `state` index only (the `+` keeps the identity index, whose prefix
    /// would scan every confirmation this session ever made for the tool, out of the plan):
    /// a decided confirmation is resolved before it expires, so `expires_at_ms >
    /// resolved_since_ms` bounds the recent ones.
    pub fn find_joinable(
        &self,
        runtime: &str,
        runtime_session_id: &str,
        tool: &str,
        resolved_since_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<ConfirmationRecord>> {
        macro_rules! same {
            () => {
                "+runtime = ?1 AND +runtime_session_id = ?2 AND +tool = ?3"
            };
        }
        const SQL: &str = concat!(
            select!("WHERE state = 'pending' AND expires_at_ms > ?5 AND "),
            same!(),
            " UNION ALL ",
            select!("WHERE state = 'approved' AND "),
            same!(),
            " UNION ALL ",
            select!(
                "WHERE state IN ('completed', 'denied', 'result_unknown') \
                 AND expires_at_ms > ?4 AND resolved_at_ms >= ?4 AND "
            ),
            same!(),
            " ORDER BY created_at_ms, confirmation_id"
        );
        crate::rows::collect(
            &self.conn(),
            "confirmations.find_joinable",
            SQL,
            params![runtime, runtime_session_id, tool, resolved_since_ms, now_ms],
            from_row,
        )
    }

    /// Confirmations matching the filter: pending first, then newest first.
    pub fn list_confirmations(
        &self,
        filter: &ConfirmationFilter,
    ) -> Result<Vec<ConfirmationRecord>> {
        query(
            &self.conn(),
            "confirmations.list",
            select!(
                "WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR runtime = ?2) \
                 ORDER BY (state = 'pending') DESC, created_at_ms DESC, confirmation_id LIMIT ?3"
            ),
            params![
                filter.state.map(ConfirmationState::as_str),
                filter.runtime,
                filter.limit.map_or(-1, sql_limit),
            ],
        )
    }

    /// When the first pending confirmation expires (`None`: none is pending): the daemon's
    /// expiry timer sleeps until then instead of polling (issue 34).
    pub fn next_pending_expiry(&self) -> Result<Option<i64>> {
        self.conn()
            .row_cached(
                "SELECT MIN(expires_at_ms) FROM confirmations WHERE state = 'pending'",
                [],
                |row| row.get::<_, Option<i64>>(0),
            )
            .ctx("confirmations.next_pending_expiry", "")
    }

    /// The approved (executing) confirmation for an identity key, the newest if two.
    pub fn find_approved(&self, identity: &IdentityKey) -> Result<Option<ConfirmationRecord>> {
        find_approved_in(&self.conn(), identity)
    }

    /// Pending, unexpired confirmations of one runtime (for the per-runtime cap).
    pub fn count_pending(&self, runtime: &str, now_ms: i64) -> Result<usize> {
        count_pending_in(&self.conn(), runtime, now_ms)
    }

    /// First resolution wins, atomically. Succeeds only from `pending`; `Approve` / `Deny`
    /// additionally need `now_ms < expires_at_ms`. Returns the updated record.
    ///
    /// Losing is [`StoreError::ConfirmationNotPending`] (→ `pending_confirmation_not_found`):
    /// unknown id, already resolved, or expired — in the last case this call has just moved
    /// the confirmation to `timeout` and the error carries that record.
    pub fn resolve(
        &self,
        confirmation_id: &str,
        decision: Resolution,
        resolved_by: &str,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        const OP: &str = "confirmations.resolve";
        let target = decision.target();
        let owned = (confirmation_id.to_owned(), resolved_by.to_owned());
        self.write(OP, confirmation_id, move |tx| {
            let (id, resolved_by) = (owned.0.as_str(), owned.1.as_str());
            let won = match decision {
                Resolution::Approve | Resolution::Deny => tx.exec_cached(
                    "UPDATE confirmations SET state = ?2, resolved_at_ms = ?3, resolved_by = ?4 \
                     WHERE confirmation_id = ?1 AND state = 'pending' AND expires_at_ms > ?3",
                    params![id, target.as_str(), now_ms, resolved_by],
                ),
                Resolution::Timeout => tx.exec_cached(
                    "UPDATE confirmations SET state = ?2, resolved_at_ms = ?3, resolved_by = ?4 \
                     WHERE confirmation_id = ?1 AND state = 'pending'",
                    params![id, target.as_str(), now_ms, resolved_by],
                ),
            }
            .ctx(OP, id)?;
            if won == 1 {
                return Ok(Ok(require(tx, id)?));
            }
            let reason = match get_in(tx, id)? {
                None => NotPending::Unknown,
                Some(record) => match record.state {
                    ConfirmationState::Pending => {
                        // Pending but expired: settle it as a timeout now.
                        let n = tx
                            .exec_cached(
                                "UPDATE confirmations SET state = 'timeout', resolved_at_ms = ?2, \
                                 resolved_by = ?3 WHERE confirmation_id = ?1 AND state = 'pending'",
                                params![id, now_ms, RESOLVED_BY_EXPIRY],
                            )
                            .ctx(OP, id)?;
                        if n == 1 {
                            NotPending::Expired {
                                timed_out: Box::new(require(tx, id)?),
                            }
                        } else {
                            NotPending::AlreadyResolved {
                                state: require(tx, id)?.state,
                            }
                        }
                    }
                    state @ (ConfirmationState::Approved
                    | ConfirmationState::Completed
                    | ConfirmationState::Denied
                    | ConfirmationState::Timeout
                    | ConfirmationState::ResultUnknown) => NotPending::AlreadyResolved { state },
                },
            };
            Ok(Err(reason))
        })
        .and_then(
            |outcome: std::result::Result<ConfirmationRecord, NotPending>| {
                outcome.map_err(|reason| StoreError::ConfirmationNotPending {
                    confirmation_id: confirmation_id.to_owned(),
                    reason,
                })
            },
        )
    }

    /// `approved → completed`: stores the final result on the confirmation and records it for
    /// replay under the confirmation's identity key (first final result wins), in one
    /// transaction. Any other state is [`StoreError::WrongState`].
    pub fn complete(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        const OP: &str = "confirmations.complete";
        let (owned_id, final_result) = (confirmation_id.to_owned(), final_result.clone());
        self.write(OP, confirmation_id, move |tx| {
            complete_in(tx, &owned_id, &final_result, now_ms)
        })
    }

    /// [`Store::complete`](crate::ConfirmationStore::complete) and the audit record of the completion in one transaction: a crash
    /// can never leave an executed, completed confirmation without its record (nor a record
    /// without the completion). Returns the completed record.
    pub fn complete_audited(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
        entry: crate::audit::AuditEntry,
    ) -> Result<ConfirmationRecord> {
        const OP: &str = "confirmations.complete";
        let prepared = crate::audit::prepare(entry)?;
        let (owned_id, final_result) = (confirmation_id.to_owned(), final_result.clone());
        self.write(OP, confirmation_id, move |tx| {
            let record = complete_in(tx, &owned_id, &final_result, now_ms)?;
            crate::audit::append_prepared_in(tx, prepared)?;
            Ok(record)
        })
    }

    /// Attaches the final result of a confirmation that ended without executing (`denied`,
    /// `timeout`, `result_unknown`) and records it for replay under its identity key, in one
    /// transaction. The first attached result wins; a confirmation that is `pending`,
    /// `approved` or `completed` is [`StoreError::WrongState`].
    pub fn attach_final_result(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        const OP: &str = "confirmations.attach_final_result";
        let (owned_id, final_result) = (confirmation_id.to_owned(), final_result.clone());
        self.write(OP, confirmation_id, move |tx| {
            let (id, final_result) = (owned_id.as_str(), &final_result);
            tx.exec_cached(
                "UPDATE confirmations SET final_result_json = ?2 WHERE confirmation_id = ?1 \
                 AND state IN ('denied', 'timeout', 'result_unknown') \
                 AND final_result_json IS NULL",
                params![id, to_json(final_result)],
            )
            .ctx(OP, id)?;
            let record = require(tx, id)?;
            record.require_ended_unexecuted()?;
            let stored = record.final_result.as_ref().unwrap_or(final_result);
            record_final_in(tx, &record.identity, &record.request_id, stored, now_ms)?;
            Ok(record)
        })
    }

    /// Moves every pending confirmation with `expires_at_ms <= now_ms` to `timeout` and returns
    /// them (the caller records their final results and announces them).
    pub fn expire_due(&self, now_ms: i64) -> Result<Vec<ConfirmationRecord>> {
        self.write("confirmations.expire_due", "", move |tx| {
            expire_due_in(tx, now_ms)
        })
    }

    /// Start-up repair after a daemon restart: `approved` (outcome unknown) → `result_unknown`,
    /// pending past expiry → `timeout`; pending in time stay pending. Other states untouched.
    pub fn recover_after_restart(&self, now_ms: i64) -> Result<Recovery> {
        const OP: &str = "confirmations.recover";
        self.write(OP, "", move |tx| {
            let approved = query(
                tx,
                OP,
                select!("WHERE state = 'approved' ORDER BY created_at_ms, confirmation_id"),
                [],
            )?;
            let mut result_unknown = Vec::with_capacity(approved.len());
            for record in approved {
                let n = tx
                    .exec_cached(
                        "UPDATE confirmations SET state = 'result_unknown' \
                         WHERE confirmation_id = ?1 AND state = 'approved'",
                        [&record.confirmation_id],
                    )
                    .ctx(OP, &record.confirmation_id)?;
                if n == 1 {
                    result_unknown.push(require(tx, &record.confirmation_id)?);
                }
            }
            let timed_out = expire_due_in(tx, now_ms)?;
            let still_pending = query(
                tx,
                OP,
                select!("WHERE state = 'pending' ORDER BY created_at_ms, confirmation_id"),
                [],
            )?;
            Ok(Recovery {
                result_unknown,
                timed_out,
                still_pending,
            })
        })
    }
}
