//! The objects of `goals.md` §1: the goal, its plan graph of actions, attempts, blockers,
//! evidence, checkpoints, the retry budget — as the document the store keeps (one JSON object
//! per goal, written by compare-and-set on `version`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::predicate::Predicate;

/// What an action does (§1, "kind"), the policy's dry run of it, who made the goal and the
/// retry budget: defined once, in the endpoint's goal records.
pub use openphone_protocol::endpoint::{
    GoalActionKind as ActionKind, GoalDecision as DecisionSummary, GoalOwner as Owner,
    GoalProposal as Proposal, GoalRetryBudget as RetryBudget,
};

/// Serde helper: `true` is the default of some flags.
fn is_false(value: &bool) -> bool {
    !*value
}

/// The highest risk a goal may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    /// Low-risk commands only.
    Low,
    /// Up to medium.
    Medium,
    /// Anything the policy allows.
    High,
}

/// The state of a goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalState {
    /// Created, no plan accepted yet.
    Draft,
    /// Moving: some action is ready, running, verifying or waiting on a timer.
    Active,
    /// Every remaining path waits on the user, the policy or something outside; each is named
    /// in `blockers`.
    Blocked,
    /// Paused by the user: nothing is scheduled (checkpoints still fire).
    Paused,
    /// Success criteria hold.
    Done,
    /// The deadline passed with criteria unmet (the fallback summary was delivered).
    Failed,
    /// Aborted by the user.
    Aborted,
}

impl GoalState {
    /// Every state.
    pub const ALL: [GoalState; 7] = [
        GoalState::Draft,
        GoalState::Active,
        GoalState::Blocked,
        GoalState::Paused,
        GoalState::Done,
        GoalState::Failed,
        GoalState::Aborted,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            GoalState::Draft => "draft",
            GoalState::Active => "active",
            GoalState::Blocked => "blocked",
            GoalState::Paused => "paused",
            GoalState::Done => "done",
            GoalState::Failed => "failed",
            GoalState::Aborted => "aborted",
        }
    }

    /// Parses the exact wire string.
    pub fn parse(text: &str) -> Option<GoalState> {
        GoalState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Nothing leaves these states.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            GoalState::Done | GoalState::Failed | GoalState::Aborted
        )
    }
}

impl std::fmt::Display for GoalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The action state machine of §2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionState {
    /// In the plan; dependencies not yet done.
    Planned,
    /// May be scheduled.
    Ready,
    /// Parked on a durable confirmation of its exact request.
    NeedsApproval,
    /// The executor has it.
    Running,
    /// The result is being checked.
    Verifying,
    /// Done (immutable).
    Done,
    /// Waiting on something named in its blocker (with a resume token).
    Blocked,
    /// Cancelled (terminal).
    Aborted,
}

impl ActionState {
    /// Every state, in the order of the diagram.
    pub const ALL: [ActionState; 8] = [
        ActionState::Planned,
        ActionState::Ready,
        ActionState::NeedsApproval,
        ActionState::Running,
        ActionState::Verifying,
        ActionState::Done,
        ActionState::Blocked,
        ActionState::Aborted,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionState::Planned => "PLANNED",
            ActionState::Ready => "READY",
            ActionState::NeedsApproval => "NEEDS_APPROVAL",
            ActionState::Running => "RUNNING",
            ActionState::Verifying => "VERIFYING",
            ActionState::Done => "DONE",
            ActionState::Blocked => "BLOCKED",
            ActionState::Aborted => "ABORTED",
        }
    }

    /// Parses the exact wire string.
    pub fn parse(text: &str) -> Option<ActionState> {
        ActionState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// DONE and ABORTED: nothing leaves them.
    pub fn is_terminal(self) -> bool {
        matches!(self, ActionState::Done | ActionState::Aborted)
    }
}

impl std::fmt::Display for ActionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A read command whose result must satisfy a predicate (`expect`, `tool_predicate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadCheck {
    /// A non-mutating command.
    pub command: String,
    /// Its params.
    #[serde(default)]
    pub params: Map<String, Value>,
    /// What its result must satisfy.
    pub predicate: Predicate,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Started, no outcome recorded yet.
    Running,
    /// Waiting on a confirmation of its request.
    AwaitingApproval,
    /// The executor returned a success.
    Ok,
    /// The executor returned a failure.
    Failed,
    /// The user declined (or the confirmation expired at the deadline).
    Declined,
    /// The approval request expired before the deadline and was asked again (costs no
    /// budget).
    Expired,
    /// The daemon stopped mid-attempt and nothing was recorded: never re-executed blind.
    OutcomeUnknown,
}

/// One execution attempt of an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1, 2, …
    pub n: u32,
    /// `goal_<id>:<action>:<n>`.
    pub idempotency_key: String,
    pub started_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    pub outcome: AttemptOutcome,
    /// SHA-256 of the policy proof the attempt ran under (empty for non-tool actions).
    #[serde(default)]
    pub decision_proof_digest: String,
    /// SHA-256 of the canonical result, once there is one.
    #[serde(default)]
    pub result_digest: String,
    /// A short summary of the result or failure.
    #[serde(default)]
    pub summary: String,
    /// The confirmation its request waits on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation_id: Option<String>,
    /// When that confirmation expires (it is asked again then, until the deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_expires_at: Option<i64>,
    /// The agent job a `job` action's attempt created: the attempt runs until that job's run
    /// finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
}

/// One action of the plan graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// Unique within the goal (`[a-z0-9_-]`, at most 64 characters).
    pub id: String,
    pub title: String,
    #[serde(flatten)]
    pub kind: ActionKind,
    pub state: ActionState,
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Other actions that achieve the same step by another path: they run only when this one
    /// is blocked or aborted.
    #[serde(default)]
    pub alternatives: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub optional: bool,
    /// Effect check used in VERIFYING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<ReadCheck>,
    /// Estimated duration, ms (critical path).
    pub estimate_ms: i64,
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// Set whenever the action waits on something outside the layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// `isolated` (runtime session `goal:<goal>:<action>`) or `main`.
    pub session_target: String,
    /// Not before this time (backoff), Unix ms; 0 when none.
    #[serde(default)]
    pub not_before: i64,
    /// The last policy dry-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionSummary>,
    /// The plan version that introduced this action.
    pub plan_version: u32,
    /// Why the policy-aware planner added it (`planner.rs`), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<Proposal>,
}

impl Action {
    /// The attempt in progress or last made.
    pub fn last_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    /// The runtime session of this action's requests.
    pub fn session(&self, goal_id: &str) -> String {
        if self.session_target == "main" {
            openphone_protocol::goal_session(goal_id)
        } else {
            openphone_protocol::goal_action_session(goal_id, &self.id)
        }
    }
}

/// Why a goal or action waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockerKind {
    Approval,
    Policy,
    Failure,
    Input,
    Dependency,
    External,
    Budget,
}

impl BlockerKind {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockerKind::Approval => "approval",
            BlockerKind::Policy => "policy",
            BlockerKind::Failure => "failure",
            BlockerKind::Input => "input",
            BlockerKind::Dependency => "dependency",
            BlockerKind::External => "external",
            BlockerKind::Budget => "budget",
        }
    }
}

/// Something the goal waits on, with the exact way out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    /// `blk_<n>`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    pub kind: BlockerKind,
    pub reason: String,
    pub since: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// One line naming the exact command that resolves it.
    pub how_to_resolve: String,
}

/// What kind of proof a piece of evidence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    ToolResult,
    Message,
    Artifact,
    UserAnswer,
}

/// Evidence of progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// `ev_<n>`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    pub kind: EvidenceKind,
    /// Where it is: an audit id, a confirmation id, an artifact path, the answer text.
    #[serde(rename = "ref")]
    pub reference: String,
    /// SHA-256 of what it refers to.
    pub digest: String,
    pub at: i64,
}

/// A success criterion's check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CriterionCheck {
    /// Every non-optional action is DONE.
    AllActionsDone,
    /// A read command's result satisfies a predicate.
    ToolPredicate {
        command: String,
        #[serde(default)]
        params: Map<String, Value>,
        predicate: Predicate,
    },
    /// The user confirmed it (evidence `user_answer` whose ref is `criterion:<id>`).
    UserConfirms,
    /// A runtime answers yes or no with evidence.
    RuntimeJudge { question: String },
}

/// A success criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    pub id: String,
    pub description: String,
    pub check: CriterionCheck,
}

/// How a checkpoint came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointOutcome {
    /// Not evaluated yet.
    Pending,
    /// Its contract holds.
    Met,
    /// Its contract does not hold: escalated.
    Missed,
}

/// A deadline checkpoint (§6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// `T-120`, `T-60`, `T-15`, `T`.
    pub label: String,
    /// Minutes before the deadline.
    pub minutes_before: i64,
    pub at: i64,
    /// What must hold then.
    pub contract: String,
    pub outcome: CheckpointOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluated_at: Option<i64>,
    /// Evaluated after its time (the daemon was down).
    #[serde(default, skip_serializing_if = "is_false")]
    pub late: bool,
    /// What was found.
    #[serde(default)]
    pub note: String,
}

/// Where delta reports go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryChannel {
    Notification,
    Telegram,
    Webhook,
    None,
}

impl DeliveryChannel {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryChannel::Notification => "notification",
            DeliveryChannel::Telegram => "telegram",
            DeliveryChannel::Webhook => "webhook",
            DeliveryChannel::None => "none",
        }
    }
}

/// What the last delta report covered, so the next one says only what changed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Reported {
    /// Action id → state at the last report.
    pub actions: std::collections::BTreeMap<String, ActionState>,
    /// Blocker ids reported.
    pub blockers: Vec<String>,
    /// Checkpoint labels reported.
    pub checkpoints: Vec<String>,
    /// Goal state reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<GoalState>,
    /// Evidence ids reported.
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// A goal (§1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    /// `goal_<ulid>`.
    pub id: String,
    pub objective: String,
    #[serde(default)]
    pub success_criteria: Vec<Criterion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    pub risk_level: RiskLevel,
    /// Ceiling for its actions (`openphone_protocol::Autonomy` wire string).
    pub autonomy: String,
    /// The phone its tool calls act on (a configured device id); none means the only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    pub owner: Owner,
    /// `builtin`, a runtime id, `openclaw` or `manual`.
    pub planner: String,
    pub state: GoalState,
    pub plan_version: u32,
    /// The plan graph, in plan order.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Open blockers.
    #[serde(default)]
    pub blockers: Vec<Blocker>,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    pub retry_budget: RetryBudget,
    #[serde(default)]
    pub checkpoints: Vec<Checkpoint>,
    pub delivery: DeliveryChannel,
    /// Actions run at once (default 1).
    pub max_parallel: u32,
    /// Counter behind blocker, evidence and run ids.
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub reported: Reported,
    pub created_at: i64,
    pub updated_at: i64,
    /// The store's version this document was read at (not stored in the document).
    #[serde(skip)]
    pub version: i64,
}

impl Goal {
    /// The action with `id`.
    pub fn action(&self, id: &str) -> Option<&Action> {
        self.actions.iter().find(|a| a.id == id)
    }

    /// The action with `id`, mutable.
    pub fn action_mut(&mut self, id: &str) -> Option<&mut Action> {
        self.actions.iter_mut().find(|a| a.id == id)
    }

    /// The next number for an id.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}
