//! Background agent jobs (`agent-jobs.md` §2) and their attempt ledger
//! (`durable-execution.md` §7).
//!
//! Two tables:
//!
//! - `agent_jobs` holds the 29-field wire record of a job, one column per field, plus four
//!   internal columns that are not part of the record: `version` (bumped by every write, for
//!   optimistic concurrency), `current_attempt` and `owner` (the fence of the run in progress,
//!   `durable-execution.md` §5) and `delivery_state` (what became of the latest result's
//!   delivery; "ran" and "the user got it" are different facts).
//! - `agent_job_runs` is the attempt ledger: one row per run attempt (job id, attempt number,
//!   intended and actual start, owner, finish, outcome, reason, output reference). It is written
//!   once at the claim and then only by the fenced finish of that attempt; its rows go with
//!   their job, and each job keeps its last [`RUNS_KEPT_PER_JOB`].
//!
//! The store keeps the rules that need the database to be exact: ids from a persisted counter
//! (`AUTOINCREMENT`: never reused), the cap on stored jobs with the trimming of terminal ones
//! (§2.4), the claim of due jobs as one conditional `UPDATE` (two claimers never both win), and
//! compare-and-set writes on `version` (a stale version is [`StoreError::Conflict`], never an
//! overwrite). What a transition does to a record is decided by the caller (`openphone-jobs`,
//! the transition table of §2.3); the store never reads the clock.
//!
//! Files: this one holds the store-side types around the wire record (which is
//! `openphone_protocol::job`, re-exported here); `rows` reads rows back, `write` holds the
//! transactional writes, `ops` the [`Store`] methods, `delivery` and `review` their own reads.

mod delivery;
mod ops;
mod review;
mod rows;
mod write;

use openphone_protocol::BUILTIN_RUNTIME_ID;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use rows::{JOB_COLUMNS, job_from_row};
pub(crate) use write::create_limited_in;

pub use openphone_protocol::endpoint::RowHost;
pub use openphone_protocol::job::{
    AgentJob, DeliveryState, JobPhase, JobRun, JobStatus, JobType, RunOutcome,
};

/// A stored job: the wire record and the store's internal columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredJob {
    /// The wire record.
    pub job: AgentJob,
    /// Bumped by every write; a write names the version it was computed from.
    pub version: i64,
    /// Number of the latest run attempt (0 before the first claim).
    pub attempt: i64,
    /// Who claimed the latest attempt (a scheduler instance id; empty before the first claim).
    pub owner: String,
    /// The delivery of the latest result or alert; `None` while there was nothing to deliver.
    pub delivery_state: Option<DeliveryState>,
    /// Who created the job (migration 13): [`OPERATOR_CREATOR`] for the user's own (the
    /// endpoint, the CLI, the dashboard, and every job stored before the column existed),
    /// `builtin` for the built-in runtime's, else the creating runtime's id. Never changes.
    #[serde(default = "operator_creator")]
    pub created_by: String,
    /// Where the job belongs in a fleet sharing one store: the daemon that created it and the
    /// one whose claim runs (or last ran) it. `None` on a store that is not shared (SQLite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<RowHost>,
}

/// `created_by` of the user's own jobs: made through the operator's endpoint (`jobs.create`,
/// `openphone jobs create`, the dashboard), and of every job stored before jobs had owners.
pub const OPERATOR_CREATOR: &str = "operator";

fn operator_creator() -> String {
    OPERATOR_CREATOR.to_owned()
}

/// Whether `created_by` is the user (the operator or the built-in runtime, the user's own
/// assistant): the user's jobs run with the built-in runtime's authority and count against
/// the user's share of `max_jobs`; every other creator is a runtime with its own quota.
pub fn is_user_creator(created_by: &str) -> bool {
    created_by == OPERATOR_CREATOR || created_by == BUILTIN_RUNTIME_ID
}

/// How many jobs may be stored, and how many of them runtimes may hold (issue 28): the user's
/// jobs (see [`is_user_creator`]) are limited only by `max_jobs`; each other creator by
/// `per_runtime` live jobs, and all of them together by `max_jobs - reserved_for_user` live
/// jobs, so no runtime (nor all of them) can take the room the user's own jobs have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobQuota {
    /// Jobs stored at most (terminal ones are trimmed to make room).
    pub max_jobs: usize,
    /// Live jobs one runtime may hold.
    pub per_runtime: usize,
    /// Room in `max_jobs` no runtime's job may take.
    pub reserved_for_user: usize,
}

impl JobQuota {
    /// Live jobs one runtime may hold by default.
    pub const DEFAULT_PER_RUNTIME: usize = 20;

    /// The quota for `max_jobs` with the defaults: a quarter of it (rounded up) reserved for
    /// the user, and [`JobQuota::DEFAULT_PER_RUNTIME`] per runtime (at most what the runtimes
    /// may hold together).
    pub fn for_max(max_jobs: usize) -> JobQuota {
        let reserved_for_user = max_jobs.div_ceil(4);
        JobQuota {
            max_jobs,
            per_runtime: Self::DEFAULT_PER_RUNTIME.min(max_jobs - reserved_for_user),
            reserved_for_user,
        }
    }

    /// Live jobs all runtimes together may hold.
    pub fn runtime_share(&self) -> usize {
        self.max_jobs.saturating_sub(self.reserved_for_user)
    }
}

/// A job as its creator asks for it, already validated and normalised (`agent-jobs.md` §5,
/// `openphone-jobs`). Every other field gets its creation value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewAgentJob {
    /// What a run does.
    pub job_type: JobType,
    /// Trimmed, non-empty.
    pub title: String,
    /// Trimmed.
    pub prompt: String,
    /// Passed to runs as data.
    pub payload_json: Map<String, Value>,
    /// With the normalised `next_run_at` and `interval_ms` written into it.
    pub schedule_json: Map<String, Value>,
    /// Resolved target (`current` is resolved before storing).
    pub session_target: String,
    /// With a valid `mode`.
    pub delivery_json: Map<String, Value>,
    /// First due time.
    pub next_run_at: i64,
    /// Who creates it: [`OPERATOR_CREATOR`], [`BUILTIN_RUNTIME_ID`] or a runtime id (see
    /// [`StoredJob::created_by`]).
    #[serde(default = "operator_creator")]
    pub created_by: String,
}

/// Which jobs [`Store::list_jobs`](crate::JobStore::list_jobs) returns. Order: live jobs first by ascending `next_run_at`
/// (0 first) then id, then terminal jobs by descending `updated_at` then descending id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only these statuses (empty: all).
    pub statuses: Vec<JobStatus>,
    /// Only this type.
    pub job_type: Option<JobType>,
    /// Case-insensitive substring of the title or the prompt (blank: no filter).
    pub text: Option<String>,
    /// At most this many (`None`: all).
    pub limit: Option<usize>,
    /// Only jobs this creator made (`None`: everyone's).
    pub created_by: Option<String>,
}

/// What a claim asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// Now (Unix ms, the caller's clock).
    pub now_ms: i64,
    /// At most this many jobs.
    pub limit: usize,
    /// The claiming scheduler's instance id.
    pub owner: String,
    /// When the claiming scheduler started: an occurrence due before it is a catch-up.
    pub started_at_ms: i64,
}

/// A job a claim won, with its new ledger row.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedJob {
    /// The job, now `running`.
    pub job: StoredJob,
    /// Its attempt, `running`.
    pub run: JobRun,
}

/// How an attempt ended, written by its fenced finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptFinish {
    /// The attempt number the runner was given.
    pub attempt: i64,
    /// The owner the runner was claimed by.
    pub owner: String,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Failure reason or note.
    pub reason: String,
    /// Output reference, or empty.
    pub output_ref: String,
    /// When it ended.
    pub finished_at: i64,
}

/// Which running jobs [`Store::repair_stale_jobs`](crate::JobStore::repair_stale_jobs) repairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleSelection {
    /// Now (Unix ms).
    pub now_ms: i64,
    /// A run started more than this long ago is stale (also: `running_at == 0`).
    pub stale_after_ms: i64,
    /// Also every running job owned by anyone but this instance (start-up repair: the
    /// directory lock guarantees their runners are gone).
    pub foreign_to: Option<String>,
    /// At most this many per call.
    pub limit: usize,
}

/// A repair computed by the caller for one stale job: the record to write (its `version` is
/// the version it was computed from) and how the attempt ended.
pub type Repair = (StoredJob, AttemptFinish);

/// Jobs kept in the ledger per job: older attempts are dropped at the next claim.
pub const RUNS_KEPT_PER_JOB: i64 = 100;
