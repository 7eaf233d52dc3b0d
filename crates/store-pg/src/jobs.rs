//! [`JobStore`] on PostgreSQL.
//!
//! Stubs until the domain is written: each method answers `StoreError::Backend` "not
//! implemented on PostgreSQL yet".

#![allow(unused_variables, unused_imports)]

use std::path::Path;

use openphone_store::*;
use serde_json::Value;

use crate::PgStore;

fn todo(op: &'static str) -> StoreError {
    StoreError::Backend {
        op,
        id: String::new(),
        detail: "not implemented on PostgreSQL yet".to_owned(),
    }
}

impl JobStore for PgStore {
    fn create_job(&self, new: &NewAgentJob, now_ms: i64, max_jobs: usize) -> Result<StoredJob> {
        Err(todo("jobs.create_job"))
    }

    fn create_job_limited(
        &self,
        new: &NewAgentJob,
        now_ms: i64,
        quota: &JobQuota,
    ) -> Result<StoredJob> {
        Err(todo("jobs.create_job_limited"))
    }

    fn create_jobs(
        &self,
        news: Vec<NewAgentJob>,
        now_ms: i64,
        max_jobs: usize,
    ) -> Result<Vec<StoredJob>> {
        Err(todo("jobs.create_jobs"))
    }

    fn set_job_device(&self, id: i64, device_id: Option<&str>) -> Result<StoredJob> {
        Err(todo("jobs.set_job_device"))
    }

    fn get_job(&self, id: i64) -> Result<Option<StoredJob>> {
        Err(todo("jobs.get_job"))
    }

    fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<StoredJob>> {
        Err(todo("jobs.list_jobs"))
    }

    fn claim_due_jobs(&self, request: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        Err(todo("jobs.claim_due_jobs"))
    }

    fn update_job(&self, next: &StoredJob) -> Result<StoredJob> {
        Err(todo("jobs.update_job"))
    }

    fn finish_job_attempt(&self, next: &StoredJob, finish: &AttemptFinish) -> Result<StoredJob> {
        Err(todo("jobs.finish_job_attempt"))
    }

    fn finish_job_attempt_checked(
        &self,
        next: &StoredJob,
        finish: &AttemptFinish,
    ) -> Result<(StoredJob, Option<RunOutcome>)> {
        Err(todo("jobs.finish_job_attempt_checked"))
    }

    fn close_stale_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        Err(todo("jobs.close_stale_job_run"))
    }

    fn finish_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        Err(todo("jobs.finish_job_run"))
    }

    fn repair_stale_jobs(
        &self,
        selection: &StaleSelection,
        repair: RepairFn,
    ) -> Result<Vec<StoredJob>> {
        Err(todo("jobs.repair_stale_jobs"))
    }

    fn next_job_wake(&self, stale_after_ms: i64) -> Result<Option<i64>> {
        Err(todo("jobs.next_job_wake"))
    }

    fn job_runs(&self, job_id: i64) -> Result<Vec<JobRun>> {
        Err(todo("jobs.job_runs"))
    }

    fn job_run(&self, job_id: i64, attempt: i64) -> Result<Option<JobRun>> {
        Err(todo("jobs.job_run"))
    }

    fn count_jobs(&self) -> Result<u64> {
        Err(todo("jobs.count_jobs"))
    }

    fn undelivered_jobs(&self, since_ms: i64, limit: usize) -> Result<Vec<StoredJob>> {
        Err(todo("jobs.undelivered_jobs"))
    }

    fn dispatched_run(&self, output_ref: &str) -> Result<Option<JobRun>> {
        Err(todo("jobs.dispatched_run"))
    }

    fn jobs_in_review(&self) -> Result<Vec<StoredJob>> {
        Err(todo("jobs.jobs_in_review"))
    }

    fn job_by_confirmation(&self, confirmation_id: &str) -> Result<Option<StoredJob>> {
        Err(todo("jobs.job_by_confirmation"))
    }
}
