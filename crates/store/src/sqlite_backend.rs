//! The SQLite store as a [`StoreBackend`](crate::StoreBackend): each method is the inherent one
//! of [`SqliteStore`] (in the module of its table).

use std::path::Path;

use serde_json::Value;

use crate::backend::*;
use crate::*;

impl SessionStore for SqliteStore {
    fn create_session(&self, new: &NewPhoneSession, now_ms: i64) -> Result<PhoneSession> {
        SqliteStore::create_session(self, new, now_ms)
    }
    fn get_session(&self, phone_session_id: &str) -> Result<Option<PhoneSession>> {
        SqliteStore::get_session(self, phone_session_id)
    }
    fn update_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        SqliteStore::update_session_status(self, phone_session_id, status, failure_reason, now_ms)
    }
    fn update_active_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<PhoneSession>> {
        SqliteStore::update_active_session_status(
            self,
            phone_session_id,
            status,
            failure_reason,
            now_ms,
        )
    }
    fn reopen_session(&self, phone_session_id: &str, now_ms: i64) -> Result<Option<PhoneSession>> {
        SqliteStore::reopen_session(self, phone_session_id, now_ms)
    }
    fn set_session_autonomy(
        &self,
        phone_session_id: &str,
        autonomy: Autonomy,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        SqliteStore::set_session_autonomy(self, phone_session_id, autonomy, now_ms)
    }
    fn set_session_device(
        &self,
        phone_session_id: &str,
        device_id: Option<&str>,
    ) -> Result<PhoneSession> {
        SqliteStore::set_session_device(self, phone_session_id, device_id)
    }
    fn set_session_runtime_session_id(
        &self,
        phone_session_id: &str,
        runtime_session_id: &str,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        SqliteStore::set_session_runtime_session_id(
            self,
            phone_session_id,
            runtime_session_id,
            now_ms,
        )
    }
    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<PhoneSession>> {
        SqliteStore::list_sessions(self, filter)
    }
    fn fail_active_sessions(
        &self,
        runtime: &str,
        reason: &str,
        now_ms: i64,
    ) -> Result<Vec<PhoneSession>> {
        SqliteStore::fail_active_sessions(self, runtime, reason, now_ms)
    }
    fn prune_sessions(&self, keep: usize) -> Result<usize> {
        SqliteStore::prune_sessions(self, keep)
    }
    fn append_transcript(
        &self,
        phone_session_id: &str,
        role: &str,
        body: &Value,
        now_ms: i64,
    ) -> Result<TranscriptEntry> {
        SqliteStore::append_transcript(self, phone_session_id, role, body, now_ms)
    }
    fn append_transcript_async<'a>(
        &'a self,
        phone_session_id: &'a str,
        role: &'a str,
        body: &'a Value,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<TranscriptEntry>> {
        Box::pin(SqliteStore::append_transcript_async(
            self,
            phone_session_id,
            role,
            body,
            now_ms,
        ))
    }
    fn transcript(&self, phone_session_id: &str) -> Result<Vec<TranscriptEntry>> {
        SqliteStore::transcript(self, phone_session_id)
    }
}

impl ConfirmationStore for SqliteStore {
    fn insert_pending(
        &self,
        new: &NewConfirmation,
        max_pending_per_runtime: usize,
    ) -> Result<PendingInsert> {
        SqliteStore::insert_pending(self, new, max_pending_per_runtime)
    }
    fn get_confirmation(&self, confirmation_id: &str) -> Result<Option<ConfirmationRecord>> {
        SqliteStore::get_confirmation(self, confirmation_id)
    }
    fn find_pending(
        &self,
        identity: &IdentityKey,
        now_ms: i64,
    ) -> Result<Option<ConfirmationRecord>> {
        SqliteStore::find_pending(self, identity, now_ms)
    }
    fn find_approved(&self, identity: &IdentityKey) -> Result<Option<ConfirmationRecord>> {
        SqliteStore::find_approved(self, identity)
    }
    fn find_joinable(
        &self,
        runtime: &str,
        runtime_session_id: &str,
        tool: &str,
        resolved_since_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<ConfirmationRecord>> {
        SqliteStore::find_joinable(
            self,
            runtime,
            runtime_session_id,
            tool,
            resolved_since_ms,
            now_ms,
        )
    }
    fn list_confirmations(&self, filter: &ConfirmationFilter) -> Result<Vec<ConfirmationRecord>> {
        SqliteStore::list_confirmations(self, filter)
    }
    fn next_pending_expiry(&self) -> Result<Option<i64>> {
        SqliteStore::next_pending_expiry(self)
    }
    fn count_pending(&self, runtime: &str, now_ms: i64) -> Result<usize> {
        SqliteStore::count_pending(self, runtime, now_ms)
    }
    fn resolve(
        &self,
        confirmation_id: &str,
        decision: Resolution,
        resolved_by: &str,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        SqliteStore::resolve(self, confirmation_id, decision, resolved_by, now_ms)
    }
    fn complete(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        SqliteStore::complete(self, confirmation_id, final_result, now_ms)
    }
    fn complete_audited(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
        entry: AuditEntry,
    ) -> Result<ConfirmationRecord> {
        SqliteStore::complete_audited(self, confirmation_id, final_result, now_ms, entry)
    }
    fn attach_final_result(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        SqliteStore::attach_final_result(self, confirmation_id, final_result, now_ms)
    }
    fn expire_due(&self, now_ms: i64) -> Result<Vec<ConfirmationRecord>> {
        SqliteStore::expire_due(self, now_ms)
    }
    fn recover_after_restart(&self, now_ms: i64) -> Result<Recovery> {
        SqliteStore::recover_after_restart(self, now_ms)
    }
}

impl ReplayStore for SqliteStore {
    fn begin_execution(&self, execution: &Execution) -> Result<AuditRecord> {
        SqliteStore::begin_execution(self, execution)
    }
    fn begin_execution_async<'a>(
        &'a self,
        execution: Execution,
    ) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(SqliteStore::begin_execution_async(self, execution))
    }
    fn finish_execution(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        outcome: &AuditEntry,
        now_ms: i64,
    ) -> Result<FinalResult> {
        SqliteStore::finish_execution(self, identity, request_id, result, outcome, now_ms)
    }
    fn finish_execution_async<'a>(
        &'a self,
        identity: IdentityKey,
        request_id: String,
        result: Value,
        outcome: AuditEntry,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<FinalResult>> {
        Box::pin(SqliteStore::finish_execution_async(
            self, identity, request_id, result, outcome, now_ms,
        ))
    }
    fn find_execution(&self, identity: &IdentityKey) -> Result<Option<Execution>> {
        SqliteStore::find_execution(self, identity)
    }
    fn list_executions(&self) -> Result<Vec<Execution>> {
        SqliteStore::list_executions(self)
    }
    fn record_final(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        now_ms: i64,
    ) -> Result<FinalResult> {
        SqliteStore::record_final(self, identity, request_id, result, now_ms)
    }
    fn find_final(&self, identity: &IdentityKey) -> Result<Option<FinalResult>> {
        SqliteStore::find_final(self, identity)
    }
    fn remember_request(
        &self,
        scope: &Scope,
        request_id: &str,
        tool: &str,
        params_digest: &str,
        now_ms: i64,
    ) -> Result<RequestCheck> {
        SqliteStore::remember_request(self, scope, request_id, tool, params_digest, now_ms)
    }
    fn remember_request_async<'a>(
        &'a self,
        scope: &'a Scope,
        request_id: &'a str,
        tool: &'a str,
        params_digest: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<RequestCheck>> {
        Box::pin(SqliteStore::remember_request_async(
            self,
            scope,
            request_id,
            tool,
            params_digest,
            now_ms,
        ))
    }
    fn find_request(&self, scope: &Scope, request_id: &str) -> Result<Option<RequestEntry>> {
        SqliteStore::find_request(self, scope, request_id)
    }
    fn count_final_results(&self) -> Result<usize> {
        SqliteStore::count_final_results(self)
    }
    fn prune_replay(&self, now_ms: i64, retention: Retention) -> Result<PruneReport> {
        SqliteStore::prune_replay(self, now_ms, retention)
    }
}

impl AuditStore for SqliteStore {
    fn append_audit(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        SqliteStore::append_audit(self, entry)
    }
    fn append_audit_async<'a>(&'a self, entry: AuditEntry) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(SqliteStore::append_audit_async(self, entry))
    }
    fn append_audit_relaxed_async<'a>(
        &'a self,
        entry: AuditEntry,
    ) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(SqliteStore::append_audit_relaxed_async(self, entry))
    }
    fn append_audit_proven_async<'a>(
        &'a self,
        entry: AuditEntry,
        proof: Option<AuditProof>,
        durable: bool,
    ) -> BoxFuture<'a, Result<i64>> {
        Box::pin(SqliteStore::append_audit_proven_async(
            self, entry, proof, durable,
        ))
    }
    fn export_audit(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditRecord>> {
        SqliteStore::export_audit(self, after_seq, limit)
    }
    fn find_audit(&self, audit_id: &str) -> Result<Vec<AuditRecord>> {
        SqliteStore::find_audit(self, audit_id)
    }
    fn verify_audit(&self) -> Result<VerifyReport> {
        SqliteStore::verify_audit(self)
    }
    fn audit_head(&self) -> Result<AuditAnchor> {
        SqliteStore::audit_head(self)
    }
    fn verify_audit_anchored(&self, anchors: &[AuditAnchor]) -> Result<AnchoredReport> {
        SqliteStore::verify_audit_anchored(self, anchors)
    }
}

impl ApprovalStore for SqliteStore {
    fn create_approval(&self, new: &NewStandingApproval, now_ms: i64) -> Result<StandingApproval> {
        SqliteStore::create_approval(self, new, now_ms)
    }
    fn get_approval(&self, approval_id: i64) -> Result<Option<StandingApproval>> {
        SqliteStore::get_approval(self, approval_id)
    }
    fn list_approvals(&self, runtime: Option<&str>) -> Result<Vec<StandingApproval>> {
        SqliteStore::list_approvals(self, runtime)
    }
    fn active_approvals(
        &self,
        runtime: &str,
        tool: &str,
        now_ms: i64,
    ) -> Result<Vec<StandingApproval>> {
        SqliteStore::active_approvals(self, runtime, tool, now_ms)
    }
    fn set_approval_enabled(
        &self,
        approval_id: i64,
        enabled: bool,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        SqliteStore::set_approval_enabled(self, approval_id, enabled, now_ms)
    }
    fn revoke_approval(
        &self,
        approval_id: i64,
        revoked_by: &str,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        SqliteStore::revoke_approval(self, approval_id, revoked_by, now_ms)
    }
    fn delete_approval(&self, approval_id: i64) -> Result<bool> {
        SqliteStore::delete_approval(self, approval_id)
    }
    fn get_setting(&self, key: &str) -> Result<Option<Value>> {
        SqliteStore::get_setting(self, key)
    }
    fn set_setting(&self, key: &str, value: &Value, now_ms: i64) -> Result<()> {
        SqliteStore::set_setting(self, key, value, now_ms)
    }
    fn delete_setting(&self, key: &str) -> Result<bool> {
        SqliteStore::delete_setting(self, key)
    }
    fn list_settings(&self) -> Result<Vec<Setting>> {
        SqliteStore::list_settings(self)
    }
}

impl JobStore for SqliteStore {
    fn create_job(&self, new: &NewAgentJob, now_ms: i64, max_jobs: usize) -> Result<StoredJob> {
        SqliteStore::create_job(self, new, now_ms, max_jobs)
    }
    fn create_job_limited(
        &self,
        new: &NewAgentJob,
        now_ms: i64,
        quota: &JobQuota,
    ) -> Result<StoredJob> {
        SqliteStore::create_job_limited(self, new, now_ms, quota)
    }
    fn create_jobs(
        &self,
        news: Vec<NewAgentJob>,
        now_ms: i64,
        max_jobs: usize,
    ) -> Result<Vec<StoredJob>> {
        SqliteStore::create_jobs(self, news, now_ms, max_jobs)
    }
    fn set_job_device(&self, id: i64, device_id: Option<&str>) -> Result<StoredJob> {
        SqliteStore::set_job_device(self, id, device_id)
    }
    fn get_job(&self, id: i64) -> Result<Option<StoredJob>> {
        SqliteStore::get_job(self, id)
    }
    fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<StoredJob>> {
        SqliteStore::list_jobs(self, filter)
    }
    fn claim_due_jobs(&self, request: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        SqliteStore::claim_due_jobs(self, request)
    }
    fn update_job(&self, next: &StoredJob) -> Result<StoredJob> {
        SqliteStore::update_job(self, next)
    }
    fn finish_job_attempt(&self, next: &StoredJob, finish: &AttemptFinish) -> Result<StoredJob> {
        SqliteStore::finish_job_attempt(self, next, finish)
    }
    fn finish_job_attempt_checked(
        &self,
        next: &StoredJob,
        finish: &AttemptFinish,
    ) -> Result<(StoredJob, Option<RunOutcome>)> {
        SqliteStore::finish_job_attempt_checked(self, next, finish)
    }
    fn close_stale_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        SqliteStore::close_stale_job_run(self, job_id, finish)
    }
    fn finish_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool> {
        SqliteStore::finish_job_run(self, job_id, finish)
    }
    fn repair_stale_jobs(
        &self,
        selection: &StaleSelection,
        repair: RepairFn,
    ) -> Result<Vec<StoredJob>> {
        SqliteStore::repair_stale_jobs(self, selection, repair)
    }
    fn next_job_wake(&self, stale_after_ms: i64) -> Result<Option<i64>> {
        SqliteStore::next_job_wake(self, stale_after_ms)
    }
    fn job_runs(&self, job_id: i64) -> Result<Vec<JobRun>> {
        SqliteStore::job_runs(self, job_id)
    }
    fn job_run(&self, job_id: i64, attempt: i64) -> Result<Option<JobRun>> {
        SqliteStore::job_run(self, job_id, attempt)
    }
    fn count_jobs(&self) -> Result<u64> {
        SqliteStore::count_jobs(self)
    }
    fn undelivered_jobs(&self, since_ms: i64, limit: usize) -> Result<Vec<StoredJob>> {
        SqliteStore::undelivered_jobs(self, since_ms, limit)
    }
    fn dispatched_run(&self, output_ref: &str) -> Result<Option<JobRun>> {
        SqliteStore::dispatched_run(self, output_ref)
    }
    fn jobs_in_review(&self) -> Result<Vec<StoredJob>> {
        SqliteStore::jobs_in_review(self)
    }
    fn job_by_confirmation(&self, confirmation_id: &str) -> Result<Option<StoredJob>> {
        SqliteStore::job_by_confirmation(self, confirmation_id)
    }
}

impl GoalStore for SqliteStore {
    fn create_goal(
        &self,
        goal: &StoredGoal,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<StoredGoal> {
        SqliteStore::create_goal(self, goal, transitions, reports)
    }
    fn update_goal_text(
        &self,
        next: GoalText,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<i64> {
        SqliteStore::update_goal_text(self, next, transitions, reports)
    }
    fn goal_version(&self, goal_id: &str) -> Result<Option<i64>> {
        SqliteStore::goal_version(self, goal_id)
    }
    fn get_goal_text(&self, goal_id: &str) -> Result<Option<GoalText>> {
        SqliteStore::get_goal_text(self, goal_id)
    }
    fn get_goal(&self, goal_id: &str) -> Result<Option<StoredGoal>> {
        SqliteStore::get_goal(self, goal_id)
    }
    fn list_goals(&self, states: &[&str], limit: Option<usize>) -> Result<Vec<StoredGoal>> {
        SqliteStore::list_goals(self, states, limit)
    }
    fn goal_transitions(&self, goal_id: &str) -> Result<Vec<GoalTransition>> {
        SqliteStore::goal_transitions(self, goal_id)
    }
    fn goal_reports(&self, goal_id: &str) -> Result<Vec<GoalReport>> {
        SqliteStore::goal_reports(self, goal_id)
    }
    fn pending_goal_reports(&self, limit: usize) -> Result<Vec<GoalReport>> {
        SqliteStore::pending_goal_reports(self, limit)
    }
    fn set_goal_report_delivery(
        &self,
        goal_id: &str,
        seq: i64,
        delivery: ReportDelivery,
        error: &str,
    ) -> Result<()> {
        SqliteStore::set_goal_report_delivery(self, goal_id, seq, delivery, error)
    }
}

impl WatcherStore for SqliteStore {
    fn create_watcher(&self, new: &NewWatcher, now_ms: i64) -> Result<WatcherRecord> {
        SqliteStore::create_watcher(self, new, now_ms)
    }
    fn create_watcher_within(
        &self,
        new: &NewWatcher,
        now_ms: i64,
        max_active: Option<usize>,
    ) -> Result<WatcherRecord> {
        SqliteStore::create_watcher_within(self, new, now_ms, max_active)
    }
    fn count_active_watchers(&self, owner: &str) -> Result<usize> {
        SqliteStore::count_active_watchers(self, owner)
    }
    fn get_watcher(&self, watcher_id: i64) -> Result<Option<WatcherRecord>> {
        SqliteStore::get_watcher(self, watcher_id)
    }
    fn list_watchers(
        &self,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        SqliteStore::list_watchers(self, text, limit)
    }
    fn list_watchers_of(
        &self,
        owner: Option<&str>,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        SqliteStore::list_watchers_of(self, owner, text, limit)
    }
    fn stop_watchers(&self, selector: &WatcherSelector, now_ms: i64) -> Result<Vec<WatcherRecord>> {
        SqliteStore::stop_watchers(self, selector, now_ms)
    }
    fn stop_watchers_of(
        &self,
        owner: Option<&str>,
        selector: &WatcherSelector,
        now_ms: i64,
    ) -> Result<Vec<WatcherRecord>> {
        SqliteStore::stop_watchers_of(self, owner, selector, now_ms)
    }
    fn fire_watcher(&self, new: NewFiring, audit: FiringAudit) -> Result<FireOutcome> {
        SqliteStore::fire_watcher(self, new, audit)
    }
    fn finish_watcher_reaction(
        &self,
        watcher_id: i64,
        firing: i64,
        failed: bool,
        note: &str,
    ) -> Result<bool> {
        SqliteStore::finish_watcher_reaction(self, watcher_id, firing, failed, note)
    }
    fn pending_watcher_reactions(&self) -> Result<Vec<WatcherFiring>> {
        SqliteStore::pending_watcher_reactions(self)
    }
    fn watcher_firings(&self, watcher_id: i64) -> Result<Vec<WatcherFiring>> {
        SqliteStore::watcher_firings(self, watcher_id)
    }
    fn set_watcher_cursor(&self, watcher_id: i64, cursor: &Value) -> Result<bool> {
        SqliteStore::set_watcher_cursor(self, watcher_id, cursor)
    }
    fn end_watcher(
        &self,
        watcher_id: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<Option<WatcherRecord>> {
        SqliteStore::end_watcher(self, watcher_id, reason, now_ms)
    }
}

impl OutcomeStore for SqliteStore {
    fn insert_deferred_outcome(&self, new: &NewDeferredOutcome, now_ms: i64) -> Result<()> {
        SqliteStore::insert_deferred_outcome(self, new, now_ms)
    }
    fn get_deferred_outcome(&self, request_id: &str) -> Result<Option<DeferredOutcome>> {
        SqliteStore::get_deferred_outcome(self, request_id)
    }
    fn list_deferred_outcomes(
        &self,
        runtime: &str,
        states: &[OutcomeState],
    ) -> Result<Vec<DeferredOutcome>> {
        SqliteStore::list_deferred_outcomes(self, runtime, states)
    }
    fn deferred_outcome_known(
        &self,
        request_id: &str,
        outcome: &Value,
        now_ms: i64,
    ) -> Result<bool> {
        SqliteStore::deferred_outcome_known(self, request_id, outcome, now_ms)
    }
    fn move_deferred_outcome(
        &self,
        request_id: &str,
        from: OutcomeState,
        to: OutcomeState,
        note: &str,
        now_ms: i64,
    ) -> Result<bool> {
        SqliteStore::move_deferred_outcome(self, request_id, from, to, note, now_ms)
    }
}

impl MemoryStore for SqliteStore {
    fn save_memory(&self, new: &NewMemory, now_ms: i64) -> Result<MemoryRecord> {
        SqliteStore::save_memory(self, new, now_ms)
    }
    fn get_memory(&self, memory_id: i64) -> Result<Option<MemoryRecord>> {
        SqliteStore::get_memory(self, memory_id)
    }
    fn delete_memory(&self, memory_id: i64) -> Result<bool> {
        SqliteStore::delete_memory(self, memory_id)
    }
    fn search_memory(&self, query: Option<&str>, limit: usize) -> Result<Vec<MemoryHit>> {
        SqliteStore::search_memory(self, query, limit)
    }
}

impl StoreInfo for SqliteStore {
    fn stats(&self) -> Result<StoreStats> {
        SqliteStore::stats(self)
    }
    fn data_dir(&self) -> &Path {
        SqliteStore::data_dir(self)
    }
    fn is_read_only(&self) -> bool {
        SqliteStore::is_read_only(self)
    }
    fn schema_version(&self) -> Result<i64> {
        SqliteStore::schema_version(self)
    }
    fn fts5_available(&self) -> Result<bool> {
        SqliteStore::fts5_available(self)
    }
    fn approvals_generation(&self) -> u64 {
        SqliteStore::approvals_generation(self)
    }
    fn writer_stats(&self) -> WriterStats {
        SqliteStore::writer_stats(self)
    }
}
