//! The policy-aware planner (§4): when a READY `tool` step would be denied — or needs approval
//! while a safer path exists — the layer proposes the policy-compatible alternative itself and
//! adds it to the plan, saying why (the action's `proposal`, shown by `goals explain`).
//!
//! - **From the manifest**, deterministically: the command's `safer_alternative` (a draft
//!   instead of a send, the clipboard instead of a share), its params taken from the step's,
//!   when its own dry run is better (Allow or Confirm for a denied step, Allow for one that
//!   needs approval); otherwise, for a denied step, a question to the user (`ask_user`: do it
//!   yourself and tell me), which needs no permission.
//! - **Through the built-in model**, when an `agent_turn` backend is attached and the goal is
//!   not a runtime's: the model is given the step, its decision and the manifest's proposal
//!   and answers with one alternative as JSON; it is taken only when it is a known command whose
//!   dry run is better than the step's (or, for a denied step, a question). Anything else, or a
//!   model that fails, leaves the manifest's proposal, saying why the model's was not used.
//!
//! The proposal is an optional alternative of the step (it runs when the step is BLOCKED or
//! ABORTED: a denial, if the policy allows it; after the user declined the step, only once
//! they agree to it — `schedule.rs` asks), added as a re-plan (`plan_version` goes up); a step
//! gets at most one.

use openphone_protocol::Registry;
use serde_json::{Map, Value, json};

use super::{GoalEngine, Work, clip};
use crate::error::GoalsError;
use crate::model::{Action, ActionKind, ActionState, DecisionSummary, Goal, Proposal};

/// Who proposed: the manifest's metadata.
pub const BY_MANIFEST: &str = "manifest";
/// Who proposed: the built-in model.
pub const BY_MODEL: &str = "model";

/// Allow > Confirm / Park > Deny.
fn rank(outcome: &str) -> u8 {
    match outcome {
        "allow" => 2,
        "confirm" | "park" => 1,
        _ => 0,
    }
}

/// A decision `candidate` that fits the policy better than the step's: any improvement on a
/// denial, only an Allow instead of an approval.
fn better(candidate: &str, step: &str) -> bool {
    rank(candidate) > rank(step) && (rank(step) == 0 || rank(candidate) == 2)
}

fn said(d: &DecisionSummary) -> String {
    let outcome = match d.outcome.as_str() {
        "deny" => "denied",
        "confirm" | "park" => "waiting for approval",
        other => other,
    };
    format!("{outcome} by {} ({})", d.layer, clip(&d.reason))
}

/// The step's command, when `action` is a READY tool step the planner should look at.
fn wants_plan_b<'a>(goal: &Goal, action: &'a Action) -> Option<(&'a str, &'a DecisionSummary)> {
    let ActionKind::Tool { command, .. } = &action.kind else {
        return None;
    };
    let decision = action.decision.as_ref()?;
    let proposed = goal
        .actions
        .iter()
        .any(|a| a.proposal.as_ref().is_some_and(|p| p.replaces == action.id));
    if action.state != ActionState::Ready
        || action.proposal.is_some()
        || !action.alternatives.is_empty()
        || proposed
        || decision.outcome == "allow"
    {
        return None;
    }
    let safer = Registry::embedded()
        .ok()
        .and_then(|r| r.resolve(command))
        .is_some_and(|c| c.safer_alternative.is_some());
    (decision.outcome == "deny" || safer).then_some((command.as_str(), decision))
}

/// A new action beside `step`: an optional alternative, same dependencies.
fn sibling(goal: &Goal, step: &Action, suffix: &str, title: String, kind: ActionKind) -> Action {
    let base: String = step.id.chars().take(64 - suffix.len() - 4).collect();
    let mut id = format!("{base}-{suffix}");
    let mut n = 2;
    while goal.action(&id).is_some() {
        id = format!("{base}-{suffix}{n}");
        n += 1;
    }
    Action {
        id,
        title,
        kind,
        state: ActionState::Planned,
        depends_on: step.depends_on.clone(),
        alternatives: Vec::new(),
        optional: true,
        expect: None,
        estimate_ms: step.estimate_ms,
        attempts: Vec::new(),
        resume_token: None,
        session_target: "isolated".to_owned(),
        not_before: 0,
        decision: None,
        plan_version: goal.plan_version + 1,
        proposal: None,
    }
}

fn ask_user(goal: &Goal, step: &Action, command: &str, d: &DecisionSummary) -> Action {
    let question = format!(
        "I may not \"{}\" myself ({command} is {}). Could you do it, then tell me when it is done?",
        step.title,
        said(d)
    );
    let mut ask = sibling(
        goal,
        step,
        "ask",
        format!("Ask the user: {}", step.title),
        ActionKind::AskUser { question },
    );
    ask.proposal = Some(Proposal {
        replaces: step.id.clone(),
        by: BY_MANIFEST.to_owned(),
        why: format!(
            "{} would be {}; the manifest names no safer command the policy allows, and asking \
             the user needs no permission",
            step.id,
            said(d)
        ),
    });
    ask
}

impl GoalEngine {
    /// Proposes an alternative for every READY step that needs one (see the module); whether
    /// the plan changed.
    pub(super) async fn propose_alternatives(&self, work: &mut Work) -> Result<bool, GoalsError> {
        let steps: Vec<String> = work
            .goal
            .actions
            .iter()
            .filter(|a| wants_plan_b(&work.goal, a).is_some())
            .map(|a| a.id.clone())
            .collect();
        let mut changed = false;
        for id in steps {
            let Some(step) = work.goal.action(&id).cloned() else {
                continue;
            };
            let Some((command, decision)) = wants_plan_b(&work.goal, &step) else {
                continue;
            };
            let (command, decision) = (command.to_owned(), decision.clone());
            let manifest = self.manifest_proposal(&work.goal, &step, &command, &decision);
            let chosen = match self
                .model_proposal(&work.goal, &step, &command, &decision, manifest.as_ref())
                .await
            {
                Ok(Some(proposal)) => Some(proposal),
                Ok(None) => manifest,
                Err(why) => manifest.map(|mut a| {
                    if let Some(p) = a.proposal.as_mut() {
                        p.why = format!(
                            "{} (the built-in model's proposal was not used: {why})",
                            p.why
                        );
                    }
                    a
                }),
            };
            if let Some(alternative) = chosen {
                work.goal.plan_version = alternative.plan_version;
                if let Some(s) = work.goal.action_mut(&id) {
                    s.alternatives.push(alternative.id.clone());
                }
                let at = work
                    .goal
                    .actions
                    .iter()
                    .position(|a| a.id == id)
                    .map_or(work.goal.actions.len(), |i| i + 1);
                work.goal.actions.insert(at, alternative);
                changed = true;
            }
        }
        Ok(changed)
    }

    /// The manifest's proposal for `step`.
    fn manifest_proposal(
        &self,
        goal: &Goal,
        step: &Action,
        command: &str,
        d: &DecisionSummary,
    ) -> Option<Action> {
        let ActionKind::Tool { params, .. } = &step.kind else {
            return None;
        };
        let safer = Registry::embedded()
            .ok()
            .and_then(|r| r.resolve(command))
            .and_then(|c| c.safer_alternative.clone());
        if let Some(alt) = safer {
            let mut mapped = Map::new();
            for (target, source) in &alt.params {
                if let Some(v) = params.get(source) {
                    mapped.insert(target.clone(), v.clone());
                }
            }
            let mut candidate = sibling(
                goal,
                step,
                "safer",
                format!("{} ({} instead)", step.title, alt.command),
                ActionKind::Tool {
                    command: alt.command.clone(),
                    params: mapped,
                },
            );
            if let Some(cd) = self.dry_run(goal, &candidate)
                && better(&cd.outcome, &d.outcome)
            {
                candidate.proposal = Some(Proposal {
                    replaces: step.id.clone(),
                    by: BY_MANIFEST.to_owned(),
                    why: format!(
                        "{} would be {}; the manifest's safer alternative {} ({}) is {}",
                        step.id,
                        said(d),
                        alt.command,
                        alt.why,
                        if cd.outcome == "allow" {
                            "allowed".to_owned()
                        } else {
                            said(&cd)
                        }
                    ),
                });
                return Some(candidate);
            }
        }
        (d.outcome == "deny").then(|| ask_user(goal, step, command, d))
    }

    /// The built-in model's proposal: `Ok(None)` without a model (or for a runtime's goal),
    /// `Err` when it failed or proposed something that does not fit.
    async fn model_proposal(
        &self,
        goal: &Goal,
        step: &Action,
        command: &str,
        d: &DecisionSummary,
        manifest: Option<&Action>,
    ) -> Result<Option<Action>, String> {
        let Some(agent) = self.backends.agent.clone() else {
            return Ok(None);
        };
        if goal.owner.surface == "runtime" {
            return Ok(None);
        }
        let ActionKind::Tool { params, .. } = &step.kind else {
            return Ok(None);
        };
        let prompt = format!(
            "You are the planner of a goal on the user's phone. Do not call tools: answer with \
             one JSON object only.\n\nGoal: {}\nStep {:?} (\"{}\") runs {command} with {}.\nThe \
             phone's policy: this step is {}.\nPropose ONE alternative step the policy allows \
             better, as {{\"kind\": \"tool\", \"command\": \"openphone.…\", \"params\": {{…}}, \
             \"title\": \"…\", \"why\": \"…\"}} or {{\"kind\": \"ask_user\", \"question\": \"…\", \
             \"title\": \"…\", \"why\": \"…\"}}.\nThe default, from the command manifest: {}",
            goal.objective,
            step.id,
            step.title,
            Value::Object(params.clone()),
            said(d),
            manifest
                .map(|a| json!({"kind": a.kind.name(), "title": a.title}).to_string())
                .unwrap_or_else(|| "none".to_owned()),
        );
        let answer = agent
            .agent_turn_on_device(&step.session(&goal.id), &prompt, goal.device_id.as_deref())
            .await
            .map_err(|e| format!("the model failed: {}", clip(&e)))?;
        let start = answer
            .find('{')
            .ok_or("the model's answer holds no JSON object")?;
        let end = answer
            .rfind('}')
            .ok_or("the model's answer holds no JSON object")?;
        let proposal: Value = serde_json::from_str(answer.get(start..=end).unwrap_or_default())
            .map_err(|e| format!("the model's answer is not JSON: {e}"))?;
        let text = |key: &str| {
            proposal
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        let why = text("why").ok_or("the model gave no `why`")?;
        let title = text("title").unwrap_or_else(|| format!("{} (alternative)", step.title));
        let (kind, fits) = match text("kind").as_deref() {
            Some("ask_user") if d.outcome == "deny" => {
                let question = text("question").ok_or("the model's question is empty")?;
                (
                    ActionKind::AskUser { question },
                    "asking the user needs no permission".to_owned(),
                )
            }
            Some("tool") => {
                let name = text("command").ok_or("the model named no command")?;
                let registry = Registry::embedded().map_err(|e| e.to_string())?;
                let cmd = registry
                    .resolve(&name)
                    .ok_or_else(|| format!("the model named an unknown command {name:?}"))?;
                let params = proposal
                    .get("params")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let kind = ActionKind::Tool {
                    command: cmd.name.clone(),
                    params,
                };
                let probe = sibling(goal, step, "model", title.clone(), kind.clone());
                let cd = self
                    .dry_run(goal, &probe)
                    .ok_or("the model's step could not be decided")?;
                if !better(&cd.outcome, &d.outcome) {
                    return Err(format!("{} would be {} too", cmd.name, said(&cd)));
                }
                (
                    kind,
                    format!(
                        "{} is {}",
                        cmd.name,
                        if cd.outcome == "allow" {
                            "allowed".to_owned()
                        } else {
                            said(&cd)
                        }
                    ),
                )
            }
            other => {
                return Err(format!(
                    "the model proposed a {other:?} step, which does not fit"
                ));
            }
        };
        let mut alternative = sibling(goal, step, "model", title, kind);
        alternative.proposal = Some(Proposal {
            replaces: step.id.clone(),
            by: BY_MODEL.to_owned(),
            why: format!(
                "{} would be {}; the built-in model proposes: {} ({fits})",
                step.id,
                said(d),
                clip(&why)
            ),
        });
        Ok(Some(alternative))
    }
}
