//! The read the delivery retry needs (`agent-jobs.md` §4): the jobs whose latest result was
//! not delivered yet (`pending`) or whose delivery failed (`failed`), so the daemon can post
//! the stored outcome again — never by running the job again.

use rusqlite::params;

use super::rows::{RUN_COLUMNS, run_from_row};
use super::{DeliveryState, JOB_COLUMNS, JobRun, StoredJob, job_from_row};
use crate::SqliteStore;
use crate::error::Result;
use crate::rows::collect;
use crate::wire::sql_limit;

impl SqliteStore {
    /// At most `limit` jobs whose latest delivery is `pending` or `failed` and whose run ended
    /// at or after `since_ms` (`last_run_at`), oldest first.
    pub fn undelivered_jobs(&self, since_ms: i64, limit: usize) -> Result<Vec<StoredJob>> {
        collect(
            &self.conn(),
            "agent_jobs.undelivered",
            &format!(
                "SELECT {JOB_COLUMNS} FROM agent_jobs \
                 WHERE delivery_state IN (?1, ?2) AND last_run_at >= ?3 AND status != 'running' \
                 ORDER BY last_run_at, id LIMIT ?4"
            ),
            params![
                DeliveryState::Pending.as_str(),
                DeliveryState::Failed.as_str(),
                since_ms,
                sql_limit(limit)
            ],
            job_from_row,
        )
    }

    /// The dispatched attempt whose output reference is `output_ref` (`session:<phone session
    /// id>`, the session a run was dispatched into), the newest if several are.
    pub fn dispatched_run(&self, output_ref: &str) -> Result<Option<JobRun>> {
        let runs = collect(
            &self.conn(),
            "agent_job_runs.dispatched",
            &format!(
                "SELECT {RUN_COLUMNS} FROM agent_job_runs \
                 WHERE output_ref = ?1 AND outcome = 'dispatched' \
                 ORDER BY started_at DESC, job_id DESC LIMIT 1"
            ),
            params![output_ref],
            run_from_row,
        )?;
        Ok(runs.into_iter().next())
    }
}
