//! Creating goals and accepting plans: the input shapes ([`GoalSpec`], [`ActionSpec`]), their
//! checks (errors name the field) and the re-plan rule of §1 (completed actions are immutable;
//! a re-plan replaces only actions that have not started, and bumps `plan_version`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::deadline::checkpoints_for;
use crate::model::{
    Action, ActionKind, ActionState, Criterion, CriterionCheck, DeliveryChannel, Goal, GoalState,
    Owner, ReadCheck, RetryBudget, RiskLevel,
};

/// The default estimate of an action, ms (critical-path scheduling).
pub const DEFAULT_ESTIMATE_MS: i64 = 60_000;
/// At most this many actions in a plan.
pub const MAX_ACTIONS: usize = 2_000;
/// A checkpoint is at most this many minutes (7 days) before the deadline.
pub const MAX_CHECKPOINT_MINUTES: i64 = 7 * 24 * 60;

/// Bad input, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid_params: {field}: {message}")]
pub struct InvalidGoal {
    pub field: String,
    pub message: String,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> InvalidGoal {
    InvalidGoal {
        field: field.into(),
        message: message.into(),
    }
}

/// One action as a planner submits it. Its kind's fields are flattened into it, which serde
/// cannot combine with refusing unknown fields, so [`ActionSpec`]'s `Deserialize` checks the
/// members itself: a member that neither every action nor its kind takes is refused, naming
/// it (`schemas/goal.schema.json` says the same).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActionSpec {
    pub id: String,
    pub title: String,
    #[serde(flatten)]
    pub kind: ActionKind,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub alternatives: Vec<String>,
    #[serde(default)]
    pub optional: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<ReadCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_ms: Option<i64>,
    /// `isolated` (default) or `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_target: Option<String>,
}

/// The members every action takes.
const ACTION_MEMBERS: &[&str] = &[
    "id",
    "title",
    "kind",
    "depends_on",
    "alternatives",
    "optional",
    "expect",
    "estimate_ms",
    "session_target",
];

/// The members of each kind of action.
fn kind_members(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "tool" => &["command", "params"],
        "agent_turn" => &["prompt"],
        "job" => &["job_title", "prompt", "run_at"],
        "wait" => &["until_ms", "on"],
        "ask_user" => &["question"],
        "verify" => &[],
        _ => return None,
    })
}

/// [`ActionSpec`] as serde reads it, before the members are checked.
#[derive(Deserialize)]
struct ActionFields {
    id: String,
    title: String,
    #[serde(flatten)]
    kind: ActionKind,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    alternatives: Vec<String>,
    #[serde(default)]
    optional: bool,
    #[serde(default)]
    expect: Option<ReadCheck>,
    #[serde(default)]
    estimate_ms: Option<i64>,
    #[serde(default)]
    session_target: Option<String>,
}

impl<'de> Deserialize<'de> for ActionSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let members = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        if let Some(kind) = members.get("kind").and_then(serde_json::Value::as_str)
            && let Some(own) = kind_members(kind)
            && let Some(unknown) = members
                .keys()
                .find(|k| !ACTION_MEMBERS.contains(&k.as_str()) && !own.contains(&k.as_str()))
        {
            return Err(D::Error::custom(format!(
                "unknown field `{unknown}` in a `{kind}` action (it takes {}, {})",
                own.join(", "),
                ACTION_MEMBERS.join(", ")
            )));
        }
        let f: ActionFields =
            serde_json::from_value(serde_json::Value::Object(members)).map_err(D::Error::custom)?;
        Ok(ActionSpec {
            id: f.id,
            title: f.title,
            kind: f.kind,
            depends_on: f.depends_on,
            alternatives: f.alternatives,
            optional: f.optional,
            expect: f.expect,
            estimate_ms: f.estimate_ms,
            session_target: f.session_target,
        })
    }
}

/// Retry budget as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    pub per_action: u32,
    pub per_goal: u32,
}

/// A goal as asked for (`goals.create`, `goal.json` of the simulator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSpec {
    pub objective: String,
    #[serde(default)]
    pub success_criteria: Vec<Criterion>,
    /// The deadline: Unix ms, or written as an RFC 3339 time with its offset
    /// (`"2026-12-01T18:00:00+01:00"`), read into Unix ms; always written back as Unix ms.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deadline_ms_or_rfc3339"
    )]
    pub deadline_at: Option<i64>,
    /// The deadline relative to the goal's creation: `90m`, `6h`, `2d` (not with
    /// `deadline_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_in: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_level: Option<RiskLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryChannel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_budget: Option<BudgetSpec>,
    /// Minutes before the deadline of each checkpoint (default 120, 60, 15, 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<Vec<i64>>,
    /// A plan given with the goal (accepted at once as plan version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<ActionSpec>>,
    /// The phone the goal acts on (a configured device id); none means the only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// Reads the JSON text of a goal file (a goal spec, a plan, the simulator's input) strictly: a
/// key given twice in one object is refused, naming the key — a lenient parse keeps the last
/// one silently, so the file would not mean what it seems to say (issue 28). Syntax errors
/// are refused too; `field` is `file` for them.
pub fn parse_goal_file(text: &str) -> Result<serde_json::Value, InvalidGoal> {
    openphone_protocol::parse_json_strict(text).map_err(|e| match e {
        openphone_protocol::CanonicalError::DuplicateKey { key } => invalid(
            key.clone(),
            format!("the key {key:?} is given twice in one object; name each key once"),
        ),
        other => invalid("file", other.to_string()),
    })
}

/// The goal spec a goal file holds: the file itself, or its `goal` member when the file is the
/// simulator's `{"goal": …, "replies": …}` (a file with an `objective` is a goal).
pub fn goal_in_file(file: serde_json::Value) -> serde_json::Value {
    if file.get("objective").is_none()
        && let Some(inner) = file.get("goal").cloned()
    {
        return inner;
    }
    file
}

/// The plan a plan file holds: a list of actions, or the `plan` list of an object.
pub fn plan_in_file(file: serde_json::Value) -> Option<Vec<serde_json::Value>> {
    match file {
        serde_json::Value::Array(plan) => Some(plan),
        serde_json::Value::Object(mut obj) => match obj.remove("plan") {
            Some(serde_json::Value::Array(plan)) => Some(plan),
            _ => None,
        },
        _ => None,
    }
}

/// `deadline_at` as Unix ms (a JSON integer) or an RFC 3339 time (a JSON string).
fn deadline_ms_or_rfc3339<'de, D>(de: D) -> Result<Option<i64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Ms(i64),
        Text(String),
    }
    match Option::<Written>::deserialize(de) {
        Ok(None) => Ok(None),
        Ok(Some(Written::Ms(ms))) => Ok(Some(ms)),
        Ok(Some(Written::Text(text))) => openphone_clock::human::parse_rfc3339(&text)
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("deadline_at {e}"))),
        Err(_) => Err(serde::de::Error::custom(
            "deadline_at: expected Unix milliseconds (an integer) or an RFC 3339 time \
             (\"2026-12-01T18:00:00+01:00\")",
        )),
    }
}

/// `deadline_in`: a whole number (at most 7 digits) of `s`, `m`, `h` or `d`, in ms.
fn relative_ms(text: &str) -> Result<i64, InvalidGoal> {
    let bad = || {
        invalid(
            "deadline_in",
            format!(
                "{text:?} is not a duration: a whole number and s, m, h or d (\"90m\", \"6h\", \"2d\")"
            ),
        )
    };
    let unit = match text.chars().last() {
        Some('s') => 1_000,
        Some('m') => 60_000,
        Some('h') => 3_600_000,
        Some('d') => 86_400_000,
        _ => return Err(bad()),
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || digits.len() > 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    Ok(n * unit)
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Builds a new goal (state `draft`, or `active` when a plan came with it) from `spec`.
pub fn new_goal(spec: &GoalSpec, id: String, owner: Owner, now: i64) -> Result<Goal, InvalidGoal> {
    if spec.objective.trim().is_empty() {
        return Err(invalid("objective", "must not be empty"));
    }
    if spec.objective.chars().count() > 4_000 {
        return Err(invalid("objective", "at most 4000 characters"));
    }
    let deadline_at = match (spec.deadline_at, spec.deadline_in.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "deadline_in",
                "give deadline_at or deadline_in, not both",
            ));
        }
        (Some(at), None) => Some(at),
        (None, Some(text)) => Some(now.saturating_add(relative_ms(text)?)),
        (None, None) => None,
    };
    if let Some(deadline) = deadline_at
        && deadline <= now
    {
        return Err(invalid("deadline_at", "must be in the future"));
    }
    let autonomy = match spec.autonomy.as_deref() {
        None => openphone_protocol::Autonomy::DEFAULT,
        Some(raw) => openphone_protocol::Autonomy::parse(raw.trim())
            .ok_or_else(|| invalid("autonomy", format!("unknown autonomy {raw:?}")))?,
    };
    let max_parallel = spec.max_parallel.unwrap_or(1);
    if !(1..=16).contains(&max_parallel) {
        return Err(invalid("max_parallel", "must be between 1 and 16"));
    }
    let retry_budget = match spec.retry_budget {
        None => RetryBudget::default(),
        Some(b) if b.per_action >= 1 && b.per_goal >= b.per_action => RetryBudget {
            per_action: b.per_action,
            per_goal: b.per_goal,
            used: 0,
        },
        Some(_) => {
            return Err(invalid(
                "retry_budget",
                "per_action must be at least 1 and per_goal at least per_action",
            ));
        }
    };
    let mut seen = BTreeSet::new();
    for (i, c) in spec.success_criteria.iter().enumerate() {
        if !valid_id(&c.id) || !seen.insert(c.id.clone()) {
            return Err(invalid(
                format!("success_criteria[{i}].id"),
                "must be unique, 1-64 of [a-z0-9_-]",
            ));
        }
    }
    let planner = spec.planner.clone().unwrap_or_else(|| "manual".to_owned());
    if planner.trim().is_empty() {
        return Err(invalid("planner", "must not be empty"));
    }
    // Checked whether or not there is a deadline: a goal without one used to accept any
    // number here, negative ones included (issue 28).
    for (i, m) in spec.checkpoints.iter().flatten().enumerate() {
        if !(0..=MAX_CHECKPOINT_MINUTES).contains(m) {
            return Err(invalid(
                format!("checkpoints[{i}]"),
                format!(
                    "{m} is not a number of minutes before the deadline: must be between 0 \
                     and {MAX_CHECKPOINT_MINUTES}"
                ),
            ));
        }
    }
    let checkpoints = match deadline_at {
        None => Vec::new(),
        Some(deadline) => {
            let minutes = spec
                .checkpoints
                .clone()
                .unwrap_or_else(|| vec![120, 60, 15, 0]);
            checkpoints_for(deadline, &minutes)
        }
    };
    let mut goal = Goal {
        id,
        objective: spec.objective.trim().to_owned(),
        device_id: spec
            .device_id
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_owned),
        success_criteria: if spec.success_criteria.is_empty() {
            vec![Criterion {
                id: "all_done".to_owned(),
                description: "every non-optional action is done".to_owned(),
                check: CriterionCheck::AllActionsDone,
            }]
        } else {
            spec.success_criteria.clone()
        },
        deadline_at,
        risk_level: spec.risk_level.unwrap_or(RiskLevel::Medium),
        autonomy: autonomy.as_str().to_owned(),
        owner,
        planner,
        state: GoalState::Draft,
        plan_version: 0,
        actions: Vec::new(),
        blockers: Vec::new(),
        evidence: Vec::new(),
        retry_budget,
        checkpoints,
        delivery: spec.delivery.unwrap_or(DeliveryChannel::Notification),
        max_parallel,
        seq: 0,
        reported: Default::default(),
        created_at: now,
        updated_at: now,
        version: 0,
    };
    if let Some(plan) = &spec.plan {
        accept_plan(&mut goal, plan, now)?;
    }
    Ok(goal)
}

/// Accepts `plan` as the goal's next plan version: actions that have started (any state but
/// PLANNED or READY, or with attempts) are kept as they are and may not be redefined; every
/// other action is replaced by the plan's. The graph is checked: unique ids, known
/// dependencies and alternatives, no cycle.
pub fn accept_plan(goal: &mut Goal, plan: &[ActionSpec], now: i64) -> Result<(), InvalidGoal> {
    if goal.state.is_terminal() {
        return Err(invalid("goal", format!("the goal is {}", goal.state)));
    }
    if plan.len() > MAX_ACTIONS {
        return Err(invalid("plan", format!("at most {MAX_ACTIONS} actions")));
    }
    let started: Vec<Action> = goal
        .actions
        .iter()
        .filter(|a| {
            !matches!(a.state, ActionState::Planned | ActionState::Ready) || !a.attempts.is_empty()
        })
        .cloned()
        .collect();
    let started_ids: BTreeSet<&str> = started.iter().map(|a| a.id.as_str()).collect();
    let version = goal.plan_version + 1;
    let mut actions = started.clone();
    for (i, spec) in plan.iter().enumerate() {
        let field = |name: &str| format!("plan[{i}].{name}");
        if !valid_id(&spec.id) {
            return Err(invalid(field("id"), "1-64 of [a-z0-9_-]"));
        }
        if started_ids.contains(spec.id.as_str()) {
            // A started action is immutable: the plan may name it only unchanged.
            continue;
        }
        if actions.iter().any(|a| a.id == spec.id) {
            return Err(invalid(field("id"), format!("{:?} appears twice", spec.id)));
        }
        if spec.title.trim().is_empty() {
            return Err(invalid(field("title"), "must not be empty"));
        }
        check_kind(&spec.kind, &field("kind"))?;
        let session_target = spec
            .session_target
            .clone()
            .unwrap_or_else(|| "isolated".to_owned());
        if session_target != "isolated" && session_target != "main" {
            return Err(invalid(field("session_target"), "isolated or main"));
        }
        let estimate_ms = spec.estimate_ms.unwrap_or(DEFAULT_ESTIMATE_MS);
        if estimate_ms < 0 {
            return Err(invalid(field("estimate_ms"), "must not be negative"));
        }
        actions.push(Action {
            id: spec.id.clone(),
            title: spec.title.trim().to_owned(),
            kind: spec.kind.clone(),
            state: ActionState::Planned,
            depends_on: spec.depends_on.clone(),
            alternatives: spec.alternatives.clone(),
            optional: spec.optional,
            expect: spec.expect.clone(),
            estimate_ms,
            attempts: Vec::new(),
            resume_token: None,
            session_target,
            not_before: 0,
            decision: None,
            plan_version: version,
            proposal: None,
        });
    }
    check_graph(&actions)?;
    goal.actions = actions;
    goal.plan_version = version;
    if goal.state == GoalState::Draft {
        goal.state = GoalState::Active;
    }
    goal.updated_at = now;
    Ok(())
}

fn check_kind(kind: &ActionKind, field: &str) -> Result<(), InvalidGoal> {
    match kind {
        ActionKind::Tool { command, .. } => {
            let registry = openphone_protocol::Registry::embedded()
                .map_err(|e| invalid(field, format!("the command registry: {e}")))?;
            if registry.resolve(command).is_none() {
                return Err(invalid(field, format!("unknown command {command:?}")));
            }
        }
        ActionKind::AgentTurn { prompt } | ActionKind::Job { prompt, .. } => {
            if prompt.trim().is_empty() {
                return Err(invalid(field, "prompt must not be empty"));
            }
        }
        ActionKind::AskUser { question } => {
            if question.trim().is_empty() {
                return Err(invalid(field, "question must not be empty"));
            }
        }
        ActionKind::Wait { on: Some(on), .. } => {
            if !openphone_protocol::endpoint::GOAL_WAIT_EVENTS.contains(&on.event.as_str()) {
                return Err(invalid(
                    format!("{field}.on.event"),
                    format!(
                        "{:?} is not an event a wait can wait for ({})",
                        on.event,
                        openphone_protocol::endpoint::GOAL_WAIT_EVENTS.join(", ")
                    ),
                ));
            }
            if let Err((i, e)) = crate::engine::events::wait_predicates(on) {
                return Err(invalid(
                    format!("{field}.on.where[{i}]"),
                    format!("not a predicate {{pointer, op, value?}}: {e}"),
                ));
            }
        }
        ActionKind::Wait { on: None, .. } | ActionKind::Verify => {}
    }
    Ok(())
}

/// Known dependencies and alternatives, no self-reference, no cycle.
fn check_graph(actions: &[Action]) -> Result<(), InvalidGoal> {
    let index: BTreeMap<&str, usize> = actions
        .iter()
        .enumerate()
        .map(|(i, a)| (a.id.as_str(), i))
        .collect();
    for a in actions {
        for d in a.depends_on.iter().chain(&a.alternatives) {
            if !index.contains_key(d.as_str()) {
                return Err(invalid(
                    format!("{}.depends_on", a.id),
                    format!("no action {d:?} in the plan"),
                ));
            }
            if d == &a.id {
                return Err(invalid(format!("{}.depends_on", a.id), "names itself"));
            }
        }
    }
    // Kahn's algorithm over depends_on.
    let mut indegree: Vec<usize> = actions.iter().map(|a| a.depends_on.len()).collect();
    let mut queue: Vec<usize> = (0..actions.len()).filter(|i| indegree[*i] == 0).collect();
    let mut seen = 0;
    while let Some(i) = queue.pop() {
        seen += 1;
        for (j, b) in actions.iter().enumerate() {
            if b.depends_on.iter().any(|d| d == &actions[i].id) {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    queue.push(j);
                }
            }
        }
    }
    if seen != actions.len() {
        return Err(invalid("plan", "the dependencies form a cycle"));
    }
    Ok(())
}
