//! The daemon's WebSocket JSON-RPC endpoint (`/v1/runtime`, `docs/endpoint.md`), as types.
//!
//! Every method has one zero-sized marker type implementing [`Method`], which names the wire
//! method and its params and result types; the server answers with these types and every Rust
//! client (the CLI, tests, adapters) parses them, so the wire shape is written once. The
//! framing (requests, responses, error objects, event notifications) is in [`envelope`]; the
//! closed set of `error.data.code` values is [`EndpointErrorCode`]; the event payloads the
//! daemon pushes are the variants of [`Event`].
//!
//! A client builds a request from a marker and parses the answer with it:
//!
//! ```
//! use openphone_protocol::endpoint::{
//!     EventsSubscribe, EventsSubscribeParams, Method, Request, ServerMessage,
//! };
//!
//! let request = Request::new::<EventsSubscribe>(
//!     7,
//!     EventsSubscribeParams { events: vec!["runtime.tool.result".into()] },
//! );
//! let frame = serde_json::to_string(&request).unwrap();
//! assert!(frame.contains(r#""method":"events.subscribe""#));
//!
//! let answer = r#"{"jsonrpc":"2.0","id":7,"result":{"subscribed":["runtime.tool.result"]}}"#;
//! let ServerMessage::Response(response) = ServerMessage::parse(answer).unwrap() else {
//!     panic!("not a response");
//! };
//! let result = response.result_as::<EventsSubscribe>().unwrap();
//! assert_eq!(result.subscribed, ["runtime.tool.result"]);
//! ```
//!
//! Params types keep the daemon's validation: the methods that refuse unknown fields
//! (`tools.invoke`, `confirmations.resolve`, `events.subscribe`, `sessions.*`, `audit.query`,
//! `policy.explain`, `approvals.*`, `sim.inject`, `jobs.*` but `jobs.create`, whose arguments
//! the creation rules check by name, and `jobs.wake`, which takes none, and `goals.*`)
//! are `deny_unknown_fields`; the others ignore fields they do not know.

pub mod envelope;

mod approvals;
mod audit;
mod confirmations;
mod dashboard;
mod devices;
mod elevation;
mod error;
mod events;
mod goals;
mod hello;
mod inbox;
mod jobs;
mod key_order;
mod policy;
mod runtimes;
mod sessions;
mod sim;
mod tools;
mod untrusted;
mod world;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use approvals::{
    ApprovalInfo, ApprovalKind, ApprovalState, ApprovalsGrantParams, ApprovalsGrantResult,
    ApprovalsListParams, ApprovalsListResult, ApprovalsRevokeParams, ApprovalsRevokeResult,
};
pub use audit::{
    AuditCaller, AuditConfirmation, AuditEntry, AuditKind, AuditProblem, AuditQueryParams,
    AuditQueryResult, AuditRecord, BrokenRecord, PolicyDecision,
};
pub use confirmations::{
    ConfirmDecision, ConfirmationsListParams, ConfirmationsListResult, ConfirmationsResolveParams,
    ConfirmationsResolveResult, PendingConfirmation,
};
pub use dashboard::{
    DashboardAuditVerifyReply, DashboardLoginBody, DashboardLoginReply, DashboardLoginResult,
    DashboardMethodsReply, DashboardOk, DashboardSessionReply,
};
pub use devices::{DeviceInfo, DevicesListParams, DevicesListResult};
pub use elevation::{
    ElevationChange, ElevationChanged, ElevationInfo, RuntimeElevateParams, RuntimeElevateResult,
    RuntimeRevokeElevationParams, RuntimeRevokeElevationResult,
};
pub use envelope::{
    APPLICATION_ERROR, ErrorData, ErrorObject, ErrorResponse, EventMethodName, EventNotification,
    EventParams, INVALID_PARAMS, INVALID_REQUEST, JsonRpcVersion, METHOD_NOT_FOUND, PARSE_ERROR,
    RejectedRequest, Request, RequestId, Response, ServerMessage, parse_request,
};
pub use error::{EndpointErrorCode, UnknownEndpointErrorCode};
pub use events::{
    BackgroundJobEvent, ConfirmationRequired, ConfirmationResolution, ConfirmationResolved, Event,
    EventsSubscribeParams, EventsSubscribeResult, GoalEvent, MessagePayload, PresenceOffline,
    PresenceOnline, PresenceTrigger, SessionUpdated,
};
pub use goals::{
    GOAL_WAIT_EVENTS, GoalActionKind, GoalActionParams, GoalActionRecord, GoalAttemptRecord,
    GoalBlockerRecord, GoalCheckpointRecord, GoalCriterionRecord, GoalDecision, GoalEvidenceRecord,
    GoalExportFile, GoalIdParams, GoalOwner, GoalProposal, GoalReadCheckRecord, GoalRecord,
    GoalReportInfo, GoalResult, GoalRetryBudget, GoalSummary, GoalTransitionInfo, GoalWaitOn,
    GoalsAnswerParams, GoalsCreateParams, GoalsExplainParams, GoalsExplainResult,
    GoalsExportResult, GoalsGetResult, GoalsListParams, GoalsListResult, GoalsPlanParams,
    GoalsTickResult,
};
pub use hello::{
    ClientInfo, HelloDevice, HelloParams, HelloResult, ManifestSummary, PhoneProfile, Role,
    VersionRange,
};
pub use inbox::{
    InboxCounts, InboxItem, InboxKind, InboxListParams, InboxListResult, InboxOutcome,
    InboxResolveParams, InboxResolveResult, InboxState,
};
pub use jobs::{
    JobEntry, JobIdParams, JobResult, JobRunInfo, JobsCreateParams, JobsGetResult, JobsListParams,
    JobsListResult, JobsReviewParams, JobsReviewResult, JobsStopResult, JobsWakeResult,
    ReviewDecision, RowHost,
};
pub use policy::{
    ExplainSource, Explanation, LayerExplanation, PolicyChange, PolicyChangeKind,
    PolicyExplainParams, PolicyExplainResult, PolicyLayer, PolicyOutcome,
};
pub use runtimes::{
    AttentionAccepted, AttentionRequestParams, AttentionRequested, AttentionStatus, ManagerStatus,
    RuntimeInfo, RuntimeKind, RuntimeListParams, RuntimeListResult, RuntimeMessageParams,
    RuntimeMessageResult, RuntimeSelectParams, RuntimeSelectResult, RuntimeState, SessionTarget,
    Source, Surface,
};
pub use sessions::{
    PhoneSession, SessionStatus, SessionsCancelParams, SessionsCancelResult, SessionsGetParams,
    SessionsGetResult, SessionsListParams, SessionsListResult,
};
pub use sim::{SimInjectParams, SimInjectResult};
pub use tools::{ToolInfo, ToolsInvokeParams, ToolsInvokeResult, ToolsListParams, ToolsListResult};
pub use untrusted::{Trust, UntrustedData};
pub use world::{
    PhoneCallReceived, PhoneMessageReceived, PhoneNotificationAction, PhoneNotificationPosted,
    WatcherFired, WatcherReaction,
};

/// One method of the endpoint: its wire name and the types of its params and result.
///
/// Implemented only by the zero-sized markers of this module ([`Hello`], [`ToolsList`], …),
/// one per entry of [`MethodName`].
pub trait Method {
    /// The wire method name, e.g. `tools.invoke`.
    const NAME: &'static str;
    /// The same method as a [`MethodName`] (for exhaustive dispatch).
    const METHOD: MethodName;
    /// What `params` holds.
    type Params: Serialize + DeserializeOwned;
    /// What `result` holds on success.
    type Result: Serialize + DeserializeOwned;
}

/// Params of the methods that take none. Any object is accepted and its fields are ignored,
/// as the daemon does; it serialises as `{}`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct NoParams {}

macro_rules! methods {
    ($( $(#[$doc:meta])* $marker:ident = $wire:literal => $params:ty, $result:ty; )*) => {
        crate::wire_enum!(
            /// Every method of the endpoint, by wire name. A server matches on it exhaustively,
            /// so adding a method makes the compiler list the dispatch that must handle it.
            MethodName { $( $(#[$doc])* $marker = $wire, )* }
        );

        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
            pub struct $marker;

            impl Method for $marker {
                const NAME: &'static str = $wire;
                const METHOD: MethodName = MethodName::$marker;
                type Params = $params;
                type Result = $result;
            }
        )*

        /// The JSON Schemas of a method's params and result (`crate::schema`).
        pub(crate) fn method_schemas(
            method: MethodName,
            generator: &mut schemars::SchemaGenerator,
        ) -> (schemars::Schema, schemars::Schema) {
            match method {
                $( MethodName::$marker => (
                    generator.subschema_for::<$params>(),
                    generator.subschema_for::<$result>(),
                ), )*
            }
        }
    };
}

methods! {
    /// `hello` (both roles; the first message of a connection): version negotiation and
    /// authentication.
    Hello = "hello" => HelloParams, HelloResult;
    /// `tools.list` (both): the commands this caller may use.
    ToolsList = "tools.list" => ToolsListParams, ToolsListResult;
    /// `tools.invoke` (both): one tool request through the tool bridge.
    ToolsInvoke = "tools.invoke" => ToolsInvokeParams, ToolsInvokeResult;
    /// `confirmations.list` (operator): the pending confirmations.
    ConfirmationsList = "confirmations.list" => ConfirmationsListParams, ConfirmationsListResult;
    /// `confirmations.resolve` (operator): approve or deny one confirmation.
    ConfirmationsResolve = "confirmations.resolve"
        => ConfirmationsResolveParams, ConfirmationsResolveResult;
    /// `inbox.list` (operator): everything waiting for the user — confirmations, job reviews,
    /// goal approvals — in one list with pending counts by kind.
    InboxList = "inbox.list" => InboxListParams, InboxListResult;
    /// `inbox.resolve` (operator): approve or deny one inbox item by id, short id or unique
    /// prefix, routed to its kind's own rules.
    InboxResolve = "inbox.resolve" => InboxResolveParams, InboxResolveResult;
    /// `events.subscribe` (both): add manifest events to this connection's subscriptions.
    EventsSubscribe = "events.subscribe" => EventsSubscribeParams, EventsSubscribeResult;
    /// `sessions.list` (operator; a runtime sees only its own sessions).
    SessionsList = "sessions.list" => SessionsListParams, SessionsListResult;
    /// `sessions.get` (operator; a runtime sees only its own sessions).
    SessionsGet = "sessions.get" => SessionsGetParams, SessionsGetResult;
    /// `sessions.cancel` (operator): stop a phone session (its built-in loop stops before
    /// its next model or tool call); the session fails with reason `cancelled`.
    SessionsCancel = "sessions.cancel" => SessionsCancelParams, SessionsCancelResult;
    /// `audit.query` (operator): a page of audit records.
    AuditQuery = "audit.query" => AuditQueryParams, AuditQueryResult;
    /// `attention.request` (operator): a phone session routed to a runtime.
    AttentionRequest = "attention.request" => AttentionRequestParams, AttentionAccepted;
    /// `runtime.message` (runtime): a reply for one of the caller's own sessions.
    RuntimeMessage = "runtime.message" => RuntimeMessageParams, RuntimeMessageResult;
    /// `runtime.list` (operator): the runtimes, their status and routed surfaces.
    RuntimeList = "runtime.list" => RuntimeListParams, RuntimeListResult;
    /// `runtime.select` (operator): route a surface to a runtime.
    RuntimeSelect = "runtime.select" => RuntimeSelectParams, RuntimeSelectResult;
    /// `runtime.elevate` (operator): raise a runtime's autonomy ceiling for a while.
    RuntimeElevate = "runtime.elevate" => RuntimeElevateParams, RuntimeElevateResult;
    /// `runtime.revoke_elevation` (operator): end a runtime's elevation now.
    RuntimeRevokeElevation = "runtime.revoke_elevation"
        => RuntimeRevokeElevationParams, RuntimeRevokeElevationResult;
    /// `policy.explain` (operator): a dry run of one request through the policy stack.
    PolicyExplain = "policy.explain" => PolicyExplainParams, PolicyExplainResult;
    /// `approvals.list` (operator): standing approvals and session grants.
    ApprovalsList = "approvals.list" => ApprovalsListParams, ApprovalsListResult;
    /// `approvals.grant` (operator): create a standing approval.
    ApprovalsGrant = "approvals.grant" => ApprovalsGrantParams, ApprovalsGrantResult;
    /// `approvals.revoke` (operator): revoke a standing approval or a session grant.
    ApprovalsRevoke = "approvals.revoke" => ApprovalsRevokeParams, ApprovalsRevokeResult;
    /// `jobs.list` (operator): background jobs with their full records.
    JobsList = "jobs.list" => JobsListParams, JobsListResult;
    /// `jobs.get` (operator): one job, its delivery state and its attempts.
    JobsGet = "jobs.get" => JobIdParams, JobsGetResult;
    /// `jobs.create` (operator): create a job (§5).
    JobsCreate = "jobs.create" => JobsCreateParams, JobResult;
    /// `jobs.stop` (operator): stop a job for good (§8).
    JobsStop = "jobs.stop" => JobIdParams, JobsStopResult;
    /// `jobs.pause` (operator): pause a queued job.
    JobsPause = "jobs.pause" => JobIdParams, JobResult;
    /// `jobs.resume` (operator): resume a paused job (due at once).
    JobsResume = "jobs.resume" => JobIdParams, JobResult;
    /// `jobs.wake` (operator): run a scheduler tick now.
    JobsWake = "jobs.wake" => NoParams, JobsWakeResult;
    /// `jobs.review` (operator): approve or deny a parked background call (§9.5).
    JobsReview = "jobs.review" => JobsReviewParams, JobsReviewResult;
    /// `goals.list` (operator): goals, most recently updated first, by state.
    GoalsList = "goals.list" => GoalsListParams, GoalsListResult;
    /// `goals.get` (operator): a goal's document, transitions and reports.
    GoalsGet = "goals.get" => GoalIdParams, GoalsGetResult;
    /// `goals.create` (operator): create a goal from a spec (with or without a plan).
    GoalsCreate = "goals.create" => GoalsCreateParams, GoalResult;
    /// `goals.plan` (operator): submit a plan, or re-plan what has not started.
    GoalsPlan = "goals.plan" => GoalsPlanParams, GoalResult;
    /// `goals.tick` (operator): run one tick of the goal now.
    GoalsTick = "goals.tick" => GoalIdParams, GoalsTickResult;
    /// `goals.answer` (operator): answer an `ask_user` action.
    GoalsAnswer = "goals.answer" => GoalsAnswerParams, GoalResult;
    /// `goals.retry` (operator): ready a BLOCKED action (or all) and renew the budget.
    GoalsRetry = "goals.retry" => GoalActionParams, GoalResult;
    /// `goals.pause` (operator): stop scheduling the goal's actions.
    GoalsPause = "goals.pause" => GoalIdParams, GoalResult;
    /// `goals.resume` (operator): resume a paused goal.
    GoalsResume = "goals.resume" => GoalIdParams, GoalResult;
    /// `goals.abort` (operator): abort the goal, or one action.
    GoalsAbort = "goals.abort" => GoalActionParams, GoalResult;
    /// `goals.explain` (operator): why an action ran, waits or is blocked.
    GoalsExplain = "goals.explain" => GoalsExplainParams, GoalsExplainResult;
    /// `goals.export` (operator): the goal's artifacts, rebuilt from the store.
    GoalsExport = "goals.export" => GoalIdParams, GoalsExportResult;
    /// `sim.inject` (operator): make something happen in the simulated phone's world.
    SimInject = "sim.inject" => SimInjectParams, SimInjectResult;
    /// `dashboard.login` (operator): a one-time login code for the web dashboard.
    DashboardLogin = "dashboard.login" => NoParams, DashboardLoginResult;
    /// `devices.list` (both; a runtime sees the phones it is granted): the daemon's phones.
    DevicesList = "devices.list" => DevicesListParams, DevicesListResult;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of<M: Method>() -> (&'static str, MethodName) {
        (M::NAME, M::METHOD)
    }

    #[test]
    fn every_marker_names_its_method() {
        let markers = [
            name_of::<Hello>(),
            name_of::<ToolsList>(),
            name_of::<ToolsInvoke>(),
            name_of::<ConfirmationsList>(),
            name_of::<ConfirmationsResolve>(),
            name_of::<InboxList>(),
            name_of::<InboxResolve>(),
            name_of::<EventsSubscribe>(),
            name_of::<SessionsList>(),
            name_of::<SessionsGet>(),
            name_of::<SessionsCancel>(),
            name_of::<AuditQuery>(),
            name_of::<AttentionRequest>(),
            name_of::<RuntimeMessage>(),
            name_of::<RuntimeList>(),
            name_of::<RuntimeSelect>(),
            name_of::<RuntimeElevate>(),
            name_of::<RuntimeRevokeElevation>(),
            name_of::<PolicyExplain>(),
            name_of::<ApprovalsList>(),
            name_of::<ApprovalsGrant>(),
            name_of::<ApprovalsRevoke>(),
            name_of::<JobsList>(),
            name_of::<JobsGet>(),
            name_of::<JobsCreate>(),
            name_of::<JobsStop>(),
            name_of::<JobsPause>(),
            name_of::<JobsResume>(),
            name_of::<JobsWake>(),
            name_of::<JobsReview>(),
            name_of::<GoalsList>(),
            name_of::<GoalsGet>(),
            name_of::<GoalsCreate>(),
            name_of::<GoalsPlan>(),
            name_of::<GoalsTick>(),
            name_of::<GoalsAnswer>(),
            name_of::<GoalsRetry>(),
            name_of::<GoalsPause>(),
            name_of::<GoalsResume>(),
            name_of::<GoalsAbort>(),
            name_of::<GoalsExplain>(),
            name_of::<GoalsExport>(),
            name_of::<SimInject>(),
            name_of::<DashboardLogin>(),
            name_of::<DevicesList>(),
        ];
        assert_eq!(markers.len(), MethodName::ALL.len());
        for ((name, method), listed) in markers.into_iter().zip(MethodName::ALL) {
            assert_eq!(method, listed);
            assert_eq!(name, method.as_str());
            assert_eq!(MethodName::parse(name), Some(method));
        }
    }

    #[test]
    fn no_params_accepts_any_object_and_writes_an_empty_one() {
        let p: NoParams = serde_json::from_str(r#"{"anything": [1, 2]}"#).unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), "{}");
    }
}
