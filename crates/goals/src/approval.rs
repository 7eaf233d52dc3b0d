//! The minimal approval package (`goals.md` §4, §8 `accept_for_session`) and the permission
//! envelope as the data a planner or the user is given.
//!
//! For a `tool` action the dry run says would be confirmed (or parked in the background), the
//! package is the smallest standing approval that would let it run without asking: this goal
//! only (scope `goal:<id>`), the built-in runtime the goal's steps run as, this command, these
//! exact params (every param the command declares but the audit's `reason`, pinned to its
//! value or to "absent"), until the goal's deadline (or [`GOAL_GRANT_MAX_MS`] from now). It is
//! exactly what the bridge stores when the user answers the action's confirmation
//! `accept_for_session` (`openphone-core`, `bridge/grants.rs`), so later attempts of the same
//! step of the same goal are not asked again and nothing else benefits.
//!
//! There is none for a command on the risk floor (`confirmation: "always"` or high risk:
//! confirmed one by one), nor for a Deny — a standing approval only ever turns a Confirm into
//! an Allow; the note says so and what would help instead.

use openphone_core::{GOAL_GRANT_MAX_MS, goal_scope};
use openphone_policy::{exact_params_constraints, is_risk_floor};
use openphone_protocol::{BUILTIN_RUNTIME_ID, Registry};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::model::{Action, ActionKind, DecisionSummary, Goal};

/// The smallest standing approval that would let one action run without asking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalPackage {
    /// The goal it is scoped to.
    pub goal_id: String,
    /// The action it is computed for.
    pub action_id: String,
    /// `goal:<goal id>`: it applies only to this goal's steps.
    pub scope: String,
    /// The runtime the goal's steps run as.
    pub runtime: String,
    /// The canonical command.
    pub tool: String,
    /// Param constraints: every declared param but `reason`, with its value or `null`
    /// ("absent").
    pub constraints: Map<String, Value>,
    /// When it stops applying (Unix ms): the goal's deadline, capped.
    pub expires_at: i64,
    /// How to grant it.
    pub how: String,
}

/// The package for `action` under `decision`, or why there is none.
pub fn package(
    goal: &Goal,
    action: &Action,
    decision: &DecisionSummary,
    now: i64,
) -> Result<ApprovalPackage, String> {
    let ActionKind::Tool { command, params } = &action.kind else {
        return Err("not a tool action: nothing to approve".to_owned());
    };
    match decision.outcome.as_str() {
        "confirm" | "park" => {}
        "allow" => return Err("allowed: nothing to approve".to_owned()),
        _ => {
            return Err(format!(
                "denied by {}: a standing approval cannot lift a deny; change the policy or \
                 the plan",
                decision.layer
            ));
        }
    }
    let registry = Registry::embedded().map_err(|e| e.to_string())?;
    let cmd = registry
        .resolve(command)
        .ok_or_else(|| format!("unknown command {command:?}"))?;
    if is_risk_floor(cmd) {
        return Err(format!(
            "{} is on the risk floor: every run is confirmed on its own",
            cmd.name
        ));
    }
    let cap = now.saturating_add(GOAL_GRANT_MAX_MS);
    let how = match action
        .last_attempt()
        .and_then(|a| a.confirmation_id.as_deref())
        .filter(|_| action.state == crate::model::ActionState::NeedsApproval)
    {
        Some(cid) => format!("openphone confirmations approve {cid} --for-session"),
        None => "answer this step's confirmation accept_for_session (openphone confirmations \
                 approve <id> --for-session) when it is asked"
            .to_owned(),
    };
    Ok(ApprovalPackage {
        goal_id: goal.id.clone(),
        action_id: action.id.clone(),
        scope: goal_scope(&goal.id),
        runtime: BUILTIN_RUNTIME_ID.to_owned(),
        tool: cmd.name.clone(),
        constraints: exact_params_constraints(cmd, &Value::Object(params.clone()))
            .into_iter()
            .collect(),
        expires_at: goal.deadline_at.map_or(cap, |d| d.min(cap)),
        how,
    })
}

/// One entry of the envelope as data: the decision, the package or why there is none.
pub fn envelope_entry(goal: &Goal, action: &Action, decision: &DecisionSummary, now: i64) -> Value {
    let command = match &action.kind {
        ActionKind::Tool { command, .. } => command.as_str(),
        _ => "",
    };
    let (offered, note) = match package(goal, action, decision, now) {
        Ok(p) => (serde_json::to_value(p).unwrap_or(Value::Null), Value::Null),
        Err(why) => (Value::Null, Value::String(why)),
    };
    json!({
        "action_id": action.id,
        "command": command,
        "outcome": decision.outcome,
        "layer": decision.layer,
        "reason": decision.reason,
        "layers": decision.layers,
        "change_command": decision.change_command,
        "approval_package": offered,
        "approval_note": note,
    })
}

/// The permission envelope of the goal's plan as data (§4): for every `tool` action not yet
/// finished, the dry-run decision now and its approval package (or why there is none).
pub fn envelope(engine: &crate::GoalEngine, goal: &Goal) -> Vec<Value> {
    let now = engine.now();
    goal.actions
        .iter()
        .filter(|a| !a.state.is_terminal())
        .filter_map(|a| {
            engine
                .dry_run(goal, a)
                .map(|d| envelope_entry(goal, a, &d, now))
        })
        .collect()
}
