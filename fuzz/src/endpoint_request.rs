//! Target: one WebSocket text frame as the daemon reads it.
//!
//! The input is the frame's text (bytes that are not UTF-8 are skipped: the WebSocket layer
//! refuses such a text frame before the endpoint sees it). Properties:
//!
//! - [`parse_request`] never panics; a refused frame gets an error answer that serialises and
//!   reads back as the same [`ServerMessage::Error`] (what the client would see);
//! - an accepted request written back out is accepted again, unchanged;
//! - for a known method, [`Request::params_as`] never panics, and typed params that parsed
//!   write out as an object that parses again into the same value (what the CLI sends, the
//!   daemon accepts);
//! - [`ServerMessage::parse`] (the client reading any frame) never panics.

use openphone_protocol::endpoint::{
    ApprovalsGrant, ApprovalsList, ApprovalsRevoke, AttentionRequest, AuditQuery,
    ConfirmationsList, ConfirmationsResolve, DashboardLogin, DevicesList, EventsSubscribe,
    GoalsAbort, GoalsAnswer, GoalsCreate, GoalsExplain, GoalsExport, GoalsGet, GoalsList,
    GoalsPause, GoalsPlan, GoalsResume, GoalsRetry, GoalsTick, Hello, InboxList, InboxResolve,
    JobsCreate, JobsGet, JobsList, JobsPause, JobsResume, JobsReview, JobsStop, JobsWake, Method,
    MethodName, PolicyExplain, Request, RuntimeElevate, RuntimeList, RuntimeMessage,
    RuntimeRevokeElevation, RuntimeSelect, ServerMessage, SessionsCancel, SessionsGet,
    SessionsList, SimInject, ToolsInvoke, ToolsList, parse_request,
};
use serde_json::Value;

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ServerMessage::parse(text);
    match parse_request(text) {
        Ok(request) => accepted(&request),
        Err(rejected) => {
            let response = rejected.into_response();
            let written = match serde_json::to_string(&response) {
                Ok(written) => written,
                Err(e) => panic!("the error answer does not serialise: {e}: {response:?}"),
            };
            match ServerMessage::parse(&written) {
                Ok(ServerMessage::Error(read)) => {
                    assert_eq!(read, response, "the error answer reads back differently");
                }
                other => panic!("the error answer {written} reads back as {other:?}"),
            }
        }
    }
}

fn accepted(request: &Request) {
    let written = match serde_json::to_string(request) {
        Ok(written) => written,
        Err(e) => panic!("an accepted request does not serialise: {e}: {request:?}"),
    };
    match parse_request(&written) {
        Ok(again) => assert_eq!(&again, request, "a written request reads back differently"),
        Err(e) => panic!("a written request is refused: {written}: {:?}", e.error),
    }
    let Some(method) = MethodName::parse(&request.method) else {
        return;
    };
    match method {
        MethodName::Hello => typed::<Hello>(request),
        MethodName::ToolsList => typed::<ToolsList>(request),
        MethodName::ToolsInvoke => typed::<ToolsInvoke>(request),
        MethodName::ConfirmationsList => typed::<ConfirmationsList>(request),
        MethodName::ConfirmationsResolve => typed::<ConfirmationsResolve>(request),
        MethodName::InboxList => typed::<InboxList>(request),
        MethodName::InboxResolve => typed::<InboxResolve>(request),
        MethodName::EventsSubscribe => typed::<EventsSubscribe>(request),
        MethodName::SessionsList => typed::<SessionsList>(request),
        MethodName::SessionsGet => typed::<SessionsGet>(request),
        MethodName::AuditQuery => typed::<AuditQuery>(request),
        MethodName::AttentionRequest => typed::<AttentionRequest>(request),
        MethodName::RuntimeMessage => typed::<RuntimeMessage>(request),
        MethodName::RuntimeList => typed::<RuntimeList>(request),
        MethodName::RuntimeSelect => typed::<RuntimeSelect>(request),
        MethodName::SessionsCancel => typed::<SessionsCancel>(request),
        MethodName::PolicyExplain => typed::<PolicyExplain>(request),
        MethodName::ApprovalsList => typed::<ApprovalsList>(request),
        MethodName::ApprovalsGrant => typed::<ApprovalsGrant>(request),
        MethodName::ApprovalsRevoke => typed::<ApprovalsRevoke>(request),
        MethodName::SimInject => typed::<SimInject>(request),
        MethodName::JobsList => typed::<JobsList>(request),
        MethodName::JobsGet => typed::<JobsGet>(request),
        MethodName::JobsCreate => typed::<JobsCreate>(request),
        MethodName::JobsStop => typed::<JobsStop>(request),
        MethodName::JobsPause => typed::<JobsPause>(request),
        MethodName::JobsResume => typed::<JobsResume>(request),
        MethodName::JobsWake => typed::<JobsWake>(request),
        MethodName::JobsReview => typed::<JobsReview>(request),
        MethodName::GoalsList => typed::<GoalsList>(request),
        MethodName::GoalsGet => typed::<GoalsGet>(request),
        MethodName::GoalsCreate => typed::<GoalsCreate>(request),
        MethodName::GoalsPlan => typed::<GoalsPlan>(request),
        MethodName::GoalsTick => typed::<GoalsTick>(request),
        MethodName::GoalsAnswer => typed::<GoalsAnswer>(request),
        MethodName::GoalsRetry => typed::<GoalsRetry>(request),
        MethodName::GoalsPause => typed::<GoalsPause>(request),
        MethodName::GoalsResume => typed::<GoalsResume>(request),
        MethodName::GoalsAbort => typed::<GoalsAbort>(request),
        MethodName::GoalsExplain => typed::<GoalsExplain>(request),
        MethodName::GoalsExport => typed::<GoalsExport>(request),
        MethodName::DashboardLogin => typed::<DashboardLogin>(request),
        MethodName::RuntimeElevate => typed::<RuntimeElevate>(request),
        MethodName::RuntimeRevokeElevation => typed::<RuntimeRevokeElevation>(request),
        MethodName::DevicesList => typed::<DevicesList>(request),
    }
}

/// Typed params of method `M`: parsed, written and parsed again to the same value.
fn typed<M: Method>(request: &Request) {
    let params = match request.params_as::<M>() {
        Ok(params) => params,
        Err(error) => {
            let answer = error.into_response(Some(request.id.clone()));
            if let Err(e) = serde_json::to_string(&answer) {
                panic!(
                    "{}: the invalid_params answer does not serialise: {e}",
                    M::NAME
                );
            }
            return;
        }
    };
    let written = match serde_json::to_value(&params) {
        Ok(Value::Object(map)) => map,
        Ok(other) => panic!("{}: params write out as a non-object {other}", M::NAME),
        Err(e) => panic!("{}: params do not serialise: {e}", M::NAME),
    };
    let resent = Request {
        params: written.clone(),
        ..request.clone()
    };
    let again = match resent.params_as::<M>() {
        Ok(again) => again,
        Err(e) => panic!(
            "{}: params written by the client are refused: {}: {e}",
            M::NAME,
            Value::Object(written)
        ),
    };
    match serde_json::to_value(&again) {
        Ok(Value::Object(map)) => assert_eq!(
            map,
            written,
            "{}: params change when written and read again",
            M::NAME
        ),
        other => panic!("{}: params read back as {other:?}", M::NAME),
    }
}
