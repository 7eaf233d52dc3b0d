//! Goals for operators (`goals.md` §10): `goals.list`, `goals.get`, `goals.create`,
//! `goals.plan`, `goals.tick`, `goals.answer`, `goals.retry`, `goals.pause`, `goals.resume`,
//! `goals.abort`, `goals.explain` and `goals.export`.
//!
//! The goal document (`openphone-goals`' `Goal`) travels as a JSON object: the protocol crate
//! does not own the goal layer's types. A goal spec and a plan travel as JSON too and are
//! checked by the goal layer, which names the field of any error. Every params type refuses
//! unknown fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One goal in a list: what a person scans for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalSummary {
    /// `goal_<ulid>`.
    pub goal_id: String,
    pub objective: String,
    /// `draft`, `active`, `blocked`, `paused`, `done`, `failed` or `aborted`.
    pub state: String,
    /// Unix ms, when the goal has a deadline.
    #[serde(default)]
    pub deadline_at: Option<i64>,
    /// Actions DONE, of `total`.
    pub done: usize,
    pub total: usize,
    /// Open blockers.
    pub blockers: usize,
    pub updated_at: i64,
}

/// `goals.list` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GoalsListParams {
    /// Only goals in this state (`draft`, `active`, `blocked`, `paused`, `done`, `failed`,
    /// `aborted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Default 20, at most 200.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `goals.list` result: most recently updated first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalsListResult {
    pub goals: Vec<GoalSummary>,
    pub count: usize,
}

/// Params naming one goal (`goals.get`, `goals.tick`, `goals.pause`, `goals.resume`,
/// `goals.export`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalIdParams {
    pub goal_id: String,
}

/// Params naming a goal and, optionally, one of its actions (`goals.retry`, `goals.abort`:
/// without `action_id`, every BLOCKED action / the whole goal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalActionParams {
    pub goal_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
}

/// One stored transition of an action (§2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalTransitionInfo {
    /// 1, 2, … per goal, in the order written.
    pub seq: i64,
    pub action_id: String,
    pub from_state: String,
    pub to_state: String,
    /// `policy`, `user`, `clock`, `executor`, `verifier`, `recovery`, …
    pub source: String,
    pub reason: String,
    pub at_ms: i64,
}

/// One stored delta report (§7) and its delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalReportInfo {
    pub seq: i64,
    pub created_at_ms: i64,
    /// `notification`, `telegram`, `webhook` or `none`.
    pub channel: String,
    /// `pending`, `sent`, `failed` or `suppressed`.
    pub delivery: String,
    pub attempts: i64,
    /// The last delivery error (never a token), or empty.
    pub last_error: String,
    /// The report as plain text.
    pub text: String,
    /// The report as data.
    pub report: Value,
}

/// `goals.get` result: the document, every transition (oldest first) and every report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalsGetResult {
    pub goal: Map<String, Value>,
    pub transitions: Vec<GoalTransitionInfo>,
    pub reports: Vec<GoalReportInfo>,
}

/// `goals.create` params: a goal spec (`docs/goals.md`, "A goal"), with or without a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalsCreateParams {
    pub goal: Value,
}

/// The answer of the methods that change a goal: the document after the change (and after
/// the tick the change triggered, when it ran at once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    pub goal: Map<String, Value>,
}

/// `goals.plan` params: a new plan (a list of actions) for the goal. Actions that started are
/// kept; the rest are replaced; `plan_version` goes up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalsPlanParams {
    pub goal_id: String,
    pub plan: Vec<Value>,
}

/// `goals.tick` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalsTickResult {
    pub goal: Map<String, Value>,
    /// Transitions the tick made.
    pub transitions: usize,
    /// Reports the tick made.
    pub reports: usize,
    /// When the goal next needs a tick by time alone (Unix ms), `null` when nothing is due.
    pub next_wake_at: Option<i64>,
}

/// `goals.answer` params: the user's answer to an `ask_user` action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalsAnswerParams {
    pub goal_id: String,
    pub action_id: String,
    pub text: String,
}

/// `goals.explain` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalsExplainParams {
    pub goal_id: String,
    pub action_id: String,
}

/// `goals.explain` result: why the action ran, waits or is blocked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalsExplainResult {
    pub goal_id: String,
    pub action_id: String,
    /// The explanation for a person, one line each: state, what it waits on, blockers with
    /// the command that resolves each, transitions, the policy proof layer by layer, attempts.
    pub lines: Vec<String>,
    /// The action as stored (its decision, attempts, resume token).
    pub action: Map<String, Value>,
    /// The action's transitions, oldest first.
    pub transitions: Vec<GoalTransitionInfo>,
}

/// One file of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalExportFile {
    /// Relative to the export directory (`plan.json`, `runs/1-find-1.json`, `status.md`,
    /// `transitions.json`).
    pub path: String,
    pub content: String,
}

/// `goals.export` result: the goal's artifacts rebuilt from the store now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalsExportResult {
    pub goal: Map<String, Value>,
    pub files: Vec<GoalExportFile>,
    pub reports: Vec<GoalReportInfo>,
}
