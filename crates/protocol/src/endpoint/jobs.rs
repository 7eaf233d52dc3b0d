//! Background agent jobs for operators (`agent-jobs.md` §8, §9.4, §10): `jobs.list`,
//! `jobs.get`, `jobs.create`, `jobs.stop`, `jobs.pause`, `jobs.resume`, `jobs.wake` and
//! `jobs.review` (approve or deny a parked state-changing call).
//!
//! Operators read the full 29-field job record ([`AgentJob`], `agent-job.schema.json`);
//! runtimes and models use the job tools (`openphone.jobs.*`), which answer with the job view
//! of §10 instead. Every params type refuses unknown fields.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::job::{AgentJob, DeliveryState, RunOutcome};

/// One job as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobEntry {
    /// The 29-field record (`agent-jobs.md` §2). On the wire its members are in key order, as
    /// they always were (see [`sorted_members`]).
    #[serde(serialize_with = "sorted_members")]
    pub job: AgentJob,
    /// What became of the latest result's delivery; `null` before any result.
    #[serde(default)]
    pub delivery_state: Option<DeliveryState>,
    /// Who created the job: `operator` (the user, through this endpoint, the CLI or the
    /// dashboard; also every job from before jobs had owners), `builtin` (the user's built-in
    /// assistant), or the id of the runtime that created it — whose authority its runs have.
    #[serde(default = "operator")]
    pub created_by: String,
}

fn operator() -> String {
    "operator".to_owned()
}

/// Writes `job` as a JSON object whose members are in key order: the bytes `jobs.*` answered
/// with when the record travelled as a `Map` (the endpoint's JSON is unchanged by the typing).
fn sorted_members<S: Serializer>(job: &AgentJob, s: S) -> Result<S::Ok, S::Error> {
    match serde_json::to_value(job) {
        Ok(value) => value.serialize(s),
        Err(e) => Err(serde::ser::Error::custom(e)),
    }
}

/// `jobs.list` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct JobsListParams {
    /// Case-insensitive substring of the title or prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Only jobs with this status (e.g. `awaiting_review`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Default 20, at most 200.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `jobs.list` result: live jobs first by next due time, then finished ones, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobsListResult {
    pub jobs: Vec<JobEntry>,
    pub count: usize,
}

/// Params naming one job (`jobs.get`, `jobs.stop`, `jobs.pause`, `jobs.resume`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobIdParams {
    pub job_id: i64,
}

/// One attempt of a job (the attempt ledger, `durable-execution.md` §7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRunInfo {
    pub attempt: i64,
    /// When the occurrence was due.
    pub intended_at: i64,
    pub started_at: i64,
    /// 0 while the attempt runs.
    pub finished_at: i64,
    /// How the attempt ended (`null` while running).
    pub outcome: Option<RunOutcome>,
    pub reason: String,
    /// The occurrence fell due while the daemon was not running.
    pub catch_up: bool,
}

/// `jobs.get` result: the record, its delivery state and its attempts, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobsGetResult {
    #[serde(flatten)]
    pub entry: JobEntry,
    pub runs: Vec<JobRunInfo>,
}

/// `jobs.create` params: the arguments of `background_job_create` (§5, §10), without
/// `reason`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct JobsCreateParams(pub Map<String, Value>);

/// The answer of `jobs.create`, `jobs.pause`, `jobs.resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobResult {
    #[serde(flatten)]
    pub entry: JobEntry,
}

/// `jobs.stop` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobsStopResult {
    #[serde(flatten)]
    pub entry: JobEntry,
    /// False when the job had already ended (nothing changed).
    pub stopped: bool,
}

/// `jobs.wake` result: what the tick it ran did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobsWakeResult {
    /// Jobs claimed and started.
    pub claimed: Vec<i64>,
    /// Stale running jobs repaired as failures.
    pub repaired: Vec<i64>,
    /// The single next wake (Unix ms), `null` when nothing is scheduled.
    pub next_wake_at: Option<i64>,
}

crate::wire_enum!(
    /// The user's decision on a background review.
    ReviewDecision {
        Approve = "approve",
        Deny = "deny",
    }
);

/// `jobs.review` params: a tap carries only the confirmation id and the decision (§9.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobsReviewParams {
    /// `job-confirm-…`.
    pub confirmation_id: String,
    pub decision: ReviewDecision,
}

/// `jobs.review` result (§9.15): `code` is `background.review_resolved` when this tap was
/// applied, else `background.review_expired`, `background.review_already_resolved` (reason
/// `claim_unavailable`) or `background.review_commit_failed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobsReviewResult {
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The job the review belonged to, when one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    /// The `status` of the bound result the job resumes with (`ok`,
    /// `background.action_denied`, `background.review_error`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_status: Option<String>,
}
