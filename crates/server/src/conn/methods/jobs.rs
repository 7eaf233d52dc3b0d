//! `jobs.*` (operator only): background agent jobs as the user sees and steers them
//! (`agent-jobs.md` §8, §9.4, §10). Reads come from the store; every change goes through the
//! scheduler (`openphone-jobs`), which owns the transition table. Creating a job here is the
//! user's own act (no confirmation) and is recorded in the audit log.

use openphone_jobs::{JobRequest, JobsError, Scheduler, StoredJob};
use openphone_protocol::ErrorCode;
use openphone_protocol::endpoint::{
    EndpointErrorCode, ErrorObject, JobEntry, JobIdParams, JobResult, JobRunInfo, JobsCreateParams,
    JobsGetResult, JobsListParams, JobsListResult, JobsReviewParams, JobsReviewResult,
    JobsStopResult, JobsWakeResult, NoParams, ReviewDecision,
};
use openphone_store::{JobFilter, JobStatus};
use serde_json::Value;

use crate::conn::{Conn, internal};

/// Most jobs `jobs.list` returns.
const LIST_MAX: usize = 200;
/// What `jobs.list` returns without a limit.
const LIST_DEFAULT: usize = 20;

fn scheduler(conn: &Conn) -> &Scheduler {
    &conn.state.jobs
}

/// A job error on the endpoint: `not_found`, `invalid_params`, or its own catalogue code.
fn error(e: JobsError) -> ErrorObject {
    let code = match &e {
        JobsError::NotFound(_) => EndpointErrorCode::NotFound,
        JobsError::Invalid(_) => EndpointErrorCode::Catalogue(ErrorCode::InvalidParams),
        JobsError::LimitReached { .. } => EndpointErrorCode::Catalogue(ErrorCode::JobLimitReached),
        JobsError::Illegal(_) | JobsError::Contended { .. } => {
            EndpointErrorCode::Catalogue(ErrorCode::JobStateConflict)
        }
        JobsError::OnAnotherHost { .. } => EndpointErrorCode::Catalogue(ErrorCode::DeviceNotFound),
        _ => return internal(e),
    };
    ErrorObject::new(code, e.to_string())
}

/// A stored job as operators see it.
pub(crate) fn entry(row: &StoredJob) -> Result<JobEntry, ErrorObject> {
    Ok(JobEntry {
        job: row.job.clone(),
        delivery_state: row.delivery_state,
        created_by: row.created_by.clone(),
        host: row.host.clone(),
    })
}

/// `jobs.list {query?, status?, limit?}`.
pub(super) fn list(conn: &Conn, p: JobsListParams) -> Result<JobsListResult, ErrorObject> {
    let statuses = match p.status.as_deref().map(str::trim) {
        None | Some("") => Vec::new(),
        Some(raw) => vec![JobStatus::parse(raw).ok_or_else(|| {
            ErrorObject::new(
                EndpointErrorCode::Catalogue(ErrorCode::InvalidParams),
                format!(
                    "status {raw:?} is not a job status (queued, running, waiting, \
                     awaiting_review, paused, completed, failed, stopped, dispatched)"
                ),
            )
        })?],
    };
    let limit = p.limit.unwrap_or(LIST_DEFAULT);
    if limit == 0 {
        return Err(ErrorObject::new(
            EndpointErrorCode::Catalogue(ErrorCode::InvalidParams),
            "limit must be at least 1",
        ));
    }
    let rows = scheduler(conn)
        .list_filtered(&JobFilter {
            statuses,
            job_type: None,
            text: p.query.filter(|q| !q.trim().is_empty()),
            limit: Some(limit.min(LIST_MAX)),
            created_by: None,
        })
        .map_err(internal)?;
    let jobs = rows.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
    Ok(JobsListResult {
        count: jobs.len(),
        jobs,
    })
}

/// `jobs.get {job_id}`: the record, its delivery state and its attempts.
pub(super) fn get(conn: &Conn, p: JobIdParams) -> Result<JobsGetResult, ErrorObject> {
    let row = scheduler(conn).get(p.job_id).map_err(error)?;
    let runs = scheduler(conn)
        .job_runs(p.job_id)
        .map_err(internal)?
        .into_iter()
        .map(|run| JobRunInfo {
            attempt: run.attempt,
            intended_at: run.intended_at,
            started_at: run.started_at,
            finished_at: run.finished_at.unwrap_or(0),
            outcome: run.finished_at.map(|_| run.outcome),
            reason: run.reason,
            catch_up: run.catch_up,
        })
        .collect();
    Ok(JobsGetResult {
        entry: entry(&row)?,
        runs,
    })
}

/// `jobs.create {…background_job_create arguments}`.
pub(super) fn create(conn: &Conn, p: JobsCreateParams) -> Result<JobResult, ErrorObject> {
    let mut args = p.0;
    args.remove("reason");
    let args = Value::Object(args);
    let request = JobRequest::from_json(&args).map_err(|e| error(e.into()))?;
    // A phone that is not configured is refused with the ids before anything is made.
    if let Some(device) = request.device_id.as_deref() {
        conn.state
            .bridge
            .devices()
            .resolve(Some(device))
            .map_err(|e| ErrorObject::invalid_params(e.to_string()))?;
    }
    conn.state
        .audit_operator_action(&conn.session.caller, "jobs.create", &args)
        .map_err(|e| {
            ErrorObject::new(
                EndpointErrorCode::Catalogue(ErrorCode::AuditUnavailable),
                format!("the audit record could not be written, so no job was created: {e}"),
            )
        })?;
    let row = scheduler(conn).create(&request, None).map_err(error)?;
    Ok(JobResult {
        entry: entry(&row)?,
    })
}

/// `jobs.stop {job_id}`.
pub(super) fn stop(conn: &Conn, p: JobIdParams) -> Result<JobsStopResult, ErrorObject> {
    let outcome = scheduler(conn).stop(p.job_id).map_err(error)?;
    Ok(JobsStopResult {
        entry: entry(&outcome.job)?,
        stopped: outcome.stopped,
    })
}

/// `jobs.pause {job_id}`: only a queued job.
pub(super) fn pause(conn: &Conn, p: JobIdParams) -> Result<JobResult, ErrorObject> {
    let row = scheduler(conn).pause(p.job_id).map_err(error)?;
    Ok(JobResult {
        entry: entry(&row)?,
    })
}

/// `jobs.resume {job_id}`: only a paused job; due at once.
pub(super) fn resume(conn: &Conn, p: JobIdParams) -> Result<JobResult, ErrorObject> {
    let row = scheduler(conn).resume(p.job_id).map_err(error)?;
    Ok(JobResult {
        entry: entry(&row)?,
    })
}

/// `jobs.wake {}`: one tick now.
pub(super) async fn wake(conn: &Conn, _p: NoParams) -> Result<JobsWakeResult, ErrorObject> {
    let report = scheduler(conn).wake().await.map_err(error)?;
    Ok(JobsWakeResult {
        claimed: report.claimed.iter().map(|(id, _)| *id).collect(),
        repaired: report.repaired,
        next_wake_at: report.next_wake,
    })
}

/// `jobs.review {confirmation_id, decision}`: the first tap wins (§9.5); the answer says
/// whether this one was applied.
pub(super) async fn review(
    conn: &Conn,
    p: JobsReviewParams,
) -> Result<JobsReviewResult, ErrorObject> {
    let approve = p.decision == ReviewDecision::Approve;
    let answer = scheduler(conn)
        .resolve_review(&p.confirmation_id, approve)
        .await
        .map_err(error)?;
    Ok(crate::background::review_result(&answer))
}
