//! The bridge and phone sessions: whose session a request may name (`own_session`,
//! `foreign_session`), the autonomy a session gives, and the session status a call moves on
//! (`touch_session`, announced as `runtime.session.updated`).

use super::*;

impl ToolBridge {
    /// The caller's own active phone session with this id. A runtime never borrows another
    /// runtime's session (its autonomy or its status); the operator may name any session.
    pub(super) fn own_session(
        &self,
        caller: &Caller,
        phone_session_id: Option<&str>,
    ) -> Option<store::PhoneSession> {
        let id = phone_session_id?;
        let session = self.store.get_session(id).ok().flatten()?;
        let owner = caller.role == Role::Operator || session.runtime_kind == caller.runtime;
        (owner && session.status.is_active()).then_some(session)
    }

    /// A runtime's request tagged with a phone session of another runtime is refused
    /// (`invalid_params`): a confirmation, audit record or event of one runtime never names
    /// another's session. The operator may name any session; in-process callers (jobs, goals,
    /// the adaptive surface) name the sessions the daemon made for them; an id that names no
    /// stored session borrows nothing and is left alone.
    pub(super) fn foreign_session(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
    ) -> Option<ToolResult> {
        if caller.role == Role::Operator
            || caller.transport == openphone_policy::Transport::Internal
        {
            return None;
        }
        let id = req.phone_session_id.as_deref()?;
        let session = match self.store.get_session(id) {
            Ok(Some(session)) => session,
            Ok(None) => return None,
            Err(e) => {
                tracing::error!(error = %e, "reading a phone session");
                return Some(ToolResult::failure(
                    &caller.runtime,
                    &req.request_id,
                    ErrorCode::ToolError,
                    "the phone could not read the request's phone session; nothing was executed",
                ));
            }
        };
        (session.runtime_kind != caller.runtime).then(|| {
            ToolResult::failure(
                &caller.runtime,
                &req.request_id,
                ErrorCode::InvalidParams,
                format!(
                    "phone_session_id {id:?} is not a phone session of runtime `{}`: a runtime \
                     may tag its calls only with its own sessions",
                    caller.runtime
                ),
            )
        })
    }

    pub(super) fn session_autonomy(
        &self,
        caller: &Caller,
        phone_session_id: Option<&str>,
    ) -> Option<Autonomy> {
        let session = self.own_session(caller, phone_session_id)?;
        Autonomy::normalize(session.autonomy.as_str())
    }

    pub(super) fn touch_session(
        &self,
        caller: &Caller,
        phone_session_id: Option<&str>,
        status: SessionStatus,
    ) {
        let Some(session) = self.own_session(caller, phone_session_id) else {
            return;
        };
        let id = session.phone_session_id.as_str();
        if session.status == status {
            return;
        }
        match self
            .store
            .update_active_session_status(id, status, None, self.now_ms())
        {
            Ok(Some(_)) => {}
            // It ended meanwhile (cancelled, failed): a late tool result does not reopen it.
            Ok(None) => return,
            Err(e) => {
                tracing::error!(error = %e, "updating a phone session");
                return;
            }
        }
        let update = SessionUpdated {
            phone_session_id: id.to_owned(),
            runtime_session_id: session.runtime_session_id.clone(),
            status,
            updated_at_ms: self.now_ms(),
            reason: None,
        };
        self.publish(&Event::SessionUpdated(update), &session.runtime_kind);
    }
}
