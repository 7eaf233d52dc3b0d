//! The scheduler (`agent-jobs.md` §6) on the injected clock.
//!
//! One [`Scheduler`] serves one store. It keeps **one** next wake (§6.4): the earliest moment
//! something about the jobs needs it, never sooner than now + 15 s, recomputed after every
//! state change. A **tick** (§6.2) is serialised and idempotent: it repairs stale running jobs
//! (§7.7), claims at most 3 due jobs (§6.3; none while 3 runners are active) with the store's
//! conditional claim, starts one runner task per claimed job, and schedules the next wake. A
//! runner's report is persisted with the attempt's fence (§7.5 completion with the recurring
//! interval, §7.6 failure with the backoff ladder and the alert), and the wake is recomputed.
//!
//! Wake triggers (§6.5): [`Scheduler::start`] (daemon start: rows left `running` by a previous
//! process are repaired at once, then a tick), [`Scheduler::wake`] (an explicit wake), the
//! time of the scheduled wake (the driver loop, [`Scheduler::run`]), and every job operation
//! (create, stop, pause, resume and a runner finishing reschedule). Missed runs (§6.6) are
//! simply due at the first tick after start: a one-shot job runs once late, a recurring job
//! once, its next run counted from the finish; the ledger marks the attempt as a catch-up.
//!
//! Reviewed background approvals (§9) live in `scheduler/review_ops.rs`: a run that ends
//! [`RunResult::Parked`] parks its job on a review (§9.3); [`Scheduler::resolve_review`]
//! claims the first tap, verifies, executes or denies, and commits (§9.5–§9.8); each tick
//! first expires overdue reviews and repairs resolutions a crash left behind (§9.10), and
//! [`Scheduler::start`] repairs those of a previous process at once.
//!
//! Time: every "now" comes from the injected [`Clock`]. The driver sleeps on tokio's timer for
//! the distance to the next wake (at most [`RECHECK`] at a time, so a changed wall clock is
//! noticed) and re-reads the clock when it wakes.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use openphone_clock::Clock;
use openphone_store::{
    AttemptFinish, ClaimRequest, ClaimedJob, JobQuota, StaleSelection, Store, StoreError,
};
use tokio::sync::{Notify, broadcast};

use crate::error::JobsError;
use crate::limits::{
    ALERT_FAILURES, CLAIMS_PER_TICK, LIST_DEFAULT, LIST_MAX, MAX_JOBS, MAX_RUNNERS,
    MIN_WAKE_DELAY_MS, RUN_BUDGET_MS, STALE_RUN_MS, STOP_GRACE_MS, SUMMARY_MAX_CHARS,
};
use crate::model::{
    AgentJob, DeliveryState, JobFilter, JobStatus, RunOutcome, StoredJob, truncate_chars,
};
use crate::reason::{FailureReason, RUN_BUDGET_EXCEEDED, RUNNER_CANCELLED, RUNNER_PANICKED};
use crate::runner::{RunContext, RunResult, Runners, StopHandle, StopSignal};
use crate::schedule::wake_at;
use crate::transition::{Change, apply};
use crate::validate::{CreateContext, JobRequest, for_creator, normalise};

mod review_ops;

/// Who asks the scheduler for something, and so whose jobs it may see and act on (issue 28):
/// the user — the operator's endpoint (`operator`) or the built-in runtime (`builtin`, the
/// user's own assistant) — sees and acts on every job and creates jobs against `max_jobs`; a
/// runtime sees, stops, pauses and resumes only the jobs it created, and creates them against
/// its own quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asker {
    id: String,
}

impl Asker {
    /// The operator (the endpoint's `jobs.*`, the CLI, the dashboard).
    pub fn operator() -> Asker {
        Asker {
            id: openphone_store::OPERATOR_CREATOR.to_owned(),
        }
    }

    /// A runtime by id (`builtin` is the user's). A runtime that happens to be called
    /// `operator` is recorded as `runtime:operator`, never as the operator.
    pub fn runtime(id: &str) -> Asker {
        let id = id.trim();
        if id == openphone_store::OPERATOR_CREATOR {
            return Asker {
                id: format!("runtime:{id}"),
            };
        }
        Asker { id: id.to_owned() }
    }

    /// The creator of `job`, as an asker.
    pub fn creator_of(job: &StoredJob) -> Asker {
        Asker {
            id: job.created_by.clone(),
        }
    }

    /// The id recorded as a job's `created_by`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether this is the user.
    pub fn is_user(&self) -> bool {
        openphone_store::is_user_creator(&self.id)
    }

    /// Whether the job is one this asker may see and act on.
    pub fn sees(&self, job: &StoredJob) -> bool {
        self.is_user() || job.created_by == self.id
    }
}

/// The longest the driver sleeps before it looks at the clock again.
pub const RECHECK: Duration = Duration::from_secs(60);

/// How often a write that lost a compare-and-set race is recomputed before giving up.
const WRITE_TRIES: usize = 8;

/// Stale rows repaired per store transaction.
const REPAIR_BATCH: usize = 1_000;

/// The scheduler's numbers; [`SchedulerConfig::new`] gives those of §6.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// This scheduler's instance id: the owner of its claims.
    pub owner: String,
    /// Jobs claimed per tick at most.
    pub claims_per_tick: usize,
    /// Runners active at once at most.
    pub max_runners: usize,
    /// A wake is never sooner than now + this.
    pub min_wake_delay_ms: i64,
    /// A run older than this is repaired.
    pub stale_after_ms: i64,
    /// The wall-clock budget of a run.
    pub run_budget_ms: i64,
    /// How long a stopped run may take to end before it is aborted.
    pub stop_grace_ms: i64,
    /// Jobs kept in the store.
    pub max_jobs: usize,
    /// Live jobs one runtime (a creator that is not the user) may hold; see
    /// [`SchedulerConfig::quota`].
    pub max_jobs_per_runtime: usize,
}

impl SchedulerConfig {
    /// The numbers of §6.1, with `owner` as the instance id.
    pub fn new(owner: impl Into<String>) -> SchedulerConfig {
        SchedulerConfig {
            owner: owner.into(),
            claims_per_tick: CLAIMS_PER_TICK,
            max_runners: MAX_RUNNERS,
            min_wake_delay_ms: MIN_WAKE_DELAY_MS,
            stale_after_ms: STALE_RUN_MS,
            run_budget_ms: RUN_BUDGET_MS,
            stop_grace_ms: STOP_GRACE_MS,
            max_jobs: MAX_JOBS,
            max_jobs_per_runtime: JobQuota::DEFAULT_PER_RUNTIME,
        }
    }

    /// The quota jobs are created under: `max_jobs` in all; a quarter of it (rounded up)
    /// reserved for the user's own jobs, so runtimes together hold at most the rest; each
    /// runtime at most `max_jobs_per_runtime` live jobs (and never more than the runtimes'
    /// share).
    pub fn quota(&self) -> JobQuota {
        let base = JobQuota::for_max(self.max_jobs);
        JobQuota {
            per_runtime: self.max_jobs_per_runtime.min(base.runtime_share()),
            ..base
        }
    }

    /// [`SchedulerConfig::new`] with a fresh random instance id.
    pub fn with_random_owner() -> SchedulerConfig {
        SchedulerConfig::new(format!("scheduler-{}", uuid::Uuid::new_v4()))
    }
}

/// Something the scheduler did, for the notifier, the audit and tests (a broadcast: a slow
/// receiver loses the oldest events, never blocks the scheduler).
#[derive(Debug, Clone, PartialEq)]
pub enum SchedulerEvent {
    /// A job was created.
    Created {
        /// The job as stored.
        job: Box<AgentJob>,
    },
    /// A tick claimed a job.
    Claimed {
        /// The job.
        job_id: i64,
        /// Its attempt.
        attempt: i64,
        /// When the occurrence was due.
        intended_at: i64,
        /// When it started.
        started_at: i64,
        /// It fell due before this scheduler started (a missed run caught up, §6.6).
        catch_up: bool,
    },
    /// A run's report was persisted.
    Finished {
        /// The job as written.
        job: Box<AgentJob>,
        /// The attempt.
        attempt: i64,
        /// How the attempt ended.
        outcome: RunOutcome,
        /// The runner's short summary for a completion notification, if any.
        summary: Option<String>,
        /// The delivery state written.
        delivery: Option<DeliveryState>,
    },
    /// A failure reached the alert threshold (§7.6).
    FailureAlert {
        /// The job.
        job_id: i64,
        /// Consecutive failures.
        failures: i64,
        /// The job gave up (`failed`).
        gave_up: bool,
        /// The delivery mode asks for a notification.
        notify: bool,
    },
    /// A stale running job was repaired as a failure.
    Repaired {
        /// The job as written.
        job: Box<AgentJob>,
        /// The attempt repaired.
        attempt: i64,
    },
    /// A runner reported for a run that is no longer current (stopped, repaired or reclaimed
    /// meanwhile): the report was discarded.
    Discarded {
        /// The job.
        job_id: i64,
        /// The attempt that reported.
        attempt: i64,
        /// The job's status when the report came.
        status: Option<JobStatus>,
    },
    /// The job was stopped.
    Stopped {
        /// The job.
        job_id: i64,
    },
    /// A run parked its job on a review (§9.3): show the user the exact action with Approve
    /// and Deny, whatever the job's delivery mode (§9.4).
    ReviewRequired {
        /// The job.
        job_id: i64,
        /// What an Approve or Deny carries.
        confirmation_id: String,
        /// The job's title.
        title: String,
        /// The model-tool name of the action.
        tool: String,
        /// The action in words (§9.3).
        summary: String,
        /// The end of the review window (Unix ms).
        expires_at: i64,
    },
    /// A review ended (§9.8): approved, denied, expired, invalid, interrupted by a crash or by
    /// a stop. Withdraw the review's notification.
    ReviewResolved {
        /// The job.
        job_id: i64,
        /// The review.
        confirmation_id: String,
        /// The job's title.
        title: String,
        /// The model-tool name of the action.
        tool: String,
        /// How it ended.
        resolution: crate::review::Resolution,
        /// The `status` of the bound result the job resumes with (`ok`,
        /// `background.action_denied`, …); `None` when there is none (a stop).
        result_status: Option<String>,
        /// The job's status after it.
        job_status: JobStatus,
        /// The resolution was stored (false: it was audited only, e.g. the job was stopped
        /// while the approved action ran, or the store failed).
        committed: bool,
        /// Tell the user whatever the delivery mode: an approved action's outcome is unknown
        /// after a crash (§9.10).
        alert: bool,
    },
}

/// What one tick did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickReport {
    /// The tick's time.
    pub now_ms: i64,
    /// Jobs repaired as stale.
    pub repaired: Vec<i64>,
    /// Jobs whose review window passed (§9.7), resumed with the timeout result.
    pub expired_reviews: Vec<i64>,
    /// Jobs whose review resolution a crash left unfinished (§9.10), settled.
    pub repaired_reviews: Vec<i64>,
    /// Jobs claimed, in due order, with their attempt numbers.
    pub claimed: Vec<(i64, i64)>,
    /// The next wake scheduled.
    pub next_wake: Option<i64>,
}

/// The result of a stop (§8).
#[derive(Debug, Clone, PartialEq)]
pub struct StopOutcome {
    /// The job after the stop (unchanged when it was already terminal).
    pub job: StoredJob,
    /// The stop changed the job (false: it was already terminal).
    pub stopped: bool,
}

/// The background job scheduler. Cheap to clone: clones share one scheduler.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

/// A handle on a [`Scheduler`] that does not keep it alive: what the job tools hold, since the
/// bridge holds them and the scheduler (through its runners and review executor) holds the
/// bridge — a strong handle would be a cycle that never frees the store.
#[derive(Clone)]
pub struct WeakScheduler {
    inner: std::sync::Weak<Inner>,
}

impl std::fmt::Debug for WeakScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakScheduler").finish_non_exhaustive()
    }
}

impl WeakScheduler {
    /// The scheduler, while it exists.
    pub fn upgrade(&self) -> Option<Scheduler> {
        self.inner.upgrade().map(|inner| Scheduler { inner })
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("owner", &self.inner.config.owner)
            .field("next_wake", &self.next_wake())
            .field("active_runs", &self.active_runs())
            .finish()
    }
}

struct Inner {
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    config: SchedulerConfig,
    runners: Runners,
    /// When this scheduler was made (Unix ms): occurrences due before it are catch-ups.
    started_at: i64,
    /// Ticks run one at a time.
    tick_lock: tokio::sync::Mutex<()>,
    /// The global review lock (§9.5): claims, expiries and crash repairs of reviews run one
    /// at a time.
    review_lock: tokio::sync::Mutex<()>,
    /// What executes approved reviews (none: an approval resolves as
    /// `framework_unavailable`).
    review_executor: Mutex<Option<Arc<dyn crate::review::ReviewExecutor>>>,
    state: Mutex<State>,
    /// The next wake changed (the driver recomputes its sleep).
    rescheduled: Notify,
    /// A runner ended.
    run_ended: Notify,
    events: broadcast::Sender<SchedulerEvent>,
}

#[derive(Default)]
struct State {
    /// The runs of this process, by job id.
    runs: HashMap<i64, RunSlot>,
    next_wake: Option<i64>,
    last_tick_at: Option<i64>,
}

struct RunSlot {
    attempt: i64,
    stop: StopHandle,
}

impl Scheduler {
    /// A scheduler over `store` with `runners`, reading time from `clock`. Nothing runs until
    /// [`Scheduler::start`] (or [`Scheduler::run`]).
    pub fn new(
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        config: SchedulerConfig,
        runners: Runners,
    ) -> Scheduler {
        let (events, _) = broadcast::channel(1_024);
        let started_at = clock.now_ms();
        Scheduler {
            inner: Arc::new(Inner {
                store,
                clock,
                config,
                runners,
                started_at,
                tick_lock: tokio::sync::Mutex::new(()),
                review_lock: tokio::sync::Mutex::new(()),
                review_executor: Mutex::new(None),
                state: Mutex::new(State::default()),
                rescheduled: Notify::new(),
                run_ended: Notify::new(),
                events,
            }),
        }
    }

    /// A handle that does not keep this scheduler alive.
    pub fn downgrade(&self) -> WeakScheduler {
        WeakScheduler {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.inner.config
    }

    /// The store the scheduler serves.
    pub fn store(&self) -> &Arc<Store> {
        &self.inner.store
    }

    /// Receives the scheduler's events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<SchedulerEvent> {
        self.inner.events.subscribe()
    }

    /// The daemon-start trigger: repairs at once every running job claimed by anyone else (a
    /// previous process: the directory lock means its runners are gone, §7.7) and every review
    /// resolution left unfinished (§9.10), then ticks.
    pub async fn start(&self) -> Result<TickReport, JobsError> {
        let now = self.inner.clock.now_ms();
        let repaired = self
            .inner
            .repair(now, Some(self.inner.config.owner.clone()))?;
        let repaired_reviews = {
            let _reviews = self.inner.review_lock.lock().await;
            self.inner.repair_resolutions(now, true)?
        };
        let mut report = self.tick().await?;
        let mut all = repaired;
        all.append(&mut report.repaired);
        report.repaired = all;
        let mut all = repaired_reviews;
        all.append(&mut report.repaired_reviews);
        report.repaired_reviews = all;
        Ok(report)
    }

    /// An explicit wake: one tick now.
    pub async fn wake(&self) -> Result<TickReport, JobsError> {
        self.tick().await
    }

    /// One tick (§6.2): expire overdue reviews, repair stale review resolutions, repair stale
    /// running jobs, claim due jobs (bounded), start their runners, schedule the next wake.
    /// Ticks never overlap.
    pub async fn tick(&self) -> Result<TickReport, JobsError> {
        let _serial = self.inner.tick_lock.lock().await;
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        let (expired_reviews, repaired_reviews) = {
            let _reviews = inner.review_lock.lock().await;
            (
                inner.expire_reviews(now)?,
                inner.repair_resolutions(now, false)?,
            )
        };
        let repaired = inner.repair(now, None)?;
        let free = inner
            .config
            .max_runners
            .saturating_sub(inner.state().runs.len());
        let limit = inner.config.claims_per_tick.min(free);
        let claimed = if limit == 0 {
            Vec::new()
        } else {
            inner.store.claim_due_jobs(&ClaimRequest {
                now_ms: now,
                limit,
                owner: inner.config.owner.clone(),
                started_at_ms: inner.started_at,
            })?
        };
        let mut started = Vec::with_capacity(claimed.len());
        for claim in claimed {
            started.push((claim.job.job.id, claim.run.attempt));
            Arc::clone(inner).spawn_run(claim);
        }
        inner.state().last_tick_at = Some(now);
        let next_wake = inner.reschedule_at(now)?;
        Ok(TickReport {
            now_ms: now,
            repaired,
            expired_reviews,
            repaired_reviews,
            claimed: started,
            next_wake,
        })
    }

    /// Recomputes the single next wake from the store (§6.4) and returns it.
    pub fn reschedule(&self) -> Result<Option<i64>, JobsError> {
        self.inner.reschedule_at(self.inner.clock.now_ms())
    }

    /// The scheduled wake, if any.
    pub fn next_wake(&self) -> Option<i64> {
        self.inner.state().next_wake
    }

    /// When the last tick ran (a stalled scheduler has an old one).
    pub fn last_tick_at(&self) -> Option<i64> {
        self.inner.state().last_tick_at
    }

    /// Runs in progress in this process.
    pub fn active_runs(&self) -> usize {
        self.inner.state().runs.len()
    }

    /// Resolves once no run is in progress in this process (each ended run's report is
    /// persisted and the wake recomputed by then).
    pub async fn wait_idle(&self) {
        loop {
            let ended = self.inner.run_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.active_runs() == 0 {
                return;
            }
            ended.await;
        }
    }

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
    /// runtime's job counts against its own quota ([`SchedulerConfig::quota`]) and may not
    /// read the user's main conversation (`for_creator`).
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
        let new = for_creator(new, request, asker.id(), |id| {
            store.get_session(id).ok().flatten().map(|s| s.runtime_kind)
        })?;
        let job = store.create_job_limited(&new, now, &self.inner.config.quota())?;
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

    /// The driver: [`Scheduler::start`], then a tick at every scheduled wake until
    /// `shutdown` resolves. A failed tick is logged and retried after the minimum delay.
    /// On shutdown the runs in progress are aborted; their rows stay `running` and the next
    /// start repairs them.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let inner = &self.inner;
        tokio::pin!(shutdown);
        if let Err(error) = self.start().await {
            tracing::warn!(%error, "jobs: the start-up tick failed; retrying at the next wake");
            inner.retry_later();
        }
        loop {
            let now = inner.clock.now_ms();
            let wait = match self.next_wake() {
                Some(at) => {
                    Duration::from_millis(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
                }
                None => RECHECK,
            }
            .min(RECHECK);
            let rescheduled = inner.rescheduled.notified();
            tokio::select! {
                () = &mut shutdown => break,
                () = rescheduled => {}
                () = tokio::time::sleep(wait) => {
                    let due = self.next_wake().is_some_and(|at| inner.clock.now_ms() >= at);
                    let outcome = if due {
                        self.tick().await.map(|_| ())
                    } else {
                        // Not due yet by the clock (it was changed, or the wake is far):
                        // look again.
                        self.reschedule().map(|_| ())
                    };
                    if let Err(error) = outcome {
                        tracing::warn!(%error, "jobs: tick failed; retrying at the next wake");
                        inner.retry_later();
                    }
                }
            }
        }
        self.abort_runs();
    }

    /// Tells every run in progress to stop (daemon shutdown). Their reports are still
    /// persisted if they come before the process ends.
    pub fn abort_runs(&self) {
        let state = self.inner.state();
        for slot in state.runs.values() {
            slot.stop.stop();
        }
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn emit(&self, event: SchedulerEvent) {
        // No receiver is not an error.
        let _ = self.events.send(event);
    }

    fn retry_later(&self) {
        let at = self
            .clock
            .now_ms()
            .saturating_add(self.config.min_wake_delay_ms);
        self.state().next_wake = Some(at);
    }

    fn reschedule_at(&self, now: i64) -> Result<Option<i64>, JobsError> {
        let candidate = self.store.next_job_wake(self.config.stale_after_ms)?;
        let wake = wake_at(candidate, now, self.config.min_wake_delay_ms);
        self.state().next_wake = wake;
        self.rescheduled.notify_one();
        Ok(wake)
    }

    /// Tells the run of `job_id` to stop (only `attempt`'s, when given).
    fn signal_stop(&self, job_id: i64, attempt: Option<i64>) {
        if let Some(slot) = self.state().runs.get(&job_id)
            && attempt.is_none_or(|a| a == slot.attempt)
        {
            slot.stop.stop();
        }
    }

    /// Repairs stale running jobs as failures (§7.7): those older than the threshold (or
    /// without `running_at`), and with `foreign_to`, every one claimed by another owner.
    fn repair(&self, now: i64, foreign_to: Option<String>) -> Result<Vec<i64>, JobsError> {
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

    fn alert_if_due(&self, row: &StoredJob) {
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

    fn spawn_run(self: Arc<Self>, claim: ClaimedJob) {
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
                Ended::Report(RunResult::Dispatched { note }) => (
                    Change::Dispatch { note: note.clone() },
                    RunOutcome::Dispatched,
                    String::new(),
                    String::new(),
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
            match self.store.finish_job_attempt(&next, &finish) {
                Ok(written) => {
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
