//! Final results for replay and the request-id index (`runtime-protocol.md` §10.2, §10.3).

use std::borrow::Cow;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::wire::{col, is_hex64, parse_json, to_json};

pub use crate::records::{FinalResult, IdentityKey, Scope};

impl IdentityKey {
    /// The key's five parts as SQL parameters `?1`..`?5`, in the columns' order (runtime,
    /// runtime session, tool, params digest, idempotency key).
    pub(crate) fn sql_params(&self) -> [&dyn rusqlite::ToSql; 5] {
        [
            &self.runtime,
            &self.runtime_session_id,
            &self.tool,
            &self.params_digest,
            &self.idempotency_key,
        ]
    }

    /// Rejects empty parts and a digest that is not 64 lowercase hex.
    #[doc(hidden)]
    pub fn check(&self) -> Result<()> {
        for (what, value) in [
            ("identity runtime", &self.runtime),
            ("identity runtime_session_id", &self.runtime_session_id),
            ("identity tool", &self.tool),
            ("identity idempotency_key", &self.idempotency_key),
        ] {
            if value.is_empty() {
                return Err(StoreError::Invalid {
                    what,
                    detail: format!("empty in {}", self.describe()),
                });
            }
        }
        check_digest(&self.params_digest)
    }
}

/// Rejects a `params_digest` that is not 64 lowercase hex digits.
#[doc(hidden)]
pub fn check_digest(digest: &str) -> Result<()> {
    if is_hex64(digest) {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what: "params_digest",
            detail: format!("{digest:?} is not 64 lowercase hex digits"),
        })
    }
}

/// An entry of the request-id index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestEntry {
    pub scope: Scope,
    pub request_id: String,
    pub tool: String,
    pub params_digest: String,
    pub recorded_at_ms: i64,
}

/// What [`Store::remember_request`](crate::ReplayStore::remember_request) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestCheck {
    /// First time this request id is seen in its scope; now remembered.
    New,
    /// The same request id with the same tool and params digest (a retry); untouched.
    Repeat(RequestEntry),
    /// The same request id with a different tool or params digest: `idempotency_conflict`.
    /// The existing entry is untouched.
    Conflict(RequestEntry),
}

/// Retention lives in `retention.rs`; re-exported here, where replay data is defined.
pub use crate::retention::{PRUNE_BATCH, PruneReport, Retention};

fn final_from_row(row: &Row<'_>) -> Result<FinalResult> {
    const OP: &str = "final_results.read";
    let identity = IdentityKey {
        runtime: col(row, "runtime", OP)?,
        runtime_session_id: col(row, "runtime_session_id", OP)?,
        tool: col(row, "tool", OP)?,
        params_digest: col(row, "params_digest", OP)?,
        idempotency_key: col(row, "idempotency_key", OP)?,
    };
    let text: String = col(row, "result_json", OP)?;
    let result = parse_json(&text, OP, &identity.describe())?;
    Ok(FinalResult {
        request_id: col(row, "request_id", OP)?,
        result,
        recorded_at_ms: col(row, "recorded_at_ms", OP)?,
        identity,
    })
}

const FIND_FINAL_SQL: &str = "SELECT runtime, runtime_session_id, tool, params_digest, \
    idempotency_key, request_id, result_json, recorded_at_ms FROM final_results \
    WHERE runtime = ?1 AND runtime_session_id = ?2 AND tool = ?3 \
    AND params_digest = ?4 AND idempotency_key = ?5";

pub(crate) fn find_final_in(
    conn: &Connection,
    identity: &IdentityKey,
) -> Result<Option<FinalResult>> {
    const OP: &str = "final_results.find";
    let describe = || identity.describe();
    let mut stmt = conn.prepare_cached(FIND_FINAL_SQL).ctx_with(OP, describe)?;
    let mut rows = stmt
        .query(&identity.sql_params()[..])
        .ctx_with(OP, describe)?;
    match rows.next().ctx_with(OP, describe)? {
        Some(row) => Ok(Some(final_from_row(row)?)),
        // A result pruned by retention answers through its tombstone: never run again.
        None => crate::retention::find_tombstone_in(conn, identity),
    }
}

/// Inserts a final result unless one is already recorded under the key (the first final
/// result wins); returns the stored one.
pub(crate) fn record_final_in(
    conn: &Connection,
    identity: &IdentityKey,
    request_id: &str,
    result: &Value,
    now_ms: i64,
) -> Result<FinalResult> {
    let text = to_json(result);
    record_final_owned(
        conn,
        identity,
        request_id,
        Cow::Borrowed(result),
        &text,
        now_ms,
    )
}

/// [`record_final_in`] given the result, owned or borrowed, and its text (`to_json` of it,
/// made by the caller so a writer job need not): when this call inserted it, the stored result
/// is the one given (not read back and parsed again).
pub(crate) fn record_final_owned(
    conn: &Connection,
    identity: &IdentityKey,
    request_id: &str,
    result: Cow<'_, Value>,
    result_json: &str,
    now_ms: i64,
) -> Result<FinalResult> {
    const OP: &str = "final_results.record";
    identity.check()?;
    let inserted = conn
        .exec_cached(
            "INSERT INTO final_results (runtime, runtime_session_id, tool, params_digest, \
             idempotency_key, request_id, result_json, recorded_at_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
            params![
                identity.runtime,
                identity.runtime_session_id,
                identity.tool,
                identity.params_digest,
                identity.idempotency_key,
                request_id,
                result_json,
                now_ms,
            ],
        )
        .ctx_with(OP, || identity.describe())?;
    if inserted == 1 {
        // The row just written: what a read would return (a JSON value reads back equal).
        return Ok(FinalResult {
            identity: identity.clone(),
            request_id: request_id.to_owned(),
            result: result.into_owned(),
            recorded_at_ms: now_ms,
        });
    }
    find_final_in(conn, identity)?.ok_or_else(|| StoreError::NotFound {
        table: "final_results",
        id: identity.describe(),
    })
}

fn request_from_row(row: &Row<'_>) -> Result<RequestEntry> {
    const OP: &str = "request_ids.read";
    Ok(RequestEntry {
        scope: Scope {
            runtime: col(row, "runtime", OP)?,
            runtime_session_id: col(row, "runtime_session_id", OP)?,
        },
        request_id: col(row, "request_id", OP)?,
        tool: col(row, "tool", OP)?,
        params_digest: col(row, "params_digest", OP)?,
        recorded_at_ms: col(row, "recorded_at_ms", OP)?,
    })
}

fn find_request_in(
    conn: &Connection,
    scope: &Scope,
    request_id: &str,
) -> Result<Option<RequestEntry>> {
    const OP: &str = "request_ids.find";
    conn.row_cached(
        "SELECT runtime, runtime_session_id, request_id, tool, params_digest, recorded_at_ms \
         FROM request_ids WHERE runtime = ?1 AND runtime_session_id = ?2 AND request_id = ?3",
        params![scope.runtime, scope.runtime_session_id, request_id],
        |row| Ok(request_from_row(row)),
    )
    .optional()
    .ctx(OP, request_id)?
    .transpose()
}

impl SqliteStore {
    /// Records the final result of a mutating request under its identity key (§10.3). The first
    /// final result recorded under a key wins; later calls return the stored one unchanged.
    pub fn record_final(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        now_ms: i64,
    ) -> Result<FinalResult> {
        let (key, request_id, result) = (identity.clone(), request_id.to_owned(), result.clone());
        self.write("final_results.record", &identity.describe(), move |tx| {
            record_final_in(tx, &key, &request_id, &result, now_ms)
        })
    }

    /// The final result recorded under the key, if any (step 3, replay). For a result pruned
    /// by retention this is its tombstone's answer (`execution_result_unknown`, see
    /// `retention.rs`), so a retry is answered rather than run again.
    pub fn find_final(&self, identity: &IdentityKey) -> Result<Option<FinalResult>> {
        find_final_in(&self.conn(), identity)
    }

    /// Remembers that `request_id` named (`tool`, `params_digest`) in `scope`, atomically
    /// reporting an earlier entry: the same pair is a [`RequestCheck::Repeat`], a different one
    /// an [`RequestCheck::Conflict`] (`idempotency_conflict`; the entry is not changed).
    pub fn remember_request(
        &self,
        scope: &Scope,
        request_id: &str,
        tool: &str,
        params_digest: &str,
        now_ms: i64,
    ) -> Result<RequestCheck> {
        let job = RememberRequest::new(scope, request_id, tool, params_digest, now_ms)?;
        self.write(REMEMBER, request_id, move |tx| job.run(tx))
    }

    /// [`Store::remember_request`](crate::ReplayStore::remember_request) for async callers (awaits the group commit).
    pub async fn remember_request_async(
        &self,
        scope: &Scope,
        request_id: &str,
        tool: &str,
        params_digest: &str,
        now_ms: i64,
    ) -> Result<RequestCheck> {
        let job = RememberRequest::new(scope, request_id, tool, params_digest, now_ms)?;
        self.write_async(REMEMBER, request_id, move |tx| job.run(tx))
            .await
    }

    /// The request-id index entry, if any.
    pub fn find_request(&self, scope: &Scope, request_id: &str) -> Result<Option<RequestEntry>> {
        find_request_in(&self.conn(), scope, request_id)
    }

    /// How many final results are stored (diagnostics, tests).
    pub fn count_final_results(&self) -> Result<usize> {
        self.conn()
            .row_cached("SELECT COUNT(*) FROM final_results", [], |row| {
                row.get::<_, i64>(0)
            })
            .map(|n| usize::try_from(n).unwrap_or(0))
            .ctx("final_results.count", "")
    }
}

const REMEMBER: &str = "request_ids.remember";

/// The write of [`Store::remember_request`](crate::ReplayStore::remember_request), its
/// arguments checked first (backend-neutral, shared with the PostgreSQL store).
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct RememberRequest {
    pub scope: Scope,
    pub request_id: String,
    pub tool: String,
    pub params_digest: String,
    pub now_ms: i64,
}

impl RememberRequest {
    /// The write, or [`StoreError::Invalid`] for a bad digest or an empty request id.
    pub fn new(
        scope: &Scope,
        request_id: &str,
        tool: &str,
        params_digest: &str,
        now_ms: i64,
    ) -> Result<Self> {
        check_digest(params_digest)?;
        if request_id.is_empty() {
            return Err(StoreError::Invalid {
                what: "request_id",
                detail: "empty".to_owned(),
            });
        }
        Ok(Self {
            scope: scope.clone(),
            request_id: request_id.to_owned(),
            tool: tool.to_owned(),
            params_digest: params_digest.to_owned(),
            now_ms,
        })
    }

    /// The answer when `entry` already holds this request id: a repeat of the same call, or a
    /// conflict with another.
    #[must_use]
    pub fn against(&self, entry: RequestEntry) -> RequestCheck {
        if entry.tool == self.tool && entry.params_digest == self.params_digest {
            RequestCheck::Repeat(entry)
        } else {
            RequestCheck::Conflict(entry)
        }
    }

    fn run(self, tx: &Connection) -> Result<RequestCheck> {
        const OP: &str = REMEMBER;
        if let Some(entry) = find_request_in(tx, &self.scope, &self.request_id)? {
            return Ok(self.against(entry));
        }
        let RememberRequest {
            scope,
            request_id,
            tool,
            params_digest,
            now_ms,
        } = self;
        tx.exec_cached(
            "INSERT INTO request_ids (runtime, runtime_session_id, request_id, tool, \
             params_digest, recorded_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                scope.runtime,
                scope.runtime_session_id,
                request_id,
                tool,
                params_digest,
                now_ms
            ],
        )
        .ctx(OP, &request_id)?;
        Ok(RequestCheck::New)
    }
}
