//! The store interface: what the trusted core asks of its durable store, split by domain.
//!
//! Long: the whole interface is one contract, every method documented where it is declared;
//! one trait per domain keeps it navigable.
//!
//! [`StoreBackend`] is every domain trait together; [`crate::Store`] holds one (the SQLite
//! implementation, [`crate::SqliteStore`], or any other given to [`crate::Store::from_backend`],
//! such as the PostgreSQL one in `openphone-store-pg`) and dereferences to it, so callers write
//! `store.create_job(…)` whichever backend runs. The documented behaviour of each method is the
//! contract every implementation keeps; the store's test suite checks it on each.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use serde_json::Value;

use crate::*;

/// A boxed future of the store (the async writes of the tool bridge).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How [`JobStore::repair_stale_jobs`] decides each stale run's repair.
pub type RepairFn = Box<dyn Fn(&StoredJob) -> Option<Repair> + Send + 'static>;

/// The audit record [`WatcherStore::fire_watcher`] writes with a firing, given its ids.
pub type FiringAudit = Box<dyn FnOnce(&FiringIds) -> AuditEntry + Send + 'static>;

/// A daemon of a fleet sharing one store, and where the fleet's phones are.
pub trait Fleet: Send + Sync {
    /// This daemon's id in the fleet (`[store] host_id`).
    fn host_id(&self) -> &str;

    /// Records that this daemon serves the phones `device_ids` (and no others): due jobs
    /// naming one of them are claimed here, and a request for one reaching another daemon is
    /// refused naming this host.
    fn register_devices(&self, device_ids: &[String]) -> Result<()>;

    /// The host serving the phone `device_id`, as last registered (`None`: no daemon serves
    /// it).
    fn host_of_device(&self, device_id: &str) -> Result<Option<String>>;

    /// The daemons of the fleet, each with its phones.
    fn hosts(&self) -> Result<Vec<FleetHost>>;

    /// Whether the goal `goal_id` is this daemon's to work on (it was made here, so its
    /// actions run on this host's phones); an unknown goal is not.
    fn goal_is_here(&self, goal_id: &str) -> Result<bool>;

    /// The active watchers this daemon runs (those made here: they watch its phones), by id.
    fn watchers_here(&self) -> Result<Vec<i64>>;

    /// Marks this daemon seen now (its `last_seen_at_ms`); the daemon calls it on a
    /// housekeeping tick. Default: nothing to mark.
    fn touch(&self) -> Result<()> {
        Ok(())
    }
}

/// One daemon of a fleet, as the shared store knows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FleetHost {
    /// Its `host_id`.
    pub host_id: String,
    /// Its label (`[store] label`, default the host id).
    pub label: String,
    /// When it last started (Unix ms).
    pub started_at_ms: i64,
    /// When it was last seen (Unix ms).
    pub last_seen_at_ms: i64,
    /// Whether it runs now (it holds its host lock on the server).
    pub live: bool,
    /// The phones it serves.
    pub device_ids: Vec<String>,
}

/// Every domain of the store: what [`crate::Store`] holds.
pub trait StoreBackend:
    SessionStore
    + ConfirmationStore
    + ReplayStore
    + AuditStore
    + ApprovalStore
    + JobStore
    + GoalStore
    + WatcherStore
    + OutcomeStore
    + MemoryStore
    + StoreInfo
    + std::fmt::Debug
    + Send
    + Sync
{
}

impl<T> StoreBackend for T where
    T: SessionStore
        + ConfirmationStore
        + ReplayStore
        + AuditStore
        + ApprovalStore
        + JobStore
        + GoalStore
        + WatcherStore
        + OutcomeStore
        + MemoryStore
        + StoreInfo
        + std::fmt::Debug
        + Send
        + Sync
{
}

/// Phone sessions and their transcripts.
pub trait SessionStore {
    /// Creates a phone session in status `created` with `audit_log_id =
    /// phone-session:<phone_session_id>`. Fails with [`StoreError::AlreadyExists`] on a
    /// duplicate id.
    fn create_session(&self, new: &NewPhoneSession, now_ms: i64) -> Result<PhoneSession>;

    /// One session, if it exists.
    fn get_session(&self, phone_session_id: &str) -> Result<Option<PhoneSession>>;

    /// Sets the status (and the failure reason: `Some` sets it, `None` clears it).
    fn update_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<PhoneSession>;

    /// Sets the status (and failure reason) only while the session is still active: a session
    /// that has completed or failed is never moved back by a late message, a streamed delta or
    /// a tool result racing its end (compare-and-set in one statement). `Ok(None)`: it had
    /// already ended, nothing changed. Re-opening a completed session on purpose is
    /// [`SessionStore::update_session_status`].
    fn update_active_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<PhoneSession>>;

    /// Moves a session that has not failed (active, or completed: a follow-up re-opens it) to
    /// `running`, in one compare-and-set. `Ok(None)`: it failed meanwhile (a cancel won).
    fn reopen_session(&self, phone_session_id: &str, now_ms: i64) -> Result<Option<PhoneSession>>;

    /// Sets a session's autonomy (a follow-up asked for a stricter one).
    fn set_session_autonomy(
        &self,
        phone_session_id: &str,
        autonomy: Autonomy,
        now_ms: i64,
    ) -> Result<PhoneSession>;

    /// Binds the session to the phone `device_id` names (`None`: the daemon's only phone).
    fn set_session_device(
        &self,
        phone_session_id: &str,
        device_id: Option<&str>,
    ) -> Result<PhoneSession>;

    /// Records the runtime session key once the adapter knows it.
    fn set_session_runtime_session_id(
        &self,
        phone_session_id: &str,
        runtime_session_id: &str,
        now_ms: i64,
    ) -> Result<PhoneSession>;

    /// Sessions matching the filter, newest first (`created_at_ms` descending).
    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<PhoneSession>>;

    /// Marks every active session of `runtime` as `failed` with `reason` (runtime disconnect,
    /// §2.3) and returns them.
    fn fail_active_sessions(
        &self,
        runtime: &str,
        reason: &str,
        now_ms: i64,
    ) -> Result<Vec<PhoneSession>>;

    /// Drops the oldest sessions beyond the `keep` most recent; `keep` is raised to at least
    /// [`MIN_SESSIONS_RETAINED`]. Returns how many were deleted.
    fn prune_sessions(&self, keep: usize) -> Result<usize>;

    /// Appends one entry to a session's transcript and returns it with its `seq`. The session
    /// must exist ([`StoreError::NotFound`] otherwise); `role` is 1 to
    /// [`MAX_TRANSCRIPT_ROLE_CHARS`] characters of `a-z`, `0-9` and `_`. Durable on return.
    fn append_transcript(
        &self,
        phone_session_id: &str,
        role: &str,
        body: &Value,
        now_ms: i64,
    ) -> Result<TranscriptEntry>;

    /// [`SessionStore::append_transcript`] for async callers: awaits the commit instead of blocking
    /// the thread.
    fn append_transcript_async<'a>(
        &'a self,
        phone_session_id: &'a str,
        role: &'a str,
        body: &'a Value,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<TranscriptEntry>>;

    /// A session's transcript, oldest first (empty for an unknown session).
    fn transcript(&self, phone_session_id: &str) -> Result<Vec<TranscriptEntry>>;
}

/// Durable confirmations (§10.1): one UPDATE decides every transition.
pub trait ConfirmationStore {
    /// Stores a new pending confirmation, atomically with the duplicate and cap checks: a
    /// pending unexpired confirmation with the same identity key wins
    /// ([`PendingInsert::Existing`]); otherwise, if the runtime already has
    /// `max_pending_per_runtime` pending ones, nothing is stored ([`PendingInsert::TooMany`]).
    /// "Now" is `new.created_at_ms`. A duplicate `confirmation_id` is
    /// [`StoreError::AlreadyExists`].
    fn insert_pending(
        &self,
        new: &NewConfirmation,
        max_pending_per_runtime: usize,
    ) -> Result<PendingInsert>;

    /// One confirmation, in whatever state.
    fn get_confirmation(&self, confirmation_id: &str) -> Result<Option<ConfirmationRecord>>;

    /// The pending, unexpired (`now_ms < expires_at_ms`) confirmation for an identity key.
    /// An expired one still marked pending is not returned; run [`ConfirmationStore::expire_due`] first
    /// to settle (and announce) those.
    fn find_pending(
        &self,
        identity: &IdentityKey,
        now_ms: i64,
    ) -> Result<Option<ConfirmationRecord>>;

    /// The confirmations of one runtime session and tool that a retry may join (the bridge's
    /// `retry.rs`): pending and unexpired at `now_ms`, approved (executing), or resolved by a
    /// decision (`completed`, `denied`, `result_unknown`) at or after `resolved_since_ms`;
    /// oldest first. Timed-out ones are not listed. The bridge matches principal, phone
    /// session and parameters itself.
    ///
    /// Read through the `state` index only (the `+` keeps the identity index, whose prefix
    /// would scan every confirmation this session ever made for the tool, out of the plan):
    /// a decided confirmation is resolved before it expires, so `expires_at_ms >
    /// resolved_since_ms` bounds the recent ones.
    fn find_joinable(
        &self,
        runtime: &str,
        runtime_session_id: &str,
        tool: &str,
        resolved_since_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<ConfirmationRecord>>;

    /// Confirmations matching the filter: pending first, then newest first.
    fn list_confirmations(&self, filter: &ConfirmationFilter) -> Result<Vec<ConfirmationRecord>>;

    /// When the first pending confirmation expires (`None`: none is pending): the daemon's
    /// expiry timer sleeps until then instead of polling (issue 34).
    fn next_pending_expiry(&self) -> Result<Option<i64>>;

    /// Pending, unexpired confirmations of one runtime (for the per-runtime cap).
    fn count_pending(&self, runtime: &str, now_ms: i64) -> Result<usize>;

    /// First resolution wins, atomically. Succeeds only from `pending`; `Approve` / `Deny`
    /// additionally need `now_ms < expires_at_ms`. Returns the updated record.
    ///
    /// Losing is [`StoreError::ConfirmationNotPending`] (→ `pending_confirmation_not_found`):
    /// unknown id, already resolved, or expired — in the last case this call has just moved
    /// the confirmation to `timeout` and the error carries that record.
    fn resolve(
        &self,
        confirmation_id: &str,
        decision: Resolution,
        resolved_by: &str,
        now_ms: i64,
    ) -> Result<ConfirmationRecord>;

    /// `approved → completed`: stores the final result on the confirmation and records it for
    /// replay under the confirmation's identity key (first final result wins), in one
    /// transaction. Any other state is [`StoreError::WrongState`].
    fn complete(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord>;

    /// [`ConfirmationStore::complete`] and the audit record of the completion in one transaction: a crash
    /// can never leave an executed, completed confirmation without its record (nor a record
    /// without the completion). Returns the completed record.
    fn complete_audited(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
        entry: AuditEntry,
    ) -> Result<ConfirmationRecord>;

    /// Attaches the final result of a confirmation that ended without executing (`denied`,
    /// `timeout`, `result_unknown`) and records it for replay under its identity key, in one
    /// transaction. The first attached result wins; a confirmation that is `pending`,
    /// `approved` or `completed` is [`StoreError::WrongState`].
    fn attach_final_result(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord>;

    /// Moves every pending confirmation with `expires_at_ms <= now_ms` to `timeout` and returns
    /// them (the caller records their final results and announces them).
    fn expire_due(&self, now_ms: i64) -> Result<Vec<ConfirmationRecord>>;

    /// Start-up repair after a daemon restart: `approved` (outcome unknown) → `result_unknown`,
    /// pending past expiry → `timeout`; pending in time stay pending. Other states untouched.
    fn recover_after_restart(&self, now_ms: i64) -> Result<Recovery>;
}

/// Final results for replay, request ids, direct executions in flight, and their retention.
pub trait ReplayStore {
    /// Marks a direct execution as begun and appends the audit record of its attempt, in one
    /// transaction; call it before the side effect, and run nothing when it fails. Refused
    /// with [`StoreError::AlreadyExists`] when the identity already has a final result or an
    /// execution in flight (the caller answers from those instead).
    fn begin_execution(&self, execution: &Execution) -> Result<AuditRecord>;

    /// [`ReplayStore::begin_execution`] for async callers (awaits the group commit).
    fn begin_execution_async<'a>(
        &'a self,
        execution: Execution,
    ) -> BoxFuture<'a, Result<AuditRecord>>;

    /// Ends a direct execution: records its final result for replay (the first final result
    /// under the key wins), appends the audit record of the outcome and removes the executing
    /// record, in one transaction. Also settles an interrupted execution (with an
    /// `execution_result_unknown` result). Returns the stored final result.
    fn finish_execution(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        outcome: &AuditEntry,
        now_ms: i64,
    ) -> Result<FinalResult>;

    /// [`ReplayStore::finish_execution`] for async callers (awaits the group commit).
    fn finish_execution_async<'a>(
        &'a self,
        identity: IdentityKey,
        request_id: String,
        result: Value,
        outcome: AuditEntry,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<FinalResult>>;

    /// The execution in flight (or interrupted) under an identity key, if any.
    fn find_execution(&self, identity: &IdentityKey) -> Result<Option<Execution>>;

    /// Every execution without a recorded outcome, oldest first. At start-up these are the
    /// ones the previous process died during.
    fn list_executions(&self) -> Result<Vec<Execution>>;

    /// Records the final result of a mutating request under its identity key (§10.3). The first
    /// final result recorded under a key wins; later calls return the stored one unchanged.
    fn record_final(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        now_ms: i64,
    ) -> Result<FinalResult>;

    /// The final result recorded under the key, if any (step 3, replay). For a result pruned
    /// by retention this is its tombstone's answer (`execution_result_unknown`, see
    /// `retention.rs`), so a retry is answered rather than run again.
    fn find_final(&self, identity: &IdentityKey) -> Result<Option<FinalResult>>;

    /// Remembers that `request_id` named (`tool`, `params_digest`) in `scope`, atomically
    /// reporting an earlier entry: the same pair is a [`RequestCheck::Repeat`], a different one
    /// an [`RequestCheck::Conflict`] (`idempotency_conflict`; the entry is not changed).
    fn remember_request(
        &self,
        scope: &Scope,
        request_id: &str,
        tool: &str,
        params_digest: &str,
        now_ms: i64,
    ) -> Result<RequestCheck>;

    /// [`ReplayStore::remember_request`] for async callers (awaits the group commit).
    fn remember_request_async<'a>(
        &'a self,
        scope: &'a Scope,
        request_id: &'a str,
        tool: &'a str,
        params_digest: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<RequestCheck>>;

    /// The request-id index entry, if any.
    fn find_request(&self, scope: &Scope, request_id: &str) -> Result<Option<RequestEntry>>;

    /// How many final results are stored (diagnostics, tests).
    fn count_final_results(&self) -> Result<usize>;

    /// Prunes stored results and the request-id index under `retention` (raised to the §10.3
    /// floor), oldest first, leaving a tombstone for every final result removed; at most
    /// [`PRUNE_BATCH`] of each in one write (call again while the report says
    /// [`more`](PruneReport::more)). The audit log is not touched. The daemon calls this
    /// periodically with its configured [`Retention`].
    fn prune_replay(&self, now_ms: i64, retention: Retention) -> Result<PruneReport>;
}

/// The hash-chained audit log and its anchors.
pub trait AuditStore {
    /// Appends one record to the chain and returns it with its seq and hashes.
    fn append_audit(&self, entry: &AuditEntry) -> Result<AuditRecord>;

    /// [`AuditStore::append_audit`] for async callers: awaits the group commit (many concurrent
    /// appends share one fsync) instead of blocking the thread.
    fn append_audit_async<'a>(&'a self, entry: AuditEntry) -> BoxFuture<'a, Result<AuditRecord>>;

    /// [`AuditStore::append_audit_async`] for the audit record of an executed safe read (a
    /// read of the `safe_read` class, nothing changed on the phone): returns once the record
    /// is committed into the write-ahead log — a crash of the process keeps it — and before
    /// the fsync, which follows at once (docs/security.md, "What is durable when"). Never for
    /// a mutation's records or a private read's.
    fn append_audit_relaxed_async<'a>(
        &'a self,
        entry: AuditEntry,
    ) -> BoxFuture<'a, Result<AuditRecord>>;

    /// Up to `limit` records with `seq > after_seq`, in order (JSONL export pages).
    fn export_audit(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditRecord>>;

    /// The records carrying one `audit_id`, oldest first.
    fn find_audit(&self, audit_id: &str) -> Result<Vec<AuditRecord>>;

    /// Walks the whole chain and reports the first broken record, if any. An `Err` means the
    /// database could not be read; a broken chain is an `Ok` report with `first_broken` set.
    fn verify_audit(&self) -> Result<VerifyReport>;

    /// The chain's head as an anchor: the newest record's seq and hash (`0:<genesis>` for an
    /// empty log). This is what a user or a cron job writes down elsewhere.
    fn audit_head(&self) -> Result<AuditAnchor>;

    /// Walks the chain ([`AuditStore::verify_audit`]) and checks each anchor against it: the
    /// record `seq` must lie in the verified part of the chain and carry the anchored hash.
    fn verify_audit_anchored(&self, anchors: &[AuditAnchor]) -> Result<AnchoredReport>;
}

/// Standing approvals (policy layer 7) and runtime settings.
pub trait ApprovalStore {
    /// Creates an enabled standing approval.
    fn create_approval(&self, new: &NewStandingApproval, now_ms: i64) -> Result<StandingApproval>;

    /// One standing approval.
    fn get_approval(&self, approval_id: i64) -> Result<Option<StandingApproval>>;

    /// All standing approvals (of one runtime, when given), oldest first.
    fn list_approvals(&self, runtime: Option<&str>) -> Result<Vec<StandingApproval>>;

    /// Enabled, unexpired approvals for (runtime, tool): the candidates for policy layer 7.
    fn active_approvals(
        &self,
        runtime: &str,
        tool: &str,
        now_ms: i64,
    ) -> Result<Vec<StandingApproval>>;

    /// Enables or disables an approval.
    fn set_approval_enabled(
        &self,
        approval_id: i64,
        enabled: bool,
        now_ms: i64,
    ) -> Result<StandingApproval>;

    /// Revokes an approval: disabled from now on, with who revoked it and when. Revoking one
    /// already revoked changes nothing and returns it as it is. `NotFound` for an unknown id.
    fn revoke_approval(
        &self,
        approval_id: i64,
        revoked_by: &str,
        now_ms: i64,
    ) -> Result<StandingApproval>;

    /// Deletes an approval; false when it did not exist.
    fn delete_approval(&self, approval_id: i64) -> Result<bool>;

    /// The value of a setting, if set.
    fn get_setting(&self, key: &str) -> Result<Option<Value>>;

    /// Sets (inserts or replaces) a setting.
    fn set_setting(&self, key: &str, value: &Value, now_ms: i64) -> Result<()>;

    /// Removes a setting; false when it was not set.
    fn delete_setting(&self, key: &str) -> Result<bool>;

    /// Every setting, by key.
    fn list_settings(&self) -> Result<Vec<Setting>>;
}

/// Background jobs, their attempt ledger, reviews and deliveries.
pub trait JobStore {
    /// Creates one job (`queued`, phase `queued`, progress `Queued`, every other field at its
    /// creation value of §2) with the next id. When the store already holds `max_jobs` jobs,
    /// the oldest terminal ones are deleted to make room; when every job is live the create is
    /// refused with [`StoreError::LimitReached`] (`job_limit_reached`).
    fn create_job(&self, new: &NewAgentJob, now_ms: i64, max_jobs: usize) -> Result<StoredJob>;

    /// [`JobStore::create_job`] under `quota`: a job whose creator is a runtime is refused with
    /// [`StoreError::LimitReached`] when that runtime already holds `quota.per_runtime` live
    /// jobs, or the runtimes together `quota.runtime_share()`; the user's jobs only when
    /// `max_jobs` is full of live jobs.
    fn create_job_limited(
        &self,
        new: &NewAgentJob,
        now_ms: i64,
        quota: &JobQuota,
    ) -> Result<StoredJob>;

    /// [`JobStore::create_job`] for many jobs in one transaction: all are created or none.
    fn create_jobs(
        &self,
        news: Vec<NewAgentJob>,
        now_ms: i64,
        max_jobs: usize,
    ) -> Result<Vec<StoredJob>>;

    /// Names the phone job `id`'s runs act on (`None`: the daemon's only phone). Set once, when
    /// the job is made; it leaves the job's version alone (nothing a run decided changes).
    fn set_job_device(&self, id: i64, device_id: Option<&str>) -> Result<StoredJob>;

    /// One job.
    fn get_job(&self, id: i64) -> Result<Option<StoredJob>>;

    /// Jobs matching `filter`, in the order described on [`JobFilter`]. Reading never changes a
    /// job.
    fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<StoredJob>>;

    /// Claims at most `request.limit` due jobs — `queued` or `active` with
    /// `next_run_at <= now` (0 = due now), in ascending `next_run_at` then id — with one
    /// conditional `UPDATE`: each becomes `running` (phase `running`, progress `Working`,
    /// `running_at = now`, the next attempt number, owned by `request.owner`), and each gets
    /// its ledger row, in the same transaction. Two claimers never both win a job: the second
    /// finds it no longer due. Returns the claimed jobs in due order.
    fn claim_due_jobs(&self, request: &ClaimRequest) -> Result<Vec<ClaimedJob>>;

    /// Writes `next` (every wire field but `id` and `created_at`, and the delivery state) if
    /// the stored row is still at `next.version`; returns the row as written, at the next
    /// version. A row changed since is [`StoreError::Conflict`] and nothing is written; an
    /// unknown id is [`StoreError::NotFound`].
    fn update_job(&self, next: &StoredJob) -> Result<StoredJob>;

    /// [`JobStore::update_job`] for the end of a run attempt, fenced: the row must also still
    /// be owned by `finish.owner` at `finish.attempt` ([`StoreError::Conflict`] otherwise).
    /// The attempt's ledger row is ended in the same transaction.
    fn finish_job_attempt(&self, next: &StoredJob, finish: &AttemptFinish) -> Result<StoredJob>;

    /// [`JobStore::finish_job_attempt`], also saying whether the attempt's ledger row had already
    /// been ended by someone else (`Some(outcome it said)`): the fenced end is the authority on
    /// the attempt its job still names, so that row is corrected to the real end, and the
    /// caller reports the correction.
    fn finish_job_attempt_checked(
        &self,
        next: &StoredJob,
        finish: &AttemptFinish,
    ) -> Result<(StoredJob, Option<RunOutcome>)>;

    /// Ends the ledger row of an attempt only if its job no longer runs it (the job is not
    /// `running`, or runs another attempt or owner), checked and closed in one statement: an
    /// attempt claimed after the caller read the job is left alone. Returns whether a row was
    /// closed (false: already ended, unknown, or still its job's current run).
    fn close_stale_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool>;

    /// Ends the ledger row of an attempt without touching its job (a late report of a runner
    /// whose job was stopped or repaired meanwhile). Returns false when the attempt had already
    /// ended or does not exist.
    fn finish_job_run(&self, job_id: i64, finish: &AttemptFinish) -> Result<bool>;

    /// Repairs stale running jobs in one transaction (`agent-jobs.md` §7.7): selects the
    /// `running` jobs of `selection` (oldest `running_at` first, at most `selection.limit`),
    /// asks `repair` for each one's new record and attempt end, and writes them with the
    /// attempt's fence. `repair` returning `None` leaves that job alone. Returns the repaired
    /// rows.
    fn repair_stale_jobs(
        &self,
        selection: &StaleSelection,
        repair: RepairFn,
    ) -> Result<Vec<StoredJob>>;

    /// The earliest time something about the jobs needs the scheduler (`agent-jobs.md` §6.4,
    /// before the minimum delay is applied): the `next_run_at` of queued jobs (0 = now),
    /// `running_at + stale_after_ms` of running ones, the review deadline of parked ones and
    /// `reviewed_at + stale_after_ms` of reviews being resolved. `None` when nothing is
    /// scheduled (paused, terminal and dispatched jobs never are).
    fn next_job_wake(&self, stale_after_ms: i64) -> Result<Option<i64>>;

    /// The ledger of one job, oldest attempt first.
    fn job_runs(&self, job_id: i64) -> Result<Vec<JobRun>>;

    /// One attempt of a job.
    fn job_run(&self, job_id: i64, attempt: i64) -> Result<Option<JobRun>>;

    /// How many jobs are stored.
    fn count_jobs(&self) -> Result<u64>;

    /// At most `limit` jobs whose latest delivery is `pending` or `failed` and whose run ended
    /// at or after `since_ms` (`last_run_at`), oldest first. In a fleet, only those this daemon
    /// ran last (or made, when none ran them): the phone that ran a job shows its outcome, so
    /// its daemon alone delivers it.
    fn undelivered_jobs(&self, since_ms: i64, limit: usize) -> Result<Vec<StoredJob>>;

    /// The dispatched attempt whose output reference is `output_ref` (`session:<phone session
    /// id>`, the session a run was dispatched into), the newest if several are.
    fn dispatched_run(&self, output_ref: &str) -> Result<Option<JobRun>>;

    /// The jobs that hold a review in progress: `awaiting_review` (parked, waiting for the
    /// user) and `waiting` (a decision being applied), by id. Both come from partial indexes,
    /// so a store without reviews answers without reading any job row.
    fn jobs_in_review(&self) -> Result<Vec<StoredJob>>;

    /// The job whose `pending_confirmation_id` is `confirmation_id` (an empty id matches
    /// nothing). A background confirmation id names one job: it is a fresh `job-confirm-<uuid>`.
    fn job_by_confirmation(&self, confirmation_id: &str) -> Result<Option<StoredJob>>;
}

/// Goals, their transitions and reports.
pub trait GoalStore {
    /// Stores a new goal at version 1 (the `version` given is ignored), with the transitions
    /// and reports of its creation. An existing id is [`StoreError::AlreadyExists`].
    fn create_goal(
        &self,
        goal: &StoredGoal,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<StoredGoal>;

    /// Writes `next` if the stored goal is still at `next.version`, appending `transitions`
    /// and `reports` in the same transaction; returns the goal as written (next version). A
    /// goal changed since is [`StoreError::Conflict`] and nothing is written; an unknown id is
    /// [`StoreError::NotFound`].
    fn update_goal(
        &self,
        next: &StoredGoal,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<StoredGoal>;

    /// [`GoalStore::update_goal`] with the document as JSON text (it must be an object's):
    /// returns the version written.
    fn update_goal_text(
        &self,
        next: GoalText,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<i64>;

    /// A goal's stored version (`None`: no such goal) — enough for a reader that keeps the
    /// document it last read or wrote to tell whether that copy is still current.
    fn goal_version(&self, goal_id: &str) -> Result<Option<i64>>;

    /// One goal with its document as JSON text.
    fn get_goal_text(&self, goal_id: &str) -> Result<Option<GoalText>>;

    /// One goal.
    fn get_goal(&self, goal_id: &str) -> Result<Option<StoredGoal>>;

    /// Goals whose state is one of `states` (all when empty), most recently updated first, at
    /// most `limit` (all when `None`).
    fn list_goals(&self, states: &[&str], limit: Option<usize>) -> Result<Vec<StoredGoal>>;

    /// Every transition of a goal, in order.
    fn goal_transitions(&self, goal_id: &str) -> Result<Vec<GoalTransition>>;

    /// Every delta report of a goal, in order.
    fn goal_reports(&self, goal_id: &str) -> Result<Vec<GoalReport>>;

    /// Reports whose delivery is `pending`, oldest first, at most `limit`.
    fn pending_goal_reports(&self, limit: usize) -> Result<Vec<GoalReport>>;

    /// Records one delivery try of a report: its new state and error (empty on success); the
    /// try count goes up by one. An unknown report is [`StoreError::NotFound`].
    fn set_goal_report_delivery(
        &self,
        goal_id: &str,
        seq: i64,
        delivery: ReportDelivery,
        error: &str,
    ) -> Result<()>;
}

/// Watchers, their firings and reactions.
pub trait WatcherStore {
    /// Creates an active watcher from the `watchers.create` params (which must be an object);
    /// `title` and `source` are derived from them. No quota: see
    /// [`WatcherStore::create_watcher_within`].
    fn create_watcher(&self, new: &NewWatcher, now_ms: i64) -> Result<WatcherRecord>;

    /// [`WatcherStore::create_watcher`] within a quota: with `max_active`, refused with
    /// [`StoreError::LimitReached`] (`what` `"active watchers of one owner"`) when the owner
    /// (`new.runtime`) already has that many active watchers. The count and the insert are one
    /// transaction, so two creations at once cannot both take the last place.
    fn create_watcher_within(
        &self,
        new: &NewWatcher,
        now_ms: i64,
        max_active: Option<usize>,
    ) -> Result<WatcherRecord>;

    /// How many active watchers `owner` (the runtime that created them) has.
    fn count_active_watchers(&self, owner: &str) -> Result<usize>;

    /// One watcher, active or stopped.
    fn get_watcher(&self, watcher_id: i64) -> Result<Option<WatcherRecord>>;

    /// Active watchers, newest first, optionally filtered by text (title, source or params,
    /// case-insensitive); at most `limit` (`None` = all).
    fn list_watchers(&self, text: Option<&str>, limit: Option<usize>)
    -> Result<Vec<WatcherRecord>>;

    /// [`WatcherStore::list_watchers`], only those of `owner` (the runtime that created them) when
    /// given.
    fn list_watchers_of(
        &self,
        owner: Option<&str>,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>>;

    /// Stops the selected active watchers and returns them (now `stopped`); an empty list when
    /// nothing matched.
    fn stop_watchers(&self, selector: &WatcherSelector, now_ms: i64) -> Result<Vec<WatcherRecord>>;

    /// [`WatcherStore::stop_watchers`] among the watchers of `owner` (the runtime that created them)
    /// when given: another owner's watcher is never selected, whatever the selector
    /// ([`WatcherSelector::All`] is all of the owner's).
    fn stop_watchers_of(
        &self,
        owner: Option<&str>,
        selector: &WatcherSelector,
        now_ms: i64,
    ) -> Result<Vec<WatcherRecord>>;

    /// Records one firing in one transaction: checks the watcher is active and has not fired
    /// for `dedupe_key`; inserts the firing; counts it on the watcher (ending it when
    /// `end`, moving its cursor when given); creates the reaction's job when given (the
    /// firing's reaction is then `done`, else `pending` until
    /// [`WatcherStore::finish_watcher_reaction`]); appends the audit record `audit` builds from the
    /// ids. All of it commits, or none of it.
    fn fire_watcher(&self, new: NewFiring, audit: FiringAudit) -> Result<FireOutcome>;

    /// Settles a firing's reaction (`done` or `failed`, with a note); whether it was pending.
    fn finish_watcher_reaction(
        &self,
        watcher_id: i64,
        firing: i64,
        failed: bool,
        note: &str,
    ) -> Result<bool>;

    /// Firings whose reaction has not run (a restart came between the firing and its
    /// reaction), oldest first.
    fn pending_watcher_reactions(&self) -> Result<Vec<WatcherFiring>>;

    /// A watcher's firings, oldest first.
    fn watcher_firings(&self, watcher_id: i64) -> Result<Vec<WatcherFiring>>;

    /// Moves an active watcher's cursor; whether it was active.
    fn set_watcher_cursor(&self, watcher_id: i64, cursor: &Value) -> Result<bool>;

    /// Ends an active watcher without a firing (`end_reason`, e.g. `deadline_passed` or
    /// `reply_received`); the watcher as ended, or `None` when it was not active.
    fn end_watcher(
        &self,
        watcher_id: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<Option<WatcherRecord>>;
}

/// The outbox of outcomes owed to remote runtimes.
pub trait OutcomeStore {
    /// Records a request answered with a pending receipt (state `waiting`). Recording the same
    /// request id again is [`StoreError::Invalid`].
    fn insert_deferred_outcome(&self, new: &NewDeferredOutcome, now_ms: i64) -> Result<()>;

    /// One row, if recorded.
    fn get_deferred_outcome(&self, request_id: &str) -> Result<Option<DeferredOutcome>>;

    /// A runtime's rows in the given states, oldest first (every state when `states` is
    /// empty).
    fn list_deferred_outcomes(
        &self,
        runtime: &str,
        states: &[OutcomeState],
    ) -> Result<Vec<DeferredOutcome>>;

    /// `waiting` → `ready` with the outcome. False when the row was not waiting.
    fn deferred_outcome_known(
        &self,
        request_id: &str,
        outcome: &Value,
        now_ms: i64,
    ) -> Result<bool>;

    /// Moves a row from `from` to `to` (with a note for `failed`). False when it was not in
    /// `from`: someone else moved it first. Only forward moves are accepted, and `posting` →
    /// `ready` (a post the runtime refused before handling it, to be posted again).
    fn move_deferred_outcome(
        &self,
        request_id: &str,
        from: OutcomeState,
        to: OutcomeState,
        note: &str,
        now_ms: i64,
    ) -> Result<bool>;
}

/// Saved memories and their search.
pub trait MemoryStore {
    /// Saves a memory and returns it with its id.
    fn save_memory(&self, new: &NewMemory, now_ms: i64) -> Result<MemoryRecord>;

    /// One memory.
    fn get_memory(&self, memory_id: i64) -> Result<Option<MemoryRecord>>;

    /// Deletes a memory; false when it did not exist.
    fn delete_memory(&self, memory_id: i64) -> Result<bool>;

    /// Full-text search, best match first, at most `limit` hits. A query without words
    /// (`None`, empty, punctuation only) lists the most recent memories instead.
    fn search_memory(&self, query: Option<&str>, limit: usize) -> Result<Vec<MemoryHit>>;
}

/// What the store is and holds: its directory, schema, counts and writer figures.
pub trait StoreInfo {
    /// The fleet this store is shared by, when it is shared (PostgreSQL): who this daemon is
    /// and which host serves which phone. `None` for a store one daemon owns (SQLite).
    fn fleet(&self) -> Option<&dyn Fleet> {
        None
    }

    /// Sizes and counts of the database (see the module docs of `stats.rs`; on PostgreSQL,
    /// what each field means there is in `openphone-store-pg`'s `info.rs`). Reads only: a
    /// read-only store gives the same figures next to a running daemon.
    fn stats(&self) -> Result<StoreStats>;

    /// The data directory.
    fn data_dir(&self) -> &Path;

    /// True for a store opened with [`Store::open_read_only`].
    fn is_read_only(&self) -> bool;

    /// The database's schema version: SQLite's `PRAGMA user_version`; on PostgreSQL, the
    /// latest migration in `schema_migrations` (its own numbering).
    fn schema_version(&self) -> Result<i64>;

    /// Whether full-text search (what [`MemoryStore::search_memory`] ranks with) is available:
    /// on SQLite, whether the linked SQLite was built with FTS5 (the bundled build is); on
    /// PostgreSQL always true (`tsvector` and GIN are part of every server).
    fn fts5_available(&self) -> Result<bool>;

    /// A number that changes whenever this store commits a change to the standing approvals:
    /// a cache of them (the bridge reads them for every call) is current while it is equal.
    /// Only this process writes the database (the directory lock), so nothing else changes
    /// them behind its back.
    fn approvals_generation(&self) -> u64;

    /// How the writer has grouped writes so far (zero for a read-only store).
    fn writer_stats(&self) -> WriterStats;
}
