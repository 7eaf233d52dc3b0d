//! [`ConfirmationStore`] on PostgreSQL: the fleet's shared inbox (`runtime-protocol.md` §10.1).
//!
//! A port of the SQLite store's `confirmations.rs`, with the same behaviour and errors. Every
//! state change is one `UPDATE … WHERE state = '<from>'` in a SERIALIZABLE transaction; the
//! affected-row count decides whether this caller won the transition — across daemons too: two
//! daemons resolving one confirmation at once touch the same row, PostgreSQL makes the second
//! wait for the first and then aborts it (40001), and the writer runs it again, when it finds
//! the row no longer pending. No transition ever executes anything.
//!
//! # Fleet semantics
//!
//! Each row names the daemon that created it (`host_id`, the one whose phone would act; see
//! [`PgStore::confirmation_host`]). Any daemon may read, list, resolve, complete or expire any
//! confirmation (the operator's inbox is the fleet's). Two things stay per daemon:
//! - [`ConfirmationStore::recover_after_restart`] settles only this daemon's rows: another live
//!   daemon's approved confirmation is still executing there, not "unknown" because this one
//!   restarted;
//! - the per-runtime cap ([`ConfirmationStore::count_pending`] and `insert_pending`) counts this
//!   daemon's pending confirmations: a runtime is a connection to one daemon, and one host's
//!   flood must not refuse another host's requests.

use openphone_protocol::Risk;
use openphone_store::{
    AuditEntry, ConfirmationFilter, ConfirmationRecord, ConfirmationState, ConfirmationStore,
    IdentityKey, NewConfirmation, NotPending, PendingInsert, RESOLVED_BY_EXPIRY, Recovery,
    Resolution, Result, StoreError,
};
use postgres::GenericClient;
use postgres::types::ToSql;
use serde_json::Value;

use crate::replay::{check_identity, record_final_in};
use crate::{PgContext, PgStore, is_unique_violation};

const COLUMNS: &str = "confirmation_id, runtime, runtime_session_id, tool, params_digest, \
    idempotency_key, request_id, request_json, phone_session_id, summary, risk, created_at_ms, \
    expires_at_ms, state, resolved_at_ms, resolved_by, final_result_json, host_id";

type Params<'a> = [&'a (dyn ToSql + Sync)];

fn corrupt(op: &'static str, id: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        op,
        id: id.to_owned(),
        detail: detail.to_string(),
    }
}

fn parse_json(text: &str, op: &'static str, id: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| corrupt(op, id, e))
}

fn from_row(row: &postgres::Row) -> Result<ConfirmationRecord> {
    const OP: &str = "confirmations.read";
    let col = |name: &str| -> Result<String> { row.try_get(name).ctx(OP, name) };
    let opt = |name: &str| -> Result<Option<String>> { row.try_get(name).ctx(OP, name) };
    let num = |name: &str| -> Result<i64> { row.try_get(name).ctx(OP, name) };
    let id = col("confirmation_id")?;
    let risk = col("risk")?;
    let state = col("state")?;
    Ok(ConfirmationRecord {
        identity: IdentityKey {
            runtime: col("runtime")?,
            runtime_session_id: col("runtime_session_id")?,
            tool: col("tool")?,
            params_digest: col("params_digest")?,
            idempotency_key: col("idempotency_key")?,
        },
        request_id: col("request_id")?,
        request: parse_json(&col("request_json")?, OP, &id)?,
        phone_session_id: opt("phone_session_id")?,
        summary: col("summary")?,
        risk: Risk::parse(&risk)
            .ok_or_else(|| corrupt(OP, &id, format!("unknown value {risk:?}")))?,
        created_at_ms: num("created_at_ms")?,
        expires_at_ms: num("expires_at_ms")?,
        state: ConfirmationState::parse(&state)
            .ok_or_else(|| corrupt(OP, &id, format!("unknown value {state:?}")))?,
        resolved_at_ms: row.try_get("resolved_at_ms").ctx(OP, "resolved_at_ms")?,
        resolved_by: opt("resolved_by")?,
        final_result: opt("final_result_json")?
            .map(|text| parse_json(&text, OP, &id))
            .transpose()?,
        host: Some(openphone_store::RowHost::of(col("host_id")?)),
        confirmation_id: id,
    })
}

fn query(
    conn: &mut impl GenericClient,
    op: &'static str,
    where_sql: &str,
    args: &Params<'_>,
) -> Result<Vec<ConfirmationRecord>> {
    let sql = format!("SELECT {COLUMNS} FROM confirmations {where_sql}");
    conn.query(sql.as_str(), args)
        .ctx(op, "")?
        .iter()
        .map(from_row)
        .collect()
}

fn get_in(conn: &mut impl GenericClient, id: &str) -> Result<Option<ConfirmationRecord>> {
    Ok(query(
        conn,
        "confirmations.get",
        "WHERE confirmation_id = $1",
        &[&id],
    )?
    .into_iter()
    .next())
}

fn require(conn: &mut impl GenericClient, id: &str) -> Result<ConfirmationRecord> {
    get_in(conn, id)?.ok_or_else(|| StoreError::NotFound {
        table: "confirmations",
        id: id.to_owned(),
    })
}

/// Moves an `approved` confirmation to `completed` with its final result, recorded for replay
/// under its identity key; any other state is [`StoreError::WrongState`].
fn complete_in(
    tx: &mut postgres::Transaction<'_>,
    id: &str,
    final_result: &Value,
    now_ms: i64,
) -> Result<ConfirmationRecord> {
    const OP: &str = "confirmations.complete";
    let n = tx
        .execute(
            "UPDATE confirmations SET state = 'completed', final_result_json = $2 \
             WHERE confirmation_id = $1 AND state = 'approved'",
            &[&id, &final_result.to_string()],
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

fn find_pending_in(
    conn: &mut impl GenericClient,
    identity: &IdentityKey,
    now_ms: i64,
) -> Result<Option<ConfirmationRecord>> {
    Ok(query(
        conn,
        "confirmations.find_pending",
        "WHERE runtime = $1 AND runtime_session_id = $2 AND tool = $3 AND params_digest = $4 \
         AND idempotency_key = $5 AND state = 'pending' AND expires_at_ms > $6 \
         ORDER BY created_at_ms LIMIT 1",
        &[
            &identity.runtime,
            &identity.runtime_session_id,
            &identity.tool,
            &identity.params_digest,
            &identity.idempotency_key,
            &now_ms,
        ],
    )?
    .into_iter()
    .next())
}

/// Pending, unexpired confirmations of `runtime` made by `host_id` (the per-runtime cap).
fn count_pending_in(
    conn: &mut impl GenericClient,
    host_id: &str,
    runtime: &str,
    now_ms: i64,
) -> Result<usize> {
    let row = conn
        .query_one(
            "SELECT COUNT(*) FROM confirmations WHERE host_id = $1 AND runtime = $2 \
             AND state = 'pending' AND expires_at_ms > $3",
            &[&host_id, &runtime, &now_ms],
        )
        .ctx("confirmations.count_pending", runtime)?;
    let n: i64 = row.try_get(0).ctx("confirmations.count_pending", runtime)?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Moves every pending confirmation with `expires_at_ms <= now_ms` to `timeout` (only those
/// made by `host`, when it is given).
fn expire_due_in(
    tx: &mut postgres::Transaction<'_>,
    host: Option<&str>,
    now_ms: i64,
) -> Result<Vec<ConfirmationRecord>> {
    const OP: &str = "confirmations.expire_due";
    let due = query(
        tx,
        OP,
        "WHERE state = 'pending' AND expires_at_ms <= $1 AND ($2::text IS NULL OR host_id = $2) \
         ORDER BY expires_at_ms, confirmation_id",
        &[&now_ms, &host],
    )?;
    let mut out = Vec::with_capacity(due.len());
    for record in due {
        let n = tx
            .execute(
                "UPDATE confirmations SET state = 'timeout', resolved_at_ms = $2, \
                 resolved_by = $3 WHERE confirmation_id = $1 AND state = 'pending'",
                &[&record.confirmation_id, &now_ms, &RESOLVED_BY_EXPIRY],
            )
            .ctx(OP, &record.confirmation_id)?;
        if n == 1 {
            out.push(require(tx, &record.confirmation_id)?);
        }
    }
    Ok(out)
}

/// Why `resolve` lost: unknown, already resolved, or pending past its expiry (which this call
/// then settles as a timeout).
fn not_pending_in(tx: &mut postgres::Transaction<'_>, id: &str, now_ms: i64) -> Result<NotPending> {
    const OP: &str = "confirmations.resolve";
    let Some(record) = get_in(tx, id)? else {
        return Ok(NotPending::Unknown);
    };
    Ok(match record.state {
        ConfirmationState::Pending => {
            // Pending but expired: settle it as a timeout now.
            let n = tx
                .execute(
                    "UPDATE confirmations SET state = 'timeout', resolved_at_ms = $2, \
                     resolved_by = $3 WHERE confirmation_id = $1 AND state = 'pending'",
                    &[&id, &now_ms, &RESOLVED_BY_EXPIRY],
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
    })
}

/// Runs the rest of `tx` at READ COMMITTED instead of the writer's SERIALIZABLE; the first
/// statement of every transition of this module and of the outbox (`outcomes.rs`).
///
/// A transition is one guarded single-row `UPDATE … WHERE state = '<from>'` plus reads of that
/// row (and the replay/audit rows of the same request): PostgreSQL takes the row's lock, and an
/// `UPDATE` that waited for another writer's lock checks its `WHERE` again on the row as that
/// writer left it, so the row count alone picks the single winner at this level. SERIALIZABLE
/// adds nothing to that but false conflicts: its read locks on index pages are page-wide, and a
/// state change writes new index entries, so two daemons moving *different* confirmations of
/// one index page abort each other (measured: the 100-confirmation race of
/// `confirmations_fleet.rs` ran out of the writer's 10 retries). `insert_pending` runs at this
/// level too, behind an advisory lock of its identity (`xact_lock.rs`).
pub(crate) fn read_committed(tx: &mut postgres::Transaction<'_>, op: &'static str) -> Result<()> {
    tx.batch_execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .ctx(op, "")
}

impl PgStore {
    /// The daemon that created a confirmation (the one whose phone would act on approval), or
    /// `None` for an unknown id. The server uses it to route an approval to the right host.
    pub fn confirmation_host(&self, confirmation_id: &str) -> Result<Option<String>> {
        const OP: &str = "confirmations.host";
        let id = confirmation_id.to_owned();
        self.read(OP, confirmation_id, move |conn| {
            let row = conn
                .query_opt(
                    "SELECT host_id FROM confirmations WHERE confirmation_id = $1",
                    &[&id],
                )
                .ctx(OP, &id)?;
            row.map(|row| row.try_get::<_, String>(0).ctx(OP, &id))
                .transpose()
        })
    }
}

impl ConfirmationStore for PgStore {
    fn insert_pending(
        &self,
        new: &NewConfirmation,
        max_pending_per_runtime: usize,
    ) -> Result<PendingInsert> {
        const OP: &str = "confirmations.insert_pending";
        check_identity(&new.identity)?;
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
        let host_id = self.host_id().to_owned();
        self.write(OP, &new.confirmation_id.clone(), move |tx| {
            let id = new.confirmation_id.as_str();
            // Two daemons asking for one identity check for its pending confirmation one
            // after the other (`xact_lock.rs`). The cap needs no lock: only this host's writer
            // inserts this host's rows (the host lock keeps a host to one daemon), and other
            // daemons only ever lower the count.
            let key = &new.identity;
            crate::xact_lock::lock_in_line(
                tx,
                OP,
                id,
                "identity",
                &[
                    &key.runtime,
                    &key.runtime_session_id,
                    &key.tool,
                    &key.params_digest,
                    &key.idempotency_key,
                ],
            )?;
            if let Some(existing) = find_pending_in(tx, &new.identity, now_ms)? {
                return Ok(PendingInsert::Existing(existing));
            }
            let pending = count_pending_in(tx, &host_id, &new.identity.runtime, now_ms)?;
            if pending >= max_pending_per_runtime {
                return Ok(PendingInsert::TooMany { pending });
            }
            let exists = || StoreError::AlreadyExists {
                table: "confirmations",
                id: id.to_owned(),
            };
            if get_in(tx, id)?.is_some() {
                return Err(exists());
            }
            let inserted = tx.execute(
                "INSERT INTO confirmations (confirmation_id, host_id, runtime, \
                 runtime_session_id, tool, params_digest, idempotency_key, request_id, \
                 request_json, phone_session_id, summary, risk, created_at_ms, expires_at_ms, \
                 state) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'pending')",
                &[
                    &id,
                    &host_id,
                    &new.identity.runtime,
                    &new.identity.runtime_session_id,
                    &new.identity.tool,
                    &new.identity.params_digest,
                    &new.identity.idempotency_key,
                    &new.request_id,
                    &new.request.to_string(),
                    &new.phone_session_id,
                    &new.summary,
                    &new.risk.as_str(),
                    &new.created_at_ms,
                    &new.expires_at_ms,
                ],
            );
            match inserted {
                Ok(_) => {}
                // Another daemon stored the same id since the check above.
                Err(e) if is_unique_violation(&e) => return Err(exists()),
                Err(e) => return Err(crate::error::from_pg(OP, id, &e)),
            }
            Ok(PendingInsert::Created(require(tx, id)?))
        })
    }

    fn get_confirmation(&self, confirmation_id: &str) -> Result<Option<ConfirmationRecord>> {
        let id = confirmation_id.to_owned();
        self.read("confirmations.get", confirmation_id, move |conn| {
            get_in(conn, &id)
        })
    }

    fn find_pending(
        &self,
        identity: &IdentityKey,
        now_ms: i64,
    ) -> Result<Option<ConfirmationRecord>> {
        let identity = identity.clone();
        self.read("confirmations.find_pending", "", move |conn| {
            find_pending_in(conn, &identity, now_ms)
        })
    }

    /// The three kinds a retry may join are disjoint by state, so one `WHERE` with three
    /// alternatives lists what SQLite's `UNION ALL` does, in the same order.
    fn find_joinable(
        &self,
        runtime: &str,
        runtime_session_id: &str,
        tool: &str,
        resolved_since_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<ConfirmationRecord>> {
        const OP: &str = "confirmations.find_joinable";
        let key = (
            runtime.to_owned(),
            runtime_session_id.to_owned(),
            tool.to_owned(),
        );
        self.read(OP, runtime_session_id, move |conn| {
            query(
                conn,
                OP,
                "WHERE runtime = $1 AND runtime_session_id = $2 AND tool = $3 AND ( \
                 (state = 'pending' AND expires_at_ms > $5) OR state = 'approved' \
                 OR (state IN ('completed', 'denied', 'result_unknown') \
                 AND expires_at_ms > $4 AND resolved_at_ms >= $4)) \
                 ORDER BY created_at_ms, confirmation_id",
                &[&key.0, &key.1, &key.2, &resolved_since_ms, &now_ms],
            )
        })
    }

    fn list_confirmations(&self, filter: &ConfirmationFilter) -> Result<Vec<ConfirmationRecord>> {
        const OP: &str = "confirmations.list";
        let state = filter.state.map(ConfirmationState::as_str);
        let runtime = filter.runtime.clone();
        let limit = filter.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        self.read(OP, "", move |conn| {
            query(
                conn,
                OP,
                "WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR runtime = $2) \
                 ORDER BY (state = 'pending') DESC, created_at_ms DESC, confirmation_id \
                 LIMIT $3",
                &[&state, &runtime, &limit],
            )
        })
    }

    fn next_pending_expiry(&self) -> Result<Option<i64>> {
        const OP: &str = "confirmations.next_pending_expiry";
        self.read(OP, "", move |conn| {
            let row = conn
                .query_one(
                    "SELECT MIN(expires_at_ms) FROM confirmations WHERE state = 'pending'",
                    &[],
                )
                .ctx(OP, "")?;
            row.try_get(0).ctx(OP, "")
        })
    }

    /// This daemon's pending, unexpired confirmations of one runtime (see the module's fleet
    /// semantics).
    fn count_pending(&self, runtime: &str, now_ms: i64) -> Result<usize> {
        let (host_id, runtime) = (self.host_id().to_owned(), runtime.to_owned());
        self.read("confirmations.count_pending", "", move |conn| {
            count_pending_in(conn, &host_id, &runtime, now_ms)
        })
    }

    fn resolve(
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
            read_committed(tx, OP)?;
            let (id, resolved_by) = (owned.0.as_str(), owned.1.as_str());
            let args: &Params<'_> = &[&id, &target.as_str(), &now_ms, &resolved_by];
            let won = match decision {
                Resolution::Approve | Resolution::Deny => tx.execute(
                    "UPDATE confirmations SET state = $2, resolved_at_ms = $3, resolved_by = $4 \
                     WHERE confirmation_id = $1 AND state = 'pending' AND expires_at_ms > $3",
                    args,
                ),
                Resolution::Timeout => tx.execute(
                    "UPDATE confirmations SET state = $2, resolved_at_ms = $3, resolved_by = $4 \
                     WHERE confirmation_id = $1 AND state = 'pending'",
                    args,
                ),
            }
            .ctx(OP, id)?;
            if won == 1 {
                return Ok(Ok(require(tx, id)?));
            }
            Ok(Err(not_pending_in(tx, id, now_ms)?))
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

    fn complete(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        let (owned_id, final_result) = (confirmation_id.to_owned(), final_result.clone());
        self.write("confirmations.complete", confirmation_id, move |tx| {
            read_committed(tx, "confirmations.complete")?;
            complete_in(tx, &owned_id, &final_result, now_ms)
        })
    }

    /// The completion and its audit record (appended to this daemon's chain) in one
    /// transaction.
    fn complete_audited(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
        entry: AuditEntry,
    ) -> Result<ConfirmationRecord> {
        let (owned_id, final_result) = (confirmation_id.to_owned(), final_result.clone());
        let host_id = self.host_id().to_owned();
        self.write("confirmations.complete", confirmation_id, move |tx| {
            read_committed(tx, "confirmations.complete")?;
            let record = complete_in(tx, &owned_id, &final_result, now_ms)?;
            crate::audit::append_in(tx, &host_id, &entry)?;
            Ok(record)
        })
    }

    fn attach_final_result(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        const OP: &str = "confirmations.attach_final_result";
        let (owned_id, final_result) = (confirmation_id.to_owned(), final_result.clone());
        self.write(OP, confirmation_id, move |tx| {
            read_committed(tx, OP)?;
            let (id, final_result) = (owned_id.as_str(), &final_result);
            tx.execute(
                "UPDATE confirmations SET final_result_json = $2 WHERE confirmation_id = $1 \
                 AND state IN ('denied', 'timeout', 'result_unknown') \
                 AND final_result_json IS NULL",
                &[&id, &final_result.to_string()],
            )
            .ctx(OP, id)?;
            let record = require(tx, id)?;
            record.require_ended_unexecuted()?;
            let stored = record.final_result.as_ref().unwrap_or(final_result);
            record_final_in(tx, &record.identity, &record.request_id, stored, now_ms)?;
            Ok(record)
        })
    }

    /// Fleet-wide: any daemon's expiry timer may settle any pending confirmation past its time.
    fn expire_due(&self, now_ms: i64) -> Result<Vec<ConfirmationRecord>> {
        const OP: &str = "confirmations.expire_due";
        self.write(OP, "", move |tx| {
            read_committed(tx, OP)?;
            expire_due_in(tx, None, now_ms)
        })
    }

    /// This daemon's confirmations only (see the module's fleet semantics).
    fn recover_after_restart(&self, now_ms: i64) -> Result<Recovery> {
        const OP: &str = "confirmations.recover";
        let host_id = self.host_id().to_owned();
        self.write(OP, &host_id.clone(), move |tx| {
            read_committed(tx, OP)?;
            let host = host_id.as_str();
            let approved = query(
                tx,
                OP,
                "WHERE host_id = $1 AND state = 'approved' ORDER BY created_at_ms, confirmation_id",
                &[&host],
            )?;
            let mut result_unknown = Vec::with_capacity(approved.len());
            for record in approved {
                let n = tx
                    .execute(
                        "UPDATE confirmations SET state = 'result_unknown' \
                         WHERE confirmation_id = $1 AND state = 'approved'",
                        &[&record.confirmation_id],
                    )
                    .ctx(OP, &record.confirmation_id)?;
                if n == 1 {
                    result_unknown.push(require(tx, &record.confirmation_id)?);
                }
            }
            let timed_out = expire_due_in(tx, Some(host), now_ms)?;
            let still_pending = query(
                tx,
                OP,
                "WHERE host_id = $1 AND state = 'pending' ORDER BY created_at_ms, confirmation_id",
                &[&host],
            )?;
            Ok(Recovery {
                result_unknown,
                timed_out,
                still_pending,
            })
        })
    }
}
