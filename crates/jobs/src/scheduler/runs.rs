//! A run, from its claim to its persisted report (§7): the runner task with its budget and
//! stop grace, the report persisted with the attempt's fence (completion with the recurring
//! interval, failure with the backoff ladder and the alert, parking on a review), and the
//! repair of stale running jobs (§7.7).

use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Duration;

use openphone_store::{AttemptFinish, ClaimedJob, StaleSelection, StoreError};

use super::{Inner, REPAIR_BATCH, RunSlot, SchedulerEvent, State, WRITE_TRIES, review_ops};
use crate::error::JobsError;
use crate::limits::{ALERT_FAILURES, SUMMARY_MAX_CHARS};
use crate::model::{DeliveryState, JobStatus, RunOutcome, StoredJob, truncate_chars};
use crate::reason::{FailureReason, RUN_BUDGET_EXCEEDED, RUNNER_CANCELLED, RUNNER_PANICKED};
use crate::runner::{RunContext, RunResult, Runners, StopSignal};
use crate::schedule::wake_at;
use crate::transition::{Change, apply};

impl Inner {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn emit(&self, event: SchedulerEvent) {
        {
            let mut lossless = self.lossless.lock().unwrap_or_else(PoisonError::into_inner);
            // A receiver that is gone is forgotten.
            lossless.retain(|tx| tx.send(event.clone()).is_ok());
        }
        // No receiver is not an error.
        let _ = self.events.send(event);
    }

    pub(super) fn retry_later(&self) {
        let at = self
            .clock
            .now_ms()
            .saturating_add(self.config.min_wake_delay_ms);
        self.state().next_wake = Some(at);
    }

    pub(super) fn reschedule_at(&self, now: i64) -> Result<Option<i64>, JobsError> {
        let candidate = self.store.next_job_wake(self.config.stale_after_ms)?;
        let mut wake = wake_at(candidate, now, self.config.min_wake_delay_ms);
        if let Some(poll) = self.config.poll_ms {
            let bound = now.saturating_add(poll.max(self.config.min_wake_delay_ms));
            wake = Some(wake.map_or(bound, |at| at.min(bound)));
        }
        self.state().next_wake = wake;
        self.rescheduled.notify_one();
        Ok(wake)
    }

    /// Tells the run of `job_id` to stop (only `attempt`'s, when given).
    pub(super) fn signal_stop(&self, job_id: i64, attempt: Option<i64>) {
        if let Some(slot) = self.state().runs.get(&job_id)
            && attempt.is_none_or(|a| a == slot.attempt)
        {
            slot.stop.stop();
        }
    }

    /// Repairs stale running jobs as failures (§7.7): those older than the threshold (or
    /// without `running_at`), and with `foreign_to`, every one claimed by another owner.
    pub(super) fn repair(
        &self,
        now: i64,
        foreign_to: Option<String>,
    ) -> Result<Vec<i64>, JobsError> {
        let outcome = if foreign_to.is_some() {
            RunOutcome::Interrupted
        } else {
            RunOutcome::TimedOut
        };
        let selection = StaleSelection {
            now_ms: now,
            stale_after_ms: self.config.stale_after_ms,
            foreign_to,
            limit: REPAIR_BATCH,
        };
        let mut repaired_ids = Vec::new();
        loop {
            let repaired = self.store.repair_stale_jobs(&selection, move |row| {
                let change = Change::Fail {
                    reason: FailureReason::StuckRunningRepaired,
                    detail: String::new(),
                };
                let next = apply(row, &change, now).ok()?;
                let finish = AttemptFinish {
                    attempt: row.attempt,
                    owner: row.owner.clone(),
                    outcome,
                    reason: FailureReason::StuckRunningRepaired.to_string(),
                    output_ref: String::new(),
                    finished_at: now,
                };
                Some((next, finish))
            })?;
            let done = repaired.len() < REPAIR_BATCH;
            for row in repaired {
                let attempt = row.attempt;
                self.signal_stop(row.job.id, Some(attempt));
                tracing::warn!(
                    job_id = row.job.id,
                    attempt,
                    "jobs: a stale running job was repaired as a failure"
                );
                repaired_ids.push(row.job.id);
                self.alert_if_due(&row);
                self.emit(SchedulerEvent::Repaired {
                    job: Box::new(row.job),
                    attempt,
                });
            }
            if done {
                return Ok(repaired_ids);
            }
        }
    }

    pub(super) fn alert_if_due(&self, row: &StoredJob) {
        let failures = row.job.failure_count;
        if failures >= ALERT_FAILURES && row.job.failure_alert_at == row.job.updated_at {
            self.emit(SchedulerEvent::FailureAlert {
                job_id: row.job.id,
                failures,
                gave_up: row.job.status == JobStatus::Failed,
                notify: row.delivery_state == Some(DeliveryState::Pending),
            });
        }
    }

    pub(super) fn spawn_run(self: Arc<Self>, claim: ClaimedJob) {
        let (handle, signal) = StopSignal::pair();
        let id = claim.job.job.id;
        let attempt = claim.run.attempt;
        self.state().runs.insert(
            id,
            RunSlot {
                attempt,
                stop: handle,
            },
        );
        if claim.run.catch_up {
            tracing::info!(
                job_id = id,
                intended_at = claim.run.intended_at,
                started_at = claim.run.started_at,
                "jobs: running a job that fell due while the daemon was not running"
            );
        }
        self.emit(SchedulerEvent::Claimed {
            job_id: id,
            attempt,
            intended_at: claim.run.intended_at,
            started_at: claim.run.started_at,
            catch_up: claim.run.catch_up,
        });
        tokio::spawn(async move {
            let ended = self.execute(&claim, signal).await;
            self.finish(&claim, ended);
            {
                let mut state = self.state();
                if state.runs.get(&id).is_some_and(|s| s.attempt == attempt) {
                    state.runs.remove(&id);
                }
            }
            if let Err(error) = self.reschedule_at(self.clock.now_ms()) {
                tracing::warn!(%error, "jobs: rescheduling after a run failed");
                self.retry_later();
            }
            self.run_ended.notify_waiters();
        });
    }

    /// Runs the claimed job under its budget and stop signal.
    async fn execute(&self, claim: &ClaimedJob, signal: StopSignal) -> Ended {
        let job = &claim.job.job;
        let Some(runner) = self.runners.get(job.job_type).cloned() else {
            return Ended::Report(RunResult::failed(Runners::missing_reason(job.job_type)));
        };
        let deadline = claim
            .run
            .started_at
            .saturating_add(self.config.run_budget_ms);
        let ctx = RunContext {
            job: job.clone(),
            attempt: claim.run.attempt,
            deadline_ms: deadline,
            stop: signal.clone(),
            clock: Arc::clone(&self.clock),
        };
        let mut task = tokio::spawn(async move { runner.run(ctx).await });
        let budget = millis(deadline.saturating_sub(self.clock.now_ms()));
        let grace = millis(self.config.stop_grace_ms);
        let mut stop = signal;
        let ended = tokio::select! {
            joined = &mut task => match joined {
                Ok(result) => Ended::Report(result),
                Err(e) if e.is_panic() => {
                    Ended::Report(RunResult::failed(FailureReason::job_error(RUNNER_PANICKED)))
                }
                Err(_) => Ended::Report(RunResult::failed(FailureReason::job_error(RUNNER_CANCELLED))),
            },
            () = tokio::time::sleep(budget) => {
                task.abort();
                Ended::Report(RunResult::failed(FailureReason::job_error(RUN_BUDGET_EXCEEDED)))
            }
            () = async { stop.stopped().await; tokio::time::sleep(grace).await } => {
                task.abort();
                Ended::Aborted
            }
        };
        // The budget is wall-clock time on the injected clock as well: a report that comes
        // after the deadline is a budget failure whatever it says.
        match ended {
            Ended::Report(RunResult::Failed { .. }) | Ended::Aborted => ended,
            Ended::Report(_) if self.clock.now_ms() > deadline => Ended::Report(RunResult::failed(
                FailureReason::job_error(RUN_BUDGET_EXCEEDED),
            )),
            Ended::Report(_) => ended,
        }
    }

    /// Persists a run's end with the attempt's fence, or discards it when the run is no longer
    /// current.
    fn finish(&self, claim: &ClaimedJob, ended: Ended) {
        let id = claim.job.job.id;
        let attempt = claim.run.attempt;
        for _ in 0..WRITE_TRIES {
            let now = self.clock.now_ms();
            let row = match self.store.get_job(id) {
                Ok(row) => row,
                Err(error) => {
                    tracing::warn!(%error, job_id = id, "jobs: reading a finished run's job failed; stale repair will settle it");
                    return;
                }
            };
            let current = row.as_ref().filter(|r| {
                r.job.status == JobStatus::Running
                    && r.attempt == attempt
                    && r.owner == self.config.owner
            });
            let Some(row) = current else {
                self.discard(claim, row.as_ref().map(|r| r.job.status), now);
                return;
            };
            // A parked run: the review is written with the attempt's fence (§9.3); a call that
            // may not be parked, or a failed write, fails the run.
            let park_failure = match &ended {
                Ended::Report(RunResult::Parked { proposal }) => {
                    match self.park(row, attempt, proposal, now) {
                        review_ops::Parking::Parked => return,
                        review_ops::Parking::Conflict => continue,
                        review_ops::Parking::Failed(reason) => Some(reason),
                    }
                }
                _ => None,
            };
            let (change, outcome, reason, output_ref, summary) = match &ended {
                Ended::Report(RunResult::Completed {
                    result,
                    summary,
                    output_ref,
                }) => (
                    Change::Complete {
                        result: result.clone(),
                    },
                    RunOutcome::Succeeded,
                    String::new(),
                    output_ref.clone(),
                    summary
                        .as_deref()
                        .map(|s| truncate_chars(s.trim(), SUMMARY_MAX_CHARS))
                        .filter(|s| !s.is_empty()),
                ),
                // Only a park that could not be written gets here.
                Ended::Report(RunResult::Parked { .. }) => {
                    let reason = park_failure
                        .clone()
                        .unwrap_or_else(|| FailureReason::job_error("review_park_failed"));
                    (
                        Change::Fail {
                            reason: reason.clone(),
                            detail: String::new(),
                        },
                        RunOutcome::Failed,
                        reason.to_string(),
                        String::new(),
                        None,
                    )
                }
                Ended::Report(RunResult::Dispatched { note, output_ref }) => (
                    Change::Dispatch { note: note.clone() },
                    RunOutcome::Dispatched,
                    String::new(),
                    output_ref.clone(),
                    None,
                ),
                Ended::Report(RunResult::Failed { reason, detail }) => {
                    let outcome = if reason == &FailureReason::job_error(RUN_BUDGET_EXCEEDED) {
                        RunOutcome::TimedOut
                    } else {
                        RunOutcome::Failed
                    };
                    (
                        Change::Fail {
                            reason: reason.clone(),
                            detail: detail.clone(),
                        },
                        outcome,
                        reason.to_string(),
                        String::new(),
                        None,
                    )
                }
                Ended::Aborted => (
                    Change::Fail {
                        reason: FailureReason::job_error(RUNNER_CANCELLED),
                        detail: String::new(),
                    },
                    RunOutcome::Cancelled,
                    FailureReason::job_error(RUNNER_CANCELLED).to_string(),
                    String::new(),
                    None,
                ),
            };
            let next = match apply(row, &change, now) {
                Ok(next) => next,
                Err(illegal) => {
                    tracing::error!(%illegal, job_id = id, "jobs: a run's report does not fit the job");
                    return;
                }
            };
            let finish = AttemptFinish {
                attempt,
                owner: self.config.owner.clone(),
                outcome,
                reason,
                output_ref,
                finished_at: now,
            };
            match self.store.finish_job_attempt_checked(&next, &finish) {
                Ok((written, corrected)) => {
                    if let Some(said) = corrected {
                        tracing::warn!(
                            job_id = id,
                            attempt,
                            ledger_said = said.as_str(),
                            outcome = outcome.as_str(),
                            "jobs: a run's ledger row had been ended early while its job still ran it; the run's real end was written over it"
                        );
                    }
                    self.alert_if_due(&written);
                    self.emit(SchedulerEvent::Finished {
                        delivery: written.delivery_state,
                        job: Box::new(written.job),
                        attempt,
                        outcome,
                        summary,
                    });
                    return;
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(error) => {
                    tracing::warn!(%error, job_id = id, "jobs: persisting a run's end failed; stale repair will settle it");
                    return;
                }
            }
        }
        tracing::warn!(
            job_id = id,
            attempt,
            "jobs: a run's end kept losing races; stale repair will settle it"
        );
    }

    /// A report for a run that is no longer current: never applied (no resurrection, §8); its
    /// ledger row is closed if nothing closed it yet.
    fn discard(&self, claim: &ClaimedJob, status: Option<JobStatus>, now: i64) {
        let id = claim.job.job.id;
        let attempt = claim.run.attempt;
        let finish = AttemptFinish {
            attempt,
            owner: self.config.owner.clone(),
            outcome: RunOutcome::Cancelled,
            reason: format!(
                "report discarded: the job is {}",
                status.map_or("gone", JobStatus::as_str)
            ),
            output_ref: String::new(),
            finished_at: now,
        };
        if let Err(error) = self.store.finish_job_run(id, &finish) {
            tracing::warn!(%error, job_id = id, "jobs: closing a discarded attempt failed");
        }
        tracing::info!(
            job_id = id,
            attempt,
            status = status.map_or("gone", JobStatus::as_str),
            "jobs: a run reported after its job moved on; the report was discarded"
        );
        self.emit(SchedulerEvent::Discarded {
            job_id: id,
            attempt,
            status,
        });
    }
}

/// How a run ended.
enum Ended {
    /// The runner reported (or the scheduler reported for it: budget, panic).
    Report(RunResult),
    /// The run was stopped and aborted after the grace period.
    Aborted,
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
