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

mod delivery;
mod review;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Store;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::collect;
use crate::wire::{col, parse_enum, sql_limit, wire_enum};

wire_enum!(
    /// What a run of the job does (§3).
    JobType {
        /// A bounded model/tool loop against the job's prompt.
        AgentTurn = "agent_turn",
        /// Records an OS or runtime event; completes at once.
        SystemEvent = "system_event",
        /// A maintenance wake; completes at once.
        Heartbeat = "heartbeat",
    }
);

wire_enum!(
    /// The lifecycle state of a job (§2.1).
    JobStatus {
        /// The spelling older stores used for `queued`; read and treated as `queued`.
        Active = "active",
        /// Waiting for `next_run_at` (also between retries and before a resume).
        Queued = "queued",
        /// A runner owns the job.
        Running = "running",
        /// A review decision is being applied.
        Waiting = "waiting",
        /// Parked on a pending background confirmation.
        AwaitingReview = "awaiting_review",
        /// Paused by the user.
        Paused = "paused",
        /// A one-shot job finished (terminal).
        Completed = "completed",
        /// Gave up, or a reviewed action's outcome is unknown (terminal).
        Failed = "failed",
        /// Stopped by the user or the model (terminal).
        Stopped = "stopped",
        /// Handed to an external runtime (terminal for this scheduler).
        Dispatched = "dispatched",
    }
);

impl JobStatus {
    /// The statuses nothing leaves.
    pub const TERMINAL: [JobStatus; 4] = [
        JobStatus::Completed,
        JobStatus::Failed,
        JobStatus::Stopped,
        JobStatus::Dispatched,
    ];

    /// True for `completed`, `failed`, `stopped` and `dispatched`.
    pub fn is_terminal(self) -> bool {
        Self::TERMINAL.contains(&self)
    }

    /// True for every status that is not terminal.
    pub fn is_live(self) -> bool {
        !self.is_terminal()
    }

    /// True for `queued` and the legacy `active`: the statuses a tick may claim.
    pub fn is_due_eligible(self) -> bool {
        matches!(self, JobStatus::Queued | JobStatus::Active)
    }
}

wire_enum!(
    /// The finer-grained state of a job (§2.2).
    JobPhase {
        /// Waiting to run.
        Queued = "queued",
        /// A runner is working on it.
        Running = "running",
        /// Waiting out the backoff after a failed run.
        Waiting = "waiting",
        /// Parked on a review.
        AwaitingReview = "awaiting_review",
        /// An approved reviewed action is executing.
        ApprovalExecuting = "approval_executing",
        /// A denial is being recorded.
        DenialResolving = "denial_resolving",
        /// About to run again after a review was settled.
        Resuming = "resuming",
        /// Finished.
        Completed = "completed",
        /// Gave up.
        Failed = "failed",
        /// Stopped.
        Stopped = "stopped",
        /// Paused.
        Paused = "paused",
        /// Handed to an external runtime.
        WaitingForRuntime = "waiting_for_runtime",
        /// An approved review was interrupted; its outcome is unknown.
        ReviewResolutionUnknown = "review_resolution_unknown",
    }
);

impl JobPhase {
    /// The phase a record with `status` and no stored phase gets (§2.4, legacy rows).
    pub fn for_status(status: JobStatus) -> JobPhase {
        match status {
            JobStatus::Active | JobStatus::Queued => JobPhase::Queued,
            JobStatus::Running => JobPhase::Running,
            JobStatus::Waiting => JobPhase::ApprovalExecuting,
            JobStatus::AwaitingReview => JobPhase::AwaitingReview,
            JobStatus::Paused => JobPhase::Paused,
            JobStatus::Completed => JobPhase::Completed,
            JobStatus::Failed => JobPhase::Failed,
            JobStatus::Stopped => JobPhase::Stopped,
            JobStatus::Dispatched => JobPhase::WaitingForRuntime,
        }
    }
}

wire_enum!(
    /// What became of the delivery of a job's latest result or failure alert (an internal
    /// column, not part of the wire record; `durable-execution.md` §8).
    DeliveryState {
        /// Something is to be delivered and has not been handed to the notifier yet.
        Pending = "pending",
        /// The notifier confirmed the delivery.
        Sent = "sent",
        /// Handed to the notifier, which did not confirm it.
        Unverified = "unverified",
        /// The delivery failed (audited; the job keeps `unread_result`).
        Failed = "failed",
        /// Nothing is pushed: the delivery mode is `silent` or `none`.
        Suppressed = "suppressed",
    }
);

wire_enum!(
    /// The state of one run attempt in the ledger (`durable-execution.md` §4.2).
    RunOutcome {
        /// Claimed and not finished.
        Running = "running",
        /// The run finished and its result was recorded.
        Succeeded = "succeeded",
        /// The run reported a failure.
        Failed = "failed",
        /// The run outlived its budget, or was found stale and repaired.
        TimedOut = "timed_out",
        /// The job was stopped while the run was in progress.
        Cancelled = "cancelled",
        /// The owning process went away before the run finished (repaired at start).
        Interrupted = "interrupted",
        /// The outcome cannot be established.
        Unknown = "unknown",
        /// The run handed the job to an external runtime.
        Dispatched = "dispatched",
        /// The run parked the job on a review.
        Parked = "parked",
    }
);

/// The wire record of a job (`agent-jobs.md` §2): a closed object whose 29 members are always
/// present, in the order of the specification. Times are Unix milliseconds (0 = unset).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentJob {
    /// Job id, from 1, never reused.
    pub id: i64,
    /// What a run does.
    #[serde(rename = "type")]
    pub job_type: JobType,
    /// Short user-visible name (never empty).
    pub title: String,
    /// Instructions for an `agent_turn` run.
    pub prompt: String,
    /// Structured input handed to the run as data.
    pub payload_json: Map<String, Value>,
    /// `{next_run_at?, interval_ms?, …}`; recurring when `interval_ms > 0`.
    pub schedule_json: Map<String, Value>,
    /// `main`, `isolated`, `current` or `session:<id>`.
    pub session_target: String,
    /// `{mode, notification_text?, …}`.
    pub delivery_json: Map<String, Value>,
    /// Lifecycle state.
    pub status: JobStatus,
    /// Creation time.
    pub created_at: i64,
    /// Time of the last write.
    pub updated_at: i64,
    /// When the job is next due (0 while queued = due now).
    pub next_run_at: i64,
    /// Start of the current run; non-zero only while running.
    pub running_at: i64,
    /// End of the most recent run.
    pub last_run_at: i64,
    /// Diagnostic result of the last run (at most 4000 characters); never a notification body.
    pub last_result: String,
    /// Consecutive failed runs.
    pub failure_count: i64,
    /// When the failure alert was last raised.
    pub failure_alert_at: i64,
    /// Finer-grained state.
    pub phase: JobPhase,
    /// User-visible progress line (at most 4000 characters).
    pub progress_text: String,
    /// Progress counter.
    pub progress_current: i64,
    /// Progress total (0 = unknown).
    pub progress_total: i64,
    /// Review checkpoint, or `{}`.
    pub checkpoint_json: Map<String, Value>,
    /// Id of the background confirmation the job waits on, or empty.
    pub pending_confirmation_id: String,
    /// The background confirmation record, or `{}`.
    pub pending_tool_request_json: Map<String, Value>,
    /// Last adaptive surface the job produced, or empty.
    pub last_surface_id: String,
    /// Token tying a checkpoint to this job's resume, or empty.
    pub resume_token: String,
    /// Time of the last lifecycle event.
    pub last_event_at: i64,
    /// A result or outcome the user has not looked at.
    pub unread_result: bool,
    /// When the job was paused (0 when not paused).
    pub paused_at: i64,
}

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
}

/// `created_by` of the user's own jobs: made through the operator's endpoint (`jobs.create`,
/// `openphone jobs create`, the dashboard), and of every job stored before jobs had owners.
pub const OPERATOR_CREATOR: &str = "operator";

/// `created_by` of the built-in runtime's jobs (the user's own assistant): its runtime id.
pub use openphone_protocol::BUILTIN_RUNTIME_ID as BUILTIN_CREATOR;

fn operator_creator() -> String {
    OPERATOR_CREATOR.to_owned()
}

/// Whether `created_by` is the user (the operator or the built-in runtime, the user's own
/// assistant): the user's jobs run with the built-in runtime's authority and count against
/// the user's share of `max_jobs`; every other creator is a runtime with its own quota.
pub fn is_user_creator(created_by: &str) -> bool {
    created_by == OPERATOR_CREATOR || created_by == BUILTIN_CREATOR
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
    /// Who creates it: [`OPERATOR_CREATOR`], [`BUILTIN_CREATOR`] or a runtime id (see
    /// [`StoredJob::created_by`]).
    #[serde(default = "operator_creator")]
    pub created_by: String,
}

/// Which jobs [`Store::list_jobs`] returns. Order: live jobs first by ascending `next_run_at`
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

/// One attempt in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRun {
    /// The job.
    pub job_id: i64,
    /// Attempt number, from 1 per job.
    pub attempt: i64,
    /// The job's `next_run_at` when it was claimed.
    pub intended_at: i64,
    /// The occurrence fell due before the claiming scheduler started: a missed run caught up.
    pub catch_up: bool,
    /// The scheduler instance that claimed it.
    pub owner: String,
    /// When it was claimed.
    pub started_at: i64,
    /// When it finished (`None` while running).
    pub finished_at: Option<i64>,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The failure reason (`agent-jobs.md` §7.8), or a short note; empty on success.
    pub reason: String,
    /// Where the run's full output is kept (the runner's reference), or empty.
    pub output_ref: String,
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

/// Which running jobs [`Store::repair_stale_jobs`] repairs.
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

const JOB_COLUMNS: &str = "id, type, title, prompt, payload_json, schedule_json, session_target, \
    delivery_json, status, created_at, updated_at, next_run_at, running_at, last_run_at, \
    last_result, failure_count, failure_alert_at, phase, progress_text, progress_current, \
    progress_total, checkpoint_json, pending_confirmation_id, pending_tool_request_json, \
    last_surface_id, resume_token, last_event_at, unread_result, paused_at, version, \
    current_attempt, owner, delivery_state, created_by";

const RUN_COLUMNS: &str = "job_id, attempt, intended_at, catch_up, owner, started_at, \
    finished_at, outcome, reason, output_ref";

const TERMINAL_SQL: &str = "('completed', 'failed', 'stopped', 'dispatched')";

const OP_READ: &str = "agent_jobs.read";

fn object(text: &str, column: &str, id: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(StoreError::corrupt(
            OP_READ,
            id,
            format!("{column} is not a JSON object"),
        )),
        Err(e) => Err(StoreError::corrupt(OP_READ, id, format!("{column}: {e}"))),
    }
}

fn job_from_row(row: &Row<'_>) -> Result<StoredJob> {
    let id: i64 = col(row, "id", OP_READ)?;
    let key = id.to_string();
    let text = |name: &str| col::<String>(row, name, OP_READ);
    let int = |name: &str| col::<i64>(row, name, OP_READ);
    let delivery_state: Option<String> = col(row, "delivery_state", OP_READ)?;
    let job = AgentJob {
        id,
        job_type: parse_enum(JobType::parse, &text("type")?, OP_READ, &key)?,
        title: text("title")?,
        prompt: text("prompt")?,
        payload_json: object(&text("payload_json")?, "payload_json", &key)?,
        schedule_json: object(&text("schedule_json")?, "schedule_json", &key)?,
        session_target: text("session_target")?,
        delivery_json: object(&text("delivery_json")?, "delivery_json", &key)?,
        status: parse_enum(JobStatus::parse, &text("status")?, OP_READ, &key)?,
        created_at: int("created_at")?,
        updated_at: int("updated_at")?,
        next_run_at: int("next_run_at")?,
        running_at: int("running_at")?,
        last_run_at: int("last_run_at")?,
        last_result: text("last_result")?,
        failure_count: int("failure_count")?,
        failure_alert_at: int("failure_alert_at")?,
        phase: parse_enum(JobPhase::parse, &text("phase")?, OP_READ, &key)?,
        progress_text: text("progress_text")?,
        progress_current: int("progress_current")?,
        progress_total: int("progress_total")?,
        checkpoint_json: object(&text("checkpoint_json")?, "checkpoint_json", &key)?,
        pending_confirmation_id: text("pending_confirmation_id")?,
        pending_tool_request_json: object(
            &text("pending_tool_request_json")?,
            "pending_tool_request_json",
            &key,
        )?,
        last_surface_id: text("last_surface_id")?,
        resume_token: text("resume_token")?,
        last_event_at: int("last_event_at")?,
        unread_result: int("unread_result")? != 0,
        paused_at: int("paused_at")?,
    };
    Ok(StoredJob {
        job,
        version: int("version")?,
        attempt: int("current_attempt")?,
        owner: text("owner")?,
        delivery_state: delivery_state
            .map(|s| parse_enum(DeliveryState::parse, &s, OP_READ, &key))
            .transpose()?,
        created_by: text("created_by")?,
    })
}

fn run_from_row(row: &Row<'_>) -> Result<JobRun> {
    const OP: &str = "agent_job_runs.read";
    let job_id: i64 = col(row, "job_id", OP)?;
    let outcome: String = col(row, "outcome", OP)?;
    Ok(JobRun {
        job_id,
        attempt: col(row, "attempt", OP)?,
        intended_at: col(row, "intended_at", OP)?,
        catch_up: col::<i64>(row, "catch_up", OP)? != 0,
        owner: col(row, "owner", OP)?,
        started_at: col(row, "started_at", OP)?,
        finished_at: col(row, "finished_at", OP)?,
        outcome: parse_enum(RunOutcome::parse, &outcome, OP, &job_id.to_string())?,
        reason: col(row, "reason", OP)?,
        output_ref: col(row, "output_ref", OP)?,
    })
}

fn json_text(map: &Map<String, Value>) -> String {
    // Serialising a map with string keys cannot fail.
    Value::Object(map.clone()).to_string()
}

fn get_in(conn: &Connection, op: &'static str, id: i64) -> Result<Option<StoredJob>> {
    Ok(collect(
        conn,
        op,
        &format!("SELECT {JOB_COLUMNS} FROM agent_jobs WHERE id = ?1"),
        [id],
        job_from_row,
    )?
    .into_iter()
    .next())
}

fn not_found(id: i64) -> StoreError {
    StoreError::NotFound {
        table: "agent_jobs",
        id: id.to_string(),
    }
}

fn conflict(id: i64, detail: String) -> StoreError {
    StoreError::Conflict {
        table: "agent_jobs",
        id: id.to_string(),
        detail,
    }
}

/// [`create_limited_in`] under the default quota for `max_jobs` ([`JobQuota::for_max`]).
pub(crate) fn create_in(
    tx: &Connection,
    news: &[NewAgentJob],
    now_ms: i64,
    max_jobs: usize,
) -> Result<Vec<StoredJob>> {
    create_limited_in(tx, news, now_ms, &JobQuota::for_max(max_jobs))
}

/// Live jobs of `created_by` (`None`: of every creator that is not the user).
fn live_count(tx: &Connection, created_by: Option<&str>) -> Result<i64> {
    let sql = format!(
        "SELECT COUNT(*) FROM agent_jobs WHERE status NOT IN {TERMINAL_SQL} AND          CASE WHEN ?1 IS NULL THEN created_by NOT IN ('{OPERATOR_CREATOR}', '{BUILTIN_CREATOR}')          ELSE created_by = ?1 END"
    );
    tx.prepare_cached(&sql)
        .and_then(|mut s| s.query_row([created_by], |r| r.get(0)))
        .ctx("agent_jobs.create", "quota")
}

/// Refuses `news` when a runtime among their creators would hold more live jobs than
/// `quota` lets it (its own `per_runtime`, or the runtimes' share together).
fn check_quota(tx: &Connection, news: &[NewAgentJob], quota: &JobQuota) -> Result<()> {
    let mut by_creator: std::collections::BTreeMap<&str, i64> = Default::default();
    for new in news.iter().filter(|n| !is_user_creator(&n.created_by)) {
        *by_creator.entry(new.created_by.as_str()).or_default() += 1;
    }
    if by_creator.is_empty() {
        return Ok(());
    }
    for (creator, adding) in &by_creator {
        let live = live_count(tx, Some(creator))?;
        if live.saturating_add(*adding) > sql_limit(quota.per_runtime) {
            return Err(StoreError::LimitReached {
                what: "live agent jobs of one runtime",
                limit: quota.per_runtime,
                detail: format!(
                    "runtime `{creator}` already has {live} live jobs; stop or finish one first"
                ),
            });
        }
    }
    let adding: i64 = by_creator.values().sum();
    let live = live_count(tx, None)?;
    if live.saturating_add(adding) > sql_limit(quota.runtime_share()) {
        return Err(StoreError::LimitReached {
            what: "live agent jobs of runtimes",
            limit: quota.runtime_share(),
            detail: format!(
                "runtimes hold {live} live jobs together; the rest of the {} is the user's",
                quota.max_jobs
            ),
        });
    }
    Ok(())
}

/// Inserts `new` jobs after making room for them (§2.4): terminal jobs are deleted, oldest
/// `updated_at` first; when that is not enough nothing is written. A runtime's jobs must also
/// fit its own quota and the runtimes' share (`quota`); the user's only `max_jobs`.
pub(crate) fn create_limited_in(
    tx: &Connection,
    news: &[NewAgentJob],
    now_ms: i64,
    quota: &JobQuota,
) -> Result<Vec<StoredJob>> {
    const OP: &str = "agent_jobs.create";
    let max_jobs = quota.max_jobs;
    check_quota(tx, news, quota)?;
    let count: i64 = tx
        .query_row("SELECT COUNT(*) FROM agent_jobs", [], |r| r.get(0))
        .ctx(OP, "")?;
    let wanted = count.saturating_add(sql_limit(news.len()));
    let excess = wanted.saturating_sub(sql_limit(max_jobs));
    if excess > 0 {
        let deleted = tx
            .prepare_cached(&format!(
                "DELETE FROM agent_jobs WHERE id IN (SELECT id FROM agent_jobs \
                 WHERE status IN {TERMINAL_SQL} ORDER BY updated_at, id LIMIT ?1)"
            ))
            .and_then(|mut s| s.execute([excess]))
            .ctx(OP, "trim")?;
        if sql_limit(deleted) < excess {
            return Err(StoreError::LimitReached {
                what: "agent jobs",
                limit: max_jobs,
                detail: "every stored job is live; stop or finish one first".to_owned(),
            });
        }
    }
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO agent_jobs (type, title, prompt, payload_json, schedule_json, \
             session_target, delivery_json, status, created_at, updated_at, next_run_at, \
             running_at, last_run_at, last_result, failure_count, failure_alert_at, phase, \
             progress_text, progress_current, progress_total, checkpoint_json, \
             pending_confirmation_id, pending_tool_request_json, last_surface_id, resume_token, \
             last_event_at, unread_result, paused_at, version, current_attempt, owner, \
             delivery_state, created_by) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?8, ?9, 0, 0, '', 0, 0, 'queued', \
             'Queued', 0, 0, '{}', '', '{}', '', '', ?8, 0, 0, 1, 0, '', NULL, ?10)",
        )
        .ctx(OP, "")?;
    let mut ids = Vec::with_capacity(news.len());
    for new in news {
        insert
            .execute(params![
                new.job_type.as_str(),
                new.title,
                new.prompt,
                json_text(&new.payload_json),
                json_text(&new.schedule_json),
                new.session_target,
                json_text(&new.delivery_json),
                now_ms,
                new.next_run_at,
                new.created_by,
            ])
            .ctx(OP, &new.title)?;
        ids.push(tx.last_insert_rowid());
    }
    ids.into_iter()
        .map(|id| get_in(tx, OP, id)?.ok_or_else(|| not_found(id)))
        .collect()
}

/// Writes `next` over the row if the row is still at `next.version` (and, with `fence`, still
/// owned by that attempt); returns the row as written.
fn write_in(
    tx: &Connection,
    op: &'static str,
    next: &StoredJob,
    fence: Option<&AttemptFinish>,
) -> Result<StoredJob> {
    let job = &next.job;
    if let Some(finish) = fence
        && (finish.attempt != next.attempt || finish.owner != next.owner)
    {
        return Err(conflict(
            job.id,
            format!(
                "the report of attempt {} of {:?} does not belong to attempt {} of {:?}",
                finish.attempt, finish.owner, next.attempt, next.owner
            ),
        ));
    }
    // One conditional statement; the reasons for a refusal are looked up only when it is one.
    let changed = tx
        .prepare_cached(
            "UPDATE agent_jobs SET type = ?2, title = ?3, prompt = ?4, payload_json = ?5, \
             schedule_json = ?6, session_target = ?7, delivery_json = ?8, status = ?9, \
             updated_at = ?10, next_run_at = ?11, running_at = ?12, last_run_at = ?13, \
             last_result = ?14, failure_count = ?15, failure_alert_at = ?16, phase = ?17, \
             progress_text = ?18, progress_current = ?19, progress_total = ?20, \
             checkpoint_json = ?21, pending_confirmation_id = ?22, \
             pending_tool_request_json = ?23, last_surface_id = ?24, resume_token = ?25, \
             last_event_at = ?26, unread_result = ?27, paused_at = ?28, delivery_state = ?29, \
             version = version + 1 \
             WHERE id = ?1 AND version = ?30 AND created_at = ?31 AND current_attempt = ?32 \
             AND owner = ?33",
        )
        .and_then(|mut s| {
            s.execute(params![
                job.id,
                job.job_type.as_str(),
                job.title,
                job.prompt,
                json_text(&job.payload_json),
                json_text(&job.schedule_json),
                job.session_target,
                json_text(&job.delivery_json),
                job.status.as_str(),
                job.updated_at,
                job.next_run_at,
                job.running_at,
                job.last_run_at,
                job.last_result,
                job.failure_count,
                job.failure_alert_at,
                job.phase.as_str(),
                job.progress_text,
                job.progress_current,
                job.progress_total,
                json_text(&job.checkpoint_json),
                job.pending_confirmation_id,
                json_text(&job.pending_tool_request_json),
                job.last_surface_id,
                job.resume_token,
                job.last_event_at,
                job.unread_result,
                job.paused_at,
                next.delivery_state.map(DeliveryState::as_str),
                next.version,
                job.created_at,
                next.attempt,
                next.owner,
            ])
        })
        .ctx(op, &job.id.to_string())?;
    if changed == 0 {
        return Err(refusal(tx, op, next)?);
    }
    if let Some(finish) = fence {
        finish_run_in(tx, op, job.id, finish)?;
    }
    let mut written = next.clone();
    written.version += 1;
    Ok(written)
}

/// Why the conditional write of `next` changed no row.
fn refusal(tx: &Connection, op: &'static str, next: &StoredJob) -> Result<StoreError> {
    let id = next.job.id;
    let Some(current) = get_in(tx, op, id)? else {
        return Ok(not_found(id));
    };
    Ok(if current.version != next.version {
        conflict(
            id,
            format!(
                "version {} was expected, the stored row is at {}",
                next.version, current.version
            ),
        )
    } else if current.job.created_at != next.job.created_at {
        StoreError::Invalid {
            what: "agent job update",
            detail: format!("created_at of job {id} cannot change"),
        }
    } else {
        conflict(
            id,
            format!(
                "attempt {} of {:?} is not the stored attempt {} of {:?}",
                next.attempt, next.owner, current.attempt, current.owner
            ),
        )
    })
}

/// Ends the ledger row of an attempt that is still `running`; an attempt already ended (or
/// trimmed) is left alone.
fn finish_run_in(
    tx: &Connection,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
) -> Result<bool> {
    let changed = tx
        .prepare_cached(
            "UPDATE agent_job_runs SET finished_at = ?4, outcome = ?5, reason = ?6, \
             output_ref = ?7 WHERE job_id = ?1 AND attempt = ?2 AND owner = ?3 \
             AND outcome = 'running'",
        )
        .and_then(|mut s| {
            s.execute(params![
                job_id,
                finish.attempt,
                finish.owner,
                finish.finished_at,
                finish.outcome.as_str(),
                finish.reason,
                finish.output_ref,
            ])
        })
        .ctx(op, &job_id.to_string())?;
    Ok(changed == 1)
}

impl Store {
    /// Creates one job (`queued`, phase `queued`, progress `Queued`, every other field at its
    /// creation value of §2) with the next id. When the store already holds `max_jobs` jobs,
    /// the oldest terminal ones are deleted to make room; when every job is live the create is
    /// refused with [`StoreError::LimitReached`] (`job_limit_reached`).
    pub fn create_job(&self, new: &NewAgentJob, now_ms: i64, max_jobs: usize) -> Result<StoredJob> {
        self.create_job_limited(new, now_ms, &JobQuota::for_max(max_jobs))
    }

    /// [`Store::create_job`] under `quota`: a job whose creator is a runtime is refused with
    /// [`StoreError::LimitReached`] when that runtime already holds `quota.per_runtime` live
    /// jobs, or the runtimes together `quota.runtime_share()`; the user's jobs only when
    /// `max_jobs` is full of live jobs.
    pub fn create_job_limited(
        &self,
        new: &NewAgentJob,
        now_ms: i64,
        quota: &JobQuota,
    ) -> Result<StoredJob> {
        let new = new.clone();
        let title = new.title.clone();
        let quota = *quota;
        self.write("agent_jobs.create", &title, move |tx| {
            let mut created = create_limited_in(tx, std::slice::from_ref(&new), now_ms, &quota)?;
            created.pop().ok_or_else(|| StoreError::Commit {
                op: "agent_jobs.create",
                id: new.title.clone(),
                detail: "the insert returned no row".to_owned(),
            })
        })
    }

    /// [`Store::create_job`] for many jobs in one transaction: all are created or none.
    pub fn create_jobs(
        &self,
        news: Vec<NewAgentJob>,
        now_ms: i64,
        max_jobs: usize,
    ) -> Result<Vec<StoredJob>> {
        self.write("agent_jobs.create", "", move |tx| {
            create_in(tx, &news, now_ms, max_jobs)
        })
    }

    /// One job.
    pub fn get_job(&self, id: i64) -> Result<Option<StoredJob>> {
        get_in(&self.conn(), "agent_jobs.get", id)
    }

    /// Jobs matching `filter`, in the order described on [`JobFilter`]. Reading never changes a
    /// job.
    pub fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<StoredJob>> {
        const OP: &str = "agent_jobs.list";
        let statuses: Vec<&str> = filter.statuses.iter().map(|s| s.as_str()).collect();
        let statuses = (!statuses.is_empty()).then(|| Value::from(statuses).to_string());
        let text = filter
            .text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty());
        collect(
            &self.conn(),
            OP,
            &format!(
                "SELECT {JOB_COLUMNS} FROM agent_jobs \
                 WHERE (?1 IS NULL OR status IN (SELECT value FROM json_each(?1))) \
                 AND (?2 IS NULL OR type = ?2) \
                 AND (?3 IS NULL OR instr(lower(title), lower(?3)) > 0 \
                      OR instr(lower(prompt), lower(?3)) > 0) \
                 AND (?5 IS NULL OR created_by = ?5) \
                 ORDER BY status IN {TERMINAL_SQL}, \
                    CASE WHEN status IN {TERMINAL_SQL} THEN -updated_at ELSE next_run_at END, \
                    CASE WHEN status IN {TERMINAL_SQL} THEN -id ELSE id END \
                 LIMIT ?4"
            ),
            params![
                statuses,
                filter.job_type.map(JobType::as_str),
                text,
                filter.limit.map_or(-1, sql_limit),
                filter.created_by,
            ],
            job_from_row,
        )
    }

    /// Claims at most `request.limit` due jobs — `queued` or `active` with
    /// `next_run_at <= now` (0 = due now), in ascending `next_run_at` then id — with one
    /// conditional `UPDATE`: each becomes `running` (phase `running`, progress `Working`,
    /// `running_at = now`, the next attempt number, owned by `request.owner`), and each gets
    /// its ledger row, in the same transaction. Two claimers never both win a job: the second
    /// finds it no longer due. Returns the claimed jobs in due order.
    pub fn claim_due_jobs(&self, request: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        const OP: &str = "agent_jobs.claim";
        if request.limit == 0 {
            return Ok(Vec::new());
        }
        // Nothing due (most ticks): answer from the read connection, without a write.
        let any: bool = self
            .conn()
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM agent_jobs \
                 WHERE status IN ('queued', 'active') AND next_run_at <= ?1)",
            )
            .and_then(|mut s| s.query_row([request.now_ms.max(0)], |r| r.get(0)))
            .ctx(OP, "")?;
        if !any {
            return Ok(Vec::new());
        }
        let request = request.clone();
        self.write(OP, &request.owner.clone(), move |tx| {
            let now = request.now_ms.max(0);
            let mut claimed = collect(
                tx,
                OP,
                &format!(
                    "UPDATE agent_jobs SET status = 'running', phase = 'running', \
                     progress_text = 'Working', running_at = ?1, updated_at = ?1, \
                     last_event_at = ?1, current_attempt = current_attempt + 1, owner = ?2, \
                     version = version + 1 \
                     WHERE id IN (SELECT id FROM agent_jobs \
                                  WHERE status IN ('queued', 'active') AND next_run_at <= ?1 \
                                  ORDER BY next_run_at, id LIMIT ?3) \
                     RETURNING {JOB_COLUMNS}"
                ),
                params![now, request.owner, sql_limit(request.limit)],
                job_from_row,
            )?;
            claimed.sort_by_key(|j| (j.job.next_run_at, j.job.id));
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO agent_job_runs (job_id, attempt, intended_at, catch_up, owner, \
                     started_at, finished_at, outcome, reason, output_ref) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, 'running', '', '')",
                )
                .ctx(OP, "")?;
            let mut trim = tx
                .prepare_cached("DELETE FROM agent_job_runs WHERE job_id = ?1 AND attempt <= ?2")
                .ctx(OP, "")?;
            let mut out = Vec::with_capacity(claimed.len());
            for job in claimed {
                let intended_at = job.job.next_run_at;
                let catch_up = intended_at > 0 && intended_at < request.started_at_ms;
                let id = job.job.id;
                insert
                    .execute(params![
                        id,
                        job.attempt,
                        intended_at,
                        catch_up,
                        request.owner,
                        now
                    ])
                    .ctx(OP, &id.to_string())?;
                trim.execute(params![id, job.attempt - RUNS_KEPT_PER_JOB])
                    .ctx(OP, &id.to_string())?;
                let run = JobRun {
                    job_id: id,
                    attempt: job.attempt,
                    intended_at,
                    catch_up,
                    owner: request.owner.clone(),
                    started_at: now,
                    finished_at: None,
                    outcome: RunOutcome::Running,
                    reason: String::new(),
                    output_ref: String::new(),
                };
                out.push(ClaimedJob { job, run });
            }
            Ok(out)
        })
    }

    /// Writes `next` (every wire field but `id` and `created_at`, and the delivery state) if
    /// the stored row is still at `next.version`; returns the row as written, at the next
    /// version. A row changed since is [`StoreError::Conflict`] and nothing is written; an
    /// unknown id is [`StoreError::NotFound`].
    pub fn update_job(&self, next: &StoredJob) -> Result<StoredJob> {
        let next = next.clone();
        self.write("agent_jobs.update", &next.job.id.to_string(), move |tx| {
            write_in(tx, "agent_jobs.update", &next, None)
        })
    }

    /// [`Store::update_job`] for the end of a run attempt, fenced: the row must also still
    /// be owned by `finish.owner` at `finish.attempt` ([`StoreError::Conflict`] otherwise).
    /// The attempt's ledger row is ended in the same transaction.
    pub fn finish_job_attempt(
        &self,
        next: &StoredJob,
        finish: &AttemptFinish,
    ) -> Result<StoredJob> {
        let next = next.clone();
        let finish = finish.clone();
        self.write("agent_jobs.finish", &next.job.id.to_string(), move |tx| {
            write_in(tx, "agent_jobs.finish", &next, Some(&finish))
        })
    }

    /// Ends the ledger row of an attempt without touching its job (a late report of a runner
    /// whose job was stopped or repaired meanwhile). Returns false when the attempt had already
    /// ended or does not exist.
    pub fn finish_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        let finish = finish.clone();
        self.write("agent_job_runs.finish", &job_id.to_string(), move |tx| {
            finish_run_in(tx, "agent_job_runs.finish", job_id, &finish)
        })
    }

    /// Repairs stale running jobs in one transaction (`agent-jobs.md` §7.7): selects the
    /// `running` jobs of `selection` (oldest `running_at` first, at most `selection.limit`),
    /// asks `repair` for each one's new record and attempt end, and writes them with the
    /// attempt's fence. `repair` returning `None` leaves that job alone. Returns the repaired
    /// rows.
    pub fn repair_stale_jobs<F>(
        &self,
        selection: &StaleSelection,
        repair: F,
    ) -> Result<Vec<StoredJob>>
    where
        F: Fn(&StoredJob) -> Option<Repair> + Send + 'static,
    {
        const OP: &str = "agent_jobs.repair";
        const STALE: &str = "status = 'running' \
            AND (running_at = 0 OR running_at < ?1 OR (?2 IS NOT NULL AND owner != ?2))";
        let selection = selection.clone();
        let threshold = selection.now_ms.saturating_sub(selection.stale_after_ms);
        // Most ticks find nothing stale: ask the read connection first and leave the writer
        // alone then (a row going stale meanwhile is found by the next tick).
        let any: bool = self
            .conn()
            .prepare_cached(&format!(
                "SELECT EXISTS (SELECT 1 FROM agent_jobs WHERE {STALE})"
            ))
            .and_then(|mut s| s.query_row(params![threshold, selection.foreign_to], |r| r.get(0)))
            .ctx(OP, "")?;
        if !any {
            return Ok(Vec::new());
        }
        self.write(OP, "", move |tx| {
            let stale = collect(
                tx,
                OP,
                &format!(
                    "SELECT {JOB_COLUMNS} FROM agent_jobs WHERE {STALE} \
                     ORDER BY running_at, id LIMIT ?3"
                ),
                params![threshold, selection.foreign_to, sql_limit(selection.limit)],
                job_from_row,
            )?;
            let mut repaired = Vec::with_capacity(stale.len());
            for job in &stale {
                if let Some((next, finish)) = repair(job) {
                    repaired.push(write_in(tx, OP, &next, Some(&finish))?);
                }
            }
            Ok(repaired)
        })
    }

    /// The earliest time something about the jobs needs the scheduler (`agent-jobs.md` §6.4,
    /// before the minimum delay is applied): the `next_run_at` of queued jobs (0 = now),
    /// `running_at + stale_after_ms` of running ones, the review deadline of parked ones and
    /// `reviewed_at + stale_after_ms` of reviews being resolved. `None` when nothing is
    /// scheduled (paused, terminal and dispatched jobs never are).
    pub fn next_job_wake(&self, stale_after_ms: i64) -> Result<Option<i64>> {
        self.conn()
            .prepare_cached(
                "SELECT MIN(t) FROM ( \
                   SELECT MIN(next_run_at) AS t FROM agent_jobs \
                     WHERE status IN ('queued', 'active') \
                   UNION ALL SELECT MIN(running_at) + ?1 FROM agent_jobs \
                     WHERE status = 'running' \
                   UNION ALL SELECT MIN(json_extract(pending_tool_request_json, '$.expires_at')) \
                     FROM agent_jobs WHERE status = 'awaiting_review' \
                   UNION ALL SELECT MIN(json_extract(pending_tool_request_json, '$.reviewed_at')) + ?1 \
                     FROM agent_jobs WHERE status = 'waiting' \
                     AND json_extract(pending_tool_request_json, '$.review_state') = 'resolving')",
            )
            .and_then(|mut s| s.query_row([stale_after_ms], |r| r.get::<_, Option<i64>>(0)))
            .ctx("agent_jobs.next_wake", "")
    }

    /// The ledger of one job, oldest attempt first.
    pub fn job_runs(&self, job_id: i64) -> Result<Vec<JobRun>> {
        collect(
            &self.conn(),
            "agent_job_runs.list",
            &format!("SELECT {RUN_COLUMNS} FROM agent_job_runs WHERE job_id = ?1 ORDER BY attempt"),
            [job_id],
            run_from_row,
        )
    }

    /// One attempt of a job.
    pub fn job_run(&self, job_id: i64, attempt: i64) -> Result<Option<JobRun>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM agent_job_runs WHERE job_id = ?1 AND attempt = ?2"
            ))
            .ctx("agent_job_runs.get", &job_id.to_string())?;
        let row = stmt
            .query_row(params![job_id, attempt], |row| Ok(run_from_row(row)))
            .optional()
            .ctx("agent_job_runs.get", &job_id.to_string())?;
        row.transpose()
    }

    /// How many jobs are stored.
    pub fn count_jobs(&self) -> Result<u64> {
        self.conn()
            .prepare_cached("SELECT COUNT(*) FROM agent_jobs")
            .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .ctx("agent_jobs.count", "")
    }
}
