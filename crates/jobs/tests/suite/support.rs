//! Shared helpers: a store in a temporary directory, a manual clock, a scripted runner.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_clock::{Clock, ManualClock};
use openphone_jobs::{
    FailureReason, JobRequest, JobRunner, JobType, RunContext, RunResult, Runners, Scheduler,
    SchedulerConfig, StoredJob, TickReport,
};
use openphone_store::Store;
use serde_json::Value;
use tempfile::TempDir;
use tokio::sync::{Notify, Semaphore};

pub const T0: i64 = 1_760_000_000_000;
pub const SEC: i64 = 1_000;
pub const MIN: i64 = 60 * SEC;
pub const HOUR: i64 = 60 * MIN;
pub const DAY: i64 = 24 * HOUR;

/// What the scripted runner does on one run.
#[derive(Debug, Clone)]
pub enum Step {
    /// Completes with this result.
    Succeed(&'static str),
    /// Fails with this reason.
    Fail(FailureReason),
    /// Moves the manual clock forward by this much, then completes.
    Advance(i64),
    /// Announces it started, waits for the stop signal, then reports a (late) completion.
    UntilStopped,
    /// Announces it started and waits until released (`Script::release`).
    Gate,
    /// Never returns.
    Hang,
    /// Panics.
    Panic,
}

/// A runner following a script (one step per run; the default once the script is empty).
#[derive(Debug)]
pub struct Script {
    steps: Mutex<VecDeque<Step>>,
    default: Step,
    clock: ManualClock,
    /// (job id, attempt, time) of every run started.
    pub calls: Mutex<Vec<(i64, i64, i64)>>,
    /// One permit per run started (see [`Script::wait_started`]).
    started: Semaphore,
    gate: Notify,
}

impl Script {
    pub fn new(clock: &ManualClock, default: Step) -> Arc<Script> {
        Arc::new(Script {
            steps: Mutex::new(VecDeque::new()),
            default,
            clock: clock.clone(),
            calls: Mutex::new(Vec::new()),
            started: Semaphore::new(0),
            gate: Notify::new(),
        })
    }

    pub fn push(&self, step: Step) {
        self.steps.lock().unwrap().push_back(step);
    }

    /// Waits until one more run (of the steps that announce themselves) has started.
    pub async fn wait_started(&self) {
        self.started.acquire().await.unwrap().forget();
    }

    pub fn release(&self) {
        self.gate.notify_waiters();
    }

    pub fn calls(&self) -> Vec<(i64, i64, i64)> {
        self.calls.lock().unwrap().clone()
    }

    pub fn runs_of(&self, job_id: i64) -> usize {
        self.calls().iter().filter(|c| c.0 == job_id).count()
    }
}

#[async_trait]
impl JobRunner for Script {
    async fn run(&self, mut ctx: RunContext) -> RunResult {
        let step = self
            .steps
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| self.default.clone());
        self.calls
            .lock()
            .unwrap()
            .push((ctx.job.id, ctx.attempt, ctx.clock.now_ms()));
        match step {
            Step::Succeed(result) => RunResult::completed(result),
            Step::Fail(reason) => RunResult::failed(reason),
            Step::Advance(ms) => {
                self.clock.advance(ms);
                RunResult::completed("slow")
            }
            Step::UntilStopped => {
                self.started.add_permits(1);
                ctx.stop.stopped().await;
                RunResult::completed("late completion")
            }
            Step::Gate => {
                let released = self.gate.notified();
                self.started.add_permits(1);
                released.await;
                RunResult::completed("released")
            }
            Step::Hang => {
                self.started.add_permits(1);
                std::future::pending::<()>().await;
                RunResult::completed("unreachable")
            }
            Step::Panic => panic!("scripted runner panic"),
        }
    }
}

/// A store, a manual clock at T0 and a scheduler whose `agent_turn` runner is a script.
pub struct Harness {
    /// Keeps the data directory for the harness's lifetime.
    _dir: TempDir,
    pub store: Arc<Store>,
    pub clock: ManualClock,
    pub script: Arc<Script>,
    pub sched: Scheduler,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with_default(Step::Succeed("done"))
    }

    pub fn with_default(default: Step) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
        let clock = ManualClock::new(T0);
        let script = Script::new(&clock, default);
        let sched = scheduler_on(&store, &clock, "sched-a", &script);
        Harness {
            _dir: dir,
            store,
            clock,
            script,
            sched,
        }
    }

    /// Another scheduler over the same store (a second instance, or the next daemon).
    pub fn scheduler(&self, owner: &str) -> Scheduler {
        scheduler_on(&self.store, &self.clock, owner, &self.script)
    }

    pub fn create(&self, args: Value) -> StoredJob {
        self.sched
            .create(&JobRequest::from_json(&args).unwrap(), None)
            .unwrap()
    }

    pub fn job(&self, id: i64) -> StoredJob {
        self.store.get_job(id).unwrap().unwrap()
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// One tick, then every run it started has ended and been persisted.
    pub async fn tick(&self) -> TickReport {
        let report = self.sched.tick().await.unwrap();
        self.sched.wait_idle().await;
        report
    }

    /// Moves the clock to each scheduled wake up to `until` and ticks there; returns the
    /// reports.
    pub async fn run_until(&self, until: i64) -> Vec<TickReport> {
        let mut reports = Vec::new();
        while let Some(wake) = self.sched.next_wake() {
            if wake > until {
                break;
            }
            self.clock.set(wake);
            reports.push(self.tick().await);
        }
        self.clock.set(until.max(self.clock.now_ms()));
        reports
    }
}

pub fn scheduler_on(
    store: &Arc<Store>,
    clock: &ManualClock,
    owner: &str,
    script: &Arc<Script>,
) -> Scheduler {
    let runner: Arc<dyn JobRunner> = script.clone();
    Scheduler::new(
        Arc::clone(store),
        Arc::new(clock.clone()),
        SchedulerConfig::new(owner),
        Runners::builtin().with(JobType::AgentTurn, runner),
    )
}
