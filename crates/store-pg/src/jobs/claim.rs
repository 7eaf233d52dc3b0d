//! The fleet's side of jobs: claiming due jobs (one statement, `FOR UPDATE SKIP LOCKED`, a lease
//! recorded on each job and ledger row), repairing stale runs (this daemon's, as on SQLite, and
//! every run of a dead daemon), and the next wake of this daemon's scheduler.

use openphone_store::{
    ClaimRequest, ClaimedJob, JobRun, RUNS_KEPT_PER_JOB, RepairFn, Result, RunOutcome,
    StaleSelection, StoredJob,
};
use postgres::Transaction;

use super::lease::{Fence, LEASE_GRACE_MS, LOCKED_LEASES, live_leases, mine};
use super::rows::{JOB_COLUMNS, collect, job_from_row, query_cached, sql_limit};
use super::write::write_in;
use crate::{PgContext, PgStore};

/// A job this daemon may claim: it names one of this daemon's phones (`fleet_devices`), or
/// none. `param` is the placeholder of this daemon's host id.
fn served(param: &str) -> String {
    format!(
        "(device_id IS NULL OR device_id IN \
         (SELECT device_id FROM fleet_devices WHERE host_id = {param}::text))"
    )
}

/// The due jobs this daemon may claim, `$1` now, `$2` this daemon's host id.
fn due() -> String {
    format!(
        "status IN ('queued', 'active') AND next_run_at <= $1 AND {}",
        served("$2")
    )
}

/// The running jobs a repair selects: `$1` the stale threshold, `$2` `foreign_to`, `$3` this
/// daemon's host id, `$4` now (for the lease grace, `lease.rs`). This daemon's own runs (and runs without a lease) by today's rule: started
/// before the threshold, without `running_at`, or (at start-up) claimed by another scheduler
/// instance; and every run of a dead lease (`lease.rs`: its daemon restarted, or lost its host
/// lock and was not seen for the grace). A live other daemon's runs are never selected: that
/// daemon repairs them.
fn stale() -> String {
    format!(
        "status = 'running' AND ( \
           ((lease_owner IS NULL OR (lease_owner, lease_epoch) IN {}) \
            AND (running_at = 0 OR running_at < $1 OR ($2::text IS NOT NULL AND owner <> $2))) \
           OR (lease_owner IS NOT NULL AND (lease_owner, lease_epoch) NOT IN {}))",
        mine("$3"),
        live_leases("$4")
    )
}

/// The first column of the one row an aggregate read returns.
fn first<T: for<'a> postgres::types::FromSql<'a>>(rows: Vec<postgres::Row>) -> Result<T> {
    let row = rows
        .first()
        .ok_or_else(|| openphone_store::StoreError::Backend {
            op: "agent_jobs.read",
            id: String::new(),
            detail: "an aggregate returned no row".to_owned(),
        })?;
    row.try_get(0).ctx("agent_jobs.read", "")
}

impl PgStore {
    pub(super) fn claim_due(&self, request: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        const OP: &str = "agent_jobs.claim";
        if request.limit == 0 {
            return Ok(Vec::new());
        }
        let now = request.now_ms.max(0);
        let me = self.host_id().to_owned();
        // Nothing due (most ticks): answer from a reader, without a write.
        let any: bool = {
            let me = me.clone();
            self.read(OP, &request.owner, move |c| {
                first(query_cached(
                    c,
                    OP,
                    &format!("SELECT EXISTS (SELECT 1 FROM agent_jobs WHERE {})", due()),
                    &[&now, &me],
                )?)
            })?
        };
        if !any {
            return Ok(Vec::new());
        }
        let request = request.clone();
        self.write(OP, &request.owner.clone(), move |tx| {
            claim_in(tx, &request, now, &me)
        })
    }

    pub(super) fn repair_stale(
        &self,
        selection: &StaleSelection,
        repair: RepairFn,
    ) -> Result<Vec<StoredJob>> {
        const OP: &str = "agent_jobs.repair";
        let selection = selection.clone();
        let threshold = selection.now_ms.saturating_sub(selection.stale_after_ms);
        let now = selection.now_ms;
        let me = self.host_id().to_owned();
        // Most ticks find nothing stale: ask a reader first and leave the writer alone then
        // (a row going stale meanwhile is found by the next tick).
        let any: bool = {
            let (me, foreign_to) = (me.clone(), selection.foreign_to.clone());
            self.read(OP, "", move |c| {
                first(query_cached(
                    c,
                    OP,
                    &format!("SELECT EXISTS (SELECT 1 FROM agent_jobs WHERE {})", stale()),
                    &[&threshold, &foreign_to, &me, &now],
                )?)
            })?
        };
        if !any {
            return Ok(Vec::new());
        }
        self.write(OP, "", move |tx| {
            let rows = tx
                .query(
                    &format!(
                        "SELECT {JOB_COLUMNS}, lease_owner, lease_epoch FROM agent_jobs \
                         WHERE {} ORDER BY running_at, id LIMIT $5",
                        stale()
                    ),
                    &[
                        &threshold,
                        &selection.foreign_to,
                        &me,
                        &selection.now_ms,
                        &sql_limit(selection.limit),
                    ],
                )
                .ctx(OP, "")?;
            let mut repaired = Vec::with_capacity(rows.len());
            for row in &rows {
                let job = job_from_row(row)?;
                let lease = Fence::Repair(
                    row.try_get("lease_owner").ctx(OP, "")?,
                    row.try_get("lease_epoch").ctx(OP, "")?,
                );
                if let Some((next, finish)) = repair(&job) {
                    repaired.push(write_in(tx, OP, &next, Some(&finish), &lease)?.0);
                }
            }
            Ok(repaired)
        })
    }

    pub(super) fn next_wake(&self, stale_after_ms: i64) -> Result<Option<i64>> {
        const OP: &str = "agent_jobs.next_wake";
        let me = self.host_id().to_owned();
        let number = |key: &str| {
            format!(
                "CASE WHEN jsonb_typeof(pending_tool_request_json::jsonb -> '{key}') = 'number' \
                 THEN (pending_tool_request_json::jsonb ->> '{key}')::numeric END"
            )
        };
        let sql = format!(
            "SELECT MIN(t) FROM ( \
               SELECT MIN(next_run_at) AS t FROM agent_jobs \
                 WHERE status IN ('queued', 'active') AND {served} \
               UNION ALL SELECT MIN(running_at) + $1 FROM agent_jobs \
                 WHERE status = 'running' \
                 AND (lease_owner IS NULL OR (lease_owner, lease_epoch) IN {mine}) \
               UNION ALL SELECT MIN(CASE WHEN h.started_at_ms = j.lease_epoch \
                   THEN GREATEST(j.running_at, h.last_seen_at_ms + {LEASE_GRACE_MS}) \
                   ELSE j.running_at END) \
                 FROM agent_jobs j LEFT JOIN fleet_hosts h ON h.host_id = j.lease_owner \
                 WHERE j.status = 'running' AND j.lease_owner IS NOT NULL \
                 AND (j.lease_owner, j.lease_epoch) NOT IN {LOCKED_LEASES} \
               UNION ALL SELECT floor(MIN({expires}))::bigint FROM agent_jobs \
                 WHERE status = 'awaiting_review' AND {served} \
               UNION ALL SELECT floor(MIN({reviewed}))::bigint + $1 FROM agent_jobs \
                 WHERE status = 'waiting' AND {served} \
                 AND pending_tool_request_json::jsonb ->> 'review_state' = 'resolving') w",
            served = served("$2"),
            mine = mine("$2"),
            expires = number("expires_at"),
            reviewed = number("reviewed_at"),
        );
        self.read(OP, "", move |c| {
            first(query_cached(c, OP, &sql, &[&stale_after_ms, &me])?)
        })
    }
}

/// The claim itself, one statement: the due jobs this daemon serves, locked with
/// `FOR UPDATE SKIP LOCKED` (a job another daemon is claiming right now is passed over, not
/// waited for), become `running` under this daemon's lease, each with its ledger row, and the
/// ledger's oldest rows beyond [`RUNS_KEPT_PER_JOB`] go. Run at READ COMMITTED, the isolation
/// the queue pattern is made for: the row locks decide who wins a job, and claimers of
/// different daemons never abort each other as SERIALIZABLE's predicate locks would.
fn claim_in(
    tx: &mut Transaction<'_>,
    request: &ClaimRequest,
    now: i64,
    me: &str,
) -> Result<Vec<ClaimedJob>> {
    const OP: &str = "agent_jobs.claim";
    tx.batch_execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .ctx(OP, "")?;
    let sql = format!(
        "WITH due AS (SELECT id FROM agent_jobs WHERE {due} \
                      ORDER BY next_run_at, id LIMIT $3 FOR UPDATE SKIP LOCKED), \
              lease AS (SELECT host_id, started_at_ms FROM fleet_hosts WHERE host_id = $2::text), \
              claimed AS (UPDATE agent_jobs j SET status = 'running', phase = 'running', \
                      progress_text = 'Working', running_at = $1, updated_at = $1, \
                      last_event_at = $1, current_attempt = j.current_attempt + 1, owner = $4, \
                      version = j.version + 1, lease_owner = lease.host_id, \
                      lease_epoch = lease.started_at_ms \
                  FROM due, lease WHERE j.id = due.id AND j.status IN ('queued', 'active') \
                  RETURNING j.*), \
              runs AS (INSERT INTO agent_job_runs (job_id, attempt, intended_at, catch_up, \
                      owner, started_at, finished_at, outcome, reason, output_ref, lease_owner, \
                      lease_epoch) \
                  SELECT id, current_attempt, next_run_at, next_run_at > 0 AND next_run_at < $5, \
                      $4, $1, NULL, 'running', '', '', lease_owner, lease_epoch FROM claimed), \
              trimmed AS (DELETE FROM agent_job_runs r USING claimed c \
                  WHERE r.job_id = c.id AND r.attempt <= c.current_attempt - $6) \
         SELECT {JOB_COLUMNS} FROM claimed",
        due = due(),
    );
    let mut claimed = collect(
        tx,
        OP,
        &sql,
        &[
            &now,
            &me,
            &sql_limit(request.limit),
            &request.owner,
            &request.started_at_ms,
            &RUNS_KEPT_PER_JOB,
        ],
        job_from_row,
    )?;
    claimed.sort_by_key(|j| (j.job.next_run_at, j.job.id));
    Ok(claimed
        .into_iter()
        .map(|job| {
            let intended_at = job.job.next_run_at;
            let run = JobRun {
                job_id: job.job.id,
                attempt: job.attempt,
                intended_at,
                catch_up: intended_at > 0 && intended_at < request.started_at_ms,
                owner: request.owner.clone(),
                started_at: now,
                finished_at: None,
                outcome: RunOutcome::Running,
                reason: String::new(),
                output_ref: String::new(),
            };
            ClaimedJob { job, run }
        })
        .collect())
}
