//! `goals explain <goal> <action>` (§8): why an action ran, waits or is blocked — its
//! transitions with their sources, the policy proof of its last dry run layer by layer, its
//! attempts and what it waits on.

use openphone_store::GoalTransition;

use crate::model::Goal;

/// The explanation of `action_id`, one line each; `None` when the goal has no such action.
pub fn explain(
    goal: &Goal,
    action_id: &str,
    transitions: &[GoalTransition],
) -> Option<Vec<String>> {
    let action = goal.action(action_id)?;
    let mut out = vec![
        format!("{} — {} ({})", action.id, action.title, action.kind.name()),
        format!("state: {}", action.state),
    ];
    if let Some(p) = &action.proposal {
        out.push(format!(
            "proposed by the planner ({}) as the alternative of {}: {}",
            p.by, p.replaces, p.why
        ));
    }
    for alt in goal
        .actions
        .iter()
        .filter(|a| a.proposal.as_ref().is_some_and(|p| p.replaces == action.id))
    {
        out.push(format!(
            "the planner proposed {} ({}) in its place: {}",
            alt.id,
            alt.kind.name(),
            alt.proposal
                .as_ref()
                .map(|p| p.why.as_str())
                .unwrap_or_default()
        ));
    }
    if let Some(token) = &action.resume_token {
        out.push(format!("waits on: {token}"));
    }
    for b in goal
        .blockers
        .iter()
        .filter(|b| b.action_id.as_deref() == Some(action_id))
    {
        out.push(format!(
            "blocked ({}): {} — resolve with: {}",
            b.kind.as_str(),
            b.reason,
            b.how_to_resolve
        ));
    }
    out.push("transitions:".to_owned());
    for t in transitions
        .iter()
        .filter(|t| t.transition.action_id == action_id)
    {
        out.push(format!(
            "  #{} at {}: {} -> {} ({}) {}",
            t.seq,
            t.transition.at_ms,
            t.transition.from_state,
            t.transition.to_state,
            t.transition.source,
            t.transition.reason
        ));
    }
    match &action.decision {
        Some(d) => {
            out.push(format!(
                "policy (dry run at {}): {} — deciding layer {}: {}",
                d.at, d.outcome, d.layer, d.reason
            ));
            for layer in &d.layers {
                out.push(format!("  {layer}"));
            }
            if let Some(cmd) = &d.change_command {
                out.push(format!("  to change the outcome: {cmd}"));
            }
            out.push(format!("  proof digest: {}", d.proof_digest));
        }
        None => out.push("policy: no command to decide".to_owned()),
    }
    out.push(format!("attempts: {}", action.attempts.len()));
    for a in &action.attempts {
        out.push(format!(
            "  #{} key {}: {:?} {}{}",
            a.n,
            a.idempotency_key,
            a.outcome,
            a.summary,
            a.confirmation_id
                .as_deref()
                .map(|c| format!(" (confirmation {c})"))
                .unwrap_or_default()
        ));
    }
    Some(out)
}
