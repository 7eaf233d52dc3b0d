//! The goal runtime layer (`docs/spec/goals.md`): a deterministic supervisor above single
//! tool calls, runtime turns and agent jobs that keeps a multi-step objective moving until it
//! is done, blocked for a visible reason, or past its deadline.
//!
//! - [`model`]: the goal document — plan graph, actions, attempts, blockers, evidence,
//!   checkpoints, the retry budget (§1); stored by `openphone-store` (migration 11) with
//!   compare-and-set on `version`;
//! - [`transition`](mod@transition): the action state machine of §2 as one table, and
//!   [`move_action`], the only code that changes an action's state;
//! - [`spec`]: creation and plans (checks naming the field; the re-plan rule);
//! - [`engine`]: the [`GoalEngine`] — the tick of §3 (ingest, policy dry-run, critical-path
//!   scheduling, the router over the real ToolBridge, checkpoints, reports), user operations,
//!   crash recovery by idempotency key (§8);
//! - [`deadline`]: checkpoints and their contracts, the critical path (§6);
//! - [`report`]: delta reports and their renderers, Telegram MarkdownV2 included (§7);
//! - [`delivery`]: sending stored reports to the notification outbox, a webhook or the
//!   Telegram Bot API, with their own delivery state;
//! - [`artifacts`]: `plan.json`, `runs/*.json`, `status.md`, written atomically (§5);
//! - [`explain`](mod@explain): why an action ran, waits or is blocked, layer by layer;
//! - [`retry`]: backoff with jitter; [`predicate`]: the JSON predicates of checks;
//! - [`risk`]: the goal's `risk_level` ceiling, applied at dry-run time;
//! - [`approval`]: the minimal approval package and the permission envelope as data (§4);
//! - [`service`]: the manifest commands `openphone.goals.*` for runtimes and MCP (§10), a
//!   runtime-owned service of the bridge.

pub mod approval;
pub mod artifacts;
pub mod deadline;
pub mod delivery;
pub mod engine;
pub mod error;
pub mod explain;
pub mod ids;
pub mod model;
pub mod predicate;
pub mod record;
pub mod report;
pub mod retry;
pub mod risk;
pub mod service;
pub mod sim;
pub mod spec;
pub mod transition;

pub use approval::ApprovalPackage;
pub use engine::{
    AgentBackend, Backends, GoalEngine, Happening, JobBackend, JobProgress, TickOutcome, goal_json,
    waiting_jobs,
};
pub use error::GoalsError;
pub use model::{
    Action, ActionKind, ActionState, Attempt, AttemptOutcome, Blocker, BlockerKind, Checkpoint,
    CheckpointOutcome, Criterion, CriterionCheck, DeliveryChannel, Evidence, EvidenceKind, Goal,
    GoalState, Owner, ReadCheck, RetryBudget, RiskLevel,
};
pub use predicate::{Predicate, PredicateOp};
pub use record::{action_record, goal_record, report_info, transition_info};
pub use report::{DeltaReport, ReportReason};
pub use service::{GoalTools, Wake};
pub use spec::{ActionSpec, GoalSpec, InvalidGoal};
pub use transition::{IllegalTransition, Source, TABLE, Transition, check, move_action};
