//! The standing approvals the user manages (`approvals.list|grant|revoke`, operator only) and
//! the session grants `accept_for_session` made, as the endpoint shows them.
//!
//! A standing approval names a configured runtime and a command or `group:<category>`, with
//! optional exact-match param constraints and an expiry. It is refused where it could never
//! apply: `*`, an unknown runtime, tool or category, a read (nothing to approve), a command on
//! the risk floor (nothing lowers it), a constraint on a param the command does not take, an
//! expiry in the past. Revoking disables it at once: the approvals cache follows the store's
//! generation, so the next request is decided without it.

use openphone_policy::{ToolSelector, is_mutating, is_risk_floor};
use openphone_protocol::endpoint::{
    ApprovalInfo, ApprovalKind, ApprovalState, ApprovalsGrantParams, ApprovalsListParams,
};
use openphone_protocol::{Command, ErrorCode};
use openphone_store::{NewStandingApproval, StandingApproval, StoreError};
use serde_json::Value;

use super::ToolBridge;
use super::types::Operator;
use crate::locks::read;

/// Why an approvals call did nothing: a catalogue code and a message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApprovalError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApprovalError {
    fn invalid(message: impl Into<String>) -> ApprovalError {
        ApprovalError {
            code: ErrorCode::InvalidParams,
            message: message.into(),
        }
    }

    fn store(e: &StoreError) -> ApprovalError {
        ApprovalError {
            code: ErrorCode::ToolError,
            message: format!("the approvals could not be read or written: {e}"),
        }
    }
}

impl ToolBridge {
    /// The approvals, oldest first: active ones only unless `all`.
    pub fn list_approvals(
        &self,
        params: &ApprovalsListParams,
    ) -> Result<Vec<ApprovalInfo>, ApprovalError> {
        let rows = self
            .store
            .list_approvals(params.runtime.as_deref())
            .map_err(|e| ApprovalError::store(&e))?;
        Ok(rows
            .iter()
            .map(|row| self.approval_info(row))
            .filter(|info| params.all || info.state == ApprovalState::Active)
            .collect())
    }

    /// Creates a standing approval, after checking it could ever apply.
    pub fn grant_approval(
        &self,
        operator: &Operator,
        params: &ApprovalsGrantParams,
    ) -> Result<ApprovalInfo, ApprovalError> {
        let runtime = params.runtime.trim();
        self.check_runtime(runtime)?;
        let selector = ToolSelector::parse(&params.tool)
            .map_err(|e| ApprovalError::invalid(format!("tool {:?}: {e}", params.tool)))?;
        let (tool, covered) = self.approvable(&selector)?;
        self.check_constraints(&tool, &covered, params)?;
        let now = self.now_ms();
        let expires_at_ms = match (params.expires_at_ms, params.expires_in_ms) {
            (Some(_), Some(_)) => {
                return Err(ApprovalError::invalid(
                    "give expires_at_ms or expires_in_ms, not both",
                ));
            }
            (None, Some(ms)) if ms <= 0 => {
                return Err(ApprovalError::invalid(format!(
                    "expires_in_ms must be positive, not {ms}"
                )));
            }
            (None, Some(ms)) => Some(now.saturating_add(ms)),
            (at, None) => at,
        };
        if let Some(at) = expires_at_ms
            && at <= now
        {
            return Err(ApprovalError::invalid(format!(
                "expires_at_ms {at} is not in the future (now {now})"
            )));
        }
        let new = NewStandingApproval {
            runtime: runtime.to_owned(),
            tool,
            constraints: Value::Object(params.constraints.clone()),
            expires_at_ms,
            background: params.background,
            phone_session_id: None,
            confirmation_id: None,
            created_by: Some(operator.label()),
            note: params.note.clone(),
        };
        let row = self
            .store
            .create_approval(&new, now)
            .map_err(|e| ApprovalError::store(&e))?;
        tracing::info!(
            approval = row.approval_id,
            runtime = %openphone_protocol::log_value(&row.runtime),
            tool = %row.tool,
            by = %openphone_protocol::log_value(&operator.label()),
            "standing approval granted"
        );
        Ok(self.approval_info(&row))
    }

    /// Revokes a standing approval or a session grant; from the next request on it applies no
    /// more. Revoking one already revoked returns it as it was left.
    pub fn revoke_approval(
        &self,
        operator: &Operator,
        approval_id: &str,
    ) -> Result<ApprovalInfo, ApprovalError> {
        let not_found = || ApprovalError {
            code: ErrorCode::InvalidParams,
            message: format!(
                "no approval {approval_id:?} (see `openphone approvals list --all` for the ids)"
            ),
        };
        let id: i64 = approval_id.trim().parse().map_err(|_| not_found())?;
        match self
            .store
            .revoke_approval(id, &operator.label(), self.now_ms())
        {
            Ok(row) => {
                tracing::info!(
                    approval = row.approval_id,
                    by = %openphone_protocol::log_value(&operator.label()),
                    "approval revoked"
                );
                Ok(self.approval_info(&row))
            }
            Err(StoreError::NotFound { .. }) => Err(not_found()),
            Err(e) => Err(ApprovalError::store(&e)),
        }
    }

    /// A stored row as the endpoint shows it, with its state now.
    fn approval_info(&self, row: &StandingApproval) -> ApprovalInfo {
        let now = self.now_ms();
        let state = if row.revoked_at_ms.is_some() || !row.enabled {
            ApprovalState::Revoked
        } else if row.expires_at_ms.is_some_and(|at| now >= at) {
            ApprovalState::Expired
        } else if let Some(session) = &row.phone_session_id {
            let active = self
                .store
                .get_session(session)
                .ok()
                .flatten()
                .is_some_and(|s| s.status.is_active() && s.runtime_kind == row.runtime);
            if active {
                ApprovalState::Active
            } else {
                ApprovalState::Ended
            }
        } else {
            ApprovalState::Active
        };
        ApprovalInfo {
            approval_id: row.approval_id.to_string(),
            kind: if row.is_session_grant() {
                ApprovalKind::SessionGrant
            } else {
                ApprovalKind::Standing
            },
            state,
            runtime: row.runtime.clone(),
            tool: row.tool.clone(),
            constraints: match &row.constraints {
                Value::Object(map) => map.clone(),
                _ => Default::default(),
            },
            expires_at_ms: row.expires_at_ms,
            background: row.background,
            phone_session_id: row.phone_session_id.clone(),
            confirmation_id: row.confirmation_id.clone(),
            created_by: row.created_by.clone(),
            note: row.note.clone(),
            created_at_ms: row.created_at_ms,
            revoked_at_ms: row.revoked_at_ms,
            revoked_by: row.revoked_by.clone(),
        }
    }

    /// A configured runtime (when the bridge knows its runtimes).
    fn check_runtime(&self, runtime: &str) -> Result<(), ApprovalError> {
        if runtime.is_empty() {
            return Err(ApprovalError::invalid("runtime is empty"));
        }
        let config = read(&self.config);
        if let Some(runtimes) = &config.runtimes
            && !runtimes.contains_key(runtime)
        {
            let known: Vec<&str> = runtimes.keys().map(String::as_str).collect();
            return Err(ApprovalError {
                code: ErrorCode::RuntimeNotConfigured,
                message: format!(
                    "no runtime {runtime:?} is configured (configured: {})",
                    known.join(", ")
                ),
            });
        }
        Ok(())
    }

    /// The stored tool (canonical name or `group:<category>`) and the commands it would
    /// cover, or why it can never lower a confirmation.
    fn approvable(
        &self,
        selector: &ToolSelector,
    ) -> Result<(String, Vec<&'static Command>), ApprovalError> {
        match selector {
            ToolSelector::All => Err(ApprovalError::invalid(
                "`*` is refused: a standing approval names the command or group it approves",
            )),
            ToolSelector::Name(name) => {
                let command = self.registry.resolve(name).ok_or_else(|| {
                    ApprovalError::invalid(format!(
                        "no command {name:?} (see `openphone tools list`)"
                    ))
                })?;
                if !is_mutating(command) {
                    return Err(ApprovalError::invalid(format!(
                        "`{}` is a read: it never asks, so there is nothing to approve",
                        command.name
                    )));
                }
                if is_risk_floor(command) {
                    return Err(ApprovalError::invalid(format!(
                        "`{}` is on the risk floor (confirmation: always): it asks every time, \
                         and no approval lowers that",
                        command.name
                    )));
                }
                Ok((command.name.clone(), vec![command]))
            }
            ToolSelector::Group(category) => {
                let members: Vec<&'static Command> = self
                    .registry
                    .commands()
                    .filter(|c| c.category == *category)
                    .collect();
                if members.is_empty() {
                    let mut known: Vec<&str> = self
                        .registry
                        .commands()
                        .map(|c| c.category.as_str())
                        .collect();
                    known.sort_unstable();
                    known.dedup();
                    return Err(ApprovalError::invalid(format!(
                        "no category {category:?} (categories: {})",
                        known.join(", ")
                    )));
                }
                let covered: Vec<&'static Command> = members
                    .into_iter()
                    .filter(|c| is_mutating(c) && !is_risk_floor(c))
                    .collect();
                if covered.is_empty() {
                    return Err(ApprovalError::invalid(format!(
                        "group:{category} has no command an approval could cover (only reads \
                         or commands on the risk floor)"
                    )));
                }
                Ok((format!("group:{category}"), covered))
            }
        }
    }

    /// Every constraint names a param that each covered command takes.
    fn check_constraints(
        &self,
        tool: &str,
        covered: &[&Command],
        params: &ApprovalsGrantParams,
    ) -> Result<(), ApprovalError> {
        for key in params.constraints.keys() {
            let takes = |c: &&Command| {
                c.input_schema
                    .get("properties")
                    .and_then(|p| p.get(key))
                    .is_some()
            };
            if !covered.iter().all(takes) {
                return Err(ApprovalError::invalid(format!(
                    "constraint {key:?}: `{tool}` does not take a param of that name"
                )));
            }
        }
        Ok(())
    }
}
