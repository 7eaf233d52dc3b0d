//! The review harness: a real store in a temporary directory, the simulated phone, the real
//! tool bridge over both, and a scheduler whose `agent_turn` runner calls tools through that
//! bridge in the job's background context — as the built-in loop does — and parks the job when
//! the bridge answers `background.confirmation_required`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_clock::{Clock, ManualClock};
use openphone_core::{BridgeConfig, EventBus, ToolBridge};
use openphone_device::SimPhone;
use openphone_jobs::review::{self, ReviewProposal, replay_for};
use openphone_jobs::{
    BridgeReviewExecutor, ConfirmationRecord, ExecutionFailure, JobRequest, JobRunner, JobType,
    RunContext, RunResult, Runners, Scheduler, SchedulerConfig, SchedulerEvent, StoredJob,
};
use openphone_policy::{Caller, Context};
use openphone_protocol::{ErrorCode, ToolRequest, ToolResult, ToolStatus};
use openphone_store::Store;
use serde_json::{Map, Value, json};
use tempfile::TempDir;
use tokio::sync::{Semaphore, broadcast};

pub use openphone_test_support::registry;

/// Params of a message the simulated phone can send.
pub fn send_params(body: &str) -> Value {
    json!({"to": "+15551234567", "body": body, "reason": "tell Sam I am late"})
}

/// One thing the runner does in one run.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Calls the model-tool `tool` with `params` through the bridge, in the job's background
    /// context (a resumed run first gets the checkpoint's stored outcome for the reviewed call,
    /// §9.9); parks when the bridge parks; completes otherwise.
    Call(&'static str, Value),
    /// Ends the run `Parked` on this proposal without asking the bridge (a runner that skipped
    /// its eligibility check).
    ParkDirectly(ReviewProposal),
}

/// What one run saw and did.
#[derive(Debug, Clone)]
pub struct RunSeen {
    pub job_id: i64,
    /// The job's checkpoint when the run started.
    pub checkpoint: Map<String, Value>,
    /// The bridge's answer, when the run called it.
    pub bridge: Option<ToolResult>,
    /// The stored outcome the run got instead of executing (§9.9).
    pub replayed: Option<String>,
}

/// The `agent_turn` runner of the tests.
pub struct BridgeRunner {
    bridge: Arc<ToolBridge>,
    plans: Mutex<VecDeque<Plan>>,
    pub seen: Mutex<Vec<RunSeen>>,
}

impl BridgeRunner {
    pub fn push(&self, plan: Plan) {
        self.plans.lock().unwrap().push_back(plan);
    }

    pub fn seen(&self) -> Vec<RunSeen> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl JobRunner for BridgeRunner {
    async fn run(&self, ctx: RunContext) -> RunResult {
        let job = &ctx.job;
        let mut seen = RunSeen {
            job_id: job.id,
            checkpoint: job.checkpoint_json.clone(),
            bridge: None,
            replayed: None,
        };
        let plan = self.plans.lock().unwrap().pop_front();
        let outcome = match plan {
            None => RunResult::completed("nothing to do"),
            Some(Plan::ParkDirectly(proposal)) => RunResult::Parked { proposal },
            Some(Plan::Call(tool, params)) => {
                if let Some(stored) = replay_for(&job.checkpoint_json, tool, &params) {
                    seen.replayed = Some(stored.clone());
                    RunResult::completed(stored)
                } else {
                    let session = review::job_session(job.id);
                    let command = registry().resolve(tool).unwrap();
                    let request = ToolRequest {
                        request_id: format!("run-{}-{}", job.id, uuid::Uuid::new_v4()),
                        runtime: Some("builtin".to_owned()),
                        runtime_session_id: session.clone(),
                        phone_session_id: Some(session),
                        tool: command.name.clone(),
                        params: params.clone(),
                        autonomy: Some("ask_before_action".to_owned()),
                        ..ToolRequest::default()
                    };
                    let job_id = u64::try_from(job.id).unwrap();
                    let result = self
                        .bridge
                        .invoke(
                            &Caller::builtin("job-runner"),
                            request,
                            Context::job(job_id),
                        )
                        .await;
                    seen.bridge = Some(result.clone());
                    let parked = result.status == ToolStatus::NeedsConfirmation
                        && result.error.as_ref().map(|e| e.code)
                            == Some(ErrorCode::BackgroundConfirmationRequired);
                    if parked {
                        RunResult::Parked {
                            proposal: ReviewProposal {
                                tool: tool.to_owned(),
                                command: command.name.clone(),
                                params,
                            },
                        }
                    } else {
                        RunResult::completed(format!("{:?}", result.status))
                    }
                }
            }
        };
        self.seen.lock().unwrap().push(seen);
        outcome
    }
}

/// What the test executor does once the action ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Reports at once.
    Report,
    /// Never reports (a daemon that dies before it commits the review).
    Hang,
    /// Reports when [`CountingExecutor::release`] is called.
    Hold,
}

/// The bridge executor with a count of its calls.
pub struct CountingExecutor {
    inner: BridgeReviewExecutor,
    pub calls: AtomicUsize,
    after: After,
    /// One permit per call whose action ran.
    pub started: Semaphore,
    release: Semaphore,
}

impl CountingExecutor {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn request(&self, record: &ConfirmationRecord) -> ToolRequest {
        self.inner.request(record).unwrap()
    }

    /// Lets one held call report.
    pub fn release(&self) {
        self.release.add_permits(1);
    }
}

#[async_trait]
impl openphone_jobs::ReviewExecutor for CountingExecutor {
    async fn execute(&self, record: &ConfirmationRecord) -> Result<Value, ExecutionFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let result = self.inner.execute(record).await;
        self.started.add_permits(1);
        match self.after {
            After::Report => {}
            After::Hang => std::future::pending::<()>().await,
            After::Hold => self.release.acquire().await.unwrap().forget(),
        }
        result
    }
}

pub struct ReviewHarness {
    _dir: TempDir,
    pub store: Arc<Store>,
    pub clock: ManualClock,
    pub phone: Arc<SimPhone>,
    pub bridge: Arc<ToolBridge>,
    pub runner: Arc<BridgeRunner>,
    pub executor: Arc<CountingExecutor>,
    pub sched: Scheduler,
    pub events: Mutex<broadcast::Receiver<SchedulerEvent>>,
}

impl ReviewHarness {
    pub fn new() -> ReviewHarness {
        ReviewHarness::build(After::Report)
    }

    /// A harness whose executor never returns after running the action.
    pub fn hanging() -> ReviewHarness {
        ReviewHarness::build(After::Hang)
    }

    /// A harness whose executor returns after running the action only when released.
    pub fn holding() -> ReviewHarness {
        ReviewHarness::build(After::Hold)
    }

    fn build(after: After) -> ReviewHarness {
        let dir = tempfile::tempdir().unwrap();
        let (phone, clock) = SimPhone::demo().unwrap();
        let phone = Arc::new(phone);
        let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
        let bridge = Arc::new(ToolBridge::new(
            registry(),
            Arc::clone(&store),
            phone.clone(),
            Arc::new(clock.clone()),
            Arc::new(EventBus::new(registry(), 256)),
            BridgeConfig::default(),
        ));
        let runner = Arc::new(BridgeRunner {
            bridge: Arc::clone(&bridge),
            plans: Mutex::new(VecDeque::new()),
            seen: Mutex::new(Vec::new()),
        });
        let executor = Arc::new(CountingExecutor {
            inner: BridgeReviewExecutor::new(Arc::clone(&bridge), registry()),
            calls: AtomicUsize::new(0),
            after,
            started: Semaphore::new(0),
            release: Semaphore::new(0),
        });
        let sched = scheduler(&store, &clock, "sched-a", &runner, &executor);
        let events = Mutex::new(sched.subscribe());
        ReviewHarness {
            _dir: dir,
            store,
            clock,
            phone,
            bridge,
            runner,
            executor,
            sched,
            events,
        }
    }

    /// Another scheduler over the same store, runner and executor: the next daemon.
    pub fn restart(&self, owner: &str) -> Scheduler {
        scheduler(
            &self.store,
            &self.clock,
            owner,
            &self.runner,
            &self.executor,
        )
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn job(&self, id: i64) -> StoredJob {
        self.store.get_job(id).unwrap().unwrap()
    }

    pub fn create(&self, title: &str) -> i64 {
        let request = JobRequest::from_json(&json!({"title": title, "prompt": "do it"})).unwrap();
        self.sched.create(&request, None).unwrap().job.id
    }

    /// Moves the clock to the scheduled wake and ticks there; every run started has ended and
    /// been persisted when this returns.
    pub async fn run_next_wake(&self) {
        let wake = self.sched.next_wake().expect("a wake is scheduled");
        if wake > self.now() {
            self.clock.set(wake);
        }
        self.sched.tick().await.unwrap();
        self.sched.wait_idle().await;
    }

    /// A job whose first run calls `tool` with `params` and gets parked; returns its id and
    /// the review's confirmation id.
    pub async fn parked(&self, tool: &'static str, params: Value) -> (i64, String) {
        self.runner.push(Plan::Call(tool, params));
        let id = self.create("Tell Sam");
        self.run_next_wake().await;
        let row = self.job(id);
        assert_eq!(row.job.status.as_str(), "awaiting_review", "{row:?}");
        (id, row.job.pending_confirmation_id.clone())
    }

    /// The actions the simulated phone carried out for `tool` (canonical name).
    pub fn actions(&self, tool: &str) -> Vec<Value> {
        self.phone
            .action_log()
            .into_iter()
            .filter(|a| a.tool == tool)
            .map(|a| a.params)
            .collect()
    }

    /// The events received so far.
    pub fn events(&self) -> Vec<SchedulerEvent> {
        let mut rx = self.events.lock().unwrap();
        let mut out = Vec::new();
        while let Ok(event) = rx.try_recv() {
            out.push(event);
        }
        out
    }

    /// The audit records of a review (§9.14), oldest first.
    pub fn review_audit(&self, confirmation_id: &str) -> Vec<openphone_store::AuditRecord> {
        self.store
            .find_audit(&review::audit_id(confirmation_id))
            .unwrap()
    }
}

fn scheduler(
    store: &Arc<Store>,
    clock: &ManualClock,
    owner: &str,
    runner: &Arc<BridgeRunner>,
    executor: &Arc<CountingExecutor>,
) -> Scheduler {
    let agent: Arc<dyn JobRunner> = runner.clone();
    let sched = Scheduler::new(
        Arc::clone(store),
        Arc::new(clock.clone()),
        SchedulerConfig::new(owner),
        Runners::builtin().with(JobType::AgentTurn, agent),
    );
    let executor: Arc<dyn openphone_jobs::ReviewExecutor> = executor.clone();
    sched.set_review_executor(executor);
    sched
}

/// The JSON object of a bound result or record string.
pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// Resolves once one more executor call has run its action.
pub async fn wait_started(executor: &CountingExecutor) {
    executor.started.acquire().await.unwrap().forget();
}
