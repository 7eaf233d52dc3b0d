//! Phone sessions (`runtime-protocol.md` §2.2).

use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::wire::{Autonomy, col, parse_enum, sql_limit};

pub use openphone_protocol::endpoint::SessionStatus;

/// At least this many of the most recent phone sessions survive [`Store::prune_sessions`](crate::SessionStore::prune_sessions).
pub const MIN_SESSIONS_RETAINED: usize = 200;

/// A stored phone session: the endpoint's wire type, stored as it is sent.
pub use openphone_protocol::endpoint::PhoneSession;

/// What the caller supplies to create a session; it starts in `created`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewPhoneSession {
    pub phone_session_id: String,
    pub runtime_kind: String,
    pub runtime_session_id: String,
    pub attention_id: String,
    pub source: String,
    pub autonomy: Autonomy,
    pub summary: String,
}

/// Filters for [`Store::list_sessions`](crate::SessionStore::list_sessions); newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionFilter {
    pub runtime: Option<String>,
    pub status: Option<SessionStatus>,
    /// `None` = no limit.
    pub limit: Option<usize>,
}

/// The columns, as a macro so the statements are `concat!`ed once, not formatted per call.
macro_rules! columns {
    () => {
        "phone_session_id, created_at_ms, updated_at_ms, runtime_kind, runtime_session_id, \
         attention_id, source, autonomy, summary, status, audit_log_id, failure_reason, device_id"
    };
}

fn from_row(row: &Row<'_>) -> Result<PhoneSession> {
    const OP: &str = "phone_sessions.read";
    let id: String = col(row, "phone_session_id", OP)?;
    let autonomy: String = col(row, "autonomy", OP)?;
    let status: String = col(row, "status", OP)?;
    Ok(PhoneSession {
        created_at_ms: col(row, "created_at_ms", OP)?,
        updated_at_ms: col(row, "updated_at_ms", OP)?,
        runtime_kind: col(row, "runtime_kind", OP)?,
        runtime_session_id: col(row, "runtime_session_id", OP)?,
        attention_id: col(row, "attention_id", OP)?,
        source: col(row, "source", OP)?,
        autonomy: parse_enum(Autonomy::parse, &autonomy, OP, &id)?,
        summary: col(row, "summary", OP)?,
        status: parse_enum(SessionStatus::parse, &status, OP, &id)?,
        audit_log_id: col(row, "audit_log_id", OP)?,
        failure_reason: col(row, "failure_reason", OP)?,
        device_id: col(row, "device_id", OP)?,
        phone_session_id: id,
    })
}

fn get_in(conn: &rusqlite::Connection, id: &str) -> Result<Option<PhoneSession>> {
    const SQL: &str = concat!(
        "SELECT ",
        columns!(),
        " FROM phone_sessions WHERE phone_session_id = ?1"
    );
    let mut stmt = conn.prepare_cached(SQL).ctx("phone_sessions.get", id)?;
    let mut rows = stmt.query([id]).ctx("phone_sessions.get", id)?;
    match rows.next().ctx("phone_sessions.get", id)? {
        Some(row) => Ok(Some(from_row(row)?)),
        None => Ok(None),
    }
}

fn require(conn: &rusqlite::Connection, id: &str) -> Result<PhoneSession> {
    get_in(conn, id)?.ok_or_else(|| StoreError::NotFound {
        table: "phone_sessions",
        id: id.to_owned(),
    })
}

impl SqliteStore {
    /// Creates a phone session in status `created` with `audit_log_id =
    /// phone-session:<phone_session_id>`. Fails with [`StoreError::AlreadyExists`] on a
    /// duplicate id.
    pub fn create_session(&self, new: &NewPhoneSession, now_ms: i64) -> Result<PhoneSession> {
        let new = new.clone();
        self.write(
            "phone_sessions.create",
            &new.phone_session_id.clone(),
            move |tx| {
                let id = new.phone_session_id.as_str();
                let exists = tx
                    .row_cached(
                        "SELECT 1 FROM phone_sessions WHERE phone_session_id = ?1",
                        [id],
                        |_| Ok(()),
                    )
                    .optional()
                    .ctx("phone_sessions.create", id)?;
                if exists.is_some() {
                    return Err(StoreError::AlreadyExists {
                        table: "phone_sessions",
                        id: id.to_owned(),
                    });
                }
                tx.exec_cached(
                    "INSERT INTO phone_sessions (phone_session_id, created_at_ms, updated_at_ms, \
                 runtime_kind, runtime_session_id, attention_id, source, autonomy, summary, \
                 status, audit_log_id, failure_reason) \
                 VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL)",
                    params![
                        id,
                        now_ms,
                        new.runtime_kind,
                        new.runtime_session_id,
                        new.attention_id,
                        new.source,
                        new.autonomy.as_str(),
                        new.summary,
                        SessionStatus::Created.as_str(),
                        format!("phone-session:{id}"),
                    ],
                )
                .ctx("phone_sessions.create", id)?;
                require(tx, id)
            },
        )
    }

    /// One session, if it exists.
    pub fn get_session(&self, phone_session_id: &str) -> Result<Option<PhoneSession>> {
        get_in(&self.conn(), phone_session_id)
    }

    /// Sets the status (and the failure reason: `Some` sets it, `None` clears it).
    pub fn update_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        let id = phone_session_id.to_owned();
        let changed = self.set_status(
            phone_session_id,
            status,
            failure_reason,
            now_ms,
            StatusGuard::Any,
        )?;
        changed.ok_or(StoreError::NotFound {
            table: "phone_sessions",
            id,
        })
    }

    /// Sets the status (and failure reason) only while the session is still active: a session
    /// that has completed or failed is never moved back by a late message, a streamed delta or
    /// a tool result racing its end (compare-and-set in one statement). `Ok(None)`: it had
    /// already ended, nothing changed. Re-opening a completed session on purpose is
    /// [`Store::update_session_status`](crate::SessionStore::update_session_status).
    pub fn update_active_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<PhoneSession>> {
        let found = self.get_session(phone_session_id)?;
        if found.is_none() {
            return Err(StoreError::NotFound {
                table: "phone_sessions",
                id: phone_session_id.to_owned(),
            });
        }
        self.set_status(
            phone_session_id,
            status,
            failure_reason,
            now_ms,
            StatusGuard::Active,
        )
    }

    /// Moves a session that has not failed (active, or completed: a follow-up re-opens it) to
    /// `running`, in one compare-and-set. `Ok(None)`: it failed meanwhile (a cancel won).
    pub fn reopen_session(
        &self,
        phone_session_id: &str,
        now_ms: i64,
    ) -> Result<Option<PhoneSession>> {
        self.set_status(
            phone_session_id,
            SessionStatus::Running,
            None,
            now_ms,
            StatusGuard::NotFailed,
        )
    }

    /// The one status write: the session after it, or `None` when no row changed (unknown,
    /// or its status not the one `guard` expects).
    fn set_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
        guard: StatusGuard,
    ) -> Result<Option<PhoneSession>> {
        const OP: &str = "phone_sessions.update_status";
        let owned = (
            phone_session_id.to_owned(),
            failure_reason.map(str::to_owned),
        );
        let sql = match guard {
            StatusGuard::Any => {
                "UPDATE phone_sessions SET status = ?2, failure_reason = ?3, updated_at_ms = ?4 \
                 WHERE phone_session_id = ?1"
            }
            StatusGuard::Active => {
                "UPDATE phone_sessions SET status = ?2, failure_reason = ?3, updated_at_ms = ?4 \
                 WHERE phone_session_id = ?1 AND status IN \
                 ('created', 'waiting_for_runtime', 'running', 'waiting_for_confirmation')"
            }
            StatusGuard::NotFailed => {
                "UPDATE phone_sessions SET status = ?2, failure_reason = ?3, updated_at_ms = ?4 \
                 WHERE phone_session_id = ?1 AND status <> 'failed'"
            }
        };
        self.write(OP, phone_session_id, move |tx| {
            let (id, failure_reason) = (owned.0.as_str(), owned.1.as_deref());
            let n = tx
                .exec_cached(sql, params![id, status.as_str(), failure_reason, now_ms])
                .ctx(OP, id)?;
            if n == 0 {
                return Ok(None);
            }
            require(tx, id).map(Some)
        })
    }

    /// Sets a session's autonomy (a follow-up asked for a stricter one).
    pub fn set_session_autonomy(
        &self,
        phone_session_id: &str,
        autonomy: Autonomy,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        let id = phone_session_id.to_owned();
        self.write("phone_sessions.set_autonomy", phone_session_id, move |tx| {
            let n = tx
                .exec_cached(
                    "UPDATE phone_sessions SET autonomy = ?2, updated_at_ms = ?3 \
                         WHERE phone_session_id = ?1",
                    params![id, autonomy.as_str(), now_ms],
                )
                .ctx("phone_sessions.set_autonomy", &id)?;
            if n == 0 {
                return Err(StoreError::NotFound {
                    table: "phone_sessions",
                    id: id.clone(),
                });
            }
            require(tx, &id)
        })
    }

    /// Binds the session to the phone `device_id` names (`None`: the daemon's only phone).
    pub fn set_session_device(
        &self,
        phone_session_id: &str,
        device_id: Option<&str>,
    ) -> Result<PhoneSession> {
        let id = phone_session_id.to_owned();
        let device = device_id.map(str::to_owned);
        self.write("phone_sessions.set_device", phone_session_id, move |tx| {
            let n = tx
                .exec_cached(
                    "UPDATE phone_sessions SET device_id = ?2 WHERE phone_session_id = ?1",
                    params![id, device],
                )
                .ctx("phone_sessions.set_device", &id)?;
            if n == 0 {
                return Err(StoreError::NotFound {
                    table: "phone_sessions",
                    id: id.clone(),
                });
            }
            require(tx, &id)
        })
    }

    /// Records the runtime session key once the adapter knows it.
    pub fn set_session_runtime_session_id(
        &self,
        phone_session_id: &str,
        runtime_session_id: &str,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        let owned = (phone_session_id.to_owned(), runtime_session_id.to_owned());
        self.write(
            "phone_sessions.set_runtime_session_id",
            phone_session_id,
            move |tx| {
                let (id, runtime_session_id) = (owned.0.as_str(), owned.1.as_str());
                let n = tx
                    .exec_cached(
                        "UPDATE phone_sessions SET runtime_session_id = ?2, updated_at_ms = ?3 \
                     WHERE phone_session_id = ?1",
                        params![id, runtime_session_id, now_ms],
                    )
                    .ctx("phone_sessions.set_runtime_session_id", id)?;
                if n == 0 {
                    return Err(StoreError::NotFound {
                        table: "phone_sessions",
                        id: id.to_owned(),
                    });
                }
                require(tx, id)
            },
        )
    }

    /// Sessions matching the filter, newest first (`created_at_ms` descending).
    pub fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<PhoneSession>> {
        const OP: &str = "phone_sessions.list";
        const SQL: &str = concat!(
            "SELECT ",
            columns!(),
            " FROM phone_sessions \
             WHERE (?1 IS NULL OR runtime_kind = ?1) AND (?2 IS NULL OR status = ?2) \
             ORDER BY created_at_ms DESC, rowid DESC LIMIT ?3"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(SQL).ctx(OP, "")?;
        let mut rows = stmt
            .query(params![
                filter.runtime,
                filter.status.map(SessionStatus::as_str),
                filter.limit.map_or(-1, sql_limit),
            ])
            .ctx(OP, "")?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().ctx(OP, "")? {
            out.push(from_row(row)?);
        }
        Ok(out)
    }

    /// Marks every active session of `runtime` as `failed` with `reason` (runtime disconnect,
    /// §2.3) and returns them.
    pub fn fail_active_sessions(
        &self,
        runtime: &str,
        reason: &str,
        now_ms: i64,
    ) -> Result<Vec<PhoneSession>> {
        const OP: &str = "phone_sessions.fail_active";
        let owned = (runtime.to_owned(), reason.to_owned());
        self.write(OP, runtime, move |tx| {
            let (runtime, reason) = (owned.0.as_str(), owned.1.as_str());
            let mut ids = Vec::new();
            {
                let mut stmt = tx
                    .prepare(
                        "SELECT phone_session_id FROM phone_sessions WHERE runtime_kind = ?1 \
                         AND status NOT IN ('completed', 'failed') ORDER BY created_at_ms",
                    )
                    .ctx(OP, runtime)?;
                let rows = stmt
                    .query_map([runtime], |row| row.get::<_, String>(0))
                    .ctx(OP, runtime)?;
                for id in rows {
                    ids.push(id.ctx(OP, runtime)?);
                }
            }
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                tx.exec_cached(
                    "UPDATE phone_sessions SET status = 'failed', failure_reason = ?2, \
                     updated_at_ms = ?3 WHERE phone_session_id = ?1",
                    params![id, reason, now_ms],
                )
                .ctx(OP, &id)?;
                out.push(require(tx, &id)?);
            }
            Ok(out)
        })
    }

    /// Drops the oldest sessions beyond the `keep` most recent; `keep` is raised to at least
    /// [`MIN_SESSIONS_RETAINED`]. Returns how many were deleted.
    pub fn prune_sessions(&self, keep: usize) -> Result<usize> {
        let keep = keep.max(MIN_SESSIONS_RETAINED);
        self.write("phone_sessions.prune", "", move |tx| {
            tx.exec_cached(
                "DELETE FROM phone_sessions WHERE rowid NOT IN (SELECT rowid FROM \
                 phone_sessions ORDER BY created_at_ms DESC, rowid DESC LIMIT ?1)",
                [sql_limit(keep)],
            )
            .ctx("phone_sessions.prune", "")
        })
    }
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
