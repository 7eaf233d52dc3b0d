//! The job operations (§5, §8): create (against the creator's quota), get, list, stop, pause
//! and resume, each as the [`Asker`] may (a runtime only its own jobs), each rescheduling the
//! next wake; the operator's reads (a filtered list, a job's attempts) and whom a job tool's
//! caller acts for.

use openphone_core::authority::{ActingFor, acting_for};
use openphone_device::DeviceError;
use openphone_policy::Caller;
use openphone_store::{AttemptFinish, StoreError};

use super::{Asker, Scheduler, SchedulerEvent, StopOutcome, WRITE_TRIES};
use crate::error::JobsError;
use crate::limits::{LIST_DEFAULT, LIST_MAX};
use crate::model::{JobFilter, JobRun, JobStatus, RunOutcome, StoredJob};
use crate::transition::{Change, apply};
use crate::validate::{CreateContext, JobRequest, for_creator, normalise};

/// The failure kind of a dispatched run whose runtime's final reply reported an error.
pub const RUNTIME_REPORTED_ERROR: &str = "runtime_reported_error";

impl Scheduler {
    /// Creates a job of the user's (the operator's) from its arguments (§5) and reschedules.
    /// The first run waits for the scheduled wake, which is at least 15 s away (§6.1).
    pub fn create(
        &self,
        request: &JobRequest,
        phone_session_id: Option<&str>,
    ) -> Result<StoredJob, JobsError> {
        self.create_as(request, phone_session_id, &Asker::operator())
    }

    /// [`Scheduler::create`] for `asker`, who becomes the job's creator (`created_by`): a
    /// runtime's job counts against its own quota
    /// ([`SchedulerConfig::quota`](super::SchedulerConfig::quota)) and may not read the user's
    /// main conversation (`for_creator`).
    pub fn create_as(
        &self,
        request: &JobRequest,
        phone_session_id: Option<&str>,
        asker: &Asker,
    ) -> Result<StoredJob, JobsError> {
        let now = self.inner.clock.now_ms();
        let new = normalise(
            request,
            &CreateContext {
                now_ms: now,
                phone_session_id: phone_session_id.map(str::to_owned),
            },
        )?;
        let store = &self.inner.store;
        let session_owner = |id: &str| store.get_session(id).ok().flatten().map(|s| s.runtime_kind);
        let mut new = for_creator(new, request, asker.id(), session_owner)?;
        // Made in one of its own phone sessions by a runtime: its results go back there too
        // (issue 32 item 3, the originating surface).
        if let Some(id) = phone_session_id.map(str::trim).filter(|id| !id.is_empty())
            && asker.id() != openphone_store::OPERATOR_CREATOR
            && session_owner(id).as_deref() == Some(asker.id())
        {
            let origin = crate::model::Origin {
                runtime: asker.id().to_owned(),
                phone_session_id: id.to_owned(),
            };
            new.delivery_json
                .insert(crate::model::ORIGIN_KEY.to_owned(), origin.to_json());
        }
        let mut job = store.create_job_limited(&new, now, &self.inner.config.quota())?;
        if let Some(device) = request.device_id.as_deref() {
            job = store.set_job_device(job.job.id, Some(device))?;
        }
        self.inner.emit(SchedulerEvent::Created {
            job: Box::new(job.job.clone()),
        });
        self.inner.reschedule_at(now)?;
        Ok(job)
    }

    /// One job.
    pub fn get(&self, id: i64) -> Result<StoredJob, JobsError> {
        self.inner.store.get_job(id)?.ok_or(JobsError::NotFound(id))
    }

    /// One job `asker` may see: the user sees every job, a runtime only its own; another's
    /// job is `job_not_found`, exactly like an id that names nothing (ids do not leak).
    pub fn get_as(&self, id: i64, asker: &Asker) -> Result<StoredJob, JobsError> {
        let row = self.get(id)?;
        if asker.sees(&row) {
            Ok(row)
        } else {
            Err(JobsError::NotFound(id))
        }
    }

    /// Jobs whose title or prompt contains `query` (case-insensitive), live first (§10); at
    /// most `limit` (default 20, capped at 50). Reading never moves a due time.
    pub fn list(
        &self,
        query: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<StoredJob>, JobsError> {
        self.list_as(query, limit, &Asker::operator())
    }

    /// [`Scheduler::list`] of the jobs `asker` may see (a runtime: only its own).
    pub fn list_as(
        &self,
        query: Option<&str>,
        limit: Option<usize>,
        asker: &Asker,
    ) -> Result<Vec<StoredJob>, JobsError> {
        let limit = limit.unwrap_or(LIST_DEFAULT).clamp(1, LIST_MAX);
        Ok(self.inner.store.list_jobs(&JobFilter {
            text: query.map(str::to_owned),
            limit: Some(limit),
            created_by: (!asker.is_user()).then(|| asker.id().to_owned()),
            ..JobFilter::default()
        })?)
    }

    /// The jobs `filter` selects, exactly as the store lists them (no cap beyond the filter's
    /// own limit): the operator's `jobs.list`. Reading never moves a due time.
    pub fn list_filtered(&self, filter: &JobFilter) -> Result<Vec<StoredJob>, StoreError> {
        self.inner.store.list_jobs(filter)
    }

    /// The ledger of job `id`: its attempts, oldest first (none for an id that names nothing).
    pub fn job_runs(&self, id: i64) -> Result<Vec<JobRun>, StoreError> {
        self.inner.store.job_runs(id)
    }

    /// For whom `caller` acts in runtime session `runtime_session_id`
    /// ([`openphone_core::authority::acting_for`] over the scheduler's store): `builtin`
    /// doing a job's, goal's or watcher's work acts for its owner; work whose owner cannot be
    /// read is refused (`work_owner_unknown`).
    pub fn acting_for(
        &self,
        caller: &Caller,
        runtime_session_id: &str,
    ) -> Result<ActingFor, DeviceError> {
        acting_for(&self.inner.store, caller, runtime_session_id)
    }

    /// [`Scheduler::stop`] of a job `asker` may see (another's is `job_not_found`).
    pub fn stop_as(&self, id: i64, asker: &Asker) -> Result<StopOutcome, JobsError> {
        self.get_as(id, asker)?;
        self.stop(id)
    }

    /// [`Scheduler::pause`] of a job `asker` may see (another's is `job_not_found`).
    pub fn pause_as(&self, id: i64, asker: &Asker) -> Result<StoredJob, JobsError> {
        self.get_as(id, asker)?;
        self.pause(id)
    }

    /// [`Scheduler::resume`] of a job `asker` may see (another's is `job_not_found`).
    pub fn resume_as(&self, id: i64, asker: &Asker) -> Result<StoredJob, JobsError> {
        self.get_as(id, asker)?;
        self.resume(id)
    }

    /// Stops a job (§8). A live job becomes `stopped` (a run in progress is told to stop and
    /// anything it reports later is discarded; its attempt ends as `cancelled`); a terminal
    /// job is left as it is (`stopped: false`).
    pub fn stop(&self, id: i64) -> Result<StopOutcome, JobsError> {
        let inner = &self.inner;
        for _ in 0..WRITE_TRIES {
            let row = self.get(id)?;
            if row.job.status.is_terminal() {
                return Ok(StopOutcome {
                    job: row,
                    stopped: false,
                });
            }
            let now = inner.clock.now_ms();
            let next = apply(&row, &Change::Stop, now)?;
            let written = if row.job.status == JobStatus::Running {
                inner.store.finish_job_attempt(
                    &next,
                    &AttemptFinish {
                        attempt: row.attempt,
                        owner: row.owner.clone(),
                        outcome: RunOutcome::Cancelled,
                        reason: "stopped".to_owned(),
                        output_ref: String::new(),
                        finished_at: now,
                    },
                )
            } else {
                inner.store.update_job(&next)
            };
            match written {
                Ok(job) => {
                    inner.signal_stop(id, None);
                    inner.review_stopped(&row, now);
                    inner.emit(SchedulerEvent::Stopped { job_id: id });
                    inner.reschedule_at(now)?;
                    return Ok(StopOutcome { job, stopped: true });
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(JobsError::Contended { id })
    }

    /// The reply of `runtime` in `phone_session_id` (its final message there): when a run of
    /// a job was dispatched into that session to that runtime and is still the job's latest
    /// attempt, the reply is saved as the job's result (`last_result`, cut to 4000
    /// characters), a one-shot job completes (`dispatched` → `completed`), and its delivery is
    /// due like a completion's (a [`SchedulerEvent::Finished`] with the reply's summary).
    /// `None` when the session is no dispatched run's, or the job moved on meanwhile.
    pub fn runtime_replied(
        &self,
        runtime: &str,
        phone_session_id: &str,
        reply: &str,
    ) -> Result<Option<StoredJob>, JobsError> {
        self.runtime_finished(runtime, phone_session_id, reply, None)
    }

    /// [`Scheduler::runtime_replied`] for a final message that may report an `error`: with
    /// one, the run failed — the job fails (`dispatched` → `failed`, reason
    /// `job_error:runtime_reported_error` with the runtime's error and any text as detail), a
    /// failure alert is due as for any failure, and nothing is announced as a completion.
    pub fn runtime_finished(
        &self,
        runtime: &str,
        phone_session_id: &str,
        reply: &str,
        error: Option<&str>,
    ) -> Result<Option<StoredJob>, JobsError> {
        let inner = &self.inner;
        let reference = crate::runner::dispatch_ref(phone_session_id);
        let Some(run) = inner.store.dispatched_run(&reference)? else {
            return Ok(None);
        };
        let session_runtime = inner
            .store
            .get_session(phone_session_id)?
            .map(|s| s.runtime_kind);
        if session_runtime.as_deref() != Some(runtime) {
            return Ok(None);
        }
        let reply = reply.trim();
        for _ in 0..WRITE_TRIES {
            let Some(row) = inner.store.get_job(run.job_id)? else {
                return Ok(None);
            };
            if row.attempt != run.attempt {
                return Ok(None);
            }
            let now = inner.clock.now_ms();
            if let Some(error) = error {
                let detail = if reply.is_empty() {
                    error.trim().to_owned()
                } else {
                    format!("{} ({reply})", error.trim())
                };
                let change = Change::Fail {
                    reason: crate::reason::FailureReason::job_error(RUNTIME_REPORTED_ERROR),
                    detail,
                };
                let next = apply(&row, &change, now)?;
                match inner.store.update_job(&next) {
                    Ok(written) => {
                        inner.alert_if_due(&written);
                        inner.emit(SchedulerEvent::Finished {
                            delivery: written.delivery_state,
                            job: Box::new(written.job.clone()),
                            attempt: run.attempt,
                            outcome: RunOutcome::Failed,
                            summary: None,
                        });
                        return Ok(Some(written));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            let next = apply(
                &row,
                &Change::RuntimeReplied {
                    reply: reply.to_owned(),
                },
                now,
            )?;
            match inner.store.update_job(&next) {
                Ok(written) => {
                    let summary = crate::model::truncate_chars(
                        &reply.split_whitespace().collect::<Vec<_>>().join(" "),
                        crate::limits::SUMMARY_MAX_CHARS,
                    );
                    inner.emit(SchedulerEvent::Finished {
                        delivery: written.delivery_state,
                        job: Box::new(written.job.clone()),
                        attempt: run.attempt,
                        outcome: RunOutcome::Succeeded,
                        summary: (!summary.is_empty()).then_some(summary),
                    });
                    return Ok(Some(written));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(JobsError::Contended { id: run.job_id })
    }

    /// Pauses a queued job (§8): it keeps its place but is never due while paused.
    pub fn pause(&self, id: i64) -> Result<StoredJob, JobsError> {
        self.change(id, &Change::Pause)
    }

    /// Resumes a paused job (§8): it is due at once (the next wake, ≥ 15 s away, runs it).
    pub fn resume(&self, id: i64) -> Result<StoredJob, JobsError> {
        self.change(id, &Change::Resume)
    }

    fn change(&self, id: i64, change: &Change) -> Result<StoredJob, JobsError> {
        let inner = &self.inner;
        for _ in 0..WRITE_TRIES {
            let row = self.get(id)?;
            let now = inner.clock.now_ms();
            let next = apply(&row, change, now)?;
            match inner.store.update_job(&next) {
                Ok(job) => {
                    inner.reschedule_at(now)?;
                    return Ok(job);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(JobsError::Contended { id })
    }
}
