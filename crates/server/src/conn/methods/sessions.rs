//! `sessions.list` and `sessions.get` (an operator sees every session, a runtime its own), and
//! `sessions.cancel` (operator).

use openphone_policy::Role;
use openphone_protocol::endpoint::{
    EndpointErrorCode, ErrorObject, SessionsCancelParams, SessionsCancelResult, SessionsGetParams,
    SessionsGetResult, SessionsListParams, SessionsListResult,
};
use openphone_store::SessionFilter;

use super::forbidden;
use crate::conn::{Conn, internal};

/// `sessions.list {runtime?, status?, limit?}`: phone sessions, newest first (`limit` default
/// 50, at most 500); a runtime naming another runtime gets `forbidden`.
pub(super) fn list(conn: &Conn, p: SessionsListParams) -> Result<SessionsListResult, ErrorObject> {
    let runtime = match conn.session.caller.role {
        Role::Operator => p.runtime,
        Role::Runtime => {
            let own = conn.session.caller.runtime.clone();
            if p.runtime.as_ref().is_some_and(|r| *r != own) {
                return Err(forbidden("a runtime sees only its own sessions"));
            }
            Some(own)
        }
    };
    let sessions = conn
        .state
        .bridge
        .phone_sessions(&SessionFilter {
            runtime,
            status: p.status,
            limit: Some(p.limit.unwrap_or(50).min(500)),
        })
        .map_err(internal)?;
    Ok(SessionsListResult { sessions })
}

/// `sessions.get {phone_session_id}`: one phone session; `not_found` also for another
/// runtime's session.
pub(super) fn get(conn: &Conn, p: SessionsGetParams) -> Result<SessionsGetResult, ErrorObject> {
    let found = conn
        .state
        .bridge
        .phone_session(&p.phone_session_id)
        .map_err(internal)?;
    let visible = found.filter(|s| match conn.session.caller.role {
        Role::Operator => true,
        Role::Runtime => s.runtime_kind == conn.session.caller.runtime,
    });
    match visible {
        Some(session) => Ok(SessionsGetResult { session }),
        None => Err(ErrorObject::new(
            EndpointErrorCode::NotFound,
            format!("no phone session {:?}", p.phone_session_id),
        )),
    }
}

/// `sessions.cancel {phone_session_id}` (operator): the session fails with reason `cancelled`;
/// a built-in loop working on it stops before its next model or tool call. `not_found` for an
/// unknown id, `session_mismatch` for a finished session.
pub(super) async fn cancel(
    conn: &Conn,
    p: SessionsCancelParams,
) -> Result<SessionsCancelResult, ErrorObject> {
    let id = p.phone_session_id.trim();
    let exists = conn
        .state
        .bridge
        .phone_session(id)
        .map_err(internal)?
        .is_some();
    if !exists {
        return Err(ErrorObject::new(
            EndpointErrorCode::NotFound,
            format!("no phone session {:?}", p.phone_session_id),
        ));
    }
    let (session, stopped_loop) = conn
        .state
        .runtimes
        .cancel_session(id)
        .map_err(|e| ErrorObject::new(e.code, e.message))?;
    // What the session still waits for the user to approve is withdrawn with it: a cancelled
    // session leaves nothing approvable behind (a remote runtime's too).
    let bridge = &conn.state.bridge;
    let pending = bridge
        .pending_confirmations(Some(&session.runtime_kind))
        .map_err(internal)?;
    let owner = openphone_policy::Caller::remote(
        &session.runtime_kind,
        openphone_policy::Transport::Internal,
        "sessions.cancel",
    );
    for record in pending
        .iter()
        .filter(|r| r.phone_session_id.as_deref() == Some(id))
    {
        if let Err(e) = bridge.withdraw(&owner, &record.confirmation_id).await {
            tracing::warn!(error = %e, confirmation = %record.confirmation_id,
                "withdrawing a cancelled session's confirmation");
        }
    }
    Ok(SessionsCancelResult {
        stopped_loop,
        session,
    })
}
