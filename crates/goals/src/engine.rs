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

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_clock::Clock;
use openphone_core::ToolBridge;
use openphone_policy::{Caller, Context};
use openphone_protocol::endpoint::{Explanation, PolicyOutcome};
use openphone_protocol::{ErrorCode, ToolRequest, ToolResult, ToolStatus};
use openphone_store::{ConfirmationState, NewGoalReport, ReportDelivery, Store, StoredGoal};
use serde_json::{Map, Value, json};

use crate::deadline::{LATE_AFTER_MS, evaluate, remaining_path};
use crate::error::GoalsError;
use crate::ids::{attempt_key, digest, goal_id};
use crate::model::{
    Action, ActionKind, ActionState, Attempt, AttemptOutcome, Blocker, BlockerKind,
    CheckpointOutcome, CriterionCheck, DecisionSummary, DeliveryChannel, Evidence, EvidenceKind,
    Goal, GoalState, Owner,
};
use crate::report::{DeltaReport, ReportReason, delta};
use crate::retry::backoff_ms;
use crate::spec::{ActionSpec, GoalSpec, accept_plan, new_goal};
use crate::transition::{BlockWith, Source, Transition, move_action};

/// The principal the goal layer's requests carry.
pub const PRINCIPAL: &str = openphone_core::GOAL_PRINCIPAL;

/// A runtime that works `agent_turn` prompts in an isolated session (the built-in runtime, a
/// scripted one in the simulator).
#[async_trait]
pub trait AgentBackend: Send + Sync {
    /// Works `prompt` in runtime session `session`; the answer text, or why it failed.
    async fn agent_turn(&self, session: &str, prompt: &str) -> Result<String, String>;
}

/// Schedules agent jobs (the `job` action kind).
#[async_trait]
pub trait JobBackend: Send + Sync {
    /// Creates the job; its id.
    async fn create_job(
        &self,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
    ) -> Result<i64, String>;
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

/// The wire name of a serialisable enum value.
fn wire<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The summary of a dry run.
pub fn summarise(explanation: &Explanation, now: i64) -> DecisionSummary {
    let outcome = explanation.decision;
    let deciding = explanation
        .layers
        .iter()
        .find(|l| l.verdict == outcome && outcome != PolicyOutcome::Allow)
        .or_else(|| explanation.layers.last());
    DecisionSummary {
        outcome: wire(&outcome),
        layer: deciding.map(|l| wire(&l.layer)).unwrap_or_default(),
        reason: deciding.map(|l| l.reason.clone()).unwrap_or_default(),
        proof_digest: serde_json::to_value(explanation)
            .map(|v| digest(&v))
            .unwrap_or_default(),
        layers: explanation
            .layers
            .iter()
            .map(|l| format!("{}: {} — {}", wire(&l.layer), wire(&l.verdict), l.reason))
            .collect(),
        change_command: explanation.changes.iter().find_map(|c| c.command.clone()),
        at: now,
    }
}

fn is_transient(result: &ToolResult) -> bool {
    if result.status == ToolStatus::Timeout {
        return true;
    }
    let code = result.error.as_ref().map(|e| e.code.as_str()).unwrap_or("");
    ["unavailable", "rate_limited", "timeout", "busy"]
        .iter()
        .any(|w| code.contains(w))
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

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
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

    /// Goals, most recently updated first (all states when `states` is empty).
    pub fn list(
        &self,
        states: &[GoalState],
        limit: Option<usize>,
    ) -> Result<Vec<Goal>, GoalsError> {
        let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        self.store
            .list_goals(&names, limit)?
            .iter()
            .map(from_stored)
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

    /// Accepts a new plan for the goal (§1: a re-plan replaces only what has not started).
    pub async fn submit_plan(&self, id: &str, plan: &[ActionSpec]) -> Result<Goal, GoalsError> {
        self.update(id, |work, now| {
            accept_plan(&mut work.goal, plan, now)?;
            Ok(())
        })
        .await
    }

    /// The user's answer to an `ask_user` action: recorded as evidence, the action proceeds.
    pub async fn answer(&self, id: &str, action: &str, text: &str) -> Result<Goal, GoalsError> {
        if text.trim().is_empty() {
            return Err(GoalsError::invalid("answer", "must not be empty"));
        }
        self.update(id, |work, now| {
            let a = work
                .goal
                .action(action)
                .ok_or_else(|| GoalsError::NoAction(action.to_owned()))?;
            if !(matches!(a.kind, ActionKind::AskUser { .. }) && a.state == ActionState::Running) {
                return Err(GoalsError::invalid(
                    "action",
                    "is not an ask_user action waiting for an answer",
                ));
            }
            work.goal
                .blockers
                .retain(|b| b.action_id.as_deref() != Some(action));
            work.evidence(
                action,
                EvidenceKind::UserAnswer,
                text.trim().to_owned(),
                crate::ids::digest_text(text.trim()),
                now,
            );
            if let Some(att) = work.attempt_mut(action) {
                att.outcome = AttemptOutcome::Ok;
                att.finished_at = Some(now);
                att.summary = "answered".to_owned();
            }
            work.mv(
                action,
                ActionState::Verifying,
                Source::Executor,
                "the user answered",
                now,
                None,
            )?;
            work.mv(
                action,
                ActionState::Done,
                Source::Verifier,
                "an answer is all it needs",
                now,
                None,
            )?;
            Ok(())
        })
        .await
    }

    /// `goals retry`: a BLOCKED action (or every one) becomes READY; its budget is renewed.
    pub async fn retry(&self, id: &str, action: Option<&str>) -> Result<Goal, GoalsError> {
        self.update(id, |work, now| {
            let targets: Vec<String> = work
                .goal
                .actions
                .iter()
                .filter(|a| a.state == ActionState::Blocked)
                .filter(|a| action.is_none_or(|x| x == a.id))
                .map(|a| a.id.clone())
                .collect();
            if targets.is_empty() {
                return Err(GoalsError::invalid("action", "no BLOCKED action to retry"));
            }
            for t in targets {
                work.mv(
                    &t,
                    ActionState::Ready,
                    Source::User,
                    "the user asked to retry",
                    now,
                    None,
                )?;
                if let Some(a) = work.goal.action_mut(&t) {
                    a.not_before = 0;
                    a.decision = None;
                }
            }
            work.goal.retry_budget.used = 0;
            if work.goal.state == GoalState::Blocked {
                work.goal.state = GoalState::Active;
            }
            Ok(())
        })
        .await
    }

    /// Pauses the goal: nothing is scheduled until resumed.
    pub async fn pause(&self, id: &str) -> Result<Goal, GoalsError> {
        self.update(id, |work, _| {
            if work.goal.state.is_terminal() {
                return Err(GoalsError::invalid(
                    "goal",
                    format!("the goal is {}", work.goal.state),
                ));
            }
            work.goal.state = GoalState::Paused;
            Ok(())
        })
        .await
    }

    /// Resumes a paused goal.
    pub async fn resume(&self, id: &str) -> Result<Goal, GoalsError> {
        self.update(id, |work, _| {
            if work.goal.state != GoalState::Paused {
                return Err(GoalsError::invalid("goal", "is not paused"));
            }
            work.goal.state = GoalState::Active;
            Ok(())
        })
        .await
    }

    /// Aborts the goal (every non-terminal action becomes ABORTED), or one action. The
    /// confirmations its aborted actions waited on are withdrawn, so a late approval runs
    /// nothing.
    pub async fn abort(&self, id: &str, action: Option<&str>) -> Result<Goal, GoalsError> {
        let waiting: Vec<String> = self
            .get(id)?
            .actions
            .iter()
            .filter(|a| a.state == ActionState::NeedsApproval)
            .filter(|a| action.is_none_or(|x| x == a.id))
            .filter_map(|a| a.last_attempt().and_then(|t| t.confirmation_id.clone()))
            .collect();
        let goal = self.abort_actions(id, action).await?;
        for cid in waiting {
            if let Err(e) = self.bridge.withdraw(&Self::caller(), &cid).await {
                tracing::info!(goal = %id, confirmation = %cid, error = %e, "not withdrawn (already resolved)");
            }
        }
        Ok(goal)
    }

    async fn abort_actions(&self, id: &str, action: Option<&str>) -> Result<Goal, GoalsError> {
        self.update(id, |work, now| {
            if work.goal.state.is_terminal() {
                return Err(GoalsError::invalid(
                    "goal",
                    format!("the goal is {}", work.goal.state),
                ));
            }
            let targets: Vec<String> = work
                .goal
                .actions
                .iter()
                .filter(|a| !a.state.is_terminal())
                .filter(|a| action.is_none_or(|x| x == a.id))
                .map(|a| a.id.clone())
                .collect();
            if let Some(x) = action
                && targets.is_empty()
            {
                return Err(GoalsError::NoAction(x.to_owned()));
            }
            for t in targets {
                work.mv(
                    &t,
                    ActionState::Aborted,
                    Source::User,
                    "aborted by the user",
                    now,
                    None,
                )?;
            }
            if action.is_none() {
                work.goal.state = GoalState::Aborted;
                work.goal.blockers.clear();
            }
            Ok(())
        })
        .await
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
                    let started = self.schedule(&mut work)?;
                    let changed = work.pending.len() > before;
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
            _ => ReportReason::Progress,
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

    /// The request of attempt `n` of a tool action.
    fn request(
        goal: &Goal,
        action: &Action,
        command: &str,
        params: &Map<String, Value>,
        n: u32,
    ) -> ToolRequest {
        let key = attempt_key(&goal.id, &action.id, n);
        let mut params = params.clone();
        params
            .entry("reason")
            .or_insert_with(|| Value::String(action.title.clone()));
        ToolRequest {
            request_id: key.clone(),
            runtime: Some(openphone_policy::BUILTIN_RUNTIME.to_owned()),
            runtime_session_id: action.session(&goal.id),
            phone_session_id: None,
            tool: command.to_owned(),
            params: Value::Object(params),
            reason: Some(action.title.clone()),
            autonomy: Some(goal.autonomy.clone()),
            idempotency_key: Some(key),
            timeout_ms: None,
        }
    }

    /// The dry run of a tool action now (§4): the real policy stack, the goal's autonomy, the
    /// background context, then the goal's risk ceiling (`risk.rs`). A request the bridge
    /// refuses to validate is a Deny.
    pub fn dry_run(&self, goal: &Goal, action: &Action) -> Option<DecisionSummary> {
        let ActionKind::Tool { command, .. } = &action.kind else {
            return None;
        };
        let decision = self.policy_dry_run(goal, action)?;
        Some(crate::risk::cap(goal, &action.id, command, decision))
    }

    /// The policy stack's part of [`GoalEngine::dry_run`].
    fn policy_dry_run(&self, goal: &Goal, action: &Action) -> Option<DecisionSummary> {
        let ActionKind::Tool { command, params } = &action.kind else {
            return None;
        };
        let n = u32::try_from(action.attempts.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        let request = Self::request(goal, action, command, params, n);
        let now = self.now();
        Some(
            match self
                .bridge
                .explain(&self.caller_for(goal), request, Context::goal(&goal.id))
            {
                Ok(explanation) => summarise(&explanation, now),
                Err((code, message)) => DecisionSummary {
                    outcome: "deny".to_owned(),
                    layer: "validation".to_owned(),
                    reason: format!("{}: {message}", code.as_str()),
                    proof_digest: crate::ids::digest_text(&message),
                    layers: vec![format!("validation: deny — {message}")],
                    change_command: None,
                    at: now,
                },
            },
        )
    }

    /// The permission envelope of the goal's plan (§4): each tool action's decision.
    pub fn envelope(&self, goal: &Goal) -> Vec<(String, DecisionSummary)> {
        goal.actions
            .iter()
            .filter_map(|a| self.dry_run(goal, a).map(|d| (a.id.clone(), d)))
            .collect()
    }

    async fn ingest(&self, work: &mut Work) -> Result<(), GoalsError> {
        // Confirmations past their time are timed out first, so an expiry is seen now.
        if work
            .goal
            .actions
            .iter()
            .any(|a| a.state == ActionState::NeedsApproval)
        {
            self.bridge.expire_due().await;
        }
        let now = self.now();
        let ids: Vec<String> = work
            .goal
            .actions
            .iter()
            .filter(|a| matches!(a.state, ActionState::NeedsApproval | ActionState::Running))
            .map(|a| a.id.clone())
            .collect();
        for id in ids {
            let Some(action) = work.goal.action(&id).cloned() else {
                continue;
            };
            match (action.state, &action.kind) {
                (ActionState::NeedsApproval, ActionKind::Tool { .. })
                    if action
                        .last_attempt()
                        .is_some_and(|a| a.confirmation_id.is_none()) =>
                {
                    // A process stopped between storing NEEDS_APPROVAL and recording the
                    // confirmation: ask again with the same key — the bridge joins the
                    // confirmation it may have made (or answers its final result).
                    self.execute(work, &id).await?;
                }
                (ActionState::NeedsApproval, ActionKind::Tool { .. }) => {
                    self.ingest_confirmation(work, &action, now).await?;
                }
                (ActionState::Running, ActionKind::Wait { until_ms }) if *until_ms <= now => {
                    if let Some(att) = work.attempt_mut(&id) {
                        att.outcome = AttemptOutcome::Ok;
                        att.finished_at = Some(now);
                    }
                    work.mv(
                        &id,
                        ActionState::Verifying,
                        Source::Executor,
                        "the wait is over",
                        now,
                        None,
                    )?;
                    work.mv(
                        &id,
                        ActionState::Done,
                        Source::Verifier,
                        "nothing to check",
                        now,
                        None,
                    )?;
                }
                (ActionState::Running, ActionKind::Tool { command, params }) => {
                    // Left RUNNING by a process that stopped: the same key is re-sent first.
                    let n = action.last_attempt().map_or(1, |a| a.n);
                    let request = Self::request(&work.goal, &action, command, params, n);
                    let result = self
                        .bridge
                        .invoke(
                            &self.caller_for(&work.goal),
                            request,
                            Context::goal(&work.goal.id),
                        )
                        .await;
                    self.tool_result(work, &id, result, Source::Recovery)
                        .await?;
                }
                (
                    ActionState::Running,
                    ActionKind::AgentTurn { .. } | ActionKind::Job { .. } | ActionKind::Verify,
                ) => {
                    // An in-process executor that did not finish: its outcome is unknown.
                    if let Some(att) = work.attempt_mut(&id) {
                        att.outcome = AttemptOutcome::OutcomeUnknown;
                        att.finished_at = Some(now);
                    }
                    work.mv(
                        &id,
                        ActionState::Blocked,
                        Source::Recovery,
                        "outcome_unknown: the daemon stopped while it ran",
                        now,
                        block(
                            BlockerKind::Failure,
                            format!("retry:{id}"),
                            retry_line(&work.goal.id, &id),
                        ),
                    )?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn ingest_confirmation(
        &self,
        work: &mut Work,
        action: &Action,
        now: i64,
    ) -> Result<(), GoalsError> {
        let id = action.id.clone();
        let Some(cid) = action
            .last_attempt()
            .and_then(|a| a.confirmation_id.clone())
        else {
            return Ok(());
        };
        let Some(record) = self.store.get_confirmation(&cid)? else {
            return Ok(());
        };
        let goal_id = work.goal.id.clone();
        match record.state {
            ConfirmationState::Pending | ConfirmationState::Approved => {}
            ConfirmationState::Completed => {
                let by = record
                    .resolved_by
                    .clone()
                    .unwrap_or_else(|| "the user".to_owned());
                work.mv(
                    &id,
                    ActionState::Running,
                    Source::User,
                    &format!("approved by {by}"),
                    now,
                    None,
                )?;
                let result: Option<ToolResult> = record
                    .final_result
                    .clone()
                    .and_then(|v| serde_json::from_value(v).ok());
                match result {
                    Some(result) => {
                        self.tool_result(work, &id, result, Source::Executor)
                            .await?
                    }
                    None => self.unknown(work, &id, now, "the approved request left no result")?,
                }
            }
            ConfirmationState::Timeout if work.goal.deadline_at.is_none_or(|d| now < d) => {
                // The bridge's confirmations wait at most ten minutes; the goal's approval
                // waits until its deadline: ask again (an expired request costs no budget).
                if let Some(att) = work.attempt_mut(&id) {
                    att.outcome = AttemptOutcome::Expired;
                    att.finished_at = Some(now);
                    att.summary = "the approval request expired; asked again".to_owned();
                }
                if counted_attempts(action) >= 2 {
                    work.goal.retry_budget.used = work.goal.retry_budget.used.saturating_sub(1);
                }
                work.mv(
                    &id,
                    ActionState::Blocked,
                    Source::Clock,
                    "the approval request expired before the deadline",
                    now,
                    block(
                        BlockerKind::Approval,
                        format!("retry:{id}"),
                        retry_line(&goal_id, &id),
                    ),
                )?;
                work.mv(
                    &id,
                    ActionState::Ready,
                    Source::Clock,
                    "asking for approval again",
                    now,
                    None,
                )?;
            }
            ConfirmationState::Denied | ConfirmationState::Timeout => {
                let (source, why) = if record.state == ConfirmationState::Denied {
                    (Source::User, "declined by the user")
                } else {
                    (Source::Clock, "the approval expired")
                };
                if let Some(att) = work.attempt_mut(&id) {
                    att.outcome = AttemptOutcome::Declined;
                    att.finished_at = Some(now);
                    att.summary = why.to_owned();
                }
                work.mv(
                    &id,
                    ActionState::Blocked,
                    source,
                    why,
                    now,
                    block(
                        BlockerKind::Approval,
                        format!("retry:{id}"),
                        retry_line(&goal_id, &id),
                    ),
                )?;
            }
            ConfirmationState::ResultUnknown => {
                work.mv(
                    &id,
                    ActionState::Running,
                    Source::User,
                    "approved; the daemon stopped while it ran",
                    now,
                    None,
                )?;
                self.unknown(work, &id, now, "the approved request's outcome is unknown")?;
            }
        }
        Ok(())
    }

    /// RUNNING → BLOCKED with `outcome_unknown` (never re-executed blind).
    fn unknown(&self, work: &mut Work, id: &str, now: i64, why: &str) -> Result<(), GoalsError> {
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = AttemptOutcome::OutcomeUnknown;
            att.finished_at = Some(now);
            att.summary = why.to_owned();
        }
        let goal_id = work.goal.id.clone();
        work.mv(
            id,
            ActionState::Blocked,
            Source::Recovery,
            &format!("outcome_unknown: {why}; check the phone, then retry or abort"),
            now,
            block(
                BlockerKind::Failure,
                format!("unknown:{id}"),
                retry_line(&goal_id, id),
            ),
        )?;
        Ok(())
    }

    fn reevaluate(&self, work: &mut Work) -> Result<(), GoalsError> {
        let now = self.now();
        for i in 0..work.goal.actions.len() {
            let action = &work.goal.actions[i];
            if action.state == ActionState::Planned && deps_met(&work.goal, action) {
                let source = if action.depends_on.is_empty() {
                    Source::Clock
                } else {
                    Source::Dependency
                };
                let reason = if is_alternative(&work.goal, &action.id) {
                    "the step it replaces is blocked"
                } else if action.depends_on.is_empty() {
                    "nothing to wait for"
                } else {
                    "its dependencies are done"
                };
                let id = action.id.clone();
                work.mv(&id, ActionState::Ready, source, reason, now, None)?;
            }
        }
        for i in 0..work.goal.actions.len() {
            let action = &work.goal.actions[i];
            if action.state == ActionState::Ready
                && let Some(decision) = self.dry_run(&work.goal, action)
            {
                work.goal.actions[i].decision = Some(decision);
            }
        }
        Ok(())
    }

    /// Picks READY actions to start and moves them (RUNNING, NEEDS_APPROVAL or BLOCKED).
    fn schedule(&self, work: &mut Work) -> Result<Vec<String>, GoalsError> {
        let now = self.now();
        let paths = remaining_path(&work.goal);
        let running = work
            .goal
            .actions
            .iter()
            .filter(|a| matches!(a.state, ActionState::Running | ActionState::Verifying))
            .filter(|a| !matches!(a.kind, ActionKind::AskUser { .. } | ActionKind::Wait { .. }))
            .count();
        let mut slots = usize::try_from(work.goal.max_parallel)
            .unwrap_or(1)
            .saturating_sub(running);
        let mut ready: Vec<(usize, i64, String)> = work
            .goal
            .actions
            .iter()
            .enumerate()
            .filter(|(_, a)| a.state == ActionState::Ready && a.not_before <= now)
            .map(|(i, a)| (i, paths.get(&a.id).copied().unwrap_or(0), a.id.clone()))
            .collect();
        ready.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let goal_id = work.goal.id.clone();
        let mut started = Vec::new();
        for (_, _, id) in ready {
            let Some(action) = work.goal.action(&id).cloned() else {
                continue;
            };
            let budget = work.goal.retry_budget;
            let tries = counted_attempts(&action);
            // A first attempt is not a retry: only retries count against `per_goal`.
            if tries >= budget.per_action || (tries >= 1 && budget.used >= budget.per_goal) {
                work.mv(
                    &id,
                    ActionState::Blocked,
                    Source::Budget,
                    &format!("retry budget exhausted after {tries} attempts"),
                    now,
                    block(
                        BlockerKind::Budget,
                        format!("retry:{id}"),
                        retry_line(&goal_id, &id),
                    ),
                )?;
                continue;
            }
            let decision = action.decision.clone();
            let outcome = decision.as_ref().map_or("allow", |d| d.outcome.as_str());
            if outcome == "deny" {
                let d = decision.clone().unwrap_or_else(|| summarise_none(now));
                let how = match &d.change_command {
                    // The goal's own risk ceiling: retrying cannot help (`risk.rs`).
                    Some(cmd) if d.layer == crate::risk::LAYER => cmd.clone(),
                    Some(cmd) => format!("{cmd}, then {}", retry_line(&goal_id, &id)),
                    None => format!(
                        "change the policy (openphone policy explain) or submit another plan (openphone goals plan {goal_id} <plan.json>), then {}",
                        retry_line(&goal_id, &id)
                    ),
                };
                work.mv(
                    &id,
                    ActionState::Blocked,
                    Source::Policy,
                    &format!("denied by {}: {}", d.layer, d.reason),
                    now,
                    block(BlockerKind::Policy, format!("policy:{id}"), how),
                )?;
                continue;
            }
            if slots == 0 {
                continue;
            }
            let n = u32::try_from(action.attempts.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            let attempt = Attempt {
                n,
                idempotency_key: attempt_key(&goal_id, &id, n),
                started_at: now,
                finished_at: None,
                outcome: AttemptOutcome::Running,
                decision_proof_digest: decision
                    .as_ref()
                    .map(|d| d.proof_digest.clone())
                    .unwrap_or_default(),
                result_digest: String::new(),
                summary: String::new(),
                confirmation_id: None,
                approval_expires_at: None,
            };
            if let Some(a) = work.goal.action_mut(&id) {
                a.attempts.push(attempt);
            }
            if tries >= 1 {
                work.goal.retry_budget.used = work.goal.retry_budget.used.saturating_add(1);
            }
            if outcome == "confirm" || outcome == "park" {
                let d = decision.clone().unwrap_or_else(|| summarise_none(now));
                if let Some(att) = work.attempt_mut(&id) {
                    att.outcome = AttemptOutcome::AwaitingApproval;
                }
                work.mv(
                    &id,
                    ActionState::NeedsApproval,
                    Source::Policy,
                    &format!("{} by {}: {}", d.outcome, d.layer, d.reason),
                    now,
                    None,
                )?;
            } else {
                let why = match &decision {
                    Some(d) => format!("allowed ({}: {})", d.layer, d.reason),
                    None => format!("{}: no command, nothing to decide", action.kind.name()),
                };
                work.mv(&id, ActionState::Running, Source::Policy, &why, now, None)?;
                slots -= 1;
            }
            started.push(id);
        }
        Ok(started)
    }

    /// The side effect of an action that just became RUNNING or NEEDS_APPROVAL.
    async fn execute(&self, work: &mut Work, id: &str) -> Result<(), GoalsError> {
        let now = self.now();
        let action = work.goal.action(id).cloned().ok_or_else(|| lost(id))?;
        let goal_id = work.goal.id.clone();
        let n = action.last_attempt().map_or(1, |a| a.n);
        match (&action.kind, action.state) {
            (ActionKind::Tool { command, params }, ActionState::NeedsApproval) => {
                // A durable confirmation bound to this exact request, in the interactive
                // context so the user can answer it.
                let mut request = Self::request(&work.goal, &action, command, params, n);
                request.timeout_ms = Some(openphone_protocol::MAX_TIMEOUT_MS);
                let result = self
                    .bridge
                    .invoke(&self.caller_for(&work.goal), request, Context::Interactive)
                    .await;
                if let Some(pending) = result.pending_confirmation() {
                    let cid = pending.confirmation_id;
                    if let Some(att) = work.attempt_mut(id) {
                        att.confirmation_id = Some(cid.clone());
                        att.approval_expires_at = pending.expires_at_ms;
                    }
                    if let Some(a) = work.goal.action_mut(id) {
                        a.resume_token = Some(cid.clone());
                    }
                    let blk = format!("blk_{}", work.goal.next_seq());
                    work.goal.blockers.push(Blocker {
                        id: blk,
                        action_id: Some(id.to_owned()),
                        kind: BlockerKind::Approval,
                        reason: format!("approval needed: {}", pending.summary),
                        since: now,
                        resume_token: Some(cid.clone()),
                        how_to_resolve: format!("openphone confirmations approve {cid}"),
                    });
                } else if result.status == ToolStatus::Denied || result.status == ToolStatus::Error
                {
                    let why = failure_text(&result);
                    if let Some(att) = work.attempt_mut(id) {
                        att.outcome = AttemptOutcome::Failed;
                        att.finished_at = Some(now);
                        att.summary = why.clone();
                    }
                    work.mv(
                        id,
                        ActionState::Blocked,
                        Source::Policy,
                        &format!("the request for approval was refused: {why}"),
                        now,
                        block(
                            BlockerKind::Policy,
                            format!("policy:{id}"),
                            retry_line(&goal_id, id),
                        ),
                    )?;
                } else {
                    work.mv(
                        id,
                        ActionState::Running,
                        Source::Policy,
                        "allowed when asked",
                        now,
                        None,
                    )?;
                    self.tool_result(work, id, result, Source::Executor).await?;
                }
            }
            (ActionKind::Tool { command, params }, ActionState::Running) => {
                let request = Self::request(&work.goal, &action, command, params, n);
                let result = self
                    .bridge
                    .invoke(
                        &self.caller_for(&work.goal),
                        request,
                        Context::goal(&goal_id),
                    )
                    .await;
                self.tool_result(work, id, result, Source::Executor).await?;
            }
            (ActionKind::Wait { until_ms }, _) => {
                if let Some(a) = work.goal.action_mut(id) {
                    a.resume_token = Some(format!("timer:{until_ms}"));
                }
                if *until_ms <= now {
                    if let Some(att) = work.attempt_mut(id) {
                        att.outcome = AttemptOutcome::Ok;
                        att.finished_at = Some(now);
                    }
                    work.mv(
                        id,
                        ActionState::Verifying,
                        Source::Executor,
                        "the wait is over",
                        now,
                        None,
                    )?;
                    work.mv(
                        id,
                        ActionState::Done,
                        Source::Verifier,
                        "nothing to check",
                        now,
                        None,
                    )?;
                }
            }
            (ActionKind::AskUser { question }, _) => {
                let token = format!("answer:{id}");
                if let Some(a) = work.goal.action_mut(id) {
                    a.resume_token = Some(token.clone());
                }
                let blk = format!("blk_{}", work.goal.next_seq());
                work.goal.blockers.push(Blocker {
                    id: blk,
                    action_id: Some(id.to_owned()),
                    kind: BlockerKind::Input,
                    reason: format!("question: {question}"),
                    since: now,
                    resume_token: Some(token),
                    how_to_resolve: format!(
                        "openphone goals answer {goal_id} {id} \"<your answer>\""
                    ),
                });
            }
            (ActionKind::Verify, _) => {
                let (ok, note) = self.criteria_hold(&work.goal).await;
                self.finish_other(work, id, ok, note, now)?;
            }
            (ActionKind::AgentTurn { prompt }, _) => match &self.backends.agent {
                Some(agent) => {
                    let session = action.session(&goal_id);
                    let outcome = agent.agent_turn(&session, prompt).await;
                    let now = self.now();
                    if let Ok(text) = &outcome {
                        work.evidence(
                            id,
                            EvidenceKind::Message,
                            format!("{session}: {}", clip(text)),
                            crate::ids::digest_text(text),
                            now,
                        );
                    }
                    let (ok, note) = match outcome {
                        Ok(text) => (true, clip(&text)),
                        Err(e) => (false, e),
                    };
                    self.finish_other(work, id, ok, note, now)?;
                }
                None => self.no_backend(work, id, "agent_turn", now)?,
            },
            (
                ActionKind::Job {
                    title,
                    prompt,
                    run_at,
                },
                _,
            ) => match &self.backends.jobs {
                Some(jobs) => {
                    let title = if title.is_empty() {
                        &action.title
                    } else {
                        title
                    };
                    let outcome = jobs.create_job(title, prompt, *run_at).await;
                    let now = self.now();
                    if let Ok(job) = &outcome {
                        work.evidence(
                            id,
                            EvidenceKind::Artifact,
                            format!("job {job}"),
                            crate::ids::digest_text(&job.to_string()),
                            now,
                        );
                    }
                    let (ok, note) = match outcome {
                        Ok(job) => (true, format!("job {job} scheduled")),
                        Err(e) => (false, e),
                    };
                    self.finish_other(work, id, ok, note, now)?;
                }
                None => self.no_backend(work, id, "job", now)?,
            },
            _ => {}
        }
        Ok(())
    }

    fn no_backend(
        &self,
        work: &mut Work,
        id: &str,
        kind: &str,
        now: i64,
    ) -> Result<(), GoalsError> {
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = AttemptOutcome::Failed;
            att.finished_at = Some(now);
            att.summary = format!("no {kind} backend is attached");
        }
        let goal_id = work.goal.id.clone();
        let missing = if kind == "agent_turn" {
            " (configure the built-in runtime's model: a [builtin] table)"
        } else {
            ""
        };
        work.mv(
            id,
            ActionState::Blocked,
            Source::Executor,
            &format!("no {kind} backend is attached to this daemon{missing}"),
            now,
            block(
                BlockerKind::External,
                format!("retry:{id}"),
                retry_line(&goal_id, id),
            ),
        )?;
        Ok(())
    }

    /// The end of a non-tool execution: VERIFYING, then DONE, a new attempt, or BLOCKED.
    fn finish_other(
        &self,
        work: &mut Work,
        id: &str,
        ok: bool,
        note: String,
        now: i64,
    ) -> Result<(), GoalsError> {
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = if ok {
                AttemptOutcome::Ok
            } else {
                AttemptOutcome::Failed
            };
            att.finished_at = Some(now);
            att.result_digest = crate::ids::digest_text(&note);
            att.summary = note.clone();
        }
        work.mv(
            id,
            ActionState::Verifying,
            Source::Executor,
            &clip(&note),
            now,
            None,
        )?;
        if ok {
            work.mv(
                id,
                ActionState::Done,
                Source::Verifier,
                "it succeeded",
                now,
                None,
            )
        } else {
            self.again_or_block(work, id, &note, now)
        }
    }

    /// VERIFYING → READY (with backoff) while budget remains, else → BLOCKED.
    fn again_or_block(
        &self,
        work: &mut Work,
        id: &str,
        why: &str,
        now: i64,
    ) -> Result<(), GoalsError> {
        let budget = work.goal.retry_budget;
        let tries = work.goal.action(id).map_or(0, counted_attempts);
        let goal_id = work.goal.id.clone();
        if tries < budget.per_action && budget.used < budget.per_goal {
            let wait = backoff_ms(tries, &goal_id, id);
            work.mv(
                id,
                ActionState::Ready,
                Source::Verifier,
                &format!("{why}; retry {} in {} ms", tries + 1, wait),
                now,
                None,
            )?;
            if let Some(a) = work.goal.action_mut(id) {
                a.not_before = now.saturating_add(wait);
            }
            Ok(())
        } else {
            work.mv(
                id,
                ActionState::Blocked,
                Source::Budget,
                &format!("{why}; retry budget exhausted after {tries} attempts"),
                now,
                block(
                    BlockerKind::Budget,
                    format!("retry:{id}"),
                    retry_line(&goal_id, id),
                ),
            )
        }
    }

    /// Records a tool result on the RUNNING action `id` and moves it on.
    async fn tool_result(
        &self,
        work: &mut Work,
        id: &str,
        result: ToolResult,
        source: Source,
    ) -> Result<(), GoalsError> {
        let now = self.now();
        let goal_id = work.goal.id.clone();
        let result_value = serde_json::to_value(&result).unwrap_or(Value::Null);
        let unknown = result
            .error
            .as_ref()
            .is_some_and(|e| e.code == ErrorCode::ExecutionResultUnknown);
        if let Some(att) = work.attempt_mut(id) {
            att.result_digest = digest(&result_value);
            att.finished_at = Some(now);
        }
        if result.status == ToolStatus::Ok {
            if let Some(att) = work.attempt_mut(id) {
                att.outcome = AttemptOutcome::Ok;
                att.summary = if result.replayed {
                    "ok (replayed)".to_owned()
                } else {
                    "ok".to_owned()
                };
            }
            work.evidence(
                id,
                EvidenceKind::ToolResult,
                format!("audit {}", result.audit_id),
                digest(&Value::Object(result.result.clone())),
                now,
            );
            let why = if result.replayed {
                "the recorded result was replayed"
            } else {
                "the command returned ok"
            };
            work.mv(id, ActionState::Verifying, Source::Executor, why, now, None)?;
            return self.verify(work, id).await;
        }
        if unknown {
            // Nothing recorded: only `expect` can tell whether it happened.
            let has_expect = work.goal.action(id).is_some_and(|a| a.expect.is_some());
            if has_expect {
                work.mv(
                    id,
                    ActionState::Verifying,
                    Source::Executor,
                    "outcome unknown; checking its effect",
                    now,
                    None,
                )?;
                let (holds, note) = self.expect_holds(&work.goal, id).await;
                if holds {
                    if let Some(att) = work.attempt_mut(id) {
                        att.outcome = AttemptOutcome::Ok;
                        att.summary = format!("outcome unknown, effect confirmed: {note}");
                    }
                    return work.mv(
                        id,
                        ActionState::Done,
                        Source::Verifier,
                        &format!("the effect is there: {note}"),
                        now,
                        None,
                    );
                }
                if let Some(att) = work.attempt_mut(id) {
                    att.outcome = AttemptOutcome::OutcomeUnknown;
                }
                return work.mv(
                    id,
                    ActionState::Blocked,
                    Source::Verifier,
                    &format!("outcome_unknown: the effect could not be confirmed ({note})"),
                    now,
                    block(
                        BlockerKind::Failure,
                        format!("unknown:{id}"),
                        retry_line(&goal_id, id),
                    ),
                );
            }
            let _ = source;
            return self.unknown(work, id, now, "the command's outcome was not recorded");
        }
        let why = failure_text(&result);
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = AttemptOutcome::Failed;
            att.summary = why.clone();
        }
        if result.status == ToolStatus::NeedsConfirmation {
            // The policy now parks what the dry run allowed: ask again through NEEDS_APPROVAL.
            return work.mv(
                id,
                ActionState::Blocked,
                Source::Executor,
                &format!("the policy now asks for approval: {why}"),
                now,
                block(
                    BlockerKind::Approval,
                    format!("retry:{id}"),
                    retry_line(&goal_id, id),
                ),
            );
        }
        if is_transient(&result) {
            work.mv(
                id,
                ActionState::Verifying,
                Source::Executor,
                &format!("transient failure: {why}"),
                now,
                None,
            )?;
            return self.again_or_block(work, id, &why, now);
        }
        let kind = if result.status == ToolStatus::Denied {
            BlockerKind::Policy
        } else {
            BlockerKind::Failure
        };
        work.mv(
            id,
            ActionState::Blocked,
            Source::Executor,
            &format!("failed: {why}"),
            now,
            block(kind, format!("retry:{id}"), retry_line(&goal_id, id)),
        )
    }

    /// VERIFYING: the action's `expect` (or none) decides DONE, a new attempt, or BLOCKED.
    async fn verify(&self, work: &mut Work, id: &str) -> Result<(), GoalsError> {
        let now = self.now();
        let has_expect = work.goal.action(id).is_some_and(|a| a.expect.is_some());
        if !has_expect {
            return work.mv(
                id,
                ActionState::Done,
                Source::Verifier,
                "no expectation to check",
                now,
                None,
            );
        }
        let (holds, note) = self.expect_holds(&work.goal, id).await;
        work.evidence(
            id,
            EvidenceKind::ToolResult,
            format!("expect: {note}"),
            crate::ids::digest_text(&note),
            now,
        );
        if holds {
            work.mv(
                id,
                ActionState::Done,
                Source::Verifier,
                &format!("expect holds: {note}"),
                now,
                None,
            )
        } else {
            self.again_or_block(work, id, &format!("expect failed: {note}"), now)
        }
    }

    /// Runs a read command through the bridge (background context) and tests its result.
    async fn read_check(
        &self,
        goal: &Goal,
        session: &str,
        command: &str,
        params: &Map<String, Value>,
        predicate: &crate::predicate::Predicate,
    ) -> (bool, String) {
        let mut params = params.clone();
        params
            .entry("reason")
            .or_insert_with(|| Value::String(format!("check progress of goal {}", goal.id)));
        let request = ToolRequest {
            request_id: format!("{}:check:{}", goal.id, uuid::Uuid::new_v4().simple()),
            runtime: Some(openphone_policy::BUILTIN_RUNTIME.to_owned()),
            runtime_session_id: session.to_owned(),
            tool: command.to_owned(),
            params: Value::Object(params),
            autonomy: Some(goal.autonomy.clone()),
            ..ToolRequest::default()
        };
        let result = self
            .bridge
            .invoke(&self.caller_for(goal), request, Context::goal(&goal.id))
            .await;
        if result.status != ToolStatus::Ok {
            return (
                false,
                format!("the check could not run: {}", failure_text(&result)),
            );
        }
        predicate.check(&Value::Object(result.result))
    }

    async fn expect_holds(&self, goal: &Goal, id: &str) -> (bool, String) {
        let Some(action) = goal.action(id) else {
            return (false, "no such action".to_owned());
        };
        let Some(expect) = &action.expect else {
            return (true, "nothing expected".to_owned());
        };
        self.read_check(
            goal,
            &action.session(&goal.id),
            &expect.command,
            &expect.params,
            &expect.predicate,
        )
        .await
    }

    /// Whether every success criterion holds, and what was found.
    pub async fn criteria_hold(&self, goal: &Goal) -> (bool, String) {
        let mut notes = Vec::new();
        let mut all = true;
        for c in &goal.success_criteria {
            let (ok, note) = match &c.check {
                CriterionCheck::AllActionsDone => {
                    let open: Vec<&str> = goal
                        .actions
                        .iter()
                        .filter(|a| {
                            !a.optional
                                && a.state != ActionState::Done
                                && !matches!(a.kind, ActionKind::Verify)
                        })
                        .filter(|a| !replaced_by_done_alternative(goal, a))
                        .map(|a| a.id.as_str())
                        .collect();
                    (
                        open.is_empty(),
                        if open.is_empty() {
                            "all done".to_owned()
                        } else {
                            format!("open: {}", open.join(", "))
                        },
                    )
                }
                CriterionCheck::ToolPredicate {
                    command,
                    params,
                    predicate,
                } => {
                    self.read_check(
                        goal,
                        &format!("goal:{}", goal.id),
                        command,
                        params,
                        predicate,
                    )
                    .await
                }
                CriterionCheck::UserConfirms => {
                    let wanted = format!("criterion:{}", c.id);
                    let ok = goal.evidence.iter().any(|e| {
                        e.kind == EvidenceKind::UserAnswer && e.reference.starts_with(&wanted)
                    });
                    (
                        ok,
                        if ok {
                            "confirmed by the user".to_owned()
                        } else {
                            "not confirmed by the user yet".to_owned()
                        },
                    )
                }
                CriterionCheck::RuntimeJudge { question } => match &self.backends.agent {
                    Some(agent) => match agent
                        .agent_turn(&format!("goal:{}:judge", goal.id), question)
                        .await
                    {
                        Ok(answer) => (
                            answer.trim().to_lowercase().starts_with("yes"),
                            clip(&answer),
                        ),
                        Err(e) => (false, e),
                    },
                    None => (false, "no runtime is attached to judge".to_owned()),
                },
            };
            all &= ok;
            notes.push(format!("{}: {}", c.id, note));
        }
        (all, notes.join("; "))
    }

    async fn checkpoints(&self, work: &mut Work) -> Result<(), GoalsError> {
        let now = self.now();
        let due: Vec<usize> = work
            .goal
            .checkpoints
            .iter()
            .enumerate()
            .filter(|(_, c)| c.outcome == CheckpointOutcome::Pending && c.at <= now)
            .map(|(i, _)| i)
            .collect();
        for i in due {
            let (minutes, at) = (
                work.goal.checkpoints[i].minutes_before,
                work.goal.checkpoints[i].at,
            );
            let (met, note) = if minutes == 0 {
                let (ok, note) = self.criteria_hold(&work.goal).await;
                work.goal.state = if ok {
                    GoalState::Done
                } else {
                    GoalState::Failed
                };
                (ok, note)
            } else {
                evaluate(&work.goal, minutes, now)
            };
            let c = &mut work.goal.checkpoints[i];
            c.outcome = if met {
                CheckpointOutcome::Met
            } else {
                CheckpointOutcome::Missed
            };
            c.evaluated_at = Some(now);
            c.late = now.saturating_sub(at) > LATE_AFTER_MS;
            c.note = note;
            let reason = if minutes == 0 {
                ReportReason::Deadline
            } else if met {
                ReportReason::Checkpoint
            } else {
                ReportReason::CheckpointMissed
            };
            // A missed contract escalates; the deadline's report is delivered whatever happened.
            if let Some(r) = delta(&mut work.goal, reason, now, !met || minutes == 0) {
                work.reports.push(r);
            }
        }
        Ok(())
    }

    /// The goal's state after a tick. A goal that is not moving and not finished always
    /// names at least one blocker (the continuity rule).
    async fn settle_state(&self, work: &mut Work) -> Result<(), GoalsError> {
        let now = self.now();
        let goal = &work.goal;
        if goal.state.is_terminal() || goal.state == GoalState::Paused || goal.plan_version == 0 {
            return Ok(());
        }
        let open_required = goal.actions.iter().any(|a| {
            !a.optional && !a.state.is_terminal() && !replaced_by_done_alternative(goal, a)
        });
        if !open_required {
            let (ok, note) = self.criteria_hold(goal).await;
            if ok {
                work.goal.state = GoalState::Done;
                work.goal.blockers.clear();
                return Ok(());
            }
            let goal_id = work.goal.id.clone();
            if !work.goal.blockers.iter().any(|b| b.action_id.is_none()) {
                let id = format!("blk_{}", work.goal.next_seq());
                work.goal.blockers.push(Blocker {
                    id,
                    action_id: None,
                    kind: BlockerKind::External,
                    reason: format!(
                        "every action is done but the success criteria do not hold: {note}"
                    ),
                    since: now,
                    resume_token: Some(format!("plan:{goal_id}")),
                    how_to_resolve: format!("openphone goals plan {goal_id} <plan.json>"),
                });
            }
            work.goal.state = GoalState::Blocked;
            return Ok(());
        }
        let moving = goal.actions.iter().any(|a| match a.state {
            ActionState::Ready | ActionState::Verifying => true,
            ActionState::Running => !matches!(a.kind, ActionKind::AskUser { .. }),
            ActionState::Planned => could_start(goal, a),
            _ => false,
        });
        if moving {
            work.goal.state = GoalState::Active;
            return Ok(());
        }
        if goal.blockers.is_empty() {
            let goal_id = goal.id.clone();
            let stuck: Vec<String> = goal
                .actions
                .iter()
                .filter(|a| !a.state.is_terminal())
                .map(|a| a.id.clone())
                .collect();
            let id = format!("blk_{}", work.goal.next_seq());
            work.goal.blockers.push(Blocker {
                id,
                action_id: None,
                kind: BlockerKind::Dependency,
                reason: format!("no path is left for: {}", stuck.join(", ")),
                since: now,
                resume_token: Some(format!("plan:{goal_id}")),
                how_to_resolve: format!("openphone goals plan {goal_id} <plan.json>"),
            });
        }
        work.goal.state = GoalState::Blocked;
        Ok(())
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

/// The attempts that count against the budget: all but expired approval requests.
fn counted_attempts(action: &Action) -> u32 {
    let n = action
        .attempts
        .iter()
        .filter(|a| a.outcome != AttemptOutcome::Expired)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn summarise_none(now: i64) -> DecisionSummary {
    DecisionSummary {
        outcome: "allow".to_owned(),
        layer: String::new(),
        reason: String::new(),
        proof_digest: String::new(),
        layers: Vec::new(),
        change_command: None,
        at: now,
    }
}

fn clip(text: &str) -> String {
    let cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// Whether `id` is listed as an alternative of some action.
fn is_alternative(goal: &Goal, id: &str) -> bool {
    goal.actions
        .iter()
        .any(|a| a.alternatives.iter().any(|x| x == id))
}

/// An action that is BLOCKED or ABORTED but one of its alternatives is DONE.
fn replaced_by_done_alternative(goal: &Goal, a: &Action) -> bool {
    matches!(a.state, ActionState::Blocked | ActionState::Aborted)
        && a.alternatives
            .iter()
            .any(|x| goal.action(x).is_some_and(|b| b.state == ActionState::Done))
}

/// A dependency counts as met when it is DONE, replaced by a done alternative, or optional
/// and aborted. An alternative waits until the action it replaces is BLOCKED or ABORTED.
fn deps_met(goal: &Goal, action: &Action) -> bool {
    let primaries: Vec<&Action> = goal
        .actions
        .iter()
        .filter(|p| p.alternatives.contains(&action.id))
        .collect();
    if !primaries.is_empty()
        && !primaries
            .iter()
            .any(|p| matches!(p.state, ActionState::Blocked | ActionState::Aborted))
    {
        return false;
    }
    action.depends_on.iter().all(|d| {
        goal.action(d).is_some_and(|dep| {
            dep.state == ActionState::Done
                || replaced_by_done_alternative(goal, dep)
                || (dep.optional && dep.state == ActionState::Aborted)
        })
    })
}

/// A PLANNED action that may still start: none of its dependencies is stuck.
fn could_start(goal: &Goal, action: &Action) -> bool {
    if is_alternative(goal, &action.id) {
        return deps_met(goal, action);
    }
    action.depends_on.iter().all(|d| {
        goal.action(d).is_some_and(|dep| match dep.state {
            ActionState::Done => true,
            ActionState::Ready | ActionState::Running | ActionState::Verifying => true,
            ActionState::Planned => could_start(goal, dep),
            ActionState::NeedsApproval | ActionState::Blocked | ActionState::Aborted => false,
        })
    })
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
            (ActionKind::Wait { until_ms }, ActionState::Running) => Some(*until_ms),
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
    })
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
