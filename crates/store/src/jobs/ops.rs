//! The store's job API ([`Store`] methods): create, read, list, claim due jobs, write, finish
//! attempts, repair stale runs, the next wake and the attempt ledger's reads.

use rusqlite::{OptionalExtension, params};

use super::rows::{JOB_COLUMNS, RUN_COLUMNS, TERMINAL_SQL, get_in, job_from_row, run_from_row};
use super::write::{close_stale_run_in, create_in, create_limited_in, finish_run_in, write_in};
use super::{
    AttemptFinish, ClaimRequest, ClaimedJob, JobFilter, JobQuota, JobRun, JobType, NewAgentJob,
    RUNS_KEPT_PER_JOB, Repair, RunOutcome, StaleSelection, StoredJob,
};
use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::rows::collect;
use crate::wire::sql_limit;
use serde_json::Value;

impl SqliteStore {
    /// Creates one job (`queued`, phase `queued`, progress `Queued`, every other field at its
    /// creation value of §2) with the next id. When the store already holds `max_jobs` jobs,
    /// the oldest terminal ones are deleted to make room; when every job is live the create is
    /// refused with [`StoreError::LimitReached`] (`job_limit_reached`).
    pub fn create_job(&self, new: &NewAgentJob, now_ms: i64, max_jobs: usize) -> Result<StoredJob> {
        self.create_job_limited(new, now_ms, &JobQuota::for_max(max_jobs))
    }

    /// [`Store::create_job`](crate::JobStore::create_job) under `quota`: a job whose creator is a runtime is refused with
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

    /// [`Store::create_job`](crate::JobStore::create_job) for many jobs in one transaction: all are created or none.
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

    /// Names the phone job `id`'s runs act on (`None`: the daemon's only phone). Set once, when
    /// the job is made; it leaves the job's version alone (nothing a run decided changes).
    pub fn set_job_device(&self, id: i64, device_id: Option<&str>) -> Result<StoredJob> {
        const OP: &str = "agent_jobs.set_device";
        let device = device_id.map(str::to_owned);
        self.write(OP, &id.to_string(), move |tx| {
            let n = tx
                .exec_cached(
                    "UPDATE agent_jobs SET device_id = ?2 WHERE id = ?1",
                    params![id, device],
                )
                .ctx(OP, &id.to_string())?;
            if n == 0 {
                return Err(StoreError::NotFound {
                    table: "agent_jobs",
                    id: id.to_string(),
                });
            }
            get_in(tx, OP, id)?.ok_or_else(|| StoreError::NotFound {
                table: "agent_jobs",
                id: id.to_string(),
            })
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
            write_in(tx, "agent_jobs.update", &next, None).map(|(written, _)| written)
        })
    }

    /// [`Store::update_job`](crate::JobStore::update_job) for the end of a run attempt, fenced: the row must also still
    /// be owned by `finish.owner` at `finish.attempt` ([`StoreError::Conflict`] otherwise).
    /// The attempt's ledger row is ended in the same transaction.
    pub fn finish_job_attempt(
        &self,
        next: &StoredJob,
        finish: &AttemptFinish,
    ) -> Result<StoredJob> {
        self.finish_job_attempt_checked(next, finish)
            .map(|(written, _)| written)
    }

    /// [`Store::finish_job_attempt`](crate::JobStore::finish_job_attempt), also saying whether the attempt's ledger row had already
    /// been ended by someone else (`Some(outcome it said)`): the fenced end is the authority on
    /// the attempt its job still names, so that row is corrected to the real end, and the
    /// caller reports the correction.
    pub fn finish_job_attempt_checked(
        &self,
        next: &StoredJob,
        finish: &AttemptFinish,
    ) -> Result<(StoredJob, Option<RunOutcome>)> {
        let next = next.clone();
        let finish = finish.clone();
        self.write("agent_jobs.finish", &next.job.id.to_string(), move |tx| {
            write_in(tx, "agent_jobs.finish", &next, Some(&finish))
        })
    }

    /// Ends the ledger row of an attempt only if its job no longer runs it (the job is not
    /// `running`, or runs another attempt or owner), checked and closed in one statement: an
    /// attempt claimed after the caller read the job is left alone. Returns whether a row was
    /// closed (false: already ended, unknown, or still its job's current run).
    pub fn close_stale_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        let finish = finish.clone();
        self.write(
            "agent_job_runs.close_stale",
            &job_id.to_string(),
            move |tx| close_stale_run_in(tx, "agent_job_runs.close_stale", job_id, &finish),
        )
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
                    repaired.push(write_in(tx, OP, &next, Some(&finish))?.0);
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
