//! Background agent jobs on the wire (`agent-jobs.md` §2, `durable-execution.md` §7): the
//! 29-field job record, its enums, the delivery state of its latest result and one attempt of
//! the attempt ledger. Defined here once; the store persists them column by column
//! (`openphone-store` re-exports them), the scheduler (`openphone-jobs`) decides their
//! transitions, and the endpoint (`jobs.*`) and the CLI read them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

crate::wire_enum!(
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

crate::wire_enum!(
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

crate::wire_enum!(
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

crate::wire_enum!(
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

crate::wire_enum!(
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
///
/// Read, it is the compatible superset of seed 001's record (issue 32): the 17 members of the
/// seed's own example are required, the 12 this project added (`phase` through `paused_at`)
/// may be absent and then take their defaults — `phase` the one its `status` implies
/// ([`JobPhase::for_status`]), empty strings and objects, 0, `false`. Unknown members are
/// refused.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
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
    /// The phone its runs act on (`[[devices]] id`), when it was created naming one; absent
    /// on a daemon with one phone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// What [`AgentJob`] reads: the seed's 17 members required, this project's 12 optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentJobRecord {
    id: i64,
    #[serde(rename = "type")]
    job_type: JobType,
    title: String,
    prompt: String,
    payload_json: Map<String, Value>,
    schedule_json: Map<String, Value>,
    session_target: String,
    delivery_json: Map<String, Value>,
    status: JobStatus,
    created_at: i64,
    updated_at: i64,
    next_run_at: i64,
    running_at: i64,
    last_run_at: i64,
    last_result: String,
    failure_count: i64,
    failure_alert_at: i64,
    phase: Option<JobPhase>,
    #[serde(default)]
    progress_text: String,
    #[serde(default)]
    progress_current: i64,
    #[serde(default)]
    progress_total: i64,
    #[serde(default)]
    checkpoint_json: Map<String, Value>,
    #[serde(default)]
    pending_confirmation_id: String,
    #[serde(default)]
    pending_tool_request_json: Map<String, Value>,
    #[serde(default)]
    last_surface_id: String,
    #[serde(default)]
    resume_token: String,
    #[serde(default)]
    last_event_at: i64,
    #[serde(default)]
    unread_result: bool,
    #[serde(default)]
    paused_at: i64,
    #[serde(default)]
    device_id: Option<String>,
}

impl<'de> Deserialize<'de> for AgentJob {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = AgentJobRecord::deserialize(deserializer)?;
        Ok(AgentJob {
            id: r.id,
            job_type: r.job_type,
            title: r.title,
            prompt: r.prompt,
            payload_json: r.payload_json,
            schedule_json: r.schedule_json,
            session_target: r.session_target,
            delivery_json: r.delivery_json,
            phase: r.phase.unwrap_or_else(|| JobPhase::for_status(r.status)),
            status: r.status,
            created_at: r.created_at,
            updated_at: r.updated_at,
            next_run_at: r.next_run_at,
            running_at: r.running_at,
            last_run_at: r.last_run_at,
            last_result: r.last_result,
            failure_count: r.failure_count,
            failure_alert_at: r.failure_alert_at,
            progress_text: r.progress_text,
            progress_current: r.progress_current,
            progress_total: r.progress_total,
            checkpoint_json: r.checkpoint_json,
            pending_confirmation_id: r.pending_confirmation_id,
            pending_tool_request_json: r.pending_tool_request_json,
            last_surface_id: r.last_surface_id,
            resume_token: r.resume_token,
            last_event_at: r.last_event_at,
            unread_result: r.unread_result,
            paused_at: r.paused_at,
            device_id: r.device_id,
        })
    }
}

/// One attempt in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
