//! [`SessionStore`] on PostgreSQL: phone sessions (`runtime-protocol.md` §2.2) and their
//! transcripts ([`transcripts`]), a port of the SQLite store's `sessions.rs`/`transcripts.rs`.
//!
//! # In a fleet
//!
//! A session belongs to the daemon whose phone it drives: `phone_sessions.host_id` is the
//! creating daemon's [`PgStore::host_id`]. Reads (`get_session`, `list_sessions`) and the
//! writes that name a session by id are fleet-wide, as the operator's views are. Two writes are
//! scoped to this daemon:
//! - [`SessionStore::fail_active_sessions`] (a runtime disconnected, or the daemon restarted)
//!   fails only THIS daemon's active sessions of the runtime: another host's runtime is still
//!   connected there, and its sessions are still running.
//! - [`SessionStore::prune_sessions`] drops only this daemon's oldest sessions beyond its
//!   `keep` most recent, so a busy host never prunes a quiet host's sessions.
//!
//! Ordering ties (sessions created in the same millisecond) are broken by `row_seq`, an
//! identity column standing in for SQLite's rowid.

use openphone_store::{
    Autonomy, MIN_SESSIONS_RETAINED, NewPhoneSession, PhoneSession, Result, SessionFilter,
    SessionStatus, SessionStore, StoreError,
};
use postgres::{GenericClient, Row};

use crate::{PgContext, PgStore};

mod transcripts;

const COLUMNS: &str = "phone_session_id, created_at_ms, updated_at_ms, runtime_kind, \
    runtime_session_id, attention_id, source, autonomy, summary, status, audit_log_id, \
    failure_reason, device_id";

/// The statuses of a session still under way (`SessionStatus::is_active`), as SQL.
const ACTIVE_SQL: &str =
    "('created', 'waiting_for_runtime', 'running', 'waiting_for_confirmation')";

fn corrupt(op: &'static str, id: &str, detail: String) -> StoreError {
    StoreError::Corrupt {
        op,
        id: id.to_owned(),
        detail,
    }
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound {
        table: "phone_sessions",
        id: id.to_owned(),
    }
}

pub(crate) fn from_row(row: &Row) -> Result<PhoneSession> {
    const OP: &str = "phone_sessions.read";
    let id: String = row.try_get("phone_session_id").ctx(OP, "")?;
    let get = |name: &str| row.try_get::<_, String>(name).ctx(OP, &id);
    let autonomy = get("autonomy")?;
    let status = get("status")?;
    Ok(PhoneSession {
        created_at_ms: row.try_get("created_at_ms").ctx(OP, &id)?,
        updated_at_ms: row.try_get("updated_at_ms").ctx(OP, &id)?,
        runtime_kind: get("runtime_kind")?,
        runtime_session_id: get("runtime_session_id")?,
        attention_id: get("attention_id")?,
        source: get("source")?,
        autonomy: Autonomy::parse(&autonomy)
            .ok_or_else(|| corrupt(OP, &id, format!("unknown value {autonomy:?}")))?,
        summary: get("summary")?,
        status: SessionStatus::parse(&status)
            .ok_or_else(|| corrupt(OP, &id, format!("unknown value {status:?}")))?,
        audit_log_id: get("audit_log_id")?,
        failure_reason: row.try_get("failure_reason").ctx(OP, &id)?,
        device_id: row.try_get("device_id").ctx(OP, &id)?,
        phone_session_id: id,
    })
}

fn get_in(client: &mut impl GenericClient, id: &str) -> Result<Option<PhoneSession>> {
    const OP: &str = "phone_sessions.get";
    let sql = format!("SELECT {COLUMNS} FROM phone_sessions WHERE phone_session_id = $1");
    client
        .query_opt(&sql, &[&id])
        .ctx(OP, id)?
        .map(|row| from_row(&row))
        .transpose()
}

/// Which current status a status write expects (compare-and-set).
#[derive(Debug, Clone, Copy)]
enum StatusGuard {
    /// Whatever it is.
    Any,
    /// Still active.
    Active,
    /// Anything but failed.
    NotFailed,
}

impl PgStore {
    /// The one status write: the session after it, or `None` when no row changed (unknown, or
    /// its status not the one `guard` expects). With `must_exist`, an unknown session is
    /// `NotFound` (checked in the same transaction).
    fn set_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
        guard: StatusGuard,
        must_exist: bool,
    ) -> Result<Option<PhoneSession>> {
        const OP: &str = "phone_sessions.update_status";
        let condition = match guard {
            StatusGuard::Any => String::new(),
            StatusGuard::Active => format!(" AND status IN {ACTIVE_SQL}"),
            StatusGuard::NotFailed => " AND status <> 'failed'".to_owned(),
        };
        let sql = format!(
            "UPDATE phone_sessions SET status = $2, failure_reason = $3, updated_at_ms = $4 \
             WHERE phone_session_id = $1{condition} RETURNING {COLUMNS}"
        );
        let id = phone_session_id.to_owned();
        let reason = failure_reason.map(str::to_owned);
        self.write(OP, phone_session_id, move |tx| {
            let row = tx
                .query_opt(&sql, &[&id, &status.as_str(), &reason, &now_ms])
                .ctx(OP, &id)?;
            match row {
                Some(row) => from_row(&row).map(Some),
                None if must_exist => {
                    let exists = tx
                        .query_opt(
                            "SELECT 1 FROM phone_sessions WHERE phone_session_id = $1",
                            &[&id],
                        )
                        .ctx(OP, &id)?;
                    match exists {
                        Some(_) => Ok(None),
                        None => Err(not_found(&id)),
                    }
                }
                None => Ok(None),
            }
        })
    }

    /// One `UPDATE … WHERE phone_session_id = $1 RETURNING`: the session after it, or
    /// `NotFound`. `sql` takes the id as `$1` and `args` as `$2…`.
    fn update_session<A>(
        &self,
        op: &'static str,
        id: &str,
        sql: String,
        args: A,
    ) -> Result<PhoneSession>
    where
        A: Fn() -> Vec<Box<dyn postgres::types::ToSql + Sync + Send>> + Send + 'static,
    {
        let owned = id.to_owned();
        self.write(op, id, move |tx| {
            let args = args();
            let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&owned];
            params.extend(
                args.iter()
                    .map(|a| a.as_ref() as &(dyn postgres::types::ToSql + Sync)),
            );
            match tx.query_opt(&sql, &params).ctx(op, &owned)? {
                Some(row) => from_row(&row),
                None => Err(not_found(&owned)),
            }
        })
    }
}

impl SessionStore for PgStore {
    /// Creates a phone session of this daemon in status `created` with `audit_log_id =
    /// phone-session:<id>`. [`StoreError::AlreadyExists`] on a duplicate id (of any host).
    fn create_session(&self, new: &NewPhoneSession, now_ms: i64) -> Result<PhoneSession> {
        const OP: &str = "phone_sessions.create";
        let new = new.clone();
        let host_id = self.host_id().to_owned();
        let sql = format!(
            "INSERT INTO phone_sessions (phone_session_id, host_id, created_at_ms, updated_at_ms, \
             runtime_kind, runtime_session_id, attention_id, source, autonomy, summary, status, \
             audit_log_id, failure_reason) \
             VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL) \
             ON CONFLICT (phone_session_id) DO NOTHING RETURNING {COLUMNS}"
        );
        self.write(OP, &new.phone_session_id.clone(), move |tx| {
            let id = new.phone_session_id.as_str();
            let row = tx
                .query_opt(
                    &sql,
                    &[
                        &id,
                        &host_id,
                        &now_ms,
                        &new.runtime_kind,
                        &new.runtime_session_id,
                        &new.attention_id,
                        &new.source,
                        &new.autonomy.as_str(),
                        &new.summary,
                        &SessionStatus::Created.as_str(),
                        &format!("phone-session:{id}"),
                    ],
                )
                .ctx(OP, id)?;
            match row {
                Some(row) => from_row(&row),
                None => Err(StoreError::AlreadyExists {
                    table: "phone_sessions",
                    id: id.to_owned(),
                }),
            }
        })
    }

    fn get_session(&self, phone_session_id: &str) -> Result<Option<PhoneSession>> {
        let id = phone_session_id.to_owned();
        self.read("phone_sessions.get", phone_session_id, move |client| {
            get_in(client, &id)
        })
    }

    /// Sets the status (and the failure reason: `Some` sets it, `None` clears it).
    fn update_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        self.set_session_status(
            phone_session_id,
            status,
            failure_reason,
            now_ms,
            StatusGuard::Any,
            false,
        )?
        .ok_or_else(|| not_found(phone_session_id))
    }

    /// Sets the status only while the session is still active (compare-and-set in one
    /// statement). `Ok(None)`: it had already ended. `NotFound` for an unknown session.
    fn update_active_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<PhoneSession>> {
        self.set_session_status(
            phone_session_id,
            status,
            failure_reason,
            now_ms,
            StatusGuard::Active,
            true,
        )
    }

    /// Moves a session that has not failed to `running`. `Ok(None)`: it failed meanwhile (or
    /// is unknown).
    fn reopen_session(&self, phone_session_id: &str, now_ms: i64) -> Result<Option<PhoneSession>> {
        self.set_session_status(
            phone_session_id,
            SessionStatus::Running,
            None,
            now_ms,
            StatusGuard::NotFailed,
            false,
        )
    }

    fn set_session_autonomy(
        &self,
        phone_session_id: &str,
        autonomy: Autonomy,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        let sql = format!(
            "UPDATE phone_sessions SET autonomy = $2, updated_at_ms = $3 \
             WHERE phone_session_id = $1 RETURNING {COLUMNS}"
        );
        self.update_session(
            "phone_sessions.set_autonomy",
            phone_session_id,
            sql,
            move || vec![Box::new(autonomy.as_str().to_owned()), Box::new(now_ms)],
        )
    }

    /// Binds the session to the phone `device_id` names (`None`: the daemon's only phone).
    fn set_session_device(
        &self,
        phone_session_id: &str,
        device_id: Option<&str>,
    ) -> Result<PhoneSession> {
        let sql = format!(
            "UPDATE phone_sessions SET device_id = $2 WHERE phone_session_id = $1 \
             RETURNING {COLUMNS}"
        );
        let device = device_id.map(str::to_owned);
        self.update_session(
            "phone_sessions.set_device",
            phone_session_id,
            sql,
            move || vec![Box::new(device.clone())],
        )
    }

    fn set_session_runtime_session_id(
        &self,
        phone_session_id: &str,
        runtime_session_id: &str,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        let sql = format!(
            "UPDATE phone_sessions SET runtime_session_id = $2, updated_at_ms = $3 \
             WHERE phone_session_id = $1 RETURNING {COLUMNS}"
        );
        let runtime_session_id = runtime_session_id.to_owned();
        self.update_session(
            "phone_sessions.set_runtime_session_id",
            phone_session_id,
            sql,
            move || vec![Box::new(runtime_session_id.clone()), Box::new(now_ms)],
        )
    }

    /// Sessions of the whole fleet matching the filter, newest first.
    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<PhoneSession>> {
        const OP: &str = "phone_sessions.list";
        let sql = format!(
            "SELECT {COLUMNS} FROM phone_sessions \
             WHERE ($1::TEXT IS NULL OR runtime_kind = $1) AND ($2::TEXT IS NULL OR status = $2) \
             ORDER BY created_at_ms DESC, row_seq DESC LIMIT $3"
        );
        let runtime = filter.runtime.clone();
        let status = filter.status.map(|s| s.as_str().to_owned());
        // LIMIT NULL is no limit.
        let limit = filter.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        self.read(OP, "", move |client| {
            client
                .query(&sql, &[&runtime, &status, &limit])
                .ctx(OP, "")?
                .iter()
                .map(from_row)
                .collect()
        })
    }

    /// Marks every active session of `runtime` ON THIS DAEMON as `failed` with `reason` and
    /// returns them, oldest first. Another host's sessions are left alone.
    fn fail_active_sessions(
        &self,
        runtime: &str,
        reason: &str,
        now_ms: i64,
    ) -> Result<Vec<PhoneSession>> {
        const OP: &str = "phone_sessions.fail_active";
        let sql = format!(
            "UPDATE phone_sessions SET status = 'failed', failure_reason = $3, \
             updated_at_ms = $4 WHERE host_id = $1 AND runtime_kind = $2 \
             AND status IN {ACTIVE_SQL} RETURNING row_seq, {COLUMNS}"
        );
        let owned = (
            self.host_id().to_owned(),
            runtime.to_owned(),
            reason.to_owned(),
        );
        self.write(OP, runtime, move |tx| {
            let (host_id, runtime, reason) = (&owned.0, &owned.1, &owned.2);
            let rows = tx
                .query(&sql, &[host_id, runtime, reason, &now_ms])
                .ctx(OP, runtime)?;
            let mut out = rows
                .iter()
                .map(|row| {
                    Ok((
                        row.try_get::<_, i64>("row_seq").ctx(OP, runtime)?,
                        from_row(row)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            out.sort_by_key(|(seq, s)| (s.created_at_ms, *seq));
            Ok(out.into_iter().map(|(_, s)| s).collect())
        })
    }

    /// Drops this daemon's oldest sessions beyond its `keep` most recent (`keep` raised to at
    /// least [`MIN_SESSIONS_RETAINED`]), their transcripts with them. Returns how many went.
    fn prune_sessions(&self, keep: usize) -> Result<usize> {
        const OP: &str = "phone_sessions.prune";
        let keep = i64::try_from(keep.max(MIN_SESSIONS_RETAINED)).unwrap_or(i64::MAX);
        let host_id = self.host_id().to_owned();
        self.write(OP, "", move |tx| {
            let n = tx
                .execute(
                    "DELETE FROM phone_sessions WHERE host_id = $1 AND row_seq NOT IN \
                     (SELECT row_seq FROM phone_sessions WHERE host_id = $1 \
                      ORDER BY created_at_ms DESC, row_seq DESC LIMIT $2)",
                    &[&host_id, &keep],
                )
                .ctx(OP, "")?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    fn append_transcript(
        &self,
        phone_session_id: &str,
        role: &str,
        body: &serde_json::Value,
        now_ms: i64,
    ) -> Result<openphone_store::TranscriptEntry> {
        transcripts::append(self, phone_session_id, role, body, now_ms)
    }

    fn append_transcript_async<'a>(
        &'a self,
        phone_session_id: &'a str,
        role: &'a str,
        body: &'a serde_json::Value,
        now_ms: i64,
    ) -> openphone_store::BoxFuture<'a, Result<openphone_store::TranscriptEntry>> {
        Box::pin(transcripts::append_async(
            self,
            phone_session_id,
            role,
            body,
            now_ms,
        ))
    }

    fn transcript(&self, phone_session_id: &str) -> Result<Vec<openphone_store::TranscriptEntry>> {
        transcripts::read(self, phone_session_id)
    }
}
