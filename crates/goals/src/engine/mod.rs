//! The goal engine: creation, plans, the tick of §3, user operations (answer, retry, pause,
//! resume, abort) and the router of actions to their executors.
//!
//! One tick per goal at a time (a per-goal lock). A tick:
//!
//! 1. **ingests** what happened outside it: confirmations resolved (the store's record of
//!    the action's confirmation), timers elapsed, and attempts left RUNNING by a process that
//!    died (re-sent first with the same idempotency key: the bridge replays a recorded
//!    result or answers `execution_result_unknown` — never a blind re-run);
//! 2. **re-evaluates**: PLANNED actions whose dependencies are done become READY, every READY
//!    `tool` action is dry-run through the real policy stack (`ToolBridge::explain`) in the
//!    goal's background context; blocked actions whose backoff elapsed are readied;
//! 3. **schedules** READY actions, critical path to the deadline first, then plan order, at
//!    most `max_parallel` running at once;
//! 4. **executes** them through the router — after their RUNNING / NEEDS_APPROVAL transition is
//!    stored: `tool` → the ToolBridge (key `goal_<id>:<action>:<n>`), `agent_turn` and `job`
//!    → the attached [`Backends`], `wait` → a timer, `ask_user` → a question blocker,
//!    `verify` → the success criteria;
//! 5. **checkpoints and reports**: deadline checkpoints, the goal's state (never a silent
//!    stop: a goal that is not moving names a blocker), a delta report when something that
//!    matters changed, the artifacts.

// The router and the tick decide what every action kind and state does: a new one must be
// handled, not fall into a catch-all.
#![warn(clippy::wildcard_enum_match_arm)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_clock::Clock;
use openphone_core::ToolBridge;
use openphone_policy::Caller;
use openphone_protocol::ToolResult;
use openphone_store::{
    GoalReport, GoalTransition, NewGoalReport, ReportDelivery, Store, StoredGoal,
};
use serde_json::{Value, json};

use crate::error::GoalsError;
use crate::ids::goal_id;
use crate::model::{
    Action, ActionKind, ActionState, Attempt, AttemptOutcome, BlockerKind, CheckpointOutcome,
    DeliveryChannel, Evidence, EvidenceKind, Goal, GoalState, Owner,
};
use crate::report::{DeltaReport, ReportReason, delta};
use crate::spec::{GoalSpec, new_goal};
use crate::transition::{BlockWith, Source, Transition, move_action};

pub(crate) mod events;
mod ingest;
mod ops;
mod outcome;
mod planner;
mod router;
mod schedule;
mod settle;
mod verify;

pub use events::{Happening, waiting_jobs};
pub use schedule::summarise;

/// The principal the goal layer's requests carry.
pub const PRINCIPAL: &str = openphone_core::GOAL_PRINCIPAL;

/// A runtime that works `agent_turn` prompts in an isolated session (the built-in runtime, a
/// scripted one in the simulator).
#[async_trait]
pub trait AgentBackend: Send + Sync {
    /// Works `prompt` in runtime session `session`; the answer text, or why it failed.
    async fn agent_turn(&self, session: &str, prompt: &str) -> Result<String, String>;

    /// [`AgentBackend::agent_turn`] for a goal that names its phone (`device`): the turn's
    /// tool calls act on it. The default is for runtimes that call no phone (scripted ones).
    async fn agent_turn_on_device(
        &self,
        session: &str,
        prompt: &str,
        device: Option<&str>,
    ) -> Result<String, String> {
        let _ = device;
        self.agent_turn(session, prompt).await
    }
}

/// Schedules agent jobs (the `job` action kind) and tells how they stand: a `job` action is
/// RUNNING from the job's creation until the job's run finishes.
#[async_trait]
pub trait JobBackend: Send + Sync {
    /// Creates the job; its id.
    async fn create_job(
        &self,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
    ) -> Result<i64, String>;

    /// Creates the job for the attempt whose idempotency key is `key`
    /// (`goal_<id>:<action>:<n>`), or answers the job already made for that key: an attempt
    /// never has two jobs. The default ignores the key (a backend that cannot find jobs by it).
    async fn create_job_keyed(
        &self,
        key: &str,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
    ) -> Result<i64, String> {
        let _ = key;
        self.create_job(title, prompt, run_at).await
    }

    /// [`JobBackend::create_job_keyed`] for a goal that names its phone: the job is made
    /// with that `device_id`, so its runs act on the goal's phone. The default ignores a
    /// phone it cannot pass on only when none is named.
    async fn create_job_on_device(
        &self,
        key: &str,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
        device: Option<&str>,
    ) -> Result<i64, String> {
        match device {
            None => self.create_job_keyed(key, title, prompt, run_at).await,
            Some(d) => Err(format!("this job backend cannot make a job on phone {d:?}")),
        }
    }

    /// The job made for the attempt whose idempotency key is `key`, if there is one (the
    /// daemon stopped after creating it and before recording its id: it is adopted, never
    /// made twice). The default finds none.
    async fn job_by_key(&self, key: &str) -> Option<i64> {
        let _ = key;
        None
    }

    /// How job `job_id` stands now.
    async fn progress(&self, job_id: i64) -> JobProgress;

    /// Stops job `job_id` (a failed run's job, so the action's own retry path is the only
    /// one that runs it again).
    async fn stop_job(&self, job_id: i64) -> Result<(), String>;
}

/// How the agent job of a `job` action stands ([`JobBackend::progress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobProgress {
    /// Its run has not finished: queued, running, parked on a review, paused, or handed to a
    /// runtime whose answer is awaited (the note says which).
    Pending(String),
    /// Its run succeeded (the result, short).
    Succeeded(String),
    /// Its run failed (why); `live` when the job would run again by itself.
    Failed { reason: String, live: bool },
    /// Someone stopped it before its run finished.
    Stopped,
    /// It cannot be read (why).
    Gone(String),
}

/// The backends of `agent_turn` and `job` actions. Without one, such an action is BLOCKED
/// (external) naming what is missing — never silently skipped.
#[derive(Clone, Default)]
pub struct Backends {
    pub agent: Option<Arc<dyn AgentBackend>>,
    pub jobs: Option<Arc<dyn JobBackend>>,
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickOutcome {
    /// Transitions made, in order.
    pub transitions: Vec<Transition>,
    /// Reports made.
    pub reports: Vec<DeltaReport>,
    /// The goal's state after the tick.
    pub state: Option<GoalState>,
    /// When the goal next needs a tick by time alone (a checkpoint, a backoff, a wait).
    pub next_wake: Option<i64>,
}

/// The goal engine.
pub struct GoalEngine {
    store: Arc<Store>,
    bridge: Arc<ToolBridge>,
    clock: Arc<dyn Clock>,
    backends: Backends,
    artifacts: Option<PathBuf>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The document of each goal as this engine last read or wrote it, with its store version:
    /// a read whose version is unchanged is served from here instead of parsing the stored
    /// JSON again (a plan of hundreds of actions is read at every tick).
    documents: Mutex<HashMap<String, Goal>>,
}

/// At most this many goal documents are kept by [`GoalEngine::get`]'s cache (it is emptied
/// when full; finished goals leave it).
const CACHED_DOCUMENTS: usize = 256;

/// A tick's working set: the goal and what the tick recorded on it so far.
struct Work {
    goal: Goal,
    transitions: Vec<Transition>,
    pending: Vec<Transition>,
    reports: Vec<DeltaReport>,
}

impl Work {
    fn mv(
        &mut self,
        action: &str,
        to: ActionState,
        source: Source,
        reason: &str,
        now: i64,
        block: Option<BlockWith>,
    ) -> Result<(), GoalsError> {
        let t = move_action(&mut self.goal, action, to, source, reason, now, block)?;
        self.pending.push(t);
        Ok(())
    }

    fn evidence(
        &mut self,
        action: &str,
        kind: EvidenceKind,
        reference: String,
        dig: String,
        now: i64,
    ) {
        let id = format!("ev_{}", self.goal.next_seq());
        self.goal.evidence.push(Evidence {
            id,
            action_id: Some(action.to_owned()),
            kind,
            reference,
            digest: dig,
            at: now,
        });
    }

    fn attempt_mut(&mut self, action: &str) -> Option<&mut Attempt> {
        self.goal
            .action_mut(action)
            .and_then(|a| a.attempts.last_mut())
    }
}

fn lost(what: &str) -> GoalsError {
    GoalsError::Internal(format!("{what} vanished during the tick"))
}

fn retry_line(goal: &str, action: &str) -> String {
    format!("openphone goals retry {goal} {action}")
}

fn block(kind: BlockerKind, token: String, how: String) -> Option<BlockWith> {
    Some(BlockWith {
        kind,
        resume_token: token,
        how_to_resolve: how,
    })
}

fn failure_text(result: &ToolResult) -> String {
    match &result.error {
        Some(e) => format!("{}: {}", e.code.as_str(), e.message),
        None => wire(&result.status),
    }
}

impl GoalEngine {
    /// An engine over the daemon's store and bridge (whose clock it uses), writing artifacts
    /// under `artifacts` when given.
    pub fn new(
        store: Arc<Store>,
        bridge: Arc<ToolBridge>,
        backends: Backends,
        artifacts: Option<PathBuf>,
    ) -> GoalEngine {
        let clock = bridge.clock();
        GoalEngine {
            store,
            bridge,
            clock,
            backends,
            artifacts,
            locks: Mutex::new(HashMap::new()),
            documents: Mutex::new(HashMap::new()),
        }
    }

    /// The engine's clock reading.
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The goal's stored transitions, oldest first.
    pub fn transitions(&self, id: &str) -> Result<Vec<GoalTransition>, GoalsError> {
        Ok(self.store.goal_transitions(id)?)
    }

    /// The goal's stored delta reports with their delivery, oldest first.
    pub fn reports(&self, id: &str) -> Result<Vec<GoalReport>, GoalsError> {
        Ok(self.store.goal_reports(id)?)
    }

    /// The bridge.
    pub fn bridge(&self) -> &Arc<ToolBridge> {
        &self.bridge
    }

    fn caller() -> Caller {
        Caller::builtin(PRINCIPAL)
    }

    /// The caller `goal`'s steps and checks are made as: `builtin` for the user's own goals;
    /// for a runtime's goal `builtin` narrowed to that runtime's authority now (the
    /// intersection of the two runtimes' grants and ceilings,
    /// [`ToolBridge::creator_authority`]), so a goal never does more than its owner may —
    /// also after the owner lost a grant. The job and watcher commands its steps call act for
    /// the owner too (`openphone_core::authority::acting_for`).
    fn caller_for(&self, goal: &Goal) -> Caller {
        let builtin = Self::caller();
        if goal.owner.surface != "runtime" {
            return builtin;
        }
        // A runtime's goal that names no runtime has nobody's authority (everything refused).
        let owner = goal.owner.runtime.as_deref().unwrap_or_default();
        self.bridge
            .creator_authority(&builtin, owner)
            .caller()
            .clone()
    }

    fn lock_for(&self, goal_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(locks.entry(goal_id.to_owned()).or_default())
    }

    /// Creates a goal from `spec` (with its plan, when one is given).
    pub fn create(&self, spec: &GoalSpec, owner: Owner) -> Result<Goal, GoalsError> {
        self.create_with_id(spec, owner, &goal_id(self.now()))
    }

    /// [`GoalEngine::create`] with a given id (the simulator's fixed one).
    pub fn create_with_id(
        &self,
        spec: &GoalSpec,
        owner: Owner,
        id: &str,
    ) -> Result<Goal, GoalsError> {
        let now = self.now();
        let mut goal = new_goal(spec, id.to_owned(), owner, now)?;
        let transitions = Vec::new();
        let stored = self
            .store
            .create_goal(&to_stored(&goal)?, transitions, Vec::new())?;
        goal.version = stored.version;
        self.remember(&goal);
        Ok(goal)
    }

    /// One goal.
    pub fn get(&self, id: &str) -> Result<Goal, GoalsError> {
        let version = self
            .store
            .goal_version(id)?
            .ok_or_else(|| GoalsError::NotFound(id.to_owned()))?;
        if let Some(goal) = self
            .cached_documents()
            .get(id)
            .filter(|g| g.version == version)
        {
            return Ok(goal.clone());
        }
        let stored = self
            .store
            .get_goal_text(id)?
            .ok_or_else(|| GoalsError::NotFound(id.to_owned()))?;
        let mut goal: Goal = serde_json::from_str(&stored.goal_json)
            .map_err(|e| GoalsError::Corrupt(stored.goal_id.clone(), e.to_string()))?;
        goal.version = stored.version;
        self.remember(&goal);
        Ok(goal)
    }

    fn cached_documents(&self) -> std::sync::MutexGuard<'_, HashMap<String, Goal>> {
        self.documents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `goal` (as stored at its version) for the next [`GoalEngine::get`].
    fn remember(&self, goal: &Goal) {
        let mut documents = self.cached_documents();
        if goal.state.is_terminal() {
            documents.remove(&goal.id);
            return;
        }
        if documents.len() >= CACHED_DOCUMENTS && !documents.contains_key(&goal.id) {
            documents.clear();
        }
        documents.insert(goal.id.clone(), goal.clone());
    }

    /// Goals, most recently updated first (all states when `states` is empty): those this
    /// engine works on — in a fleet sharing the store, the goals made on this daemon (their
    /// actions run on its phones; every other daemon ticks its own).
    pub fn list(
        &self,
        states: &[GoalState],
        limit: Option<usize>,
    ) -> Result<Vec<Goal>, GoalsError> {
        let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        let mut stored = self.store.list_goals(&names, limit)?;
        if let Some(fleet) = self.store.fleet() {
            let me = fleet.host_id();
            stored.retain(|g| g.host.as_ref().is_some_and(|h| h.host_id == me));
        }
        stored.iter().map(from_stored).collect()
    }

    /// [`GoalEngine::list`] with each goal's daemon in a fleet sharing the store (`None` on a
    /// store that is not shared): the operator's fleet-wide views.
    pub fn list_with_hosts(
        &self,
        states: &[GoalState],
        limit: Option<usize>,
    ) -> Result<Vec<(Goal, Option<openphone_store::RowHost>)>, GoalsError> {
        let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        self.store
            .list_goals(&names, limit)?
            .iter()
            .map(|stored| Ok((from_stored(stored)?, stored_host(stored))))
            .collect()
    }

    /// Writes `goal` (compare-and-set on its version) with its transitions and reports.
    fn save(
        &self,
        goal: &mut Goal,
        transitions: &[Transition],
        reports: &[DeltaReport],
    ) -> Result<(), GoalsError> {
        let channel = goal.delivery;
        let reports = reports
            .iter()
            .map(|r| {
                Ok(NewGoalReport {
                    channel: channel.as_str().to_owned(),
                    report: serde_json::to_value(r)
                        .map_err(|e| GoalsError::Internal(e.to_string()))?,
                    delivery: if channel == DeliveryChannel::None {
                        ReportDelivery::Suppressed
                    } else {
                        ReportDelivery::Pending
                    },
                    created_at_ms: r.at,
                })
            })
            .collect::<Result<Vec<_>, GoalsError>>()?;
        // The document goes to the store as text, without a `Value` tree of it first.
        let text = openphone_store::GoalText {
            goal_id: goal.id.clone(),
            state: goal.state.as_str().to_owned(),
            version: goal.version,
            deadline_at_ms: goal.deadline_at,
            created_at_ms: goal.created_at,
            updated_at_ms: goal.updated_at,
            goal_json: serde_json::to_string(goal)
                .map_err(|e| GoalsError::Internal(e.to_string()))?,
        };
        goal.version = self.store.update_goal_text(
            text,
            transitions.iter().map(Transition::to_store).collect(),
            reports,
        )?;
        self.remember(goal);
        Ok(())
    }

    /// Persists what the tick recorded so far (transitions before their side effects).
    fn flush(&self, work: &mut Work) -> Result<(), GoalsError> {
        if work.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut work.pending);
        self.save(&mut work.goal, &pending, &[])?;
        work.transitions.extend(pending);
        Ok(())
    }

    /// Runs `f` on the goal under its lock, then stores it (with the transitions `f` made).
    async fn update<F>(&self, id: &str, f: F) -> Result<Goal, GoalsError>
    where
        F: FnOnce(&mut Work, i64) -> Result<(), GoalsError>,
    {
        let lock = self.lock_for(id);
        let _guard = lock.lock().await;
        let goal = self.get(id)?;
        // In a fleet a goal's actions run on the phones of the daemon that made it: only that
        // daemon ticks it.
        if let Some(fleet) = self.store.fleet()
            && !fleet.goal_is_here(id)?
        {
            return Err(GoalsError::invalid(
                "goal",
                format!(
                    "goal {id} acts on the phones of another host of the fleet, not of this \
                     daemon (host {:?}): its own daemon ticks it",
                    fleet.host_id()
                ),
            ));
        }
        let mut work = Work {
            goal,
            transitions: Vec::new(),
            pending: Vec::new(),
            reports: Vec::new(),
        };
        let now = self.now();
        f(&mut work, now)?;
        if let Some(r) = delta(&mut work.goal, ReportReason::Progress, now, false) {
            work.reports.push(r);
        }
        let pending = std::mem::take(&mut work.pending);
        let reports = std::mem::take(&mut work.reports);
        self.save(&mut work.goal, &pending, &reports)?;
        self.write_artifacts(&work.goal);
        Ok(work.goal)
    }

    /// One tick of the goal (§3).
    pub async fn tick(&self, id: &str) -> Result<TickOutcome, GoalsError> {
        let lock = self.lock_for(id);
        let _guard = lock.lock().await;
        let goal = self.get(id)?;
        let mut work = Work {
            goal,
            transitions: Vec::new(),
            pending: Vec::new(),
            reports: Vec::new(),
        };
        if !work.goal.state.is_terminal() {
            self.ingest(&mut work).await?;
            if work.goal.state != GoalState::Paused && work.goal.plan_version > 0 {
                // Rounds until nothing more starts: what an action's completion readies runs
                // in the same tick.
                for _ in 0..=work.goal.actions.len() {
                    let before = work.pending.len();
                    self.reevaluate(&mut work)?;
                    // A step that would be denied (or waits for approval while a safer path
                    // exists) gets the planner's alternative before it is scheduled (§4).
                    let replanned = self.propose_alternatives(&mut work).await?;
                    let started = self.schedule(&mut work)?;
                    let changed = work.pending.len() > before || replanned;
                    // The transitions into RUNNING / NEEDS_APPROVAL are stored before any
                    // side effect of those states starts.
                    self.flush(&mut work)?;
                    if started.is_empty() && !changed {
                        break;
                    }
                    let last = started.len();
                    for (i, action) in started.into_iter().enumerate() {
                        self.execute(&mut work, &action).await?;
                        // What an execution recorded is stored before the next one's side
                        // effect starts; after the last, with the next round's transitions
                        // (re-evaluating and scheduling have no side effect).
                        if i + 1 < last {
                            self.flush(&mut work)?;
                        }
                    }
                }
                self.flush(&mut work)?;
            }
            self.checkpoints(&mut work).await?;
            self.settle_state(&mut work).await?;
        }
        let now = self.now();
        let reason = match work.goal.state {
            GoalState::Done => ReportReason::Done,
            GoalState::Blocked => ReportReason::Blocked,
            GoalState::Draft
            | GoalState::Active
            | GoalState::Paused
            | GoalState::Failed
            | GoalState::Aborted => ReportReason::Progress,
        };
        if let Some(r) = delta(&mut work.goal, reason, now, false) {
            work.reports.push(r);
        }
        let pending = std::mem::take(&mut work.pending);
        let reports = std::mem::take(&mut work.reports);
        self.save(&mut work.goal, &pending, &reports)?;
        work.transitions.extend(pending);
        self.write_artifacts(&work.goal);
        Ok(TickOutcome {
            next_wake: next_wake(&work.goal),
            state: Some(work.goal.state),
            transitions: work.transitions,
            reports,
        })
    }

    fn write_artifacts(&self, goal: &Goal) {
        if let Some(dir) = &self.artifacts {
            let transitions = self.store.goal_transitions(&goal.id).unwrap_or_default();
            if let Err(e) = crate::artifacts::write_all(dir, goal, &transitions, self.now()) {
                tracing::warn!(goal = %goal.id, error = %e, "goal artifacts could not be written");
            }
        }
    }
}

/// The wire name of a serialisable enum value.
fn wire<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The attempts that count against the budget: all but expired approval requests.
fn counted_attempts(action: &Action) -> u32 {
    let n = action
        .attempts
        .iter()
        .filter(|a| a.outcome != AttemptOutcome::Expired)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn clip(text: &str) -> String {
    let cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// When the goal next needs a tick by time alone.
pub fn next_wake(goal: &Goal) -> Option<i64> {
    if goal.state.is_terminal() {
        return None;
    }
    let checkpoints = goal
        .checkpoints
        .iter()
        .filter(|c| c.outcome == CheckpointOutcome::Pending)
        .map(|c| c.at);
    let backoffs = goal
        .actions
        .iter()
        .filter(|a| a.state == ActionState::Ready && a.not_before > 0)
        .map(|a| a.not_before);
    let waits = goal
        .actions
        .iter()
        .filter_map(|a| match (&a.kind, a.state) {
            (ActionKind::Wait { until_ms, .. }, ActionState::Running) => Some(*until_ms),
            (_, ActionState::NeedsApproval) => a.last_attempt().and_then(|t| t.approval_expires_at),
            _ => None,
        });
    checkpoints.chain(backoffs).chain(waits).min()
}

/// The store's row of a goal.
pub fn to_stored(goal: &Goal) -> Result<StoredGoal, GoalsError> {
    Ok(StoredGoal {
        goal_id: goal.id.clone(),
        state: goal.state.as_str().to_owned(),
        version: goal.version,
        deadline_at_ms: goal.deadline_at,
        created_at_ms: goal.created_at,
        updated_at_ms: goal.updated_at,
        goal: serde_json::to_value(goal).map_err(|e| GoalsError::Internal(e.to_string()))?,
        host: None,
    })
}

/// The daemon of a fleet a stored goal belongs to.
fn stored_host(stored: &StoredGoal) -> Option<openphone_store::RowHost> {
    stored.host.clone()
}

/// A goal from the store's row.
pub fn from_stored(stored: &StoredGoal) -> Result<Goal, GoalsError> {
    let mut goal: Goal = serde_json::from_value(stored.goal.clone())
        .map_err(|e| GoalsError::Corrupt(stored.goal_id.clone(), e.to_string()))?;
    goal.version = stored.version;
    Ok(goal)
}

/// The JSON the endpoint and CLI show for a goal.
pub fn goal_json(goal: &Goal) -> Value {
    let mut value = serde_json::to_value(goal).unwrap_or(Value::Null);
    if let Some(obj) = value.as_object_mut() {
        obj.insert("version".to_owned(), json!(goal.version));
        obj.remove("reported");
        obj.remove("seq");
    }
    value
}
