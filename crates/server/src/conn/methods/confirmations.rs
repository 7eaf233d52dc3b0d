//! `confirmations.list` and `confirmations.resolve` (operator only).

use openphone_core::Operator;
use openphone_protocol::endpoint::{
    ConfirmationsListResult, ConfirmationsResolveParams, ConfirmationsResolveResult, ErrorObject,
    PendingConfirmation,
};

use super::forbidden;
use crate::conn::{Conn, internal};

/// `confirmations.list {}` (operator): the pending confirmations.
pub(super) fn list(conn: &Conn) -> Result<ConfirmationsListResult, ErrorObject> {
    let records = conn
        .state
        .bridge
        .pending_confirmations(None)
        .map_err(internal)?;
    let bridge = &conn.state.bridge;
    let confirmations = records
        .into_iter()
        .map(|r| PendingConfirmation {
            session_grant_offered: bridge.session_grant_offered(&r),
            confirmation_id: r.confirmation_id,
            tool: r.identity.tool,
            runtime: r.identity.runtime,
            request_id: r.request_id,
            phone_session_id: r.phone_session_id,
            summary: r.summary,
            risk: r.risk,
            created_at_ms: r.created_at_ms,
            expires_at_ms: r.expires_at_ms,
        })
        .collect();
    Ok(ConfirmationsListResult { confirmations })
}

/// The operator capability of the connection; a runtime gets `forbidden` — a runtime can
/// never resolve a confirmation.
pub(super) fn operator(conn: &Conn) -> Result<Operator, ErrorObject> {
    Operator::from_caller(&conn.session.caller).ok_or_else(|| {
        forbidden("a runtime can never resolve a confirmation; only the user (operator) can")
    })
}

/// `confirmations.resolve {confirmation_id, decision}` (operator only): the final tool result
/// (approve: the stored request re-checked and run once; `accept_for_session`: the same, and a
/// session grant for the rest of the phone session when one can be made; deny: `denied`).
pub(super) async fn resolve(
    conn: &Conn,
    operator: &Operator,
    p: ConfirmationsResolveParams,
) -> Result<ConfirmationsResolveResult, ErrorObject> {
    if p.confirmation_id.starts_with("job-confirm-") {
        return Err(ErrorObject::invalid_params(format!(
            "{} is a background job's review, not a runtime confirmation: decide it with \
             inbox.resolve or jobs.review (`openphone inbox approve|deny <id>`)",
            p.confirmation_id
        )));
    }
    match conn
        .state
        .bridge
        .resolve(operator, &p.confirmation_id, p.decision)
        .await
    {
        Ok(result) => Ok(result),
        // Expired (with the time), already resolved or unknown: the inbox says which.
        Err(e) if e.code() == openphone_protocol::ErrorCode::PendingConfirmationNotFound => {
            let now = conn.state.bridge.now_ms();
            Err(super::inbox::not_pending(conn, &p.confirmation_id, now))
        }
        Err(e) => Err(ErrorObject::new(e.code(), e.to_string())),
    }
}
