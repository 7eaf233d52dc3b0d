//! The domains a tool call goes through: phone sessions, confirmations, replay and
//! executions, the audit log, standing approvals and settings.

use serde_json::Value;

use super::BoxFuture;
use crate::*;

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

    /// The approved (executing) confirmation for an identity key, the newest when there were
    /// ever two. This default lists the runtime's approved confirmations and picks; a backend
    /// answers through its identity index instead (the bridge asks on every state-changing
    /// call, issue 34).
    fn find_approved(&self, identity: &IdentityKey) -> Result<Option<ConfirmationRecord>> {
        let approved = self.list_confirmations(&ConfirmationFilter {
            state: Some(ConfirmationState::Approved),
            runtime: Some(identity.runtime.clone()),
            limit: None,
        })?;
        Ok(approved.into_iter().find(|r| r.identity == *identity))
    }

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

    /// [`AuditStore::append_audit_async`] (`durable`) or [`AuditStore::append_audit_relaxed_async`]
    /// of `entry` with its policy proof given beside it, made ready once ([`AuditProof`]:
    /// its text and digest computed, shared by the records that carry it), for the per-call
    /// records. Stores exactly what `entry` with `policy_proof: Some(proof.value())` stores;
    /// returns only the record's seq. `entry.policy_proof` must be `None` when a proof is given.
    fn append_audit_proven_async<'a>(
        &'a self,
        mut entry: AuditEntry,
        proof: Option<AuditProof>,
        durable: bool,
    ) -> BoxFuture<'a, Result<i64>> {
        if let Some(proof) = &proof {
            if entry.policy_proof.is_some() {
                return Box::pin(std::future::ready(Err(StoreError::Invalid {
                    what: "audit policy_proof",
                    detail: "given both inside the entry and beside it".to_owned(),
                })));
            }
            entry.policy_proof = Some(proof.value().clone());
        }
        let append = if durable {
            self.append_audit_async(entry)
        } else {
            self.append_audit_relaxed_async(entry)
        };
        Box::pin(async move { append.await.map(|record| record.seq) })
    }

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
