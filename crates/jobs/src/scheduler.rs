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
//! [`RunResult::Parked`](crate::RunResult::Parked) parks its job on a review (§9.3); [`Scheduler::resolve_review`]
//! claims the first tap, verifies, executes or denies, and commits (§9.5–§9.8); each tick
//! first expires overdue reviews and repairs resolutions a crash left behind (§9.10), and
//! [`Scheduler::start`] repairs those of a previous process at once.
//!
//! Time: every "now" comes from the injected [`Clock`]. The driver sleeps on tokio's timer for
//! the distance to the next wake (at most [`RECHECK`] at a time, so a changed wall clock is
//! noticed) and re-reads the clock when it wakes.//!
//! Files: this one holds the scheduler's types, its construction, the tick and the driver;
//! `scheduler/ops.rs` the job operations (create, get, list, stop, pause, resume),
//! `scheduler/runs.rs` a run from its claim to its persisted report (and the repair of stale
//! runs), `scheduler/review_ops.rs` reviewed background approvals.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openphone_clock::Clock;
use openphone_store::{ClaimRequest, JobQuota, Store};
use tokio::sync::{Notify, broadcast, mpsc};

use crate::error::JobsError;
use crate::limits::{
    CLAIMS_PER_TICK, MAX_JOBS, MAX_RUNNERS, MIN_WAKE_DELAY_MS, RUN_BUDGET_MS, STALE_RUN_MS,
    STOP_GRACE_MS,
};
use crate::model::{AgentJob, DeliveryState, JobStatus, RunOutcome, StoredJob};
use crate::runner::{Runners, StopHandle};

mod ops;
mod review_ops;
mod runs;

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
    /// For a store shared by several daemons (a fleet on PostgreSQL): the longest the
    /// scheduler waits before it looks at the store again — the others create jobs and let
    /// runs go stale without telling it — and every tick then also repairs the runs of
    /// daemons that died (the store decides who is dead). `None` (one daemon, SQLite): it
    /// wakes only when its next job is due or it is told of a change.
    pub poll_ms: Option<i64>,
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
            poll_ms: None,
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

/// Something the scheduler did, for the notifier, the audit and tests. Two ways to receive
/// them: [`Scheduler::subscribe`] (a broadcast: a slow receiver loses the oldest events) and
/// [`Scheduler::subscribe_all`] (every event, queued without bound: for the consumer that
/// acts on them — posts reviews, writes audit records and artifacts, delivers results).
/// Neither blocks the scheduler.
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
    /// The receivers that must see every event ([`Scheduler::subscribe_all`]).
    lossless: Mutex<Vec<mpsc::UnboundedSender<SchedulerEvent>>>,
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
                lossless: Mutex::new(Vec::new()),
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

    /// Receives the scheduler's events from now on; a receiver more than 1,024 events behind
    /// loses the oldest (`RecvError::Lagged`). For watching (tests, live views).
    pub fn subscribe(&self) -> broadcast::Receiver<SchedulerEvent> {
        self.inner.events.subscribe()
    }

    /// Receives every one of the scheduler's events from now on, in order, however far
    /// behind the receiver is: they queue until it takes them (memory grows with the
    /// backlog; a burst of 10,000 job creations queues 10,000 events). For the consumer whose
    /// work an event names — a review's notification, an audit record, a result's delivery —
    /// which a dropped event would lose. A dropped receiver is forgotten at the next event.
    pub fn subscribe_all(&self) -> mpsc::UnboundedReceiver<SchedulerEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.inner
            .lossless
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tx);
        rx
    }

    /// The daemon-start trigger: repairs at once every running job claimed by anyone else (a
    /// previous process: the directory lock means its runners are gone, §7.7; in a fleet, the
    /// store repairs only those of daemons that are gone) and every review resolution left
    /// unfinished (§9.10; in a fleet, those of this daemon's jobs — only it resolves them —
    /// and the others' left longer than a resolution may take), then ticks.
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
        // In a fleet, runs of another owner are repaired here too: the shared store repairs
        // only those whose daemon is gone.
        let foreign_to = inner.config.poll_ms.map(|_| inner.config.owner.clone());
        let repaired = inner.repair(now, foreign_to)?;
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
