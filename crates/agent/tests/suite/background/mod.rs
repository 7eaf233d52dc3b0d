//! Background job runs (`agent-jobs.md` §7.2, §7.3, §9.1, §9.9): the `agent_turn` runner on
//! the built-in loop and the dispatch to an external runtime, with the real store, bridge,
//! runtime manager and simulated phone, the fake model on loopback and, where the job's
//! lifecycle matters, the real scheduler on a manual clock.
//!
//! This file holds the shared fixture ([`Bg`] and its helpers); the tests are in `built_in`
//! (a run on the built-in loop), `limits_and_model` (its limits and its model) and `dispatch`
//! (a job handed to an external runtime).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use openphone_agent::background::{RUN_STOPPED, summary_of};
use openphone_agent::transcript::STATUS_ROLE;
use openphone_agent::{AgentTurnRunner, BuiltinConfig, BuiltinSetup, ModelEndpoint};
use openphone_clock::{Clock, ManualClock};
use openphone_core::{
    BridgeConfig, EventBus, RuntimeEntry, RuntimeKind, RuntimeManager, RuntimesConfig,
};
use openphone_device::{SimPhone, SimState};
use openphone_fake_model::{FakeModel, Script};
use openphone_jobs::limits::RUN_BUDGET_MS;
use openphone_jobs::review::{CHECKPOINT_SCHEMA, Checkpoint};
use openphone_jobs::{
    FailureReason, JobRequest, JobRunner, JobStatus, JobType, ReviewProposal, RunContext,
    RunResult, Runners, Scheduler, SchedulerConfig, SchedulerEvent, StopSignal, StoredJob,
};
use openphone_store::{SessionStatus, Store};
use serde_json::{Map, Value, json};

use super::support::{Core, chat_session, limits};

mod built_in;
mod dispatch;
mod limits_and_model;

const ALICE: &str = "+49 151 2345 6789";

/// One daemon core for background runs: store, bridge over the simulated phone, manager with
/// a WebSocket runtime `hermes` configured (not connected), a fake model, and the runner.
struct Bg {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    phone: Arc<SimPhone>,
    manager: Arc<RuntimeManager>,
    events: Arc<EventBus>,
    store: Arc<Store>,
    setup: BuiltinSetup,
    fake: FakeModel,
    runner: AgentTurnRunner,
}

impl Bg {
    async fn start() -> Bg {
        Bg::with(limits()).await
    }

    async fn with(config: BuiltinConfig) -> Bg {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeModel::start().await;
        let core = Core::open(
            dir,
            SimState::default_scenario().unwrap(),
            BridgeConfig::default(),
        );
        let mut runtimes = RuntimesConfig::default();
        runtimes.runtimes.push(RuntimeEntry {
            id: "hermes".into(),
            kind: RuntimeKind::Websocket,
            enabled: true,
        });
        let manager = core.manager(runtimes);
        let setup = core.builtin_setup(&manager);
        let runner = core.agent_turn_runner(&setup, &config, &fake);
        let Core {
            dir,
            clock,
            phone,
            store,
            events,
            ..
        } = core;
        Bg {
            _dir: dir,
            clock,
            phone,
            manager,
            events,
            store,
            setup,
            fake,
            runner,
        }
    }

    /// A scheduler over the store on the manual clock with `runner` for `agent_turn`. A
    /// stopped run gets a minute to end by itself (it is aborted after that): a test that
    /// sees the runner's own report knows it noticed the stop.
    fn scheduler(&self, runner: Arc<dyn JobRunner>) -> Scheduler {
        Scheduler::new(
            self.store.clone(),
            Arc::new(self.clock.clone()),
            SchedulerConfig {
                stop_grace_ms: 60_000,
                ..SchedulerConfig::new("test-scheduler")
            },
            Runners::builtin().with(JobType::AgentTurn, runner),
        )
    }

    /// Creates an `agent_turn` job through a scheduler (so it is a real, normalised record).
    fn create(&self, args: Value) -> StoredJob {
        let scheduler = self.scheduler(Arc::new(self.runner.clone()));
        scheduler
            .create(&JobRequest::from_json(&args).unwrap(), None)
            .unwrap()
    }

    /// A run context for `job` with the scheduler's budget, a stop signal that never fires.
    fn ctx(&self, job: &StoredJob) -> RunContext {
        RunContext {
            job: job.job.clone(),
            attempt: 1,
            deadline_ms: self.clock.now_ms() + RUN_BUDGET_MS,
            stop: StopSignal::never(),
            clock: Arc::new(self.clock.clone()),
        }
    }

    async fn run(&self, job: &StoredJob) -> RunResult {
        self.runner.run(self.ctx(job)).await
    }

    fn transcript(&self, job: &StoredJob) -> Vec<openphone_store::TranscriptEntry> {
        self.store
            .transcript(&format!("background-job:{}", job.job.id))
            .unwrap()
    }

    /// The `messages` of the `n`th model request.
    fn request(&self, n: usize) -> Vec<Value> {
        self.fake.requests()[n]["messages"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The content of the last message of the `n`th model request.
    fn last_message(&self, n: usize) -> String {
        self.request(n)
            .last()
            .unwrap()
            .get("content")
            .and_then(Value::as_str)
            .unwrap()
            .to_owned()
    }
}

/// Records what the runner it wraps reports (a run the scheduler aborted reports nothing).
struct Recording {
    inner: Arc<dyn JobRunner>,
    reports: Mutex<Vec<RunResult>>,
}

#[async_trait]
impl JobRunner for Recording {
    async fn run(&self, ctx: RunContext) -> RunResult {
        let result = self.inner.run(ctx).await;
        self.reports.lock().unwrap().push(result.clone());
        result
    }
}

fn send_args(body: &str) -> Value {
    json!({"to": ALICE, "body": body, "reason": "tell Alice"})
}

fn failed_with(result: &RunResult) -> String {
    match result {
        RunResult::Failed { reason, .. } => reason.to_string(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The `status` of each tool entry of a transcript.
fn tool_statuses(entries: &[openphone_store::TranscriptEntry]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.role == "tool")
        .map(|e| e.body["status"].as_str().unwrap_or("-").to_owned())
        .collect()
}
