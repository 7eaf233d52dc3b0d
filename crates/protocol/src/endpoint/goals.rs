//! Goals for operators (`goals.md` §10): `goals.list`, `goals.get`, `goals.create`,
//! `goals.plan`, `goals.tick`, `goals.answer`, `goals.retry`, `goals.pause`, `goals.resume`,
//! `goals.abort`, `goals.explain` and `goals.export`.
//!
//! The goal document travels as a [`GoalRecord`]: the goal, its actions (with their
//! [`GoalActionKind`], attempts and policy decision), blockers, evidence, checkpoints and
//! deadline, as the goal layer (`openphone-goals`) builds it from its own `Goal`. The kinds of
//! action, the decision, the owner and the retry budget are defined here once and used by the
//! goal layer as they are; states and outcomes travel as their wire strings. A goal spec and a
//! plan travel as JSON and are checked by the goal layer, which names the field of any error.
//! Every params type refuses unknown fields.
//!
//! A record read back (the CLI) takes every member as optional: the documented examples show
//! abbreviated documents.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One goal in a list: what a person scans for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The daemon of a fleet that made the goal (its ticks run there). Absent when not in a
    /// fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<super::RowHost>,
    /// The phone the goal's tool calls act on, when it names one; given with `host` (in a
    /// fleet) only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// `goals.list` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalsListResult {
    pub goals: Vec<GoalSummary>,
    pub count: usize,
}

/// Params naming one goal (`goals.get`, `goals.tick`, `goals.pause`, `goals.resume`,
/// `goals.export`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalIdParams {
    pub goal_id: String,
}

/// Params naming a goal and, optionally, one of its actions (`goals.retry`, `goals.abort`:
/// without `action_id`, every BLOCKED action / the whole goal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalActionParams {
    pub goal_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
}

/// One stored transition of an action (§2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalsGetResult {
    pub goal: GoalRecord,
    pub transitions: Vec<GoalTransitionInfo>,
    pub reports: Vec<GoalReportInfo>,
}

/// `goals.create` params: a goal spec (`docs/goals.md`, "A goal"), with or without a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalsCreateParams {
    pub goal: Value,
}

/// The answer of the methods that change a goal: the document after the change (and after
/// the tick the change triggered, when it ran at once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalResult {
    pub goal: GoalRecord,
}

/// `goals.plan` params: a new plan (a list of actions) for the goal. Actions that started are
/// kept; the rest are replaced; `plan_version` goes up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalsPlanParams {
    pub goal_id: String,
    pub plan: Vec<Value>,
}

/// `goals.tick` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalsTickResult {
    pub goal: GoalRecord,
    /// Transitions the tick made.
    pub transitions: usize,
    /// Reports the tick made.
    pub reports: usize,
    /// When the goal next needs a tick by time alone (Unix ms), `null` when nothing is due.
    pub next_wake_at: Option<i64>,
}

/// `goals.answer` params: the user's answer to an `ask_user` action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalsAnswerParams {
    pub goal_id: String,
    pub action_id: String,
    pub text: String,
}

/// `goals.explain` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalsExplainParams {
    pub goal_id: String,
    pub action_id: String,
}

/// `goals.explain` result: why the action ran, waits or is blocked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalsExplainResult {
    pub goal_id: String,
    pub action_id: String,
    /// The explanation for a person, one line each: state, what it waits on, blockers with
    /// the command that resolves each, transitions, the policy proof layer by layer, attempts.
    pub lines: Vec<String>,
    /// The action as stored (its decision, attempts, resume token).
    pub action: GoalActionRecord,
    /// The action's transitions, oldest first.
    pub transitions: Vec<GoalTransitionInfo>,
}

/// One file of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalExportFile {
    /// Relative to the export directory (`plan.json`, `runs/1-find-1.json`, `status.md`,
    /// `transitions.json`).
    pub path: String,
    pub content: String,
}

/// `goals.export` result: the goal's artifacts rebuilt from the store now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalsExportResult {
    pub goal: GoalRecord,
    pub files: Vec<GoalExportFile>,
    pub reports: Vec<GoalReportInfo>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// The goal document as the endpoint shows it (`goals.md` §1): the goal layer's document
/// without its bookkeeping (`seq`, `reported`), with the store's `version`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalRecord {
    /// `goal_<ulid>`.
    pub id: String,
    pub objective: String,
    pub success_criteria: Vec<GoalCriterionRecord>,
    /// Unix ms, when the goal has a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    /// `low`, `medium` or `high`.
    pub risk_level: String,
    /// The autonomy of the goal's requests.
    pub autonomy: String,
    /// The phone the goal's tool calls act on; absent means the only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    pub owner: GoalOwner,
    /// Who planned it (`user`, a runtime, …).
    pub planner: String,
    /// `draft`, `active`, `blocked`, `paused`, `done`, `failed` or `aborted`.
    pub state: String,
    pub plan_version: u32,
    /// The plan, in plan order.
    pub actions: Vec<GoalActionRecord>,
    /// What the goal waits on, each with the command that resolves it.
    pub blockers: Vec<GoalBlockerRecord>,
    pub evidence: Vec<GoalEvidenceRecord>,
    pub retry_budget: GoalRetryBudget,
    /// The deadline's checkpoints (the contract of progress before it).
    pub checkpoints: Vec<GoalCheckpointRecord>,
    /// `notification`, `telegram`, `webhook` or `none`.
    pub delivery: String,
    pub max_parallel: u32,
    pub created_at: i64,
    pub updated_at: i64,
    /// The store's version of the document (compare-and-set).
    pub version: i64,
}

/// What an action does (§1, "kind"): on the wire, `kind` beside the kind's own members.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GoalActionKind {
    /// One command through the ToolBridge.
    Tool {
        /// The command, by any of its names.
        command: String,
        /// Its params (a JSON object).
        #[serde(default)]
        params: Map<String, Value>,
    },
    /// A runtime works a prompt in an isolated runtime session (the subagent backend).
    AgentTurn {
        /// The prompt.
        prompt: String,
    },
    /// Schedules an agent job (the cron backend).
    Job {
        /// The job's title when it differs from the action's (`job_title`; the action's own
        /// `title` key cannot be read twice: it belongs to the action).
        #[serde(
            rename = "job_title",
            default,
            skip_serializing_if = "String::is_empty"
        )]
        title: String,
        /// The job's prompt.
        prompt: String,
        /// When it should first run (Unix ms; absent: soon).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_at: Option<i64>,
    },
    /// Waits until a time, or — with `on` — until something happens on the phone or to the
    /// daemon (`until_ms` is then the time it gives up).
    Wait {
        /// Unix ms.
        until_ms: i64,
        /// The event that ends the wait early.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<GoalWaitOn>,
    },
    /// Asks the user; the answer becomes evidence.
    AskUser {
        /// The question.
        question: String,
    },
    /// Evaluates the goal's success criteria.
    Verify,
}

/// What a `wait` action waits for (`goals.md` §3, the tick's triggers): an event of the bus
/// whose payload passes every predicate of `where`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalWaitOn {
    /// `phone.message.received`, `phone.call.received`, `phone.notification.posted`,
    /// `phone.notification.action`, `watcher.fired` or `runtime.message.final`
    /// ([`GOAL_WAIT_EVENTS`]).
    pub event: String,
    /// Predicates on the event's payload, each `{pointer, op, value?}` (`op`: `exists`,
    /// `equals`, `contains`, `not_empty`); all must hold. Empty: any such event.
    #[serde(default, rename = "where", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
}

/// The events a `wait` action may wait for.
pub const GOAL_WAIT_EVENTS: [&str; 6] = [
    "phone.message.received",
    "phone.call.received",
    "phone.notification.posted",
    "phone.notification.action",
    "watcher.fired",
    "runtime.message.final",
];

impl GoalActionKind {
    /// The kind's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            GoalActionKind::Tool { .. } => "tool",
            GoalActionKind::AgentTurn { .. } => "agent_turn",
            GoalActionKind::Job { .. } => "job",
            GoalActionKind::Wait { .. } => "wait",
            GoalActionKind::AskUser { .. } => "ask_user",
            GoalActionKind::Verify => "verify",
        }
    }
}

/// One action of the plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalActionRecord {
    pub id: String,
    pub title: String,
    /// What it does (absent only in an abbreviated document).
    #[serde(flatten)]
    pub kind: Option<GoalActionKind>,
    /// `PLANNED`, `READY`, `NEEDS_APPROVAL`, `RUNNING`, `VERIFYING`, `DONE`, `BLOCKED` or
    /// `ABORTED`.
    pub state: String,
    pub depends_on: Vec<String>,
    /// Actions that replace this one when it is blocked.
    pub alternatives: Vec<String>,
    #[serde(skip_serializing_if = "is_false")]
    pub optional: bool,
    /// The read that must hold after it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<GoalReadCheckRecord>,
    pub estimate_ms: i64,
    /// Every attempt, the last one in progress or last made.
    pub attempts: Vec<GoalAttemptRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    pub session_target: String,
    /// Unix ms before which it is not started again (a backoff).
    pub not_before: i64,
    /// The policy's dry run of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<GoalDecision>,
    pub plan_version: u32,
    /// Why the policy-aware planner added it, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposal: Option<GoalProposal>,
}

/// Why the policy-aware planner added an action to the plan (`goals.md` §4): the step it is an
/// alternative of, who proposed it and why, for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalProposal {
    /// The action it is an alternative of (it runs when that one is BLOCKED or ABORTED).
    pub replaces: String,
    /// `manifest` (the command's `safer_alternative`, or asking the user) or `model` (the
    /// built-in model).
    pub by: String,
    /// The decision of the step it replaces, and why this one fits the policy.
    pub why: String,
}

/// A read command whose result must satisfy a predicate (`expect`, `tool_predicate`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalReadCheckRecord {
    pub command: String,
    pub params: Map<String, Value>,
    /// `{pointer, op, value?}`, as the goal layer's predicate writes it.
    pub predicate: Value,
}

/// One attempt of an action.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalAttemptRecord {
    /// 1, 2, … per action.
    pub n: u32,
    pub idempotency_key: String,
    pub started_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// `running`, `awaiting_approval`, `ok`, `failed`, `declined`, `expired` or
    /// `outcome_unknown`.
    pub outcome: String,
    pub decision_proof_digest: String,
    pub result_digest: String,
    pub summary: String,
    /// The confirmation it waits on (a NEEDS_APPROVAL tool action).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_expires_at: Option<i64>,
    /// The agent job a `job` action's attempt created (the attempt runs until the job's run
    /// finishes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
}

/// What the policy dry-run said about an action (the permission envelope's entry, §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalDecision {
    /// `allow`, `confirm`, `park` or `deny`.
    pub outcome: String,
    /// The deciding layer's name.
    pub layer: String,
    /// The deciding layer's reason.
    pub reason: String,
    /// SHA-256 of the whole explanation (the proof layer by layer).
    pub proof_digest: String,
    /// The proof, layer by layer: `layer: verdict — reason`.
    #[serde(default)]
    pub layers: Vec<String>,
    /// The exact command that would change the outcome, when the policy names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_command: Option<String>,
    /// When the dry run was made.
    pub at: i64,
}

/// What a goal waits on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalBlockerRecord {
    /// `blk_<n>`.
    pub id: String,
    /// The action it blocks; none: the goal as a whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// `approval`, `input`, `policy`, `budget`, `failure`, `dependency` or `external`.
    pub kind: String,
    pub reason: String,
    pub since: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// The exact command that resolves it.
    pub how_to_resolve: String,
}

/// One piece of evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalEvidenceRecord {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// `tool_result`, `message`, `artifact` or `user_answer`.
    pub kind: String,
    /// What it refers to (an audit id, a message, a file).
    #[serde(rename = "ref")]
    pub reference: String,
    pub digest: String,
    pub at: i64,
}

/// A success criterion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalCriterionRecord {
    pub id: String,
    pub description: String,
    /// `{kind: all_actions_done | tool_predicate | user_confirms | runtime_judge, …}`.
    pub check: Value,
}

/// The retry budget and what is left of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalRetryBudget {
    /// Attempts per action (default 3).
    pub per_action: u32,
    /// Retries (attempts after an action's first) over the whole goal (default 20).
    pub per_goal: u32,
    /// Retries used so far over the goal.
    #[serde(default)]
    pub used: u32,
}

impl Default for GoalRetryBudget {
    fn default() -> Self {
        GoalRetryBudget {
            per_action: 3,
            per_goal: 20,
            used: 0,
        }
    }
}

/// One checkpoint before the deadline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GoalCheckpointRecord {
    pub label: String,
    /// Minutes before the deadline (0: the deadline itself).
    pub minutes_before: i64,
    /// Unix ms.
    pub at: i64,
    /// What must be true by then.
    pub contract: String,
    /// `pending`, `met` or `missed`.
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluated_at: Option<i64>,
    #[serde(skip_serializing_if = "is_false")]
    pub late: bool,
    pub note: String,
}

/// Who made the goal.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalOwner {
    /// `cli`, `endpoint`, `runtime`, `simulator`.
    pub surface: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
}
