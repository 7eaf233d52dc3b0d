//! Background work and what agents keep: jobs, goals, watchers, the outcomes owed to remote
//! runtimes, memory.

use serde_json::Value;

use super::{FiringAudit, RepairFn};
use crate::*;

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
    ) -> Result<StoredGoal> {
        let version =
            self.update_goal_text(GoalText::of(next, "goals.update")?, transitions, reports)?;
        let mut written = next.clone();
        written.version = version;
        Ok(written)
    }

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
