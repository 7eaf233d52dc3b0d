//! The endpoint's params, results and event payloads: each serialises to the shape the daemon
//! sends today and reads back unchanged; params refuse unknown fields exactly where the daemon
//! does.

use std::fmt::Debug;

use openphone_protocol::endpoint::*;
use openphone_protocol::{
    Autonomy, Confirmation, Exposure, Risk, ToolResult, VersionAdvertisement,
};
use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// `value` serialises to exactly `wire`, and `wire` reads back as `value`.
pub(super) fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(
    value: &T,
    wire: Value,
) {
    assert_eq!(serde_json::to_value(value).unwrap(), wire);
    let back: T = serde_json::from_value(wire).unwrap();
    assert_eq!(&back, value);
}

pub(super) fn params<M: Method>(v: Value) -> Result<M::Params, serde_json::Error> {
    serde_json::from_value(v)
}

pub(super) fn ok_result() -> ToolResult {
    let mut result = Map::new();
    result.insert("tapped".into(), json!(true));
    ToolResult::ok("hermes", "req-42", result)
}

pub(super) fn ok_result_wire() -> Value {
    json!({"request_id": "req-42", "status": "ok", "requires_confirmation": false,
           "result": {"tapped": true}, "audit_id": "runtime:hermes:req-42"})
}

#[test]
fn hello_round_trips() {
    round_trip(
        &HelloParams {
            protocol: VersionRange { min: 1, max: 1 },
            client: ClientInfo {
                name: "hermes-adapter".into(),
                version: "0.3.0".into(),
            },
            token: Some("t".into()),
        },
        json!({"protocol": {"min": 1, "max": 1},
               "client": {"name": "hermes-adapter", "version": "0.3.0"}, "token": "t"}),
    );
    round_trip(
        &HelloResult {
            protocol_version: 1,
            role: Role::Runtime,
            runtime: "hermes".into(),
            runtime_protocol: VersionAdvertisement::current(),
            phone: PhoneProfile {
                platform: "simulated".into(),
                model: "OpenPhone Sim".into(),
                os_version: "Android 15 (simulated)".into(),
                screen_width: 1080,
                screen_height: 2400,
                supported_tools: vec!["openphone.screen.get".into()],
            },
            manifests: ManifestSummary {
                commands_version: 1,
                commands: vec!["openphone.screen.get".into()],
                events: vec!["runtime.tool.result".into()],
                capabilities: vec!["screen.read.visible".into()],
            },
            devices: Vec::new(),
        },
        json!({
            "protocol_version": 1,
            "role": "runtime",
            "runtime": "hermes",
            "runtime_protocol": {"name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1},
            "phone": {"platform": "simulated", "model": "OpenPhone Sim",
                      "os_version": "Android 15 (simulated)", "screen_width": 1080,
                      "screen_height": 2400, "supported_tools": ["openphone.screen.get"]},
            "manifests": {"commands_version": 1, "commands": ["openphone.screen.get"],
                          "events": ["runtime.tool.result"], "capabilities": ["screen.read.visible"]},
        }),
    );
    // Like the daemon: unknown fields are ignored, `client` may be absent.
    let p = params::<Hello>(json!({"protocol": {"min": 1, "max": 2}, "extra": 1})).unwrap();
    assert_eq!(p.client, ClientInfo::default());
    assert!(params::<Hello>(json!({"protocol": {"min": -1, "max": 1}})).is_err());
}

#[test]
fn tools_round_trip() {
    round_trip(
        &ToolsListResult {
            tools: vec![ToolInfo {
                name: "openphone.ui.tap".into(),
                aliases: vec![],
                android_tool: "tap".into(),
                description: "Taps the screen.".into(),
                category: "ui".into(),
                input_schema: json!({"type": "object"}),
                risk: Risk::Medium,
                confirmation: Confirmation::AskBeforeAction,
                default_exposure: Exposure::Dangerous,
                mutating: true,
                supported: true,
            }],
        },
        json!({"tools": [{"name": "openphone.ui.tap", "aliases": [], "android_tool": "tap",
            "description": "Taps the screen.", "category": "ui", "input_schema": {"type": "object"},
            "risk": "medium", "confirmation": "ask_before_action", "default_exposure": "dangerous",
            "mutating": true, "supported": true}]}),
    );
    round_trip(
        &ToolsInvokeParams {
            request_id: "req-42".into(),
            tool: "openphone.ui.tap".into(),
            params: Some(json!({"x": 540, "y": 1200, "reason": "open Messages"})),
            reason: Some("r".into()),
            runtime_session_id: Some("rs".into()),
            phone_session_id: Some("ps".into()),
            autonomy: Some("yolo".into()),
            idempotency_key: Some("k".into()),
            timeout_ms: Some(30_000),
            wait: Some(false),
            device_id: None,
        },
        json!({"request_id": "req-42", "tool": "openphone.ui.tap",
               "params": {"x": 540, "y": 1200, "reason": "open Messages"}, "reason": "r",
               "runtime_session_id": "rs", "phone_session_id": "ps", "autonomy": "yolo",
               "idempotency_key": "k", "timeout_ms": 30000, "wait": false}),
    );
    round_trip(&ok_result(), ok_result_wire());
    // `params: null` is no params, as today.
    let p = params::<ToolsInvoke>(json!({"tool": "x", "params": null})).unwrap();
    assert_eq!(p.params, None);
    // tools.list ignores whatever it is sent.
    params::<ToolsList>(json!({"verbose": true})).unwrap();
}

#[test]
fn confirmations_round_trip() {
    round_trip(
        &ConfirmationsListResult {
            confirmations: vec![PendingConfirmation {
                confirmation_id: "runtime-confirm-1".into(),
                tool: "openphone.ui.tap".into(),
                runtime: "hermes".into(),
                request_id: "req-42".into(),
                phone_session_id: None,
                summary: "openphone.ui.tap: open Messages".into(),
                risk: Risk::Medium,
                created_at_ms: 1,
                expires_at_ms: 2,
                session_grant_offered: true,
            }],
        },
        json!({"confirmations": [{"confirmation_id": "runtime-confirm-1",
            "tool": "openphone.ui.tap", "runtime": "hermes", "request_id": "req-42",
            "phone_session_id": null, "summary": "openphone.ui.tap: open Messages",
            "risk": "medium", "created_at_ms": 1, "expires_at_ms": 2,
            "session_grant_offered": true}]}),
    );
    round_trip(
        &ConfirmationsResolveParams {
            confirmation_id: "runtime-confirm-1".into(),
            decision: ConfirmDecision::Approve,
        },
        json!({"confirmation_id": "runtime-confirm-1", "decision": "approve"}),
    );
}

#[test]
fn sessions_and_audit_round_trip() {
    let session = PhoneSession {
        phone_session_id: "phone-sess-1".into(),
        created_at_ms: 1,
        updated_at_ms: 2,
        runtime_kind: "hermes".into(),
        runtime_session_id: "phone-sess-1".into(),
        attention_id: "attn-1".into(),
        source: "chat".into(),
        autonomy: Autonomy::AskBeforeAction,
        summary: "s".into(),
        status: SessionStatus::Running,
        audit_log_id: "phone-session:phone-sess-1".into(),
        failure_reason: None,
        device_id: None,
    };
    let session_wire = json!({"phone_session_id": "phone-sess-1", "created_at_ms": 1,
        "updated_at_ms": 2, "runtime_kind": "hermes", "runtime_session_id": "phone-sess-1",
        "attention_id": "attn-1", "source": "chat", "autonomy": "ask_before_action",
        "summary": "s", "status": "running", "audit_log_id": "phone-session:phone-sess-1",
        "failure_reason": null});
    round_trip(
        &SessionsListResult {
            sessions: vec![session.clone()],
        },
        json!({"sessions": [session_wire.clone()]}),
    );
    round_trip(
        &SessionsGetResult { session },
        json!({"session": session_wire}),
    );
    round_trip(
        &SessionsListParams {
            runtime: Some("hermes".into()),
            status: Some(SessionStatus::WaitingForConfirmation),
            limit: Some(20),
        },
        json!({"runtime": "hermes", "status": "waiting_for_confirmation", "limit": 20}),
    );
    round_trip(
        &SessionsGetParams {
            phone_session_id: "p".into(),
        },
        json!({"phone_session_id": "p"}),
    );
    round_trip(
        &AuditQueryParams {
            after: Some(0),
            limit: Some(100),
        },
        json!({"after": 0, "limit": 100}),
    );
    round_trip(
        &AuditQueryResult {
            records: vec![],
            next_after: None,
        },
        json!({"records": [], "next_after": null}),
    );
}

#[test]
fn runtime_methods_round_trip() {
    round_trip(
        &AttentionRequestParams {
            surface: "chat".into(),
            text: "What is next?".into(),
            runtime: None,
            autonomy: None,
            include_screen: true,
            context: Some(json!({"app": "calendar"})),
            session_target: Some("main".into()),
        },
        json!({"surface": "chat", "text": "What is next?", "include_screen": true,
               "context": {"app": "calendar"}, "session_target": "main"}),
    );
    // Only `text` is required; unknown fields (e.g. `screen`) are ignored, as today.
    let p = params::<AttentionRequest>(json!({"text": "hi", "screen": 5})).unwrap();
    assert_eq!(p.surface, "");
    assert!(params::<AttentionRequest>(json!({"surface": "chat"})).is_err());
    round_trip(
        &AttentionAccepted {
            ok: true,
            status: AttentionStatus::Sent,
            message: "sent to hermes".into(),
            phone_session_id: "p".into(),
            attention_id: "a".into(),
            runtime: "hermes".into(),
            runtime_session_id: "p".into(),
        },
        json!({"ok": true, "status": "sent", "message": "sent to hermes",
               "phone_session_id": "p", "attention_id": "a", "runtime": "hermes",
               "runtime_session_id": "p"}),
    );
    round_trip(
        &RuntimeMessageParams {
            phone_session_id: "p".into(),
            runtime_session_id: None,
            text: "Lunch at 12:30".into(),
            is_final: true,
            output: None,
            error: None,
            attention_id: Some("attn-1".into()),
        },
        json!({"phone_session_id": "p", "text": "Lunch at 12:30", "final": true,
               "attention_id": "attn-1"}),
    );
    round_trip(
        &RuntimeMessageResult {
            phone_session_id: "p".into(),
            status: SessionStatus::Completed,
        },
        json!({"phone_session_id": "p", "status": "completed"}),
    );
    round_trip(
        &RuntimeListResult {
            status: ManagerStatus::Connected,
            runtimes: vec![RuntimeInfo {
                id: "hermes".into(),
                kind: RuntimeKind::Websocket,
                enabled: true,
                status: RuntimeState::Connected,
                connections: 1,
                surfaces: vec![Surface::Chat, Surface::Volume],
                detail: None,
                elevation: None,
            }],
        },
        json!({"status": "connected", "runtimes": [{"id": "hermes", "kind": "websocket",
            "enabled": true, "status": "connected", "connections": 1,
            "surfaces": ["chat", "volume"]}]}),
    );
    round_trip(
        &RuntimeSelectParams {
            surface: "chat".into(),
            runtime: "hermes".into(),
        },
        json!({"surface": "chat", "runtime": "hermes"}),
    );
    round_trip(
        &RuntimeSelectResult {
            surface: Surface::Background,
            runtime: "builtin".into(),
        },
        json!({"surface": "background", "runtime": "builtin"}),
    );
    round_trip(
        &EventsSubscribeParams {
            events: vec!["runtime.tool.result".into()],
        },
        json!({"events": ["runtime.tool.result"]}),
    );
    round_trip(
        &EventsSubscribeResult {
            subscribed: vec!["runtime.tool.result".into()],
        },
        json!({"subscribed": ["runtime.tool.result"]}),
    );
}

/// The methods whose params the daemon parses with `deny_unknown_fields`.
#[test]
fn unknown_fields_are_refused_exactly_where_the_daemon_refuses_them() {
    fn refuses<M: Method>(valid: Value) -> bool {
        params::<M>(valid.clone()).unwrap();
        let mut with_extra = valid;
        with_extra["surprise"] = json!(1);
        params::<M>(with_extra).is_err()
    }
    let table = [
        (
            MethodName::Hello,
            refuses::<Hello>(json!({"protocol": {"min": 1, "max": 1}})),
        ),
        (MethodName::ToolsList, refuses::<ToolsList>(json!({}))),
        (
            MethodName::ToolsInvoke,
            refuses::<ToolsInvoke>(json!({"tool": "t"})),
        ),
        (
            MethodName::ConfirmationsList,
            refuses::<ConfirmationsList>(json!({})),
        ),
        (
            MethodName::ConfirmationsResolve,
            refuses::<ConfirmationsResolve>(json!({"confirmation_id": "c", "decision": "deny"})),
        ),
        (MethodName::InboxList, refuses::<InboxList>(json!({}))),
        (
            MethodName::InboxResolve,
            refuses::<InboxResolve>(json!({"id": "abcd", "decision": "deny"})),
        ),
        (
            MethodName::EventsSubscribe,
            refuses::<EventsSubscribe>(json!({"events": []})),
        ),
        (MethodName::SessionsList, refuses::<SessionsList>(json!({}))),
        (
            MethodName::SessionsGet,
            refuses::<SessionsGet>(json!({"phone_session_id": "p"})),
        ),
        (
            MethodName::SessionsCancel,
            refuses::<SessionsCancel>(json!({"phone_session_id": "p"})),
        ),
        (MethodName::AuditQuery, refuses::<AuditQuery>(json!({}))),
        (
            MethodName::AttentionRequest,
            refuses::<AttentionRequest>(json!({"text": "t"})),
        ),
        (
            MethodName::RuntimeMessage,
            refuses::<RuntimeMessage>(json!({"phone_session_id": "p", "text": "t"})),
        ),
        (MethodName::RuntimeList, refuses::<RuntimeList>(json!({}))),
        (
            MethodName::RuntimeSelect,
            refuses::<RuntimeSelect>(json!({"surface": "chat", "runtime": "r"})),
        ),
        (
            MethodName::RuntimeElevate,
            refuses::<RuntimeElevate>(
                json!({"runtime": "r", "to": "trusted_actions", "duration_secs": 60}),
            ),
        ),
        (
            MethodName::RuntimeRevokeElevation,
            refuses::<RuntimeRevokeElevation>(json!({"runtime": "r"})),
        ),
        (
            MethodName::PolicyExplain,
            refuses::<PolicyExplain>(json!({"tool": "t"})),
        ),
        (
            MethodName::ApprovalsList,
            refuses::<ApprovalsList>(json!({})),
        ),
        (
            MethodName::ApprovalsGrant,
            refuses::<ApprovalsGrant>(json!({"runtime": "r", "tool": "t"})),
        ),
        (
            MethodName::ApprovalsRevoke,
            refuses::<ApprovalsRevoke>(json!({"approval_id": "1"})),
        ),
        (MethodName::JobsList, refuses::<JobsList>(json!({}))),
        (
            MethodName::JobsGet,
            refuses::<JobsGet>(json!({"job_id": 1})),
        ),
        // The creation rules (§5) refuse unknown members, naming them, not serde.
        (MethodName::JobsCreate, refuses::<JobsCreate>(json!({}))),
        (
            MethodName::JobsStop,
            refuses::<JobsStop>(json!({"job_id": 1})),
        ),
        (
            MethodName::JobsPause,
            refuses::<JobsPause>(json!({"job_id": 1})),
        ),
        (
            MethodName::JobsResume,
            refuses::<JobsResume>(json!({"job_id": 1})),
        ),
        (MethodName::JobsWake, refuses::<JobsWake>(json!({}))),
        (
            MethodName::JobsReview,
            refuses::<JobsReview>(json!({"confirmation_id": "c", "decision": "deny"})),
        ),
        (MethodName::GoalsList, refuses::<GoalsList>(json!({}))),
        (
            MethodName::GoalsGet,
            refuses::<GoalsGet>(json!({"goal_id": "g"})),
        ),
        (
            MethodName::GoalsCreate,
            refuses::<GoalsCreate>(json!({"goal": {}})),
        ),
        (
            MethodName::GoalsPlan,
            refuses::<GoalsPlan>(json!({"goal_id": "g", "plan": []})),
        ),
        (
            MethodName::GoalsTick,
            refuses::<GoalsTick>(json!({"goal_id": "g"})),
        ),
        (
            MethodName::GoalsAnswer,
            refuses::<GoalsAnswer>(json!({"goal_id": "g", "action_id": "a", "text": "t"})),
        ),
        (
            MethodName::GoalsRetry,
            refuses::<GoalsRetry>(json!({"goal_id": "g"})),
        ),
        (
            MethodName::GoalsPause,
            refuses::<GoalsPause>(json!({"goal_id": "g"})),
        ),
        (
            MethodName::GoalsResume,
            refuses::<GoalsResume>(json!({"goal_id": "g"})),
        ),
        (
            MethodName::GoalsAbort,
            refuses::<GoalsAbort>(json!({"goal_id": "g"})),
        ),
        (
            MethodName::GoalsExplain,
            refuses::<GoalsExplain>(json!({"goal_id": "g", "action_id": "a"})),
        ),
        (
            MethodName::GoalsExport,
            refuses::<GoalsExport>(json!({"goal_id": "g"})),
        ),
        (
            MethodName::SimInject,
            refuses::<SimInject>(json!({"kind": "message", "address": "a", "text": "t"})),
        ),
        (
            MethodName::DashboardLogin,
            refuses::<DashboardLogin>(json!({})),
        ),
        (MethodName::DevicesList, refuses::<DevicesList>(json!({}))),
    ];
    let refusing: Vec<&str> = table
        .iter()
        .filter(|(_, refuses)| *refuses)
        .map(|(m, _)| m.as_str())
        .collect();
    assert_eq!(
        refusing,
        [
            "tools.invoke",
            "confirmations.resolve",
            "inbox.list",
            "inbox.resolve",
            "events.subscribe",
            "sessions.list",
            "sessions.get",
            "sessions.cancel",
            "audit.query",
            "runtime.elevate",
            "runtime.revoke_elevation",
            "policy.explain",
            "approvals.list",
            "approvals.grant",
            "approvals.revoke",
            "jobs.list",
            "jobs.get",
            "jobs.stop",
            "jobs.pause",
            "jobs.resume",
            "jobs.review",
            "goals.list",
            "goals.get",
            "goals.create",
            "goals.plan",
            "goals.tick",
            "goals.answer",
            "goals.retry",
            "goals.pause",
            "goals.resume",
            "goals.abort",
            "goals.explain",
            "goals.export",
            "sim.inject"
        ]
    );
    assert_eq!(table.len(), MethodName::ALL.len());
}
