//! The scheduler's side of reviewed background approvals (`agent-jobs.md` §9.3–§9.10).
//!
//! - **Parking** (§9.3, [`Inner::park`]): a run that ends `Parked` is checked again
//!   ([`review::prepare`]: eligibility, blocked material, sizes) and its job written
//!   `awaiting_review` with the confirmation record, the checkpoint and the resume token in
//!   **one** compare-and-set from `running`, fenced by the attempt, which also closes the
//!   attempt's ledger row as `parked`. Anything refused, or a failed write, fails the run.
//! - **Claiming** (§9.5, [`Scheduler::resolve_review`]): under the global review lock,
//!   overdue reviews are expired first, then the job holding the tapped id is claimed — its
//!   record `resolving` with the decision and `reviewed_at`, the job `waiting` — with one
//!   compare-and-set. The first tap wins; every later one is answered
//!   `background.review_already_resolved` (or `…_expired`) and changes nothing.
//! - **Carrying out** (§9.6–§9.8): the claimed row passes the 16 checks of
//!   [`review::verify_claim`] or nothing runs (`binding_invalid`); an approval runs only the
//!   stored call, through the [`ReviewExecutor`]; the resolution — record `resolved`,
//!   checkpoint `resume_pending` with the bound result, job `queued`/`resuming` due now — is
//!   committed in one compare-and-set, then audited (§9.14) and announced
//!   ([`SchedulerEvent::ReviewResolved`]). This part runs in its own task: a caller that goes
//!   away does not abandon a claimed review.
//! - **Expiry** (§9.7) and **crash repair** (§9.10) at every tick; at start every unfinished
//!   resolution is repaired at once (a denial is committed as `denied_after_restart`; an
//!   approval becomes `failed` / `review_resolution_unknown` and is never replayed).
//!
//! Records are changed field by field in their stored JSON, never re-serialised from a parsed
//! copy: a tampered record stays exactly as tampered, for verification to reject.

use std::sync::Arc;

use openphone_protocol::{BUILTIN_RUNTIME_ID, ErrorCode, background_job_session};
use openphone_store::{
    AttemptFinish, AuditConfirmation, AuditEntry, AuditKind, Caller as AuditCaller, StoreError,
};
use serde_json::{Map, Value, json};

use super::{Inner, Scheduler, SchedulerEvent, WRITE_TRIES};
use crate::error::JobsError;
use crate::model::{JobStatus, RunOutcome, StoredJob, truncate_chars};
use crate::reason::FailureReason;
use crate::review::executor::NOT_ELIGIBLE;
use crate::review::{
    self, AUDIT_EVENT, AUDIT_SCHEMA, BoundResult, MAX_ID_CHARS, Resolution, ReviewAnswer,
    ReviewDecision, ReviewExecutor, ReviewProposal, ReviewState, STALE_RESOLUTION_MS,
    eligible_command, is_tool_name,
};
use crate::transition::{Change, apply};

/// How parking a run went.
pub(super) enum Parking {
    /// The job is `awaiting_review`.
    Parked,
    /// The row changed since it was read: read it again.
    Conflict,
    /// The run fails with this reason.
    Failed(FailureReason),
}

/// What a tap's claim found.
enum Claim {
    /// Nothing to claim: the answer.
    Answer(ReviewAnswer),
    /// This tap won; the job as the claim wrote it.
    Won(Box<StoredJob>),
}

/// A review resolution to write, with the job's transition.
struct Settle<'a> {
    /// The review.
    confirmation_id: &'a str,
    /// The job's status it must be in.
    from: JobStatus,
    /// The record's `review_state` it must have.
    state: &'a str,
    /// The job's transition.
    change: Change,
    /// How the review ends.
    resolution: Resolution,
    /// What the resumed run gets.
    bound: &'a BoundResult,
}

impl Scheduler {
    /// Installs what executes approved reviews (the daemon: a
    /// [`review::BridgeReviewExecutor`] over its tool bridge). Without one an approval is
    /// resolved with the bound result `background.review_error` / `framework_unavailable`.
    pub fn set_review_executor(&self, executor: Arc<dyn ReviewExecutor>) {
        *self
            .inner
            .review_executor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(executor);
    }

    /// A tap on a background review (§9.5–§9.8): `approve` or deny the review
    /// `confirmation_id`. Only the first tap is carried out; every later one is answered
    /// `background.review_already_resolved` (reason `claim_unavailable`), or
    /// `background.review_expired` when the window had passed, and changes nothing. The
    /// winning tap is verified (§9.6), executed (approve) or recorded (deny), committed, audited
    /// and announced; its answer is `background.review_resolved`, or
    /// `background.review_commit_failed` when the resolution could not be stored (the crash
    /// repair of §9.10 then settles the job). Errors are store failures before the claim.
    pub async fn resolve_review(
        &self,
        confirmation_id: &str,
        approve: bool,
    ) -> Result<ReviewAnswer, JobsError> {
        let inner = &self.inner;
        let decision = ReviewDecision::from_approve(approve);
        inner.refuse_if_on_another_host(confirmation_id)?;
        let claimed = {
            let _reviews = inner.review_lock.lock().await;
            let now = inner.clock.now_ms();
            let expired = inner.expire_reviews(now)?;
            if !expired.is_empty() {
                inner.reschedule_at(now)?;
            }
            match inner.claim(confirmation_id, decision, now)? {
                Claim::Answer(answer) => return Ok(answer),
                Claim::Won(row) => row,
            }
        };
        let carrier = Arc::clone(inner);
        let tapped = confirmation_id.to_owned();
        let task =
            tokio::spawn(async move { carrier.carry_out(*claimed, &tapped, decision).await });
        match task.await {
            Ok(answer) => Ok(answer),
            Err(error) => {
                tracing::error!(%error, confirmation_id, "jobs: carrying out a claimed review failed; the crash repair will settle it");
                Ok(ReviewAnswer::unclaimed(
                    ErrorCode::BackgroundReviewCommitFailed,
                    confirmation_id,
                    None,
                ))
            }
        }
    }
}

impl Inner {
    /// Whether this daemon resolves the reviews of job `job_id`: always alone; in a fleet,
    /// when the job acts on its phones (an unreadable host counts as another's).
    fn resolves_here(&self, job_id: i64) -> bool {
        match self.store.fleet() {
            None => true,
            Some(fleet) => {
                fleet.job_host(job_id).ok().flatten().as_deref() == Some(fleet.host_id())
            }
        }
    }

    /// In a fleet: the review's call would run on this daemon's phone, so only the daemon
    /// whose phone the job acts on decides it (an unknown review is left to the claim).
    fn refuse_if_on_another_host(&self, confirmation_id: &str) -> Result<(), JobsError> {
        let Some(fleet) = self.store.fleet() else {
            return Ok(());
        };
        let Some(job) = self.store.job_by_confirmation(confirmation_id)? else {
            return Ok(());
        };
        match fleet.job_host(job.job.id)? {
            Some(host) if host != fleet.host_id() => Err(JobsError::OnAnotherHost {
                confirmation_id: confirmation_id.to_owned(),
                host,
                here: fleet.host_id().to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// Parks the run of `row` (still `running`, attempt `attempt`) on a review of `proposal`
    /// (§9.3).
    pub(super) fn park(
        &self,
        row: &StoredJob,
        attempt: i64,
        proposal: &ReviewProposal,
        now: i64,
    ) -> Parking {
        let id = row.job.id;
        let prepared = match review::prepare(id, proposal, now) {
            Ok(prepared) => prepared,
            Err(refused) => {
                tracing::warn!(job_id = id, tool = %truncate_chars(&proposal.tool, 80), %refused,
                    "jobs: a run parked a call that cannot be reviewed; the run fails");
                return Parking::Failed(FailureReason::job_error(&format!(
                    "review_{}",
                    refused.as_str()
                )));
            }
        };
        let mut next = match apply(row, &Change::Park, now) {
            Ok(next) => next,
            Err(illegal) => {
                tracing::error!(%illegal, job_id = id, "jobs: a parked run does not fit the job");
                return Parking::Failed(FailureReason::job_error("review_park_failed"));
            }
        };
        next.job.progress_text = prepared.progress_text();
        next.job.pending_confirmation_id = prepared.record.confirmation_id.clone();
        next.job.pending_tool_request_json = prepared.record.to_map();
        next.job.checkpoint_json = prepared.checkpoint.to_map();
        next.job.resume_token = prepared.checkpoint.resume_token.clone();
        let finish = AttemptFinish {
            attempt,
            owner: self.config.owner.clone(),
            outcome: RunOutcome::Parked,
            reason: format!("parked for review {}", prepared.record.confirmation_id),
            output_ref: String::new(),
            finished_at: now,
        };
        match self.store.finish_job_attempt(&next, &finish) {
            Ok(written) => {
                let record = &prepared.record;
                tracing::info!(job_id = id, attempt, confirmation_id = %record.confirmation_id,
                    tool = %record.tool, "jobs: a run parked its job for the user's review");
                self.emit(SchedulerEvent::ReviewRequired {
                    job_id: id,
                    confirmation_id: record.confirmation_id.clone(),
                    title: written.job.title,
                    tool: record.tool.clone(),
                    summary: record.summary.clone(),
                    expires_at: record.expires_at,
                });
                Parking::Parked
            }
            Err(StoreError::Conflict { .. }) => Parking::Conflict,
            Err(error) => {
                tracing::warn!(%error, job_id = id, "jobs: writing a review failed; the run fails");
                Parking::Failed(FailureReason::job_error("review_park_failed"))
            }
        }
    }

    /// Expires every `awaiting_review` job whose window has passed (§9.7): bound result
    /// `background.confirmation_timeout`, the job resumes (not failed, its failure count
    /// unchanged, `unread_result` set). A record without a readable `expires_at` counts as
    /// expired. Returns the jobs expired.
    pub(super) fn expire_reviews(&self, now: i64) -> Result<Vec<i64>, JobsError> {
        let mut expired = Vec::new();
        for row in self.store.jobs_in_review()? {
            if row.job.status != JobStatus::AwaitingReview {
                continue;
            }
            let record = &row.job.pending_tool_request_json;
            if raw_i64(record, "expires_at").is_some_and(|at| now < at) {
                continue;
            }
            let tool = tool_of(record);
            let bound = BoundResult::expired(&tool);
            let settle = Settle {
                confirmation_id: &row.job.pending_confirmation_id,
                from: JobStatus::AwaitingReview,
                state: raw_str(record, "review_state").unwrap_or_default(),
                change: Change::ReviewExpired,
                resolution: Resolution::ApprovalExpired,
                bound: &bound,
            };
            match self.settle(row.job.id, &settle, now) {
                Ok(Some(written)) => {
                    tracing::info!(
                        job_id = row.job.id,
                        "jobs: a review expired; the job resumes without the action"
                    );
                    self.settled(
                        &row,
                        written.job.status,
                        true,
                        Resolution::ApprovalExpired,
                        Some(&bound),
                        now,
                    );
                    expired.push(row.job.id);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, job_id = row.job.id, "jobs: expiring a review failed; retried at the next tick");
                }
            }
        }
        Ok(expired)
    }

    /// Settles `waiting` jobs whose review resolution was left unfinished (§9.10): claimed
    /// more than 10 minutes ago, or — `all`, at daemon start — any (the previous process is
    /// gone). A denial is committed as `denied_after_restart` and the job resumes; an approval
    /// may or may not have run: the job fails (`review_resolution_unknown`), the record is
    /// resolved `result_unknown`, the action is never replayed and the user is told
    /// ([`SchedulerEvent::ReviewResolved`] with `alert`). Returns the jobs settled.
    pub(super) fn repair_resolutions(&self, now: i64, all: bool) -> Result<Vec<i64>, JobsError> {
        let threshold = now.saturating_sub(STALE_RESOLUTION_MS);
        let mut repaired = Vec::new();
        for row in self.store.jobs_in_review()? {
            if row.job.status != JobStatus::Waiting {
                continue;
            }
            let record = &row.job.pending_tool_request_json;
            let state = raw_str(record, "review_state").unwrap_or_default();
            let reviewed_at = raw_i64(record, "reviewed_at").unwrap_or(0);
            // At start every resolution left unfinished is this daemon's to settle — in a
            // fleet only those of its own jobs (only it resolves them); another daemon's may
            // be resolving now and is settled once it is older than a resolution may take.
            let mine = all && self.resolves_here(row.job.id);
            if !mine && state == ReviewState::Resolving.as_str() && reviewed_at >= threshold {
                continue;
            }
            let tool = tool_of(record);
            let denied = raw_str(record, "decision") == Some(ReviewDecision::Denied.as_str());
            let (change, resolution, bound) = if denied {
                (
                    Change::StaleResolutionDenied,
                    Resolution::DeniedAfterRestart,
                    BoundResult::denied(&tool),
                )
            } else {
                (
                    Change::StaleResolutionApproved,
                    Resolution::ResultUnknown,
                    BoundResult::error(
                        ErrorCode::BackgroundReviewInterruptedResultUnknown,
                        None,
                        &tool,
                    ),
                )
            };
            let settle = Settle {
                confirmation_id: &row.job.pending_confirmation_id,
                from: JobStatus::Waiting,
                state,
                change,
                resolution,
                bound: &bound,
            };
            match self.settle(row.job.id, &settle, now) {
                Ok(Some(written)) => {
                    tracing::warn!(job_id = row.job.id, %resolution,
                        "jobs: a review resolution left unfinished was settled");
                    self.settled(
                        &row,
                        written.job.status,
                        true,
                        resolution,
                        Some(&bound),
                        now,
                    );
                    repaired.push(row.job.id);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, job_id = row.job.id, "jobs: settling an unfinished review failed; retried at the next tick");
                }
            }
        }
        Ok(repaired)
    }

    /// A stop (§8) cleared the review `before` held: it ended `job_stopped` (audited and
    /// announced, so its notification is withdrawn).
    pub(super) fn review_stopped(&self, before: &StoredJob, now: i64) {
        let state = raw_str(&before.job.pending_tool_request_json, "review_state");
        if matches!(
            state.and_then(ReviewState::parse),
            Some(ReviewState::Pending | ReviewState::Resolving)
        ) {
            self.settled(
                before,
                JobStatus::Stopped,
                true,
                Resolution::JobStopped,
                None,
                now,
            );
        }
    }

    /// Claims the review `tapped` for `decision` (§9.5 steps 3–5).
    fn claim(&self, tapped: &str, decision: ReviewDecision, now: i64) -> Result<Claim, JobsError> {
        let mut last = None;
        for _ in 0..WRITE_TRIES {
            let Some(row) = self.store.job_by_confirmation(tapped)? else {
                let code = self.unheld_code(tapped)?;
                return Ok(Claim::Answer(ReviewAnswer::unclaimed(code, tapped, None)));
            };
            let id = row.job.id;
            last = Some(id);
            let record = &row.job.pending_tool_request_json;
            if raw_str(record, "review_state") != Some(ReviewState::Pending.as_str())
                || row.job.status != JobStatus::AwaitingReview
            {
                let code = self.gone_code(tapped, raw_str(record, "resolution"))?;
                return Ok(Claim::Answer(ReviewAnswer::unclaimed(
                    code,
                    tapped,
                    Some(id),
                )));
            }
            let approved = decision == ReviewDecision::Approved;
            let mut next = apply(&row, &Change::ReviewClaimed { approved }, now)?;
            let record = &mut next.job.pending_tool_request_json;
            record.insert("review_state".into(), json!(ReviewState::Resolving));
            record.insert("decision".into(), json!(decision.as_str()));
            record.insert("reviewed_at".into(), json!(now));
            match self.store.update_job(&next) {
                Ok(written) => {
                    tracing::info!(
                        job_id = id,
                        confirmation_id = tapped,
                        decision = decision.as_str(),
                        "jobs: a review was claimed"
                    );
                    return Ok(Claim::Won(Box::new(written)));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(JobsError::Contended {
            id: last.unwrap_or_default(),
        })
    }

    /// The answer to a tap on an id no job holds: `job_not_found` (reason `no_such_review`)
    /// when no review with it was ever settled — every settled review is audited under its id
    /// (§9.14) — else as [`Inner::gone_code`]. An unknown id is not "already resolved"
    /// (issue 28).
    fn unheld_code(&self, tapped: &str) -> Result<ErrorCode, JobsError> {
        if self.store.find_audit(&review::audit_id(tapped))?.is_empty() {
            return Ok(ErrorCode::JobNotFound);
        }
        self.gone_code(tapped, None)
    }

    /// The answer to a tap on a review that is no longer pending: expired when it was resolved
    /// as expired (`resolution`, or the review's audit), otherwise already resolved.
    fn gone_code(&self, tapped: &str, resolution: Option<&str>) -> Result<ErrorCode, JobsError> {
        let expired = resolution == Some(Resolution::ApprovalExpired.as_str())
            || self
                .store
                .find_audit(&review::audit_id(tapped))?
                .iter()
                .any(|r| {
                    r.entry
                        .policy_proof
                        .as_ref()
                        .and_then(|p| p.get("resolution"))
                        .and_then(Value::as_str)
                        == Some(Resolution::ApprovalExpired.as_str())
                });
        Ok(if expired {
            ErrorCode::BackgroundReviewExpired
        } else {
            ErrorCode::BackgroundReviewAlreadyResolved
        })
    }

    /// Verifies, executes or denies, commits, audits and announces a claimed review (§9.6–§9.8).
    async fn carry_out(
        self: Arc<Self>,
        claimed: StoredJob,
        tapped: &str,
        decision: ReviewDecision,
    ) -> ReviewAnswer {
        let id = claimed.job.id;
        let tool = tool_of(&claimed.job.pending_tool_request_json);
        let now = self.clock.now_ms();
        let (resolution, bound) = match review::verify_claim(&claimed.job, tapped, decision, now) {
            Err(failure) => {
                tracing::warn!(job_id = id, confirmation_id = tapped, %failure,
                    "jobs: a claimed review failed verification; nothing runs");
                (
                    Resolution::BindingInvalid,
                    BoundResult::review_error(review::executor::BINDING_INVALID, &tool),
                )
            }
            Ok(_) if decision == ReviewDecision::Denied => {
                (Resolution::Denied, BoundResult::denied(&tool))
            }
            Ok(record) => self.execute_approved(&record).await,
        };
        let now = self.clock.now_ms();
        let settle = Settle {
            confirmation_id: tapped,
            from: JobStatus::Waiting,
            state: ReviewState::Resolving.as_str(),
            change: Change::ResolutionCommitted,
            resolution,
            bound: &bound,
        };
        let written = match self.settle(id, &settle, now) {
            Ok(written) => written,
            Err(error) => {
                tracing::warn!(%error, job_id = id, "jobs: committing a review failed; the crash repair will settle it");
                None
            }
        };
        let committed = written.is_some();
        let status = match &written {
            Some(row) => row.job.status,
            None => match self.store.get_job(id) {
                Ok(Some(row)) => row.job.status,
                _ => claimed.job.status,
            },
        };
        self.settled(&claimed, status, committed, resolution, Some(&bound), now);
        if let Err(error) = self.reschedule_at(now) {
            tracing::warn!(%error, "jobs: rescheduling after a review failed");
            self.retry_later();
        }
        ReviewAnswer {
            code: if committed {
                ErrorCode::BackgroundReviewResolved
            } else {
                ErrorCode::BackgroundReviewCommitFailed
            },
            reason: None,
            confirmation_id: tapped.to_owned(),
            job_id: Some(id),
            resolution: Some(resolution),
            result_status: Some(bound.status),
        }
    }

    /// Runs the stored call of a verified approval once (§9.7).
    async fn execute_approved(
        &self,
        record: &review::ConfirmationRecord,
    ) -> (Resolution, BoundResult) {
        if eligible_command(&record.tool, "").is_err() {
            return (
                Resolution::NotEligible,
                BoundResult::review_error(NOT_ELIGIBLE, &record.tool),
            );
        }
        let executor = self
            .review_executor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let Some(executor) = executor else {
            tracing::warn!(
                job_id = record.job_id,
                "jobs: an approved review has no executor"
            );
            return (
                Resolution::Approved,
                BoundResult::review_error(review::executor::FRAMEWORK_UNAVAILABLE, &record.tool),
            );
        };
        match executor.execute(record).await {
            Ok(result) => {
                tracing::info!(job_id = record.job_id, tool = %record.tool, "jobs: an approved background action ran");
                (Resolution::Approved, BoundResult::ok(&record.tool, &result))
            }
            Err(failure) => {
                tracing::warn!(job_id = record.job_id, tool = %record.tool, %failure,
                    "jobs: an approved background action did not run successfully");
                (
                    failure.resolution(),
                    BoundResult::review_error(&failure.reason, &record.tool),
                )
            }
        }
    }

    /// Writes a review's resolution and the job's transition in one compare-and-set (§9.8):
    /// record `resolved` with the resolution and `resolved_at`; checkpoint `resume_pending`
    /// with the resolution, the bound result and `resolved_at`. `None` when the job moved on
    /// (another status, another review, another record state): nothing written.
    fn settle(&self, id: i64, s: &Settle<'_>, now: i64) -> Result<Option<StoredJob>, JobsError> {
        for _ in 0..WRITE_TRIES {
            let Some(row) = self.store.get_job(id)? else {
                return Ok(None);
            };
            let record = &row.job.pending_tool_request_json;
            if row.job.status != s.from
                || row.job.pending_confirmation_id != s.confirmation_id
                || raw_str(record, "review_state").unwrap_or_default() != s.state
            {
                return Ok(None);
            }
            let Ok(mut next) = apply(&row, &s.change, now) else {
                return Ok(None);
            };
            if s.change == Change::ReviewExpired {
                next.job.unread_result = true;
            }
            let record = &mut next.job.pending_tool_request_json;
            record.insert("review_state".into(), json!(ReviewState::Resolved));
            record.insert("resolution".into(), json!(s.resolution.as_str()));
            record.insert("resolved_at".into(), json!(now));
            let checkpoint = &mut next.job.checkpoint_json;
            if !checkpoint.is_empty() {
                checkpoint.insert("resume_pending".into(), json!(true));
                checkpoint.insert("review_resolution".into(), json!(s.resolution.as_str()));
                checkpoint.insert("tool_result".into(), json!(s.bound.text));
                checkpoint.insert("resolved_at".into(), json!(now));
            }
            match self.store.update_job(&next) {
                Ok(written) => return Ok(Some(written)),
                Err(StoreError::Conflict { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(JobsError::Contended { id })
    }

    /// The audit record of a settled review (§9.14: digests and lifecycle data, never the
    /// params) and its event.
    fn settled(
        &self,
        before: &StoredJob,
        job_status: JobStatus,
        committed: bool,
        resolution: Resolution,
        bound: Option<&BoundResult>,
        now: i64,
    ) {
        let job = &before.job;
        let record = &job.pending_tool_request_json;
        let confirmation_id = job.pending_confirmation_id.clone();
        let session = background_job_session(job.id);
        let tool = tool_of(record);
        let idempotency_key = raw_str(record, "idempotency_key")
            .map(|k| truncate_chars(k, MAX_ID_CHARS))
            .unwrap_or_default();
        let result_status = bound.map(|b| b.status.clone());
        let checkpoint_committed = committed && bound.is_some();
        let payload = json!({
            "schema": AUDIT_SCHEMA,
            "job_id": job.id,
            "confirmation_id": confirmation_id,
            "runtime": BUILTIN_RUNTIME_ID,
            "phone_session_id": session,
            "tool": tool,
            "params_digest": digest_of(record, "params_digest"),
            "binding_digest": digest_of(record, "binding_digest"),
            "idempotency_key": idempotency_key,
            "resolution": resolution.as_str(),
            "result_status": result_status,
            "checkpoint_committed": checkpoint_committed,
            "resolved_at": now,
        });
        let entry = AuditEntry {
            audit_id: review::audit_id(&confirmation_id),
            kind: AuditKind::BackgroundEvent,
            at_ms: now,
            runtime: BUILTIN_RUNTIME_ID.to_owned(),
            caller: AuditCaller {
                runtime: BUILTIN_RUNTIME_ID.to_owned(),
                transport: "internal".to_owned(),
                principal: self.config.owner.clone(),
            },
            phone_session_id: Some(session.clone()),
            runtime_session_id: Some(session),
            request_id: confirmation_id.clone(),
            idempotency_key: (!idempotency_key.is_empty()).then(|| idempotency_key.clone()),
            tool: Some(AUDIT_EVENT.to_owned()),
            policy_proof: Some(payload),
            confirmation_id: Some(confirmation_id.clone()),
            confirmation: audit_confirmation(resolution),
            ..AuditEntry::default()
        };
        if let Err(error) = self.store.append_audit(&entry) {
            tracing::error!(%error, job_id = job.id, %resolution, "jobs: the audit record of a review could not be written");
        }
        self.emit(SchedulerEvent::ReviewResolved {
            job_id: job.id,
            confirmation_id,
            title: job.title.clone(),
            tool,
            resolution,
            result_status,
            job_status,
            committed,
            alert: resolution == Resolution::ResultUnknown,
        });
    }
}

/// The audit record's `confirmation` for a resolution.
fn audit_confirmation(resolution: Resolution) -> Option<AuditConfirmation> {
    match resolution {
        Resolution::Approved => Some(AuditConfirmation::Approved),
        Resolution::Denied | Resolution::DeniedAfterRestart => Some(AuditConfirmation::Denied),
        Resolution::ApprovalExpired => Some(AuditConfirmation::Timeout),
        Resolution::ResultUnknown => Some(AuditConfirmation::ResultUnknown),
        Resolution::BindingInvalid | Resolution::NotEligible | Resolution::JobStopped => None,
    }
}

fn raw_str<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

fn raw_i64(map: &Map<String, Value>, key: &str) -> Option<i64> {
    map.get(key).and_then(Value::as_i64)
}

/// The record's model-tool name when it has the form of one, else empty (a tampered value is
/// never copied into a result or the audit).
fn tool_of(record: &Map<String, Value>) -> String {
    raw_str(record, "tool")
        .filter(|t| is_tool_name(t))
        .unwrap_or_default()
        .to_owned()
}

/// A digest of the record when it has the form of one (64 lowercase hex), else empty.
fn digest_of(record: &Map<String, Value>, key: &str) -> String {
    raw_str(record, key)
        .filter(|d| d.len() == 64 && d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .unwrap_or_default()
        .to_owned()
}
