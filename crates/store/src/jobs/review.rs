//! The reads the reviewed background approvals of `agent-jobs.md` §9 need: the jobs parked on
//! a review or applying one, and the job a background confirmation id belongs to. Writes go
//! through the compare-and-set of [`Store::update_job`](crate::JobStore::update_job) / [`Store::finish_job_attempt`](crate::JobStore::finish_job_attempt) like
//! every other job write.

use super::{JOB_COLUMNS, StoredJob, job_from_row};
use crate::SqliteStore;
use crate::error::{Result, SqlContext};
use crate::rows::collect;

impl SqliteStore {
    /// The jobs that hold a review in progress: `awaiting_review` (parked, waiting for the
    /// user) and `waiting` (a decision being applied), by id. Both come from partial indexes,
    /// so a store without reviews answers without reading any job row.
    pub fn jobs_in_review(&self) -> Result<Vec<StoredJob>> {
        const OP: &str = "agent_jobs.in_review";
        let any: bool = self
            .conn()
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM agent_jobs WHERE status = 'awaiting_review') \
                 OR EXISTS (SELECT 1 FROM agent_jobs WHERE status = 'waiting')",
            )
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .ctx(OP, "")?;
        if !any {
            return Ok(Vec::new());
        }
        let mut jobs = collect(
            &self.conn(),
            OP,
            &format!("SELECT {JOB_COLUMNS} FROM agent_jobs WHERE status = 'awaiting_review'"),
            [],
            job_from_row,
        )?;
        jobs.extend(collect(
            &self.conn(),
            OP,
            &format!("SELECT {JOB_COLUMNS} FROM agent_jobs WHERE status = 'waiting'"),
            [],
            job_from_row,
        )?);
        jobs.sort_by_key(|j| j.job.id);
        Ok(jobs)
    }

    /// The job whose `pending_confirmation_id` is `confirmation_id` (an empty id matches
    /// nothing). A background confirmation id names one job: it is a fresh `job-confirm-<uuid>`.
    pub fn job_by_confirmation(&self, confirmation_id: &str) -> Result<Option<StoredJob>> {
        const OP: &str = "agent_jobs.by_confirmation";
        if confirmation_id.is_empty() {
            return Ok(None);
        }
        Ok(collect(
            &self.conn(),
            OP,
            &format!(
                "SELECT {JOB_COLUMNS} FROM agent_jobs WHERE pending_confirmation_id = ?1 \
                 ORDER BY id LIMIT 1"
            ),
            [confirmation_id],
            job_from_row,
        )?
        .into_iter()
        .next())
    }
}
