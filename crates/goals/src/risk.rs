//! The goal's risk ceiling (`goals.md` §1, `risk_level`): a `tool` action whose command is
//! riskier than the goal allows is refused at dry-run time — its decision becomes a Deny by
//! the `goal_risk` layer, placed after the policy stack's own layers, so the envelope shows it
//! and the tick BLOCKS the action (`policy`) with a line saying how to resolve it.
//!
//! The ceiling only ever tightens: an action the policy denies stays denied whatever the
//! goal's level, and a goal at `high` adds nothing to the policy's decision.

use openphone_protocol::{Registry, Risk};

use crate::ids::digest_text;
use crate::model::{DecisionSummary, Goal, RiskLevel};

/// The name of the layer the ceiling decides in.
pub const LAYER: &str = "goal_risk";

/// A command's risk on the goal's scale.
pub fn level_of(risk: Risk) -> RiskLevel {
    match risk {
        Risk::Low => RiskLevel::Low,
        Risk::Medium => RiskLevel::Medium,
        Risk::High => RiskLevel::High,
    }
}

fn name(level: RiskLevel) -> &'static str {
    match level {
        RiskLevel::Low => "low",
        RiskLevel::Medium => "medium",
        RiskLevel::High => "high",
    }
}

/// The command's risk when it is above the goal's ceiling (`None` when it fits, or when the
/// command is unknown — the bridge's validation denies that one).
pub fn exceeds(goal: &Goal, command: &str) -> Option<RiskLevel> {
    let risk = level_of(Registry::embedded().ok()?.resolve(command)?.risk);
    (risk > goal.risk_level).then_some(risk)
}

/// The line that resolves a step refused by the ceiling: drop the step (its alternatives, if
/// any, then run), or start the goal again at the step's level.
pub fn how_to_resolve(goal: &Goal, action: &str, risk: RiskLevel) -> String {
    format!(
        "openphone goals abort {} {action} (its alternatives then run), or create the goal \
         again with risk_level {}",
        goal.id,
        name(risk)
    )
}

/// `decision` with the ceiling applied: unchanged when the command fits (or the policy already
/// denies it), else a Deny by [`LAYER`] naming both levels and how to resolve it.
pub fn cap(goal: &Goal, action: &str, command: &str, decision: DecisionSummary) -> DecisionSummary {
    if decision.outcome == "deny" {
        return decision;
    }
    let Some(risk) = exceeds(goal, command) else {
        return decision;
    };
    let reason = format!(
        "{command} is {} risk; this goal may take at most {} risk",
        name(risk),
        name(goal.risk_level)
    );
    let mut layers = decision.layers;
    layers.push(format!("{LAYER}: deny — {reason}"));
    DecisionSummary {
        outcome: "deny".to_owned(),
        layer: LAYER.to_owned(),
        proof_digest: digest_text(&format!("{}\n{LAYER}: {reason}", decision.proof_digest)),
        reason,
        layers,
        change_command: Some(how_to_resolve(goal, action, risk)),
        at: decision.at,
    }
}
