//! The read the delivery retry needs (`agent-jobs.md` §4): the jobs whose latest result was
//! not delivered yet (`pending`) or whose delivery failed (`failed`), so the daemon can post
//! the stored outcome again — never by running the job again.

use rusqlite::params;

use super::{DeliveryState, JOB_COLUMNS, StoredJob, job_from_row};
use crate::Store;
use crate::error::Result;
use crate::rows::collect;
use crate::wire::sql_limit;

impl Store {
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
}
