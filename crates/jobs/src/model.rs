//! The job model: the wire record and its enums (defined once in `openphone_protocol::job`,
//! persisted column by column by the store, and re-exported here), the delivery mode, the job
//! view the tools return, and the few derived values every part of the scheduler reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use openphone_protocol::job::{
    AgentJob, DeliveryState, JobPhase, JobRun, JobStatus, JobType, RunOutcome,
};
pub use openphone_store::{JobFilter, NewAgentJob, StoredJob};

use crate::limits::INTERVAL_FLOOR_MS;

/// How a job's outcome reaches the user (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// A notification on completion and on failure alerts.
    Notification,
    /// Nothing pushed; the result is visible in job views.
    Silent,
    /// Nothing at all; clients may hide these jobs from default listings.
    None,
}

impl DeliveryMode {
    /// Every mode.
    pub const ALL: [DeliveryMode; 3] = [
        DeliveryMode::Notification,
        DeliveryMode::Silent,
        DeliveryMode::None,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryMode::Notification => "notification",
            DeliveryMode::Silent => "silent",
            DeliveryMode::None => "none",
        }
    }

    /// Parses the exact wire string.
    pub fn parse(text: &str) -> Option<DeliveryMode> {
        DeliveryMode::ALL.into_iter().find(|m| m.as_str() == text)
    }

    /// The mode a job of `job_type` gets when none is asked for (§3).
    pub fn default_for(job_type: JobType) -> DeliveryMode {
        match job_type {
            JobType::Heartbeat => DeliveryMode::Silent,
            JobType::AgentTurn | JobType::SystemEvent => DeliveryMode::Notification,
        }
    }

    /// What the delivery of something to tell the user starts as: `pending` when it is to be
    /// pushed, `suppressed` when the mode pushes nothing.
    pub fn initial_state(self) -> DeliveryState {
        match self {
            DeliveryMode::Notification => DeliveryState::Pending,
            DeliveryMode::Silent | DeliveryMode::None => DeliveryState::Suppressed,
        }
    }
}

impl std::fmt::Display for DeliveryMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Values derived from a job record.
pub trait AgentJobExt {
    /// `schedule_json.interval_ms` when it is a positive integer, else 0.
    fn interval_ms(&self) -> i64;
    /// True when the job repeats (`interval_ms > 0`).
    fn is_recurring(&self) -> bool;
    /// The interval actually used between runs: `max(interval_ms, 15000)`, or 0 for a
    /// one-shot job.
    fn effective_interval_ms(&self) -> i64;
    /// `delivery_json.mode`, or the type's default when it is missing or unknown.
    fn delivery_mode(&self) -> DeliveryMode;
    /// `delivery_json.notification_text` when it is a non-empty string.
    fn notification_text(&self) -> Option<&str>;
    /// `delivery_json.origin`: the runtime and the phone session the job was created in
    /// (recorded by the daemon, never given by the caller; issue 32 item 3).
    fn origin(&self) -> Option<Origin>;
}

/// The key of [`AgentJobExt::origin`] in `delivery_json`.
pub const ORIGIN_KEY: &str = "origin";

/// Where a job was created: the runtime and its phone session (the surface its results are
/// delivered back to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The runtime that created the job.
    pub runtime: String,
    /// The phone session the creating request came in.
    pub phone_session_id: String,
}

impl Origin {
    /// The value stored under `delivery_json.origin`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"runtime": self.runtime, "phone_session_id": self.phone_session_id})
    }
}

impl AgentJobExt for AgentJob {
    fn interval_ms(&self) -> i64 {
        self.schedule_json
            .get("interval_ms")
            .and_then(Value::as_i64)
            .filter(|ms| *ms > 0)
            .unwrap_or(0)
    }

    fn is_recurring(&self) -> bool {
        self.interval_ms() > 0
    }

    fn effective_interval_ms(&self) -> i64 {
        effective_interval_ms(self.interval_ms())
    }

    fn delivery_mode(&self) -> DeliveryMode {
        self.delivery_json
            .get("mode")
            .and_then(Value::as_str)
            .and_then(DeliveryMode::parse)
            .unwrap_or_else(|| DeliveryMode::default_for(self.job_type))
    }

    fn notification_text(&self) -> Option<&str> {
        self.delivery_json
            .get("notification_text")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
    }

    fn origin(&self) -> Option<Origin> {
        let origin = self.delivery_json.get(ORIGIN_KEY)?;
        let field = |key: &str| {
            origin
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Some(Origin {
            runtime: field("runtime")?,
            phone_session_id: field("phone_session_id")?,
        })
    }
}

/// `max(interval_ms, 15000)` for a recurring interval, 0 for none (§5, §7.5).
pub fn effective_interval_ms(interval_ms: i64) -> i64 {
    if interval_ms > 0 {
        interval_ms.max(INTERVAL_FLOOR_MS)
    } else {
        0
    }
}

/// **\[project\]** What the job tools return for a job (§10): never the prompt, the payload,
/// `last_result`, the review params or the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobView {
    /// Job id.
    pub id: i64,
    /// Job type.
    #[serde(rename = "type")]
    pub job_type: JobType,
    /// Title.
    pub title: String,
    /// Status.
    pub status: JobStatus,
    /// Phase.
    pub phase: JobPhase,
    /// Progress line.
    pub progress_text: String,
    /// Next due time.
    pub next_run_at: i64,
    /// End of the last run.
    pub last_run_at: i64,
    /// The stored interval (0: one-shot).
    pub interval_ms: i64,
    /// Session target.
    pub session_target: String,
    /// Delivery mode.
    pub delivery_mode: DeliveryMode,
    /// Consecutive failures.
    pub failure_count: i64,
    /// Something the user has not looked at.
    pub unread_result: bool,
    /// The review the job waits on, or empty.
    pub pending_confirmation_id: String,
    /// Creation time.
    pub created_at: i64,
    /// Last write.
    pub updated_at: i64,
}

impl From<&AgentJob> for JobView {
    fn from(job: &AgentJob) -> JobView {
        JobView {
            id: job.id,
            job_type: job.job_type,
            title: job.title.clone(),
            status: job.status,
            phase: job.phase,
            progress_text: job.progress_text.clone(),
            next_run_at: job.next_run_at,
            last_run_at: job.last_run_at,
            interval_ms: job.interval_ms(),
            session_target: job.session_target.clone(),
            delivery_mode: job.delivery_mode(),
            failure_count: job.failure_count,
            unread_result: job.unread_result,
            pending_confirmation_id: job.pending_confirmation_id.clone(),
            created_at: job.created_at,
            updated_at: job.updated_at,
        }
    }
}

/// Cuts `text` to at most `max` characters (never inside a character).
pub fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text.to_owned(),
    }
}
