//! Standing approvals: user-made rules that may turn Confirm into Allow (policy layer 7), and
//! session grants — the same rule scoped to one phone session, made by approving a
//! confirmation `accept_for_session`. The store only keeps them; the policy crate decides what
//! they permit. A revoked approval keeps its row, disabled, with who revoked it and when.

use rusqlite::{Connection, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::wire::{col, parse_json, to_json};

/// A stored standing approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandingApproval {
    pub approval_id: i64,
    pub runtime: String,
    /// Canonical command name.
    pub tool: String,
    /// Parameter constraints (interpreted by the policy crate); `{}` for none.
    pub constraints: Value,
    /// `None` = no expiry.
    pub expires_at_ms: Option<i64>,
    /// May also apply inside background job runs.
    pub background: bool,
    pub enabled: bool,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// A session grant: the phone session it is scoped to. `None` for a standing approval.
    pub phone_session_id: Option<String>,
    /// The confirmation whose `accept_for_session` made this grant.
    pub confirmation_id: Option<String>,
    /// Who made it (`<surface>:<principal>`).
    pub created_by: Option<String>,
    /// The user's note.
    pub note: Option<String>,
    /// When it was revoked (it is then disabled).
    pub revoked_at_ms: Option<i64>,
    /// Who revoked it.
    pub revoked_by: Option<String>,
}

impl StandingApproval {
    /// Enabled and not expired at `now_ms`.
    pub fn is_active(&self, now_ms: i64) -> bool {
        self.enabled && self.expires_at_ms.is_none_or(|at| now_ms < at)
    }

    /// Whether this is a session grant (scoped to one phone session).
    pub fn is_session_grant(&self) -> bool {
        self.phone_session_id.is_some()
    }
}

/// What the caller supplies to create a standing approval or a session grant (enabled on
/// creation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewStandingApproval {
    pub runtime: String,
    pub tool: String,
    pub constraints: Value,
    pub expires_at_ms: Option<i64>,
    pub background: bool,
    /// Set for a session grant.
    pub phone_session_id: Option<String>,
    pub confirmation_id: Option<String>,
    pub created_by: Option<String>,
    pub note: Option<String>,
}

const COLUMNS: &str = "approval_id, runtime, tool, constraints_json, expires_at_ms, background, \
    enabled, created_at_ms, updated_at_ms, phone_session_id, confirmation_id, created_by, note, \
    revoked_at_ms, revoked_by";

fn from_row(row: &Row<'_>) -> Result<StandingApproval> {
    const OP: &str = "standing_approvals.read";
    let id: i64 = col(row, "approval_id", OP)?;
    let constraints: String = col(row, "constraints_json", OP)?;
    Ok(StandingApproval {
        approval_id: id,
        runtime: col(row, "runtime", OP)?,
        tool: col(row, "tool", OP)?,
        constraints: parse_json(&constraints, OP, &id.to_string())?,
        expires_at_ms: col(row, "expires_at_ms", OP)?,
        background: col(row, "background", OP)?,
        enabled: col(row, "enabled", OP)?,
        created_at_ms: col(row, "created_at_ms", OP)?,
        updated_at_ms: col(row, "updated_at_ms", OP)?,
        phone_session_id: col(row, "phone_session_id", OP)?,
        confirmation_id: col(row, "confirmation_id", OP)?,
        created_by: col(row, "created_by", OP)?,
        note: col(row, "note", OP)?,
        revoked_at_ms: col(row, "revoked_at_ms", OP)?,
        revoked_by: col(row, "revoked_by", OP)?,
    })
}

fn query(
    conn: &Connection,
    op: &'static str,
    where_sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<StandingApproval>> {
    let sql = format!("SELECT {COLUMNS} FROM standing_approvals {where_sql}");
    crate::rows::collect(conn, op, &sql, args, from_row)
}

fn get_in(conn: &Connection, id: i64) -> Result<Option<StandingApproval>> {
    Ok(query(
        conn,
        "standing_approvals.get",
        "WHERE approval_id = ?1",
        [id],
    )?
    .into_iter()
    .next())
}

impl SqliteStore {
    /// Creates an enabled standing approval.
    pub fn create_approval(
        &self,
        new: &NewStandingApproval,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        const OP: &str = "standing_approvals.create";
        let new = new.clone();
        let written = self.write(OP, &new.tool.clone(), move |tx| {
            tx.exec_cached(
                "INSERT INTO standing_approvals (runtime, tool, constraints_json, expires_at_ms, \
                 background, enabled, created_at_ms, updated_at_ms, phone_session_id, \
                 confirmation_id, created_by, note) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?6, ?7, ?8, ?9, ?10)",
                params![
                    new.runtime,
                    new.tool,
                    to_json(&new.constraints),
                    new.expires_at_ms,
                    new.background,
                    now_ms,
                    new.phone_session_id,
                    new.confirmation_id,
                    new.created_by,
                    new.note,
                ],
            )
            .ctx(OP, &new.tool)?;
            let id = tx.last_insert_rowid();
            get_in(tx, id)?.ok_or_else(|| StoreError::NotFound {
                table: "standing_approvals",
                id: id.to_string(),
            })
        });
        self.approvals_changed();
        written
    }

    /// One standing approval.
    pub fn get_approval(&self, approval_id: i64) -> Result<Option<StandingApproval>> {
        get_in(&self.conn(), approval_id)
    }

    /// All standing approvals (of one runtime, when given), oldest first.
    pub fn list_approvals(&self, runtime: Option<&str>) -> Result<Vec<StandingApproval>> {
        query(
            &self.conn(),
            "standing_approvals.list",
            "WHERE (?1 IS NULL OR runtime = ?1) ORDER BY approval_id",
            [runtime],
        )
    }

    /// Enabled, unexpired approvals for (runtime, tool): the candidates for policy layer 7.
    pub fn active_approvals(
        &self,
        runtime: &str,
        tool: &str,
        now_ms: i64,
    ) -> Result<Vec<StandingApproval>> {
        query(
            &self.conn(),
            "standing_approvals.active",
            "WHERE runtime = ?1 AND tool = ?2 AND enabled = 1 \
             AND (expires_at_ms IS NULL OR expires_at_ms > ?3) ORDER BY approval_id",
            params![runtime, tool, now_ms],
        )
    }

    /// Enables or disables an approval.
    pub fn set_approval_enabled(
        &self,
        approval_id: i64,
        enabled: bool,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        const OP: &str = "standing_approvals.set_enabled";
        let id = approval_id.to_string();
        let written = self.write(OP, &id.clone(), move |tx| {
            tx.exec_cached(
                "UPDATE standing_approvals SET enabled = ?2, updated_at_ms = ?3 \
                 WHERE approval_id = ?1",
                params![approval_id, enabled, now_ms],
            )
            .ctx(OP, &id)?;
            get_in(tx, approval_id)?.ok_or_else(|| StoreError::NotFound {
                table: "standing_approvals",
                id: id.clone(),
            })
        });
        self.approvals_changed();
        written
    }

    /// Revokes an approval: disabled from now on, with who revoked it and when. Revoking one
    /// already revoked changes nothing and returns it as it is. `NotFound` for an unknown id.
    pub fn revoke_approval(
        &self,
        approval_id: i64,
        revoked_by: &str,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        const OP: &str = "standing_approvals.revoke";
        let id = approval_id.to_string();
        let by = revoked_by.to_owned();
        let written = self.write(OP, &id.clone(), move |tx| {
            tx.exec_cached(
                "UPDATE standing_approvals SET enabled = 0, revoked_at_ms = ?2, revoked_by = ?3, \
                 updated_at_ms = ?2 WHERE approval_id = ?1 AND revoked_at_ms IS NULL",
                params![approval_id, now_ms, by],
            )
            .ctx(OP, &id)?;
            get_in(tx, approval_id)?.ok_or_else(|| StoreError::NotFound {
                table: "standing_approvals",
                id: id.clone(),
            })
        });
        self.approvals_changed();
        written
    }

    /// Deletes an approval; false when it did not exist.
    pub fn delete_approval(&self, approval_id: i64) -> Result<bool> {
        const OP: &str = "standing_approvals.delete";
        let written = self.write(OP, &approval_id.to_string(), move |tx| {
            tx.exec_cached(
                "DELETE FROM standing_approvals WHERE approval_id = ?1",
                [approval_id],
            )
            .map(|n| n > 0)
            .ctx(OP, &approval_id.to_string())
        });
        self.approvals_changed();
        written
    }
}
