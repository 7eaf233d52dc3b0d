//! [`ApprovalStore`] on PostgreSQL: standing approvals, session grants and runtime settings, a
//! port of the SQLite store's `approvals.rs`/`settings.rs`. Both are fleet-wide: an approval the
//! user made (or revoked) on one host applies on every host, and so does a setting.
//!
//! # The approvals' generation, and what a revoke promises
//!
//! The bridge (crates/core) caches the standing approvals and reads them again only when
//! [`StoreInfo::approvals_generation`](openphone_store::StoreInfo::approvals_generation)
//! changes; it asks for the generation before every tool call's policy check. On SQLite an
//! in-process counter is enough (one process writes). In a fleet another daemon may revoke, so
//! the generation lives in the database: `approvals_version.version`, one row, bumped by the
//! same SERIALIZABLE transaction as every write that changes `standing_approvals` (create,
//! enable/disable, revoke, delete). [`approvals_generation`] reads it from the server on every
//! call (one round trip on a reader connection, simple-query protocol, READ COMMITTED: the
//! statement sees every transaction committed before it started). There is no cache in this
//! store, and no LISTEN/NOTIFY: a notification arrives some time after the commit, and a cache
//! refreshed by one would leave a window in which a revoked approval is still used.
//!
//! **The promise:** once an approval write has committed (its call returned `Ok` on any
//! daemon), every `approvals_generation`, `active_approvals`, `list_approvals` and
//! `get_approval` that STARTS afterwards, on any daemon of the fleet, sees it. So a tool call
//! whose policy check begins after a revoke committed never acts on the revoked approval; a
//! check that had already read the approvals before the commit may still use it, as on SQLite.
//! When the generation cannot be read (server unreachable), the answer is a value no stored
//! generation can take (top bit set, never repeated), so a cache is never trusted on a failed
//! read; the bridge's re-read then fails too and it acts without standing approvals.
//!
//! Cost: one round trip per tool call (`examples/approvals_generation_cost.rs`, loopback, a shared
//! 2-core machine: p50 55 µs, p99 101 µs, up to p50 89 / p99 269 µs while other builds ran; a
//! cache miss's `list_approvals` p50 206 µs), against the tens of milliseconds a phone action
//! takes. SQLite's in-process counter costs nothing measurable.

use std::sync::atomic::{AtomicU64, Ordering};

use openphone_store::{
    ApprovalStore, NewStandingApproval, Result, Setting, StandingApproval, StoreError,
};
use postgres::{GenericClient, Row, SimpleQueryMessage, Transaction};
use serde_json::Value;

use crate::{PgContext, PgStore};

const COLUMNS: &str = "approval_id, runtime, tool, constraints_json, expires_at_ms, background, \
    enabled, created_at_ms, updated_at_ms, phone_session_id, confirmation_id, created_by, note, \
    revoked_at_ms, revoked_by";

/// Generations answered when the stored one could not be read: the top bit (never set in a
/// stored BIGINT, which is at least 0) and a counter, so no two failed reads answer alike.
const UNREADABLE: u64 = 1 << 63;
static FAILED_READS: AtomicU64 = AtomicU64::new(0);

/// The approvals' generation as committed in the shared database now (see the module docs).
/// `StoreInfo::approvals_generation` of [`PgStore`] answers this (info.rs calls it).
pub(crate) fn approvals_generation(store: &PgStore) -> u64 {
    const OP: &str = "approvals_version.read";
    let read = store.read(OP, "", |client| {
        let messages = client
            .simple_query("SELECT version FROM approvals_version")
            .ctx(OP, "")?;
        let text = messages.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        });
        let text = text.ok_or_else(|| StoreError::Corrupt {
            op: OP,
            id: String::new(),
            detail: "the approvals_version row is missing".to_owned(),
        })?;
        text.parse::<u64>().map_err(|e| StoreError::Corrupt {
            op: OP,
            id: String::new(),
            detail: format!("{text:?}: {e}"),
        })
    });
    match read {
        Ok(version) if version < UNREADABLE => version,
        Ok(_) | Err(_) => UNREADABLE | FAILED_READS.fetch_add(1, Ordering::Relaxed),
    }
}

/// Bumps the generation in `tx` (the transaction that changed `standing_approvals`).
fn bump(tx: &mut Transaction<'_>, op: &'static str, id: &str) -> Result<()> {
    tx.execute("UPDATE approvals_version SET version = version + 1", &[])
        .ctx(op, id)?;
    Ok(())
}

fn corrupt(op: &'static str, id: &str, detail: String) -> StoreError {
    StoreError::Corrupt {
        op,
        id: id.to_owned(),
        detail,
    }
}

fn not_found(id: i64) -> StoreError {
    StoreError::NotFound {
        table: "standing_approvals",
        id: id.to_string(),
    }
}

fn from_row(row: &Row) -> Result<StandingApproval> {
    const OP: &str = "standing_approvals.read";
    let id: i64 = row.try_get("approval_id").ctx(OP, "")?;
    let sid = id.to_string();
    let constraints: String = row.try_get("constraints_json").ctx(OP, &sid)?;
    Ok(StandingApproval {
        approval_id: id,
        runtime: row.try_get("runtime").ctx(OP, &sid)?,
        tool: row.try_get("tool").ctx(OP, &sid)?,
        constraints: serde_json::from_str(&constraints)
            .map_err(|e| corrupt(OP, &sid, e.to_string()))?,
        expires_at_ms: row.try_get("expires_at_ms").ctx(OP, &sid)?,
        background: row.try_get("background").ctx(OP, &sid)?,
        enabled: row.try_get("enabled").ctx(OP, &sid)?,
        created_at_ms: row.try_get("created_at_ms").ctx(OP, &sid)?,
        updated_at_ms: row.try_get("updated_at_ms").ctx(OP, &sid)?,
        phone_session_id: row.try_get("phone_session_id").ctx(OP, &sid)?,
        confirmation_id: row.try_get("confirmation_id").ctx(OP, &sid)?,
        created_by: row.try_get("created_by").ctx(OP, &sid)?,
        note: row.try_get("note").ctx(OP, &sid)?,
        revoked_at_ms: row.try_get("revoked_at_ms").ctx(OP, &sid)?,
        revoked_by: row.try_get("revoked_by").ctx(OP, &sid)?,
    })
}

fn get_in(client: &mut impl GenericClient, id: i64) -> Result<Option<StandingApproval>> {
    const OP: &str = "standing_approvals.get";
    let sql = format!("SELECT {COLUMNS} FROM standing_approvals WHERE approval_id = $1");
    client
        .query_opt(&sql, &[&id])
        .ctx(OP, &id.to_string())?
        .map(|row| from_row(&row))
        .transpose()
}

impl PgStore {
    /// Approvals matching `where_sql` (with `$1…` bound to `args`), on a reader.
    fn query_approvals<A>(
        &self,
        op: &'static str,
        where_sql: &str,
        args: A,
    ) -> Result<Vec<StandingApproval>>
    where
        A: FnOnce(&mut postgres::Client, &str) -> std::result::Result<Vec<Row>, postgres::Error>
            + Send
            + 'static,
    {
        let sql = format!("SELECT {COLUMNS} FROM standing_approvals {where_sql}");
        self.read(op, "", move |client| {
            args(client, &sql)
                .ctx(op, "")?
                .iter()
                .map(from_row)
                .collect()
        })
    }
}

impl ApprovalStore for PgStore {
    /// Creates an enabled standing approval (fleet-wide).
    fn create_approval(&self, new: &NewStandingApproval, now_ms: i64) -> Result<StandingApproval> {
        const OP: &str = "standing_approvals.create";
        let new = new.clone();
        let constraints = new.constraints.to_string();
        let sql = format!(
            "INSERT INTO standing_approvals (runtime, tool, constraints_json, expires_at_ms, \
             background, enabled, created_at_ms, updated_at_ms, phone_session_id, \
             confirmation_id, created_by, note) \
             VALUES ($1, $2, $3, $4, $5, TRUE, $6, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
        );
        self.write(OP, &new.tool.clone(), move |tx| {
            let row = tx
                .query_one(
                    &sql,
                    &[
                        &new.runtime,
                        &new.tool,
                        &constraints,
                        &new.expires_at_ms,
                        &new.background,
                        &now_ms,
                        &new.phone_session_id,
                        &new.confirmation_id,
                        &new.created_by,
                        &new.note,
                    ],
                )
                .ctx(OP, &new.tool)?;
            let created = from_row(&row)?;
            bump(tx, OP, &new.tool)?;
            Ok(created)
        })
    }

    fn get_approval(&self, approval_id: i64) -> Result<Option<StandingApproval>> {
        self.read(
            "standing_approvals.get",
            &approval_id.to_string(),
            move |client| get_in(client, approval_id),
        )
    }

    /// All standing approvals of the fleet (of one runtime, when given), oldest first.
    fn list_approvals(&self, runtime: Option<&str>) -> Result<Vec<StandingApproval>> {
        let runtime = runtime.map(str::to_owned);
        self.query_approvals(
            "standing_approvals.list",
            "WHERE ($1::TEXT IS NULL OR runtime = $1) ORDER BY approval_id",
            move |client, sql| client.query(sql, &[&runtime]),
        )
    }

    /// Enabled, unexpired approvals for (runtime, tool): the candidates for policy layer 7.
    fn active_approvals(
        &self,
        runtime: &str,
        tool: &str,
        now_ms: i64,
    ) -> Result<Vec<StandingApproval>> {
        let owned = (runtime.to_owned(), tool.to_owned());
        self.query_approvals(
            "standing_approvals.active",
            "WHERE runtime = $1 AND tool = $2 AND enabled \
             AND (expires_at_ms IS NULL OR expires_at_ms > $3) ORDER BY approval_id",
            move |client, sql| client.query(sql, &[&owned.0, &owned.1, &now_ms]),
        )
    }

    fn set_approval_enabled(
        &self,
        approval_id: i64,
        enabled: bool,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        const OP: &str = "standing_approvals.set_enabled";
        let id = approval_id.to_string();
        let sql = format!(
            "UPDATE standing_approvals SET enabled = $2, updated_at_ms = $3 \
             WHERE approval_id = $1 RETURNING {COLUMNS}"
        );
        self.write(OP, &id.clone(), move |tx| {
            let row = tx
                .query_opt(&sql, &[&approval_id, &enabled, &now_ms])
                .ctx(OP, &id)?
                .ok_or_else(|| not_found(approval_id))?;
            let changed = from_row(&row)?;
            bump(tx, OP, &id)?;
            Ok(changed)
        })
    }

    /// Revokes an approval: disabled from now on, on every host (see the module docs), with
    /// who revoked it and when. Revoking one already revoked changes nothing and returns it as
    /// it is. `NotFound` for an unknown id.
    fn revoke_approval(
        &self,
        approval_id: i64,
        revoked_by: &str,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        const OP: &str = "standing_approvals.revoke";
        let id = approval_id.to_string();
        let by = revoked_by.to_owned();
        let sql = format!(
            "UPDATE standing_approvals SET enabled = FALSE, revoked_at_ms = $2, \
             revoked_by = $3, updated_at_ms = $2 \
             WHERE approval_id = $1 AND revoked_at_ms IS NULL RETURNING {COLUMNS}"
        );
        self.write(OP, &id.clone(), move |tx| {
            match tx
                .query_opt(&sql, &[&approval_id, &now_ms, &by])
                .ctx(OP, &id)?
            {
                Some(row) => {
                    let revoked = from_row(&row)?;
                    bump(tx, OP, &id)?;
                    Ok(revoked)
                }
                None => get_in(tx, approval_id)?.ok_or_else(|| not_found(approval_id)),
            }
        })
    }

    /// Deletes an approval; false when it did not exist.
    fn delete_approval(&self, approval_id: i64) -> Result<bool> {
        const OP: &str = "standing_approvals.delete";
        let id = approval_id.to_string();
        self.write(OP, &id.clone(), move |tx| {
            let n = tx
                .execute(
                    "DELETE FROM standing_approvals WHERE approval_id = $1",
                    &[&approval_id],
                )
                .ctx(OP, &id)?;
            if n > 0 {
                bump(tx, OP, &id)?;
            }
            Ok(n > 0)
        })
    }

    /// The value of a setting, if set (fleet-wide).
    fn get_setting(&self, key: &str) -> Result<Option<Value>> {
        const OP: &str = "runtime_settings.get";
        let key = key.to_owned();
        self.read(OP, &key.clone(), move |client| {
            let row = client
                .query_opt(
                    "SELECT value_json FROM runtime_settings WHERE key = $1",
                    &[&key],
                )
                .ctx(OP, &key)?;
            let Some(row) = row else { return Ok(None) };
            let text: String = row.try_get(0).ctx(OP, &key)?;
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| corrupt(OP, &key, e.to_string()))
        })
    }

    /// Sets (inserts or replaces) a setting.
    fn set_setting(&self, key: &str, value: &Value, now_ms: i64) -> Result<()> {
        const OP: &str = "runtime_settings.set";
        let owned = (key.to_owned(), value.to_string());
        self.write(OP, key, move |tx| {
            tx.execute(
                "INSERT INTO runtime_settings (key, value_json, updated_at_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (key) DO UPDATE SET value_json = EXCLUDED.value_json, \
                 updated_at_ms = EXCLUDED.updated_at_ms",
                &[&owned.0, &owned.1, &now_ms],
            )
            .ctx(OP, &owned.0)?;
            Ok(())
        })
    }

    /// Removes a setting; false when it was not set.
    fn delete_setting(&self, key: &str) -> Result<bool> {
        const OP: &str = "runtime_settings.delete";
        let key = key.to_owned();
        self.write(OP, &key.clone(), move |tx| {
            tx.execute("DELETE FROM runtime_settings WHERE key = $1", &[&key])
                .map(|n| n > 0)
                .ctx(OP, &key)
        })
    }

    /// Every setting, by key.
    fn list_settings(&self) -> Result<Vec<Setting>> {
        const OP: &str = "runtime_settings.list";
        self.read(OP, "", |client| {
            let rows = client
                .query(
                    "SELECT key, value_json, updated_at_ms FROM runtime_settings \
                     ORDER BY key COLLATE \"C\"",
                    &[],
                )
                .ctx(OP, "")?;
            rows.iter()
                .map(|row| {
                    let key: String = row.try_get(0).ctx(OP, "")?;
                    let text: String = row.try_get(1).ctx(OP, &key)?;
                    Ok(Setting {
                        value: serde_json::from_str(&text)
                            .map_err(|e| corrupt(OP, &key, e.to_string()))?,
                        updated_at_ms: row.try_get(2).ctx(OP, &key)?,
                        key,
                    })
                })
                .collect()
        })
    }
}
