//! Background agent jobs for operators (`agent-jobs.md` §8, §9.4, §10): `jobs.list`,
//! `jobs.get`, `jobs.create`, `jobs.stop`, `jobs.pause`, `jobs.resume`, `jobs.wake` and
//! `jobs.review` (approve or deny a parked state-changing call).
//!
//! Operators read the full 29-field job record ([`AgentJob`], `agent-job.schema.json`);
//! runtimes and models use the job tools (`openphone.jobs.*`), which answer with the job view
//! of §10 instead. Every params type refuses unknown fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::key_order::in_key_order;
use crate::job::{AgentJob, DeliveryState, RunOutcome};

/// One job as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobEntry {
    /// The 29-field record (`agent-jobs.md` §2). On the wire its members are in key order, as
    /// they always were (the record travelled as a map).
    #[serde(serialize_with = "in_key_order")]
    pub job: AgentJob,
    /// What became of the latest result's delivery; `null` before any result.
    #[serde(default)]
    pub delivery_state: Option<DeliveryState>,
    /// Who created the job: `operator` (the user, through this endpoint, the CLI or the
    /// dashboard; also every job from before jobs had owners), `builtin` (the user's built-in
    /// assistant), or the id of the runtime that created it — whose authority its runs have.
    #[serde(default = "operator")]
    pub created_by: String,
    /// Where the job belongs in a fleet of daemons sharing one store (`docs/fleet.md`): the
    /// daemon that created it and the one whose claim runs it now or ran it last. Absent
    /// when the daemon is not in a fleet (the SQLite store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<RowHost>,
}

/// Which daemon of a fleet a listed row belongs to (`jobs.list`, `inbox.list`, `goals.list`).
/// Only a fleet's shared store knows it; a lone daemon's rows carry none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RowHost {
    /// The `[store] host_id` of the daemon that made the row (a job's or goal's creator, the
    /// daemon whose runtime asked for a confirmation).
    pub host_id: String,
    /// The daemon whose claim runs a job now, or ran it last (jobs only; absent before the
    /// first run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_owner: Option<String>,
}

impl RowHost {
    /// A row made by `host_id`, with no lease.
    pub fn of(host_id: impl Into<String>) -> RowHost {
        RowHost {
            host_id: host_id.into(),
            lease_owner: None,
        }
    }

    /// The daemon that runs (or last ran) the row's work: the lease holder when there is
    /// one, else the maker.
    pub fn acting(&self) -> &str {
        self.lease_owner.as_deref().unwrap_or(&self.host_id)
    }
}

fn operator() -> String {
    "operator".to_owned()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{JobPhase, JobStatus, JobType};

    /// The typed record answers the bytes the map did: members in key order, none omitted.
    #[test]
    fn a_job_entry_has_the_bytes_of_the_map_it_replaced() {
        let job = AgentJob {
            id: 7,
            job_type: JobType::AgentTurn,
            title: "t".into(),
            prompt: "p".into(),
            payload_json: Map::new(),
            schedule_json: Map::new(),
            session_target: "isolated".into(),
            delivery_json: Map::new(),
            status: JobStatus::Queued,
            created_at: 1,
            updated_at: 2,
            next_run_at: 3,
            running_at: 0,
            last_run_at: 0,
            last_result: String::new(),
            failure_count: 0,
            failure_alert_at: 0,
            phase: JobPhase::Queued,
            progress_text: "Queued".into(),
            progress_current: 0,
            progress_total: 0,
            checkpoint_json: Map::new(),
            pending_confirmation_id: String::new(),
            pending_tool_request_json: Map::new(),
            last_surface_id: String::new(),
            resume_token: String::new(),
            last_event_at: 1,
            unread_result: false,
            paused_at: 0,
            device_id: None,
        };
        let Ok(Value::Object(map)) = serde_json::to_value(&job) else {
            panic!("a job is an object");
        };
        let entry = |job| JobEntry {
            job,
            delivery_state: Some(DeliveryState::Sent),
            created_by: "operator".into(),
            host: None,
        };
        // What `JobEntry` with `job: Map<String, Value>` wrote.
        let before = format!(
            r#"{{"job":{},"delivery_state":"sent","created_by":"operator"}}"#,
            Value::Object(map)
        );
        let typed = serde_json::to_string(&entry(job)).unwrap();
        assert_eq!(typed, before);
        let back: JobEntry = serde_json::from_str(&typed).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), typed);
    }

    #[test]
    fn row_host_is_absent_off_a_fleet_and_names_the_lease_holder_in_one() {
        let lone = serde_json::to_value(RowHost::of("a")).unwrap();
        assert_eq!(lone, serde_json::json!({"host_id": "a"}));
        let leased = RowHost {
            host_id: "a".into(),
            lease_owner: Some("b".into()),
        };
        assert_eq!(leased.acting(), "b");
        assert_eq!(RowHost::of("a").acting(), "a");
        let back: RowHost =
            serde_json::from_value(serde_json::json!({"host_id": "a", "lease_owner": "b"}))
                .unwrap();
        assert_eq!(back, leased);
    }
}
