//! What runs a job: the [`JobRunner`] trait, the context a run gets (its job, attempt,
//! deadline and stop signal), what it reports, and the runners of the two job types that
//! complete at once (§3). The `agent_turn` runner (a bounded model loop) is installed by the
//! daemon; without one an `agent_turn` run fails with `model_unconfigured`.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use openphone_clock::Clock;
use tokio::sync::watch;

use crate::model::{AgentJob, JobType};
use crate::reason::FailureReason;
use crate::transition::{HEARTBEAT_RESULT, SYSTEM_EVENT_RESULT};

/// Tells a run that its job was stopped (or its run repaired, or the daemon is stopping).
/// Runners check it between steps and select on [`StopSignal::stopped`] while they wait; a run
/// that does not stop within the grace period is aborted.
#[derive(Debug, Clone)]
pub struct StopSignal {
    rx: watch::Receiver<bool>,
    /// Keeps the sender of a signal that never fires alive (a dropped sender reads as a stop).
    _keep: Option<Arc<watch::Sender<bool>>>,
}

/// The sending side of a [`StopSignal`].
#[derive(Debug)]
pub(crate) struct StopHandle {
    tx: watch::Sender<bool>,
}

impl StopHandle {
    pub(crate) fn stop(&self) {
        self.tx.send_replace(true);
    }
}

impl StopSignal {
    pub(crate) fn pair() -> (StopHandle, StopSignal) {
        let (tx, rx) = watch::channel(false);
        (StopHandle { tx }, StopSignal { rx, _keep: None })
    }

    /// A signal that never fires (for running a runner outside the scheduler).
    pub fn never() -> StopSignal {
        let (tx, rx) = watch::channel(false);
        StopSignal {
            rx,
            _keep: Some(Arc::new(tx)),
        }
    }

    /// True once a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves when a stop is asked for (at once if it already was).
    pub async fn stopped(&mut self) {
        // An error means the sender is gone: the scheduler dropped the run, which counts as
        // a stop.
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }
}

/// What a run is given.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The job as claimed (status `running`).
    pub job: AgentJob,
    /// The attempt number of this run.
    pub attempt: i64,
    /// When the run's budget ends (Unix ms on [`RunContext::clock`]): a run still going then
    /// is ended as `job_error:run_budget_exceeded`, and a result reported after it is refused
    /// the same way.
    pub deadline_ms: i64,
    /// The stop signal.
    pub stop: StopSignal,
    /// The scheduler's clock.
    pub clock: Arc<dyn Clock>,
}

impl RunContext {
    /// Milliseconds left of the budget (0 when it is spent).
    pub fn remaining_ms(&self) -> i64 {
        self.deadline_ms.saturating_sub(self.clock.now_ms()).max(0)
    }
}

/// What a run reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunResult {
    /// The run finished.
    Completed {
        /// The diagnostic result or trace for `last_result` (cut to 4000 characters; never a
        /// notification body).
        result: String,
        /// A short user-facing summary for the completion notification (§4), if the run made
        /// one.
        summary: Option<String>,
        /// Where the run's full output is kept, or empty.
        output_ref: String,
    },
    /// The run handed the job to an external runtime (§7.3).
    Dispatched {
        /// What `last_result` records about the dispatch.
        note: String,
        /// Where the runtime works on it (`session:<phone session id>`), or empty: the
        /// runtime's final reply in that session completes the job.
        output_ref: String,
    },
    /// The run wants a state-changing tool call made and ends here: the scheduler parks the
    /// job on a review of exactly this call (§9.3); nothing executes until the user approves.
    Parked {
        /// The call to review.
        proposal: crate::review::ReviewProposal,
    },
    /// The run failed.
    Failed {
        /// Why (§7.8).
        reason: FailureReason,
        /// A short detail for `last_result`, or empty.
        detail: String,
    },
}

impl RunResult {
    /// A completion with only a result.
    pub fn completed(result: impl Into<String>) -> RunResult {
        RunResult::Completed {
            result: result.into(),
            summary: None,
            output_ref: String::new(),
        }
    }

    /// A failure without detail.
    pub fn failed(reason: FailureReason) -> RunResult {
        RunResult::Failed {
            reason,
            detail: String::new(),
        }
    }
}

/// The output reference of a run dispatched into phone session `phone_session_id`
/// (`session:<id>`, [`RunResult::Dispatched`]).
pub fn dispatch_ref(phone_session_id: &str) -> String {
    format!("session:{phone_session_id}")
}

/// Runs one job type. A runner must end by itself within its budget, check the stop signal
/// between steps, and never panic (a panic ends the run as `job_error:runner_panicked`).
#[async_trait]
pub trait JobRunner: Send + Sync + 'static {
    /// Runs the job once.
    async fn run(&self, ctx: RunContext) -> RunResult;
}

/// The `system_event` run of V1: completes at once with `system_event_recorded`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemEventRunner;

#[async_trait]
impl JobRunner for SystemEventRunner {
    async fn run(&self, _ctx: RunContext) -> RunResult {
        RunResult::completed(SYSTEM_EVENT_RESULT)
    }
}

/// The `heartbeat` run: a maintenance wake that completes at once with `heartbeat`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeartbeatRunner;

#[async_trait]
impl JobRunner for HeartbeatRunner {
    async fn run(&self, _ctx: RunContext) -> RunResult {
        RunResult::completed(HEARTBEAT_RESULT)
    }
}

/// A runner bound after the scheduler is built: the daemon's `agent_turn` runner offers the
/// tools the bridge serves when it is built, so it is built after the job and goal tools are
/// installed — which needs the scheduler (issue 32). A run before [`LateRunner::bind`] fails
/// with `framework_unavailable`; the scheduler's driver starts only after it.
#[derive(Clone, Default)]
pub struct LateRunner {
    slot: Arc<std::sync::OnceLock<Arc<dyn JobRunner>>>,
}

impl std::fmt::Debug for LateRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateRunner")
            .field("bound", &self.slot.get().is_some())
            .finish()
    }
}

impl LateRunner {
    /// An unbound runner.
    pub fn new() -> LateRunner {
        LateRunner::default()
    }

    /// Binds the runner every run goes to; `false` when one was already bound (kept).
    pub fn bind(&self, runner: Arc<dyn JobRunner>) -> bool {
        self.slot.set(runner).is_ok()
    }

    /// This runner, for [`Runners::with`].
    pub fn runner(&self) -> Arc<dyn JobRunner> {
        Arc::new(self.clone())
    }
}

#[async_trait]
impl JobRunner for LateRunner {
    async fn run(&self, ctx: RunContext) -> RunResult {
        match self.slot.get() {
            Some(runner) => runner.run(ctx).await,
            None => RunResult::Failed {
                reason: FailureReason::FrameworkUnavailable,
                detail: "the runner of this job type is not set up yet".to_owned(),
            },
        }
    }
}

/// The runner of each job type.
#[derive(Clone, Default)]
pub struct Runners {
    by_type: HashMap<JobType, Arc<dyn JobRunner>>,
}

impl std::fmt::Debug for Runners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut types: Vec<&str> = self.by_type.keys().map(|t| t.as_str()).collect();
        types.sort_unstable();
        f.debug_struct("Runners").field("types", &types).finish()
    }
}

impl Runners {
    /// No runner at all: every run fails (`model_unconfigured` for `agent_turn`,
    /// `framework_unavailable` for the others).
    pub fn none() -> Runners {
        Runners::default()
    }

    /// The runners of `system_event` and `heartbeat`; no `agent_turn` runner.
    pub fn builtin() -> Runners {
        Runners::none()
            .with(JobType::SystemEvent, Arc::new(SystemEventRunner))
            .with(JobType::Heartbeat, Arc::new(HeartbeatRunner))
    }

    /// These runners with `runner` for `job_type` (replacing any).
    pub fn with(mut self, job_type: JobType, runner: Arc<dyn JobRunner>) -> Runners {
        self.by_type.insert(job_type, runner);
        self
    }

    /// The runner of `job_type`.
    pub fn get(&self, job_type: JobType) -> Option<&Arc<dyn JobRunner>> {
        self.by_type.get(&job_type)
    }

    /// Why a run of `job_type` fails when it has no runner.
    pub fn missing_reason(job_type: JobType) -> FailureReason {
        match job_type {
            JobType::AgentTurn => FailureReason::ModelUnconfigured,
            JobType::SystemEvent | JobType::Heartbeat => FailureReason::FrameworkUnavailable,
        }
    }
}
