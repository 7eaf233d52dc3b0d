//! [`JobStore`] on PostgreSQL: background agent jobs and their attempt ledger, shared by a fleet
//! of daemons (issue 35). The same records, rules, errors and order as the SQLite store
//! (`openphone_store`'s `jobs` module); the tables are in `schema/jobs.sql`.
//!
//! What a fleet adds:
//!
//! - **Claims** (`claim.rs`): one statement with `FOR UPDATE SKIP LOCKED`, so daemons claiming
//!   at once never win the same job and never wait on each other's rows. A claim records the
//!   lease on the job and its ledger row: `lease_owner` = this daemon's `host_id`,
//!   `lease_epoch` = its incarnation (`fleet_hosts.started_at_ms`).
//! - **Fencing** (`lease.rs`, `write.rs`): every write of a claimed run names that lease in its
//!   `WHERE`; a daemon whose run was taken over (repaired by another daemon, or claimed again)
//!   gets [`StoreError::Conflict`] and writes nothing.
//! - **Repair**: this daemon's stale runs as on SQLite, and every run of a dead daemon (its
//!   host lock not held, or restarted since it claimed) at once; a live daemon's runs are its
//!   own to repair.
//! - **Phones belong to hosts**: [`PgStore::register_devices`] records the phones this daemon
//!   serves (`fleet_devices`); it claims, and wakes for, only the jobs naming one of them or
//!   naming none. Jobs also record the daemon that created them (`host_id`).

mod claim;
mod lease;
mod rows;
mod write;

pub(crate) use write::{create_limited_in, lock_for_create};

use openphone_clock::{Clock, SystemClock};
use openphone_store::*;

use crate::{PgContext, PgStore};
use lease::Fence;
use rows::{
    JOB_COLUMNS, RUN_COLUMNS, TERMINAL_SQL, collect, get_in, job_from_row, run_from_row, sql_limit,
};
use write::{close_stale_run_in, finish_run_in, run_lease_refusal, write_in};

impl PgStore {
    /// Records the phones this daemon serves (its `[[devices]]` ids), replacing what it
    /// recorded before: from now on this daemon claims (and wakes for) the jobs naming one of
    /// them, and the jobs naming no phone; a job naming a phone of another host is that host's.
    /// The daemon calls it once after opening the store (and again if its phones change). An
    /// empty id is refused.
    pub fn register_devices(&self, ids: &[String]) -> Result<()> {
        const OP: &str = "fleet_devices.register";
        if let Some(bad) = ids.iter().find(|id| id.trim().is_empty()) {
            return Err(StoreError::Invalid {
                what: "device id",
                detail: format!("{bad:?} is empty: a device id names a phone"),
            });
        }
        let ids = ids.to_vec();
        let me = self.host_id().to_owned();
        let now_ms = SystemClock.now_ms();
        self.write(OP, &me.clone(), move |tx| {
            tx.execute(
                "DELETE FROM fleet_devices WHERE host_id = $1 AND NOT (device_id = ANY($2))",
                &[&me, &ids],
            )
            .ctx(OP, &me)?;
            tx.execute(
                "INSERT INTO fleet_devices (host_id, device_id, registered_at_ms) \
                 SELECT $1, d, $3 FROM unnest($2::text[]) AS d ON CONFLICT DO NOTHING",
                &[&me, &ids, &now_ms],
            )
            .ctx(OP, &me)?;
            Ok(())
        })
    }

    /// The phones this daemon serves, as [`PgStore::register_devices`] recorded them, by id.
    pub fn registered_devices(&self) -> Result<Vec<String>> {
        const OP: &str = "fleet_devices.list";
        let me = self.host_id().to_owned();
        self.read(OP, &me.clone(), move |c| {
            Ok(c.query(
                "SELECT device_id FROM fleet_devices WHERE host_id = $1 ORDER BY device_id",
                &[&me],
            )
            .ctx(OP, &me)?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })
    }

    /// The daemons of job `id`, for fleet views (PostgreSQL only: the [`JobStore`] trait has
    /// no host): the one that created it, and the one whose lease its latest run holds or held
    /// (`None` before its first claim). `None`: no such job.
    pub fn job_hosts(&self, id: i64) -> Result<Option<(String, Option<String>)>> {
        const OP: &str = "agent_jobs.hosts";
        self.read(OP, &id.to_string(), move |c| {
            c.query_opt(
                "SELECT host_id, lease_owner FROM agent_jobs WHERE id = $1",
                &[&id],
            )
            .ctx(OP, &id.to_string())?
            .map(|row| {
                let created: String = row.try_get(0).ctx(OP, &id.to_string())?;
                let lease: Option<String> = row.try_get(1).ctx(OP, &id.to_string())?;
                Ok((created, lease))
            })
            .transpose()
        })
    }

    fn read_jobs(
        &self,
        op: &'static str,
        sql: String,
        params: Vec<Box<dyn postgres::types::ToSql + Sync + Send>>,
    ) -> Result<Vec<StoredJob>> {
        self.read(op, "", move |c| {
            let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                params.iter().map(|p| &**p as _).collect();
            collect(c, op, &sql, &refs, job_from_row)
        })
    }
}

impl JobStore for PgStore {
    fn create_job(&self, new: &NewAgentJob, now_ms: i64, max_jobs: usize) -> Result<StoredJob> {
        self.create_job_limited(new, now_ms, &JobQuota::for_max(max_jobs))
    }

    fn create_job_limited(
        &self,
        new: &NewAgentJob,
        now_ms: i64,
        quota: &JobQuota,
    ) -> Result<StoredJob> {
        let new = new.clone();
        let quota = *quota;
        let me = self.host_id().to_owned();
        self.write("agent_jobs.create", &new.title.clone(), move |tx| {
            let mut created =
                create_limited_in(tx, std::slice::from_ref(&new), now_ms, &quota, &me)?;
            created.pop().ok_or_else(|| StoreError::Backend {
                op: "agent_jobs.create",
                id: new.title.clone(),
                detail: "the insert returned no row".to_owned(),
            })
        })
    }

    fn create_jobs(
        &self,
        news: Vec<NewAgentJob>,
        now_ms: i64,
        max_jobs: usize,
    ) -> Result<Vec<StoredJob>> {
        let me = self.host_id().to_owned();
        self.write("agent_jobs.create", "", move |tx| {
            create_limited_in(tx, &news, now_ms, &JobQuota::for_max(max_jobs), &me)
        })
    }

    fn set_job_device(&self, id: i64, device_id: Option<&str>) -> Result<StoredJob> {
        const OP: &str = "agent_jobs.set_device";
        let device = device_id.map(str::to_owned);
        self.write(OP, &id.to_string(), move |tx| {
            let n = tx
                .execute(
                    "UPDATE agent_jobs SET device_id = $2 WHERE id = $1",
                    &[&id, &device],
                )
                .ctx(OP, &id.to_string())?;
            if n == 0 {
                return Err(rows::not_found(id));
            }
            get_in(tx, OP, id)?.ok_or_else(|| rows::not_found(id))
        })
    }

    fn get_job(&self, id: i64) -> Result<Option<StoredJob>> {
        self.read("agent_jobs.get", &id.to_string(), move |c| {
            get_in(c, "agent_jobs.get", id)
        })
    }

    fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<StoredJob>> {
        let statuses: Vec<String> = filter
            .statuses
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect();
        let statuses = (!statuses.is_empty()).then_some(statuses);
        let text = filter
            .text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        self.read_jobs(
            "agent_jobs.list",
            format!(
                "SELECT {JOB_COLUMNS} FROM agent_jobs \
                 WHERE ($1::text[] IS NULL OR status = ANY($1)) \
                 AND ($2::text IS NULL OR type = $2) \
                 AND ($3::text IS NULL OR position(lower($3) IN lower(title)) > 0 \
                      OR position(lower($3) IN lower(prompt)) > 0) \
                 AND ($5::text IS NULL OR created_by = $5) \
                 ORDER BY status IN {TERMINAL_SQL}, \
                    CASE WHEN status IN {TERMINAL_SQL} THEN -updated_at ELSE next_run_at END, \
                    CASE WHEN status IN {TERMINAL_SQL} THEN -id ELSE id END \
                 LIMIT $4"
            ),
            vec![
                Box::new(statuses),
                Box::new(filter.job_type.map(|t| t.as_str().to_owned())),
                Box::new(text),
                Box::new(filter.limit.map(sql_limit)),
                Box::new(filter.created_by.clone()),
            ],
        )
    }

    fn claim_due_jobs(&self, request: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        self.claim_due(request)
    }

    fn update_job(&self, next: &StoredJob) -> Result<StoredJob> {
        let next = next.clone();
        let lease = Fence::Progress(self.host_id().to_owned());
        self.write("agent_jobs.update", &next.job.id.to_string(), move |tx| {
            write_in(tx, "agent_jobs.update", &next, None, &lease).map(|(written, _)| written)
        })
    }

    fn finish_job_attempt(&self, next: &StoredJob, finish: &AttemptFinish) -> Result<StoredJob> {
        self.finish_job_attempt_checked(next, finish)
            .map(|(written, _)| written)
    }

    fn finish_job_attempt_checked(
        &self,
        next: &StoredJob,
        finish: &AttemptFinish,
    ) -> Result<(StoredJob, Option<RunOutcome>)> {
        let next = next.clone();
        let finish = finish.clone();
        let lease = Fence::Finish(self.host_id().to_owned());
        self.write("agent_jobs.finish", &next.job.id.to_string(), move |tx| {
            write_in(tx, "agent_jobs.finish", &next, Some(&finish), &lease)
        })
    }

    fn close_stale_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        const OP: &str = "agent_job_runs.close_stale";
        let finish = finish.clone();
        let me = self.host_id().to_owned();
        self.write(OP, &job_id.to_string(), move |tx| {
            close_stale_run_in(tx, OP, job_id, &finish, &me)
        })
    }

    fn finish_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        const OP: &str = "agent_job_runs.finish";
        let finish = finish.clone();
        let me = self.host_id().to_owned();
        self.write(OP, &job_id.to_string(), move |tx| {
            let lease = Fence::Finish(me.clone());
            if finish_run_in(tx, OP, job_id, &finish, &lease)? {
                return Ok(true);
            }
            run_lease_refusal(tx, OP, job_id, &finish, &me)?;
            Ok(false)
        })
    }

    fn repair_stale_jobs(
        &self,
        selection: &StaleSelection,
        repair: RepairFn,
    ) -> Result<Vec<StoredJob>> {
        self.repair_stale(selection, repair)
    }

    fn next_job_wake(&self, stale_after_ms: i64) -> Result<Option<i64>> {
        self.next_wake(stale_after_ms)
    }

    fn job_runs(&self, job_id: i64) -> Result<Vec<JobRun>> {
        const OP: &str = "agent_job_runs.list";
        self.read(OP, &job_id.to_string(), move |c| {
            collect(
                c,
                OP,
                &format!(
                    "SELECT {RUN_COLUMNS} FROM agent_job_runs WHERE job_id = $1 ORDER BY attempt"
                ),
                &[&job_id],
                run_from_row,
            )
        })
    }

    fn job_run(&self, job_id: i64, attempt: i64) -> Result<Option<JobRun>> {
        const OP: &str = "agent_job_runs.get";
        self.read(OP, &job_id.to_string(), move |c| {
            Ok(collect(
                c,
                OP,
                &format!(
                    "SELECT {RUN_COLUMNS} FROM agent_job_runs WHERE job_id = $1 AND attempt = $2"
                ),
                &[&job_id, &attempt],
                run_from_row,
            )?
            .into_iter()
            .next())
        })
    }

    fn count_jobs(&self) -> Result<u64> {
        const OP: &str = "agent_jobs.count";
        self.read(OP, "", |c| {
            let n: i64 = c
                .query_one("SELECT COUNT(*) FROM agent_jobs", &[])
                .ctx(OP, "")?
                .get(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn undelivered_jobs(&self, since_ms: i64, limit: usize) -> Result<Vec<StoredJob>> {
        self.read_jobs(
            "agent_jobs.undelivered",
            format!(
                "SELECT {JOB_COLUMNS} FROM agent_jobs \
                 WHERE delivery_state IN ($1, $2) AND last_run_at >= $3 AND status <> 'running' \
                 AND COALESCE(lease_owner, host_id) = $5 \
                 ORDER BY last_run_at, id LIMIT $4"
            ),
            vec![
                Box::new(DeliveryState::Pending.as_str()),
                Box::new(DeliveryState::Failed.as_str()),
                Box::new(since_ms),
                Box::new(sql_limit(limit)),
                // A job's outcome is delivered by the daemon that ran it (its phone shows it),
                // never by every daemon of the fleet.
                Box::new(self.host_id().to_owned()),
            ],
        )
    }

    fn dispatched_run(&self, output_ref: &str) -> Result<Option<JobRun>> {
        const OP: &str = "agent_job_runs.dispatched";
        let output_ref = output_ref.to_owned();
        self.read(OP, &output_ref.clone(), move |c| {
            Ok(collect(
                c,
                OP,
                &format!(
                    "SELECT {RUN_COLUMNS} FROM agent_job_runs \
                     WHERE output_ref = $1 AND outcome = 'dispatched' \
                     ORDER BY started_at DESC, job_id DESC LIMIT 1"
                ),
                &[&output_ref],
                run_from_row,
            )?
            .into_iter()
            .next())
        })
    }

    fn jobs_in_review(&self) -> Result<Vec<StoredJob>> {
        self.read_jobs(
            "agent_jobs.in_review",
            format!(
                "SELECT {JOB_COLUMNS} FROM agent_jobs WHERE status = 'awaiting_review' \
                 UNION ALL SELECT {JOB_COLUMNS} FROM agent_jobs WHERE status = 'waiting' \
                 ORDER BY id"
            ),
            Vec::new(),
        )
    }

    fn job_by_confirmation(&self, confirmation_id: &str) -> Result<Option<StoredJob>> {
        if confirmation_id.is_empty() {
            return Ok(None);
        }
        Ok(self
            .read_jobs(
                "agent_jobs.by_confirmation",
                format!(
                    "SELECT {JOB_COLUMNS} FROM agent_jobs WHERE pending_confirmation_id = $1 \
                     ORDER BY id LIMIT 1"
                ),
                vec![Box::new(confirmation_id.to_owned())],
            )?
            .into_iter()
            .next())
    }
}
