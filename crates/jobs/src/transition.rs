//! The transitions of a job (`agent-jobs.md` §2.3), in one place.
//!
//! [`transition`] is the table: which status an event leads to from which status; every pair
//! not in it is an [`IllegalTransition`]. [`apply`] is the only code that changes a job's
//! status: it asks the table first, then writes the effects the specification gives each
//! edge (§7.5 completion, §7.6 failure and backoff, §8 stop, pause and resume, the review
//! edges of §9). The result is written with the store's compare-and-set on the version it was
//! computed from, so a transition computed from a row that changed meanwhile is refused
//! ("lost the race"). The store's claim (`Store::claim_due_jobs`) is the SQL form of the
//! [`JobEvent::Claim`] edge; a test checks the two agree.

// Routers name every variant: a new one must be handled here (tidy rule `exhaustive`).
#![warn(clippy::wildcard_enum_match_arm)]

use std::fmt;

use serde_json::Map;

use crate::limits::{ALERT_FAILURES, LAST_RESULT_MAX_CHARS, TERMINAL_FAILURES};
use crate::model::{AgentJobExt, DeliveryState, JobPhase, JobStatus, StoredJob, truncate_chars};
use crate::reason::FailureReason;
use crate::schedule::backoff_ms;

/// `last_result` of a `system_event` run.
pub const SYSTEM_EVENT_RESULT: &str = "system_event_recorded";
/// `last_result` of a `heartbeat` run.
pub const HEARTBEAT_RESULT: &str = "heartbeat";
/// `last_result` of a job whose approved review was interrupted (§9.10).
pub const REVIEW_INTERRUPTED_RESULT: &str = "background.review_interrupted_result_unknown";

/// What happens to a job: the triggers of §2.3. Creation is not an event: a new job is
/// [`INITIAL_STATUS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobEvent {
    /// A tick claimed the due job.
    Claim,
    /// The run succeeded.
    Succeed {
        /// The job repeats.
        recurring: bool,
    },
    /// The run handed the job to an external runtime.
    Dispatch {
        /// The job repeats.
        recurring: bool,
    },
    /// The run failed, or was found stale and repaired.
    Fail {
        /// This failure is the 6th in a row.
        terminal: bool,
    },
    /// The run parked a state-changing tool call for review.
    Park,
    /// The first Approve or Deny of the review was claimed.
    ReviewClaimed,
    /// The review window passed without a decision.
    ReviewExpired,
    /// The review's resolution was committed.
    ResolutionCommitted,
    /// A resolution left half-done by a crash; the decision was deny.
    StaleResolutionDenied,
    /// A resolution left half-done by a crash; the decision was approve (outcome unknown).
    StaleResolutionApproved,
    /// The user paused the job.
    Pause,
    /// The user resumed the job.
    Resume,
    /// The user or the model stopped the job.
    Stop,
    /// The runtime a run was dispatched to replied (its final message in the dispatched
    /// session): a one-shot `dispatched` job completes, a recurring one keeps its place.
    RuntimeReplied,
}

impl JobEvent {
    /// Every event, with both values of each flag.
    pub const ALL: [JobEvent; 17] = [
        JobEvent::Claim,
        JobEvent::Succeed { recurring: false },
        JobEvent::Succeed { recurring: true },
        JobEvent::Dispatch { recurring: false },
        JobEvent::Dispatch { recurring: true },
        JobEvent::Fail { terminal: false },
        JobEvent::Fail { terminal: true },
        JobEvent::Park,
        JobEvent::ReviewClaimed,
        JobEvent::ReviewExpired,
        JobEvent::ResolutionCommitted,
        JobEvent::StaleResolutionDenied,
        JobEvent::StaleResolutionApproved,
        JobEvent::Pause,
        JobEvent::Resume,
        JobEvent::Stop,
        JobEvent::RuntimeReplied,
    ];
}

impl fmt::Display for JobEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobEvent::Claim => f.write_str("claim"),
            JobEvent::Succeed { recurring: false } => f.write_str("success"),
            JobEvent::Succeed { recurring: true } => f.write_str("success (recurring)"),
            JobEvent::Dispatch { recurring: false } => f.write_str("dispatch"),
            JobEvent::Dispatch { recurring: true } => f.write_str("dispatch (recurring)"),
            JobEvent::Fail { terminal: false } => f.write_str("failure"),
            JobEvent::Fail { terminal: true } => f.write_str("failure (terminal)"),
            JobEvent::Park => f.write_str("park for review"),
            JobEvent::ReviewClaimed => f.write_str("review claimed"),
            JobEvent::ReviewExpired => f.write_str("review expired"),
            JobEvent::ResolutionCommitted => f.write_str("resolution committed"),
            JobEvent::StaleResolutionDenied => f.write_str("stale resolution (denied)"),
            JobEvent::StaleResolutionApproved => f.write_str("stale resolution (approved)"),
            JobEvent::Pause => f.write_str("pause"),
            JobEvent::Resume => f.write_str("resume"),
            JobEvent::Stop => f.write_str("stop"),
            JobEvent::RuntimeReplied => f.write_str("runtime replied"),
        }
    }
}

/// The status of a new job.
pub const INITIAL_STATUS: JobStatus = JobStatus::Queued;

/// An event that the table does not allow from the job's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a job that is {from} cannot take the event {event}")]
pub struct IllegalTransition {
    /// The status the job is in.
    pub from: JobStatus,
    /// The event refused.
    pub event: JobEvent,
}

/// The transition table of §2.3: the status `event` leads to from `from`.
pub fn transition(from: JobStatus, event: JobEvent) -> Result<JobStatus, IllegalTransition> {
    use JobEvent as E;
    use JobStatus as S;
    let to = match (from, event) {
        (S::Queued | S::Active, E::Claim) => S::Running,
        (S::Running, E::Succeed { recurring: false }) => S::Completed,
        (S::Running, E::Succeed { recurring: true }) => S::Queued,
        (S::Running, E::Dispatch { recurring: false }) => S::Dispatched,
        (S::Running, E::Dispatch { recurring: true }) => S::Queued,
        (S::Running, E::Fail { terminal: false }) => S::Queued,
        (S::Running, E::Fail { terminal: true }) => S::Failed,
        (S::Running, E::Park) => S::AwaitingReview,
        (S::AwaitingReview, E::ReviewClaimed) => S::Waiting,
        (S::AwaitingReview, E::ReviewExpired) => S::Queued,
        (S::Waiting, E::ResolutionCommitted) => S::Queued,
        (S::Waiting, E::StaleResolutionDenied) => S::Queued,
        (S::Waiting, E::StaleResolutionApproved) => S::Failed,
        (S::Queued | S::Active, E::Pause) => S::Paused,
        (S::Paused, E::Resume) => S::Queued,
        (live, E::Stop) if live.is_live() => S::Stopped,
        // A dispatched job is terminal for the scheduler (never claimed again); the reply of
        // the runtime it went to completes it (issue 32 item 3).
        (S::Dispatched, E::RuntimeReplied) => S::Completed,
        // A final reply that reports an error fails the run: the job fails, never completes.
        (S::Dispatched, E::Fail { .. }) => S::Failed,
        (S::Queued | S::Active, E::RuntimeReplied) => S::Queued,
        (S::Paused, E::RuntimeReplied) => S::Paused,
        _ => return Err(IllegalTransition { from, event }),
    };
    Ok(to)
}

/// A change to a job, with the data its effects need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A tick claimed it (the store's claim does this in SQL; kept here for the table's tests).
    Claim,
    /// The run succeeded with this diagnostic result.
    Complete {
        /// The run's result or trace (cut to 4000 characters).
        result: String,
    },
    /// The run handed the job to an external runtime.
    Dispatch {
        /// What `last_result` records about the dispatch.
        note: String,
    },
    /// The run failed.
    Fail {
        /// Why.
        reason: FailureReason,
        /// A short detail, or empty.
        detail: String,
    },
    /// The run parked on a review (the review records are set by the caller).
    Park,
    /// The first decision on the review was claimed.
    ReviewClaimed {
        /// Approve (else deny).
        approved: bool,
    },
    /// The review window passed.
    ReviewExpired,
    /// The review's resolution was committed.
    ResolutionCommitted,
    /// A stale resolution whose decision was deny.
    StaleResolutionDenied,
    /// A stale resolution whose decision was approve.
    StaleResolutionApproved,
    /// Pause.
    Pause,
    /// Resume.
    Resume,
    /// Stop.
    Stop,
    /// The runtime the latest run was dispatched to replied with this text.
    RuntimeReplied {
        /// The reply (cut to 4000 characters for `last_result`).
        reply: String,
    },
}

impl Change {
    /// The table's event for this change on `row`.
    pub fn event(&self, row: &StoredJob) -> JobEvent {
        match self {
            Change::Claim => JobEvent::Claim,
            Change::Complete { .. } => JobEvent::Succeed {
                recurring: row.job.is_recurring(),
            },
            Change::Dispatch { .. } => JobEvent::Dispatch {
                recurring: row.job.is_recurring(),
            },
            Change::Fail { .. } => JobEvent::Fail {
                terminal: row.job.failure_count.saturating_add(1) >= TERMINAL_FAILURES,
            },
            Change::Park => JobEvent::Park,
            Change::ReviewClaimed { .. } => JobEvent::ReviewClaimed,
            Change::ReviewExpired => JobEvent::ReviewExpired,
            Change::ResolutionCommitted => JobEvent::ResolutionCommitted,
            Change::StaleResolutionDenied => JobEvent::StaleResolutionDenied,
            Change::StaleResolutionApproved => JobEvent::StaleResolutionApproved,
            Change::Pause => JobEvent::Pause,
            Change::Resume => JobEvent::Resume,
            Change::Stop => JobEvent::Stop,
            Change::RuntimeReplied { .. } => JobEvent::RuntimeReplied,
        }
    }
}

/// Applies `change` to `row` at `now_ms`: the next record (same `version`: the one it was
/// computed from, for the store's compare-and-set), or the illegal transition.
pub fn apply(
    row: &StoredJob,
    change: &Change,
    now_ms: i64,
) -> Result<StoredJob, IllegalTransition> {
    let to = transition(row.job.status, change.event(row))?;
    let mut next = row.clone();
    let mode = row.job.delivery_mode();
    let job = &mut next.job;
    job.status = to;
    job.updated_at = now_ms;
    job.last_event_at = now_ms;
    match change {
        Change::Claim => {
            job.running_at = now_ms;
            job.phase = JobPhase::Running;
            job.progress_text = "Working".to_owned();
        }
        Change::Complete { result } => {
            end_run(job, now_ms, result);
            job.failure_count = 0;
            job.failure_alert_at = 0;
            clear_review(job);
            job.unread_result = true;
            if to == JobStatus::Queued {
                job.phase = JobPhase::Queued;
                job.progress_text = "Queued".to_owned();
                job.next_run_at = now_ms.saturating_add(job.effective_interval_ms());
            } else {
                job.phase = JobPhase::Completed;
                job.progress_text = "Completed".to_owned();
                job.next_run_at = 0;
            }
            next.delivery_state = Some(mode.initial_state());
        }
        Change::Dispatch { note } => {
            end_run(job, now_ms, note);
            job.failure_count = 0;
            job.failure_alert_at = 0;
            job.unread_result = true;
            if to == JobStatus::Queued {
                job.phase = JobPhase::Queued;
                job.progress_text = "Queued".to_owned();
                job.next_run_at = now_ms.saturating_add(job.effective_interval_ms());
            } else {
                job.phase = JobPhase::WaitingForRuntime;
                job.progress_text = "Sent to runtime".to_owned();
                job.next_run_at = 0;
            }
        }
        Change::Fail { reason, detail } => {
            let failures = job.failure_count.saturating_add(1);
            let text = if detail.trim().is_empty() {
                reason.to_string()
            } else {
                format!("{reason}: {}", detail.trim())
            };
            end_run(job, now_ms, &text);
            job.failure_count = failures;
            if to == JobStatus::Failed {
                job.phase = JobPhase::Failed;
                job.progress_text = "Failed".to_owned();
                job.next_run_at = 0;
                job.unread_result = true;
            } else {
                job.phase = JobPhase::Waiting;
                job.progress_text = "Waiting to retry".to_owned();
                job.next_run_at = now_ms.saturating_add(backoff_ms(failures));
            }
            if failures >= ALERT_FAILURES {
                job.failure_alert_at = now_ms;
                next.delivery_state = Some(mode.initial_state());
            }
        }
        Change::Park => {
            job.running_at = 0;
            job.phase = JobPhase::AwaitingReview;
            job.progress_text = "Waiting for your review".to_owned();
        }
        Change::ReviewClaimed { approved } => {
            job.phase = if *approved {
                JobPhase::ApprovalExecuting
            } else {
                JobPhase::DenialResolving
            };
        }
        Change::ReviewExpired | Change::ResolutionCommitted | Change::StaleResolutionDenied => {
            job.phase = JobPhase::Resuming;
            job.progress_text = "Resuming".to_owned();
            job.next_run_at = now_ms;
        }
        Change::StaleResolutionApproved => {
            job.phase = JobPhase::ReviewResolutionUnknown;
            job.progress_text = "Failed".to_owned();
            job.last_result = REVIEW_INTERRUPTED_RESULT.to_owned();
            job.next_run_at = 0;
            job.unread_result = true;
            // The user is told whatever the delivery mode (§9.10).
            next.delivery_state = Some(DeliveryState::Pending);
        }
        Change::Pause => {
            job.phase = JobPhase::Paused;
            job.progress_text = "Paused".to_owned();
            job.paused_at = now_ms;
        }
        Change::Resume => {
            job.phase = JobPhase::Queued;
            job.progress_text = "Queued".to_owned();
            job.next_run_at = now_ms;
            job.paused_at = 0;
        }
        Change::RuntimeReplied { reply } => {
            end_run(job, now_ms, reply);
            job.unread_result = true;
            if to == JobStatus::Completed {
                job.phase = JobPhase::Completed;
                job.progress_text = "Completed".to_owned();
                job.next_run_at = 0;
            }
            next.delivery_state = Some(mode.initial_state());
        }
        Change::Stop => {
            job.phase = JobPhase::Stopped;
            job.progress_text = "Stopped".to_owned();
            job.next_run_at = 0;
            job.running_at = 0;
            job.paused_at = 0;
            job.unread_result = true;
            clear_review(job);
        }
    }
    Ok(next)
}

/// The end of a run: its time, its result, no longer running.
fn end_run(job: &mut crate::model::AgentJob, now_ms: i64, result: &str) {
    job.last_run_at = now_ms;
    job.running_at = 0;
    job.last_result = truncate_chars(result, LAST_RESULT_MAX_CHARS);
}

/// Empties the review state of a job.
fn clear_review(job: &mut crate::model::AgentJob) {
    job.checkpoint_json = Map::new();
    job.pending_confirmation_id = String::new();
    job.pending_tool_request_json = Map::new();
    job.resume_token = String::new();
}
