//! `events.subscribe` and the events the daemon pushes (names from the events manifest).
//!
//! A runtime receives only the events addressed to its own runtime id; operators receive the
//! events meant for operators.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::elevation::ElevationChanged;
use super::runtimes::{AttentionRequested, ManagerStatus};
use super::sessions::SessionStatus;
use super::world::{
    PhoneCallReceived, PhoneMessageReceived, PhoneNotificationAction, PhoneNotificationPosted,
    WatcherFired,
};
use crate::autonomy::Autonomy;
use crate::manifest::Risk;
use crate::tool_result::ToolResult;

/// `events.subscribe` params: manifest event names to add to the connection's set. Unknown
/// fields are refused; a name that is not a manifest event is `event_unsupported`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsSubscribeParams {
    pub events: Vec<String>,
}

/// `events.subscribe` result: every event the connection is now subscribed to, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventsSubscribeResult {
    pub subscribed: Vec<String>,
}

/// An event the daemon pushes: its manifest name (`event`) and its payload (`payload`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", content = "payload")]
pub enum Event {
    /// A runtime connected.
    #[serde(rename = "runtime.presence.online")]
    PresenceOnline(PresenceOnline),
    /// A runtime's last connection closed.
    #[serde(rename = "runtime.presence.offline")]
    PresenceOffline(PresenceOffline),
    /// An attention request for the runtime.
    #[serde(rename = "runtime.attention.requested")]
    AttentionRequested(AttentionRequested),
    /// A streamed fragment of a runtime's reply (to operators).
    #[serde(rename = "runtime.message.delta")]
    MessageDelta(MessagePayload),
    /// A runtime's finished reply (to operators).
    #[serde(rename = "runtime.message.final")]
    MessageFinal(MessagePayload),
    /// A tool request's result (the final result of a `wait: false` invoke included).
    #[serde(rename = "runtime.tool.result")]
    ToolResult(ToolResult),
    /// A tool request is waiting for the user.
    #[serde(rename = "runtime.confirmation.required")]
    ConfirmationRequired(ConfirmationRequired),
    /// A confirmation reached its final result.
    #[serde(rename = "runtime.confirmation.resolved")]
    ConfirmationResolved(ConfirmationResolved),
    /// A phone session changed status.
    #[serde(rename = "runtime.session.updated")]
    SessionUpdated(SessionUpdated),
    /// A background job was created (to operators).
    #[serde(rename = "background_job.created")]
    JobCreated(BackgroundJobEvent),
    /// A background job changed status, phase or progress (to operators).
    #[serde(rename = "background_job.updated")]
    JobUpdated(BackgroundJobEvent),
    /// A background run parked a state-changing call for the user's review (to operators).
    #[serde(rename = "background_job.review_required")]
    JobReviewRequired(BackgroundJobEvent),
    /// A background review was settled (to operators).
    #[serde(rename = "background_job.review_resolved")]
    JobReviewResolved(BackgroundJobEvent),
    /// A job's result was delivered, or its delivery failed (to operators).
    #[serde(rename = "background_job.delivered")]
    JobDelivered(BackgroundJobEvent),
    /// A job failed 3 or more times in a row, or gave up (to operators).
    #[serde(rename = "background_job.failure_alert")]
    JobFailureAlert(BackgroundJobEvent),
    /// A goal was created (to operators).
    #[serde(rename = "goal.created")]
    GoalCreated(GoalEvent),
    /// A goal changed: its state, its plan, an action's state, a checkpoint (to operators).
    #[serde(rename = "goal.updated")]
    GoalUpdated(GoalEvent),
    /// A goal's action waits for the user's approval (to operators).
    #[serde(rename = "goal.approval.requested")]
    GoalApprovalRequested(GoalEvent),
    /// The approval a goal's action waited for was given, declined or expired (to operators).
    #[serde(rename = "goal.approval.resolved")]
    GoalApprovalResolved(GoalEvent),
    /// A goal made a delta report (to operators).
    #[serde(rename = "goal.report")]
    GoalReport(GoalEvent),
    /// A message arrived on the phone (to operators).
    #[serde(rename = "phone.message.received")]
    PhoneMessageReceived(PhoneMessageReceived),
    /// A call reached the phone (to operators).
    #[serde(rename = "phone.call.received")]
    PhoneCallReceived(PhoneCallReceived),
    /// A notification appeared in the shade (to operators).
    #[serde(rename = "phone.notification.posted")]
    PhoneNotificationPosted(PhoneNotificationPosted),
    /// The user pressed a notification's action button (to operators).
    #[serde(rename = "phone.notification.action")]
    PhoneNotificationAction(PhoneNotificationAction),
    /// A watcher fired (to operators and the runtime that made it).
    #[serde(rename = "watcher.fired")]
    WatcherFired(WatcherFired),
    /// An elevation was granted, revoked or expired (to operators and the runtime concerned).
    #[serde(rename = "runtime.elevation.changed")]
    ElevationChanged(ElevationChanged),
}

impl Event {
    /// Every event name the daemon sends, in declaration order.
    pub const NAMES: [&'static str; 26] = [
        "runtime.presence.online",
        "runtime.presence.offline",
        "runtime.attention.requested",
        "runtime.message.delta",
        "runtime.message.final",
        "runtime.tool.result",
        "runtime.confirmation.required",
        "runtime.confirmation.resolved",
        "runtime.session.updated",
        "background_job.created",
        "background_job.updated",
        "background_job.review_required",
        "background_job.review_resolved",
        "background_job.delivered",
        "background_job.failure_alert",
        "goal.created",
        "goal.updated",
        "goal.approval.requested",
        "goal.approval.resolved",
        "goal.report",
        "phone.message.received",
        "phone.call.received",
        "phone.notification.posted",
        "phone.notification.action",
        "watcher.fired",
        "runtime.elevation.changed",
    ];

    /// The manifest event name.
    pub fn name(&self) -> &'static str {
        match self {
            Event::PresenceOnline(_) => "runtime.presence.online",
            Event::PresenceOffline(_) => "runtime.presence.offline",
            Event::AttentionRequested(_) => "runtime.attention.requested",
            Event::MessageDelta(_) => "runtime.message.delta",
            Event::MessageFinal(_) => "runtime.message.final",
            Event::ToolResult(_) => "runtime.tool.result",
            Event::ConfirmationRequired(_) => "runtime.confirmation.required",
            Event::ConfirmationResolved(_) => "runtime.confirmation.resolved",
            Event::SessionUpdated(_) => "runtime.session.updated",
            Event::JobCreated(_) => "background_job.created",
            Event::JobUpdated(_) => "background_job.updated",
            Event::JobReviewRequired(_) => "background_job.review_required",
            Event::JobReviewResolved(_) => "background_job.review_resolved",
            Event::JobDelivered(_) => "background_job.delivered",
            Event::JobFailureAlert(_) => "background_job.failure_alert",
            Event::GoalCreated(_) => "goal.created",
            Event::GoalUpdated(_) => "goal.updated",
            Event::GoalApprovalRequested(_) => "goal.approval.requested",
            Event::GoalApprovalResolved(_) => "goal.approval.resolved",
            Event::GoalReport(_) => "goal.report",
            Event::PhoneMessageReceived(_) => "phone.message.received",
            Event::PhoneCallReceived(_) => "phone.call.received",
            Event::PhoneNotificationPosted(_) => "phone.notification.posted",
            Event::PhoneNotificationAction(_) => "phone.notification.action",
            Event::WatcherFired(_) => "watcher.fired",
            Event::ElevationChanged(_) => "runtime.elevation.changed",
        }
    }

    /// The payload alone, as JSON.
    pub fn payload(&self) -> Result<Value, serde_json::Error> {
        match self {
            Event::PresenceOnline(p) => serde_json::to_value(p),
            Event::PresenceOffline(p) => serde_json::to_value(p),
            Event::AttentionRequested(p) => serde_json::to_value(p),
            Event::MessageDelta(p) | Event::MessageFinal(p) => serde_json::to_value(p),
            Event::ToolResult(p) => serde_json::to_value(p),
            Event::ConfirmationRequired(p) => serde_json::to_value(p),
            Event::ConfirmationResolved(p) => serde_json::to_value(p),
            Event::SessionUpdated(p) => serde_json::to_value(p),
            Event::JobCreated(p)
            | Event::JobUpdated(p)
            | Event::JobReviewRequired(p)
            | Event::JobReviewResolved(p)
            | Event::JobDelivered(p)
            | Event::JobFailureAlert(p) => serde_json::to_value(p),
            Event::GoalCreated(p)
            | Event::GoalUpdated(p)
            | Event::GoalApprovalRequested(p)
            | Event::GoalApprovalResolved(p)
            | Event::GoalReport(p) => serde_json::to_value(p),
            Event::PhoneMessageReceived(p) => serde_json::to_value(p),
            Event::PhoneCallReceived(p) => serde_json::to_value(p),
            Event::PhoneNotificationPosted(p) => serde_json::to_value(p),
            Event::PhoneNotificationAction(p) => serde_json::to_value(p),
            Event::WatcherFired(p) => serde_json::to_value(p),
            Event::ElevationChanged(p) => serde_json::to_value(p),
        }
    }

    /// The event named `name` with a JSON payload (what a bus carries), checked against the
    /// payload type.
    pub fn from_parts(name: &str, payload: Value) -> Result<Event, serde_json::Error> {
        serde_json::from_value(serde_json::json!({"event": name, "payload": payload}))
    }
}

crate::wire_enum!(
    /// What changed a runtime's presence.
    PresenceTrigger {
        Connect = "connect",
        Disconnect = "disconnect",
    }
);

/// `runtime.presence.online` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PresenceOnline {
    pub trigger: PresenceTrigger,
    /// When the daemon sent it (Unix ms; camelCase on the wire, as upstream names it).
    #[serde(rename = "sentAtMs")]
    pub sent_at_ms: i64,
    pub runtime: String,
}

/// `runtime.presence.offline` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PresenceOffline {
    pub trigger: PresenceTrigger,
    /// When the daemon sent it (Unix ms; camelCase on the wire, as upstream names it).
    #[serde(rename = "sentAtMs")]
    pub sent_at_ms: i64,
    pub runtime: String,
    /// The manager's aggregate status after the disconnect.
    pub runtime_manager_status: ManagerStatus,
}

/// `runtime.message.delta` and `runtime.message.final` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessagePayload {
    pub phone_session_id: String,
    pub runtime_session_id: String,
    pub text: String,
    /// Final messages only: the assistant output envelope, when the runtime sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Final messages only: the runtime reports that the turn failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The attention request this reply answers, when the runtime named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_id: Option<String>,
}

/// `runtime.confirmation.required` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfirmationRequired {
    pub confirmation_id: String,
    pub request_id: String,
    pub runtime: String,
    pub runtime_session_id: String,
    /// Canonical command name.
    pub tool: String,
    /// What the user is asked to approve.
    pub summary: String,
    /// The request's reason (empty when it gave none).
    pub reason: String,
    /// The effective autonomy of the request.
    pub autonomy: Autonomy,
    pub timeout_ms: i64,
    pub expires_at_ms: i64,
    pub risk: Risk,
    /// Always present; `null` outside a phone session.
    pub phone_session_id: Option<String>,
    /// `false` when this request joined a confirmation that was already pending.
    pub created: bool,
    /// Whether `accept_for_session` would make a session grant (below the risk floor, inside a
    /// phone session).
    #[serde(default)]
    pub session_grant_offered: bool,
    /// The `needs_confirmation` tool result.
    pub result: ToolResult,
}

crate::wire_enum!(
    /// How a confirmation ended.
    ConfirmationResolution {
        /// Approved and executed.
        Approved = "approved",
        /// Approved for the rest of the phone session (a session grant was made) and executed.
        ApprovedForSession = "approved_for_session",
        /// Denied (by the user, a confirming host, or withdrawn by its caller).
        Denied = "denied",
        /// Expired before anyone answered.
        Timeout = "timeout",
        /// Was executing when the daemon stopped; never run again.
        ResultUnknown = "result_unknown",
    }
);

/// `runtime.confirmation.resolved` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfirmationResolved {
    pub confirmation_id: String,
    pub request_id: String,
    pub runtime: String,
    pub runtime_session_id: String,
    /// Canonical command name.
    pub tool: String,
    pub resolution: ConfirmationResolution,
    /// The session grant `accept_for_session` made (resolution `approved_for_session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// Why an `accept_for_session` counted as a plain approval (`risk_floor`,
    /// `no_phone_session`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downgraded: Option<String>,
    /// The final tool result.
    pub result: ToolResult,
}

/// `runtime.session.updated` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionUpdated {
    pub phone_session_id: String,
    pub runtime_session_id: String,
    pub status: SessionStatus,
    pub updated_at_ms: i64,
    /// Why the session failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_carry_their_name_beside_the_payload() {
        let event = Event::SessionUpdated(SessionUpdated {
            phone_session_id: "p".into(),
            runtime_session_id: "r".into(),
            status: SessionStatus::Failed,
            updated_at_ms: 5,
            reason: Some("gone".into()),
        });
        let v = serde_json::to_value(&event).unwrap();
        assert_eq!(v["event"], "runtime.session.updated");
        assert_eq!(v["payload"], event.payload().unwrap());
        let back = Event::from_parts(event.name(), event.payload().unwrap()).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn names_list_every_variant() {
        let one = |name: &str| Event::NAMES.iter().filter(|n| **n == name).count();
        let online = Event::PresenceOnline(PresenceOnline {
            trigger: PresenceTrigger::Connect,
            sent_at_ms: 1,
            runtime: "hermes".into(),
        });
        assert_eq!(one(online.name()), 1);
        assert!(Event::from_parts("runtime.made.up", json!({})).is_err());
    }
}

/// The payload of every `background_job.*` event: the job's view (`agent-jobs.md` §10: never
/// the prompt, payload, result trace or review params) and what the event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackgroundJobEvent {
    pub job_id: i64,
    pub title: String,
    /// The job's status after the event.
    pub status: String,
    pub phase: String,
    pub progress_text: String,
    pub unread_result: bool,
    pub failure_count: i64,
    /// The next due time (Unix ms; 0 when none).
    pub next_run_at: i64,
    /// The review this event concerns (`job-confirm-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation_id: Option<String>,
    /// The reviewed call's summary (`review_required`), or the resolution
    /// (`review_resolved`: `approved`, `denied`, `approval_expired`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `delivered`: `sent` or `failed`; `review_resolved`: the bound result's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// When the review window ends (`review_required`, Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// The payload of every `goal.*` event: the goal at a glance and what the event is about.
/// The goal document itself is read with `goals.get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalEvent {
    /// `goal_<ulid>`.
    pub goal_id: String,
    pub objective: String,
    /// The goal's state after the event.
    pub state: String,
    pub plan_version: u32,
    /// Actions DONE, of `total`.
    pub done: usize,
    pub total: usize,
    /// Open blockers.
    pub blockers: usize,
    /// When the goal next needs a tick by time alone (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wake_at: Option<i64>,
    /// The action the event concerns (`approval.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// The confirmation it concerns (`approval.*`): `openphone confirmations approve <id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation_id: Option<String>,
    /// `approval.requested`: what is to be approved; `approval.resolved`: the action's state
    /// after it (`running`, `done`, `blocked`, …); `updated`: the transitions made, one line
    /// each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `report`: the report as plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}
