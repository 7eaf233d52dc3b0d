//! The methods of a connection after `hello`, one module per family, behind [`dispatch`].
//!
//! Each method takes its params type and returns its result type from
//! `openphone_protocol::endpoint`; [`dispatch`] parses the params and writes the result, so
//! the wire shapes live only in the protocol crate.

mod approvals;
mod audit;
mod confirmations;
mod dashboard;
mod devices;
mod events;
mod goals;
mod inbox;
mod jobs;
mod policy;
mod runtime;
mod sessions;
mod sim;
mod tools;

use std::sync::Arc;

use openphone_policy::Role;
use openphone_protocol::endpoint::{
    ApprovalsGrant, ApprovalsList, ApprovalsRevoke, AttentionRequest, AuditQuery,
    ConfirmationsResolve, EndpointErrorCode, ErrorObject, EventsSubscribe, GoalsAbort, GoalsAnswer,
    GoalsCreate, GoalsExplain, GoalsExport, GoalsGet, GoalsList, GoalsPause, GoalsPlan,
    GoalsResume, GoalsRetry, GoalsTick, InboxList, InboxResolve, JobsCreate, JobsGet, JobsList,
    JobsPause, JobsResume, JobsReview, JobsStop, JobsWake, MethodName, PolicyExplain, Request,
    RuntimeElevate, RuntimeMessage, RuntimeRevokeElevation, RuntimeSelect, SessionsCancel,
    SessionsGet, SessionsList, SimInject, ToolsInvoke,
};
use serde::Serialize;

use super::{Conn, internal};

/// `forbidden` for a runtime calling an operator method.
fn operator_only(conn: &Conn, method: MethodName) -> Result<(), ErrorObject> {
    match conn.session.caller.role {
        Role::Operator => Ok(()),
        Role::Runtime => Err(forbidden(format!(
            "{method} is for operators; runtime credentials cannot call it"
        ))),
    }
}

/// A `forbidden` error.
fn forbidden(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(EndpointErrorCode::Forbidden, message)
}

/// A method's result as JSON text, written once by serde_json (or by
/// `ToolResult::to_json_text`, which is serde_json's text too); the response frame embeds it
/// as it is ([`super::send_written`]). Never built from text that was not written so.
pub(in crate::conn) struct Written(pub(in crate::conn) String);

/// A method's typed result as the `result` member of the response, written to JSON text once
/// (never through a `Value` tree first).
fn written<R: Serialize>(result: Result<R, ErrorObject>) -> Result<Written, ErrorObject> {
    serde_json::to_string(&result?)
        .map(Written)
        .map_err(internal)
}

/// Answers one request of a connection that said `hello`. Names every method (tidy rule
/// `exhaustive`): a new one must be routed here.
#[warn(clippy::wildcard_enum_match_arm)]
pub(super) async fn dispatch(conn: &Arc<Conn>, req: &Request) -> Result<Written, ErrorObject> {
    let Some(method) = req.method_name() else {
        return Err(ErrorObject::method_not_found(&req.method));
    };
    match method {
        MethodName::Hello => Err(ErrorObject::invalid_request(
            "hello was already said on this connection",
        )),
        MethodName::ToolsList => written(Ok(tools::list(conn))),
        // A result the bridge sealed embeds its `result` text as written once (issue 34).
        MethodName::ToolsInvoke => tools::invoke(conn, req.params_as::<ToolsInvoke>()?)
            .await
            .to_json_text()
            .map(Written)
            .map_err(internal),
        MethodName::ConfirmationsList => {
            operator_only(conn, method)?;
            written(confirmations::list(conn))
        }
        MethodName::ConfirmationsResolve => {
            // The role is checked before the params: a runtime is refused whatever it sends.
            let operator = confirmations::operator(conn)?;
            let params = req.params_as::<ConfirmationsResolve>()?;
            written(confirmations::resolve(conn, &operator, params).await)
        }
        MethodName::InboxList => {
            operator_only(conn, method)?;
            written(inbox::list(conn, req.params_as::<InboxList>()?))
        }
        MethodName::InboxResolve => {
            // The role is checked before the params, as for `confirmations.resolve`.
            let operator = confirmations::operator(conn)?;
            let params = req.params_as::<InboxResolve>()?;
            written(inbox::resolve(conn, &operator, params).await)
        }
        MethodName::EventsSubscribe => {
            written(events::subscribe(conn, req.params_as::<EventsSubscribe>()?))
        }
        MethodName::SessionsList => written(sessions::list(conn, req.params_as::<SessionsList>()?)),
        MethodName::SessionsGet => written(sessions::get(conn, req.params_as::<SessionsGet>()?)),
        MethodName::SessionsCancel => {
            operator_only(conn, method)?;
            written(sessions::cancel(conn, req.params_as::<SessionsCancel>()?).await)
        }
        MethodName::AuditQuery => {
            operator_only(conn, method)?;
            written(audit::query(conn, req.params_as::<AuditQuery>()?))
        }
        MethodName::AttentionRequest => {
            operator_only(conn, method)?;
            let params = req.params_as::<AttentionRequest>()?;
            let device = runtime::named_device(&req.params)?;
            written(runtime::attention_request(conn, params, device).await)
        }
        MethodName::RuntimeMessage => {
            runtime::runtime_only(conn)?;
            written(runtime::message(conn, req.params_as::<RuntimeMessage>()?))
        }
        MethodName::RuntimeList => {
            operator_only(conn, method)?;
            written(Ok(runtime::list(conn)))
        }
        MethodName::RuntimeSelect => {
            operator_only(conn, method)?;
            written(runtime::select(conn, req.params_as::<RuntimeSelect>()?))
        }
        MethodName::RuntimeElevate => {
            operator_only(conn, method)?;
            written(runtime::elevate(conn, req.params_as::<RuntimeElevate>()?))
        }
        MethodName::RuntimeRevokeElevation => {
            operator_only(conn, method)?;
            let params = req.params_as::<RuntimeRevokeElevation>()?;
            written(runtime::revoke_elevation(conn, params))
        }
        MethodName::PolicyExplain => {
            operator_only(conn, method)?;
            written(policy::explain(conn, req.params_as::<PolicyExplain>()?).await)
        }
        MethodName::ApprovalsList => {
            operator_only(conn, method)?;
            written(approvals::list(conn, req.params_as::<ApprovalsList>()?))
        }
        MethodName::ApprovalsGrant => {
            operator_only(conn, method)?;
            written(approvals::grant(conn, req.params_as::<ApprovalsGrant>()?))
        }
        MethodName::ApprovalsRevoke => {
            operator_only(conn, method)?;
            written(approvals::revoke(conn, req.params_as::<ApprovalsRevoke>()?))
        }
        MethodName::JobsList => {
            operator_only(conn, method)?;
            written(jobs::list(conn, req.params_as::<JobsList>()?))
        }
        MethodName::JobsGet => {
            operator_only(conn, method)?;
            written(jobs::get(conn, req.params_as::<JobsGet>()?))
        }
        MethodName::JobsCreate => {
            operator_only(conn, method)?;
            written(jobs::create(conn, req.params_as::<JobsCreate>()?))
        }
        MethodName::JobsStop => {
            operator_only(conn, method)?;
            written(jobs::stop(conn, req.params_as::<JobsStop>()?))
        }
        MethodName::JobsPause => {
            operator_only(conn, method)?;
            written(jobs::pause(conn, req.params_as::<JobsPause>()?))
        }
        MethodName::JobsResume => {
            operator_only(conn, method)?;
            written(jobs::resume(conn, req.params_as::<JobsResume>()?))
        }
        MethodName::JobsWake => {
            operator_only(conn, method)?;
            written(jobs::wake(conn, req.params_as::<JobsWake>()?).await)
        }
        MethodName::JobsReview => {
            operator_only(conn, method)?;
            written(jobs::review(conn, req.params_as::<JobsReview>()?).await)
        }
        MethodName::GoalsList => {
            operator_only(conn, method)?;
            written(goals::list(conn, req.params_as::<GoalsList>()?))
        }
        MethodName::GoalsGet => {
            operator_only(conn, method)?;
            written(goals::get(conn, req.params_as::<GoalsGet>()?))
        }
        MethodName::GoalsCreate => {
            operator_only(conn, method)?;
            written(goals::create(conn, req.params_as::<GoalsCreate>()?).await)
        }
        MethodName::GoalsPlan => {
            operator_only(conn, method)?;
            written(goals::plan(conn, req.params_as::<GoalsPlan>()?).await)
        }
        MethodName::GoalsTick => {
            operator_only(conn, method)?;
            written(goals::tick(conn, req.params_as::<GoalsTick>()?).await)
        }
        MethodName::GoalsAnswer => {
            operator_only(conn, method)?;
            written(goals::answer(conn, req.params_as::<GoalsAnswer>()?).await)
        }
        MethodName::GoalsRetry => {
            operator_only(conn, method)?;
            written(goals::retry(conn, req.params_as::<GoalsRetry>()?).await)
        }
        MethodName::GoalsPause => {
            operator_only(conn, method)?;
            written(goals::pause(conn, req.params_as::<GoalsPause>()?).await)
        }
        MethodName::GoalsResume => {
            operator_only(conn, method)?;
            written(goals::resume(conn, req.params_as::<GoalsResume>()?).await)
        }
        MethodName::GoalsAbort => {
            operator_only(conn, method)?;
            written(goals::abort(conn, req.params_as::<GoalsAbort>()?).await)
        }
        MethodName::GoalsExplain => {
            operator_only(conn, method)?;
            written(goals::explain(conn, req.params_as::<GoalsExplain>()?))
        }
        MethodName::GoalsExport => {
            operator_only(conn, method)?;
            written(goals::export(conn, req.params_as::<GoalsExport>()?))
        }
        MethodName::SimInject => {
            operator_only(conn, method)?;
            written(sim::inject(conn, req.params_as::<SimInject>()?).await)
        }
        MethodName::DashboardLogin => {
            operator_only(conn, method)?;
            written(dashboard::login_code(&conn.state))
        }
        MethodName::DevicesList => written(Ok(devices::list(conn).await)),
    }
}
