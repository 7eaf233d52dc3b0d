//! `approvals.list`, `approvals.grant`, `approvals.revoke` (operator only): the standing
//! approvals the user manages and the session grants `accept_for_session` made. The rules
//! (what can be approved, what a revoke does) live in the core (`ToolBridge::grant_approval`).

use openphone_core::ApprovalError;
use openphone_protocol::endpoint::{
    ApprovalsGrantParams, ApprovalsGrantResult, ApprovalsListParams, ApprovalsListResult,
    ApprovalsRevokeParams, ApprovalsRevokeResult, ErrorObject,
};

use super::confirmations::operator;
use crate::conn::Conn;

fn error(e: ApprovalError) -> ErrorObject {
    ErrorObject::new(e.code, e.message)
}

/// `approvals.list {runtime?, all?}`: active approvals (every one with `all`), oldest first.
pub(super) fn list(
    conn: &Conn,
    p: ApprovalsListParams,
) -> Result<ApprovalsListResult, ErrorObject> {
    let approvals = conn.state.bridge.list_approvals(&p).map_err(error)?;
    Ok(ApprovalsListResult { approvals })
}

/// `approvals.grant {runtime, tool, constraints?, expires_at_ms?, background?, note?}`.
pub(super) fn grant(
    conn: &Conn,
    p: ApprovalsGrantParams,
) -> Result<ApprovalsGrantResult, ErrorObject> {
    let operator = operator(conn)?;
    conn.state
        .bridge
        .grant_approval(&operator, &p)
        .map_err(error)
}

/// `approvals.revoke {approval_id}`.
pub(super) fn revoke(
    conn: &Conn,
    p: ApprovalsRevokeParams,
) -> Result<ApprovalsRevokeResult, ErrorObject> {
    let operator = operator(conn)?;
    conn.state
        .bridge
        .revoke_approval(&operator, &p.approval_id)
        .map_err(error)
}
