//! Router simulation (§9): a goal run in simulated time against the simulated phone, through
//! the real store and bridge, with scripted approval decisions, answers and runtime replies;
//! the timeline it prints is the same for the same input.
//!
//! Input: the goal (a [`GoalSpec`], or `{"goal": …, "replies": {…}}` with scripted
//! `agent_turn` replies by action id), an optional phone scenario (`SCENARIO.md`; the demo
//! scenario otherwise) and optional [`Rules`]: per action, a decision (`approve`, `deny`, or
//! an answer for `ask_user`) given `after_ms` after the action started waiting.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use openphone_clock::{Clock, ManualClock};
use openphone_core::{BridgeConfig, ConfirmDecision, EventBus, Operator, ToolBridge};
use openphone_device::{SimPhone, SimState};
use openphone_policy::{Caller, Transport};
use openphone_store::Store;
use serde::{Deserialize, Serialize};

use crate::engine::{AgentBackend, Backends, GoalEngine};
use crate::error::GoalsError;
use crate::model::{ActionKind, ActionState, GoalState, Owner};
use crate::report::{DeltaReport, render_plain, telegram_messages};
use crate::spec::GoalSpec;

/// The simulated goal's id (fixed, so the timeline is reproducible).
pub const SIM_GOAL_ID: &str = "goal_SIMULATED";

/// One scripted decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The action it answers.
    pub action: String,
    /// `approve`, `deny`, or `answer` (with `text`).
    pub decision: String,
    /// The answer of an `ask_user` action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// How long after the action started waiting, ms (default 60000).
    #[serde(default = "default_after")]
    pub after_ms: i64,
}

fn default_after() -> i64 {
    60_000
}

/// Scripted decisions (`--approvals <rules.json>`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// The goal file: a goal, with scripted runtime replies.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SimInput {
    /// A goal and its script.
    Scripted {
        goal: GoalSpec,
        #[serde(default)]
        replies: BTreeMap<String, String>,
    },
    /// A bare goal.
    Bare(GoalSpec),
}

/// Replies by session (`goal:<goal>:<action>` → text).
struct ScriptedRuntime {
    replies: BTreeMap<String, String>,
}

#[async_trait]
impl AgentBackend for ScriptedRuntime {
    async fn agent_turn(&self, session: &str, _prompt: &str) -> Result<String, String> {
        let action = session.rsplit(':').next().unwrap_or_default();
        self.replies
            .get(action)
            .cloned()
            .ok_or_else(|| format!("the script has no reply for {action}"))
    }
}

/// What a simulation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulation {
    /// The timeline, one line per event.
    pub timeline: Vec<String>,
    /// The goal's final state.
    pub state: GoalState,
    /// Ticks run.
    pub ticks: usize,
    /// Transitions made.
    pub transitions: usize,
    /// Reports made.
    pub reports: Vec<DeltaReport>,
}

fn stamp(start: i64, at: i64) -> String {
    let s = (at - start).max(0) / 1_000;
    format!("+{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// Replaces confirmation ids (random) by stable names, in order of appearance.
struct Names(BTreeMap<String, String>);

impl Names {
    fn clean(&mut self, text: &str) -> String {
        let mut out = text.to_owned();
        while let Some(start) = out.find("runtime-confirm-") {
            let end = out[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .map_or(out.len(), |e| start + e);
            let id = out[start..end].to_owned();
            let next = self.0.len() + 1;
            let name = self
                .0
                .entry(id.clone())
                .or_insert_with(|| format!("confirmation-{next}"))
                .clone();
            out.replace_range(start..end, &name);
        }
        out
    }
}

/// Runs the simulation. `data_dir` is an empty directory for the simulation's store.
pub async fn simulate(
    input: SimInput,
    phone: Option<SimState>,
    rules: &Rules,
    data_dir: &Path,
) -> Result<Simulation, GoalsError> {
    let (spec, replies) = match input {
        SimInput::Scripted { goal, replies } => (goal, replies),
        SimInput::Bare(goal) => (goal, BTreeMap::new()),
    };
    let state = match phone {
        Some(s) => s,
        None => SimState::default_scenario().map_err(|e| GoalsError::Internal(e.to_string()))?,
    };
    let clock = ManualClock::new(state.clock.start_ms);
    let phone = Arc::new(
        SimPhone::new(state, Arc::new(clock.clone()))
            .map_err(|e| GoalsError::Internal(e.to_string()))?,
    );
    let registry = openphone_protocol::Registry::embedded()
        .map_err(|e| GoalsError::Internal(e.to_string()))?;
    let store = Arc::new(Store::open(data_dir)?);
    let bridge = Arc::new(ToolBridge::new(
        registry,
        Arc::clone(&store),
        phone,
        Arc::new(clock.clone()),
        Arc::new(EventBus::new(registry, 1024)),
        BridgeConfig::default(),
    ));
    let backends = Backends {
        agent: Some(Arc::new(ScriptedRuntime { replies })),
        jobs: None,
    };
    let engine = GoalEngine::new(store, Arc::clone(&bridge), backends, None);
    let owner = Owner {
        surface: "simulator".to_owned(),
        phone_session: None,
        runtime: None,
    };
    let start = clock.now_ms();
    let mut spec = spec;
    // Deadlines in the goal file may be given relative to the start (below 10^12 ms).
    if let Some(d) = spec.deadline_at
        && d < 1_000_000_000_000
    {
        spec.deadline_at = Some(start + d);
    }
    let goal = engine.create_with_id(&spec, owner, SIM_GOAL_ID)?;
    let operator = Operator::from_caller(&Caller::operator("simulator", Transport::Cli, "script"))
        .ok_or_else(|| GoalsError::Internal("no operator".to_owned()))?;
    let mut names = Names(BTreeMap::new());
    let mut timeline = vec![format!(
        "{} goal created: {}",
        stamp(start, start),
        goal.objective
    )];
    let mut out = Simulation {
        timeline: Vec::new(),
        state: goal.state,
        ticks: 0,
        transitions: 0,
        reports: Vec::new(),
    };
    // Action id → when it started waiting (approval or answer).
    let mut waiting_since: BTreeMap<String, i64> = BTreeMap::new();
    let limit = 20 * goal.actions.len() + 200;
    for _ in 0..limit {
        let tick = engine.tick(&goal.id).await?;
        out.ticks += 1;
        out.transitions += tick.transitions.len();
        let g = engine.get(&goal.id)?;
        for t in &tick.transitions {
            let decision = g
                .action(&t.action_id)
                .and_then(|a| a.decision.as_ref())
                .filter(|_| t.source == crate::transition::Source::Policy)
                .map(|d| format!(" [decision {} by {}]", d.outcome, d.layer))
                .unwrap_or_default();
            timeline.push(names.clean(&format!(
                "{} {} {} -> {} ({}) {}{decision}",
                stamp(start, t.at),
                t.action_id,
                t.from,
                t.to,
                t.source,
                t.reason
            )));
        }
        for r in &tick.reports {
            timeline.push(format!("{} report ({:?}):", stamp(start, r.at), r.reason));
            for line in render_plain(r).lines() {
                timeline.push(names.clean(&format!("    {line}")));
            }
            let parts = telegram_messages(r).len();
            timeline.push(format!("    [telegram: {parts} message(s)]"));
        }
        out.reports.extend(tick.reports.iter().cloned());
        out.state = g.state;
        if g.state.is_terminal() {
            break;
        }
        // Scripted decisions that are due now, and the next one's time.
        let now = clock.now_ms();
        let mut next_scripted: Option<i64> = None;
        let mut acted = false;
        for a in &g.actions {
            let waits = matches!(a.state, ActionState::NeedsApproval)
                || (a.state == ActionState::Running
                    && matches!(a.kind, ActionKind::AskUser { .. }));
            if !waits {
                waiting_since.remove(&a.id);
                continue;
            }
            let since = *waiting_since.entry(a.id.clone()).or_insert(now);
            let Some(rule) = rules.rules.iter().find(|r| r.action == a.id) else {
                continue;
            };
            let due = since + rule.after_ms;
            if due > now {
                next_scripted = Some(next_scripted.map_or(due, |n: i64| n.min(due)));
                continue;
            }
            waiting_since.remove(&a.id);
            acted = true;
            match (rule.decision.as_str(), &a.resume_token) {
                ("answer", _) => {
                    let text = rule.text.clone().unwrap_or_default();
                    timeline.push(format!(
                        "{} user answers {}: {text}",
                        stamp(start, now),
                        a.id
                    ));
                    engine.answer(&goal.id, &a.id, &text).await?;
                }
                (decision, Some(cid)) => {
                    let (d, verb) = if decision == "approve" {
                        (ConfirmDecision::Approve, "approves")
                    } else {
                        (ConfirmDecision::Deny, "declines")
                    };
                    timeline.push(names.clean(&format!(
                        "{} user {verb} {} ({cid})",
                        stamp(start, now),
                        a.id
                    )));
                    bridge
                        .resolve(&operator, cid, d)
                        .await
                        .map_err(|e| GoalsError::Internal(e.to_string()))?;
                }
                (_, None) => {}
            }
        }
        if acted {
            continue;
        }
        let wake = [tick.next_wake, next_scripted].into_iter().flatten().min();
        match wake {
            Some(at) if at > now => {
                clock.set(at);
            }
            Some(_) => {}
            None => {
                let blockers: Vec<String> = g
                    .blockers
                    .iter()
                    .map(|b| names.clean(&format!("{} → {}", b.reason, b.how_to_resolve)))
                    .collect();
                timeline.push(format!(
                    "{} stopped: {} — {}",
                    stamp(start, now),
                    g.state,
                    blockers.join("; ")
                ));
                break;
            }
        }
    }
    timeline.push(format!(
        "{} end: goal {} after {} ticks, {} transitions",
        stamp(start, clock.now_ms()),
        out.state,
        out.ticks,
        out.transitions
    ));
    out.timeline = timeline;
    Ok(out)
}

/// The first wait of [`day_of_checks`] ends at this time (Unix ms).
pub const DAY_OF_CHECKS_START: i64 = 1_773_300_600_000;

/// The benchmark's goal: `actions` actions (rounded down to an even number) over a simulated
/// day — waits spread over 23 h 45 min, each followed by a read of the calendar
/// (`openphone.calendar.search`), in one chain; the deadline 24 h after the start. The figures
/// in `docs/benchmarks.md` are for 100 and 300 actions.
pub fn day_of_checks(actions: usize) -> Result<SimInput, GoalsError> {
    let pairs = actions / 2;
    let step = 85_500_000 / i64::try_from(pairs.max(1)).unwrap_or(1);
    let mut plan = Vec::with_capacity(pairs * 2);
    for i in 0..pairs {
        let n = i64::try_from(i).unwrap_or(0);
        let after: Vec<String> = if i == 0 {
            Vec::new()
        } else {
            vec![format!("r{}", i - 1)]
        };
        plan.push(
            serde_json::json!({"id": format!("w{i}"), "title": format!("wait {i}"),
            "kind": "wait", "until_ms": DAY_OF_CHECKS_START + n * step, "depends_on": after}),
        );
        plan.push(
            serde_json::json!({"id": format!("r{i}"), "title": format!("read {i}"),
            "kind": "tool", "command": "openphone.calendar.search",
            "params": {"query": "Dentist"}, "depends_on": [format!("w{i}")]}),
        );
    }
    serde_json::from_value(serde_json::json!({
        "objective": "a day of checks", "deadline_at": 86_400_000, "plan": plan
    }))
    .map_err(|e| GoalsError::Internal(e.to_string()))
}
