//! Artifacts (§5): under `<data dir>/artifacts/<goal-id>/`, `plan.json` (the plan graph with
//! each action's state, attempts and decision summary), `runs/<seq>-<action>-<attempt>.json`
//! (one per execution attempt) and `status.md` (for a person). Deterministic renders of the
//! stored goal, written atomically (temp file + rename); [`write_all`] rebuilds them all.

use std::io::Write;
use std::path::{Path, PathBuf};

use openphone_store::GoalTransition;
use serde_json::{Value, json};

use crate::model::{ActionKind, ActionState, Goal};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, synced, then
/// renamed over the target.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("an artifact path has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// [`write_atomic`] unless `path` already holds exactly `bytes`: a tick rewrites only the
/// artifacts it changed (a run's file is written once per outcome, not at every tick).
/// Returns whether it wrote.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    match std::fs::read(path) {
        Ok(existing) if existing == bytes => Ok(false),
        _ => write_atomic(path, bytes).map(|()| true),
    }
}

/// The directory of one goal's artifacts under `root` (`<data dir>/artifacts`).
pub fn goal_dir(root: &Path, goal_id: &str) -> PathBuf {
    root.join(goal_id)
}

/// `plan.json`.
pub fn plan_json(goal: &Goal) -> Value {
    let actions: Vec<Value> = goal
        .actions
        .iter()
        .map(|a| {
            json!({
                "id": a.id,
                "title": a.title,
                "kind": a.kind.name(),
                "state": a.state.as_str(),
                "depends_on": a.depends_on,
                "alternatives": a.alternatives,
                "optional": a.optional,
                "estimate_ms": a.estimate_ms,
                "plan_version": a.plan_version,
                "attempts": a.attempts,
                "decision": a.decision.as_ref().map(|d| json!({
                    "outcome": d.outcome, "layer": d.layer, "reason": d.reason,
                    "proof_digest": d.proof_digest,
                })),
            })
        })
        .collect();
    json!({
        "goal_id": goal.id,
        "objective": goal.objective,
        "state": goal.state.as_str(),
        "plan_version": goal.plan_version,
        "deadline_at": goal.deadline_at,
        "actions": actions,
    })
}

/// One `runs/*.json` per attempt: (file name, content).
pub fn runs(goal: &Goal) -> Vec<(String, Value)> {
    let registry = openphone_protocol::Registry::embedded().ok();
    let mut out = Vec::new();
    let mut seq = 0;
    for a in &goal.actions {
        for att in &a.attempts {
            seq += 1;
            let mut request = json!({"kind": a.kind.name()});
            if let ActionKind::Tool { command, params } = &a.kind {
                let private = registry
                    .and_then(|r| r.resolve(command))
                    .is_some_and(|c| c.default_exposure.as_str().contains("private"));
                request["command"] = json!(command);
                request["params_digest"] =
                    json!(crate::ids::digest(&Value::Object(params.clone())));
                if !private {
                    request["params"] = Value::Object(params.clone());
                }
            }
            out.push((
                format!("{seq:04}-{}-{}.json", a.id, att.n),
                json!({
                    "goal_id": goal.id,
                    "action": a.id,
                    "attempt": att.n,
                    "idempotency_key": att.idempotency_key,
                    "request": request,
                    "policy": a.decision.as_ref().map(|d| json!({
                        "outcome": d.outcome, "layers": d.layers,
                        "proof_digest": att.decision_proof_digest,
                    })),
                    "outcome": att.outcome,
                    "summary": att.summary,
                    "result_digest": att.result_digest,
                    "confirmation_id": att.confirmation_id,
                    "started_at": att.started_at,
                    "finished_at": att.finished_at,
                }),
            ));
        }
    }
    out
}

fn minutes(ms: i64) -> String {
    let m = ms.div_euclid(60_000);
    if m >= 60 {
        format!("{} h {} min", m / 60, m % 60)
    } else {
        format!("{m} min")
    }
}

/// `status.md`: objective, progress, deadline countdown, blockers with the exact command,
/// next actions, evidence.
pub fn status_md(goal: &Goal, now: i64) -> String {
    let total = goal.actions.iter().filter(|a| !a.optional).count();
    let done = goal
        .actions
        .iter()
        .filter(|a| !a.optional && a.state == ActionState::Done)
        .count();
    let mut out = format!(
        "# Goal {}\n\n**Objective:** {}\n\n",
        goal.id, goal.objective
    );
    out.push_str(&format!(
        "**State:** {} — {done}/{total} actions done (plan v{})\n\n",
        goal.state, goal.plan_version
    ));
    if let Some(deadline) = goal.deadline_at {
        if deadline > now {
            out.push_str(&format!("**Deadline:** in {}\n\n", minutes(deadline - now)));
        } else {
            out.push_str("**Deadline:** passed\n\n");
        }
    }
    out.push_str("## Actions\n\n");
    for a in &goal.actions {
        out.push_str(&format!("- [{}] {} — {}\n", a.state, a.id, a.title));
    }
    out.push_str("\n## Blockers\n\n");
    if goal.blockers.is_empty() {
        out.push_str("None.\n");
    }
    for b in &goal.blockers {
        out.push_str(&format!(
            "- {} ({}): {}\n  - resolve: `{}`\n",
            b.action_id.as_deref().unwrap_or("goal"),
            b.kind.as_str(),
            b.reason,
            b.how_to_resolve
        ));
    }
    out.push_str("\n## Next\n\n");
    let next: Vec<_> = goal
        .actions
        .iter()
        .filter(|a| matches!(a.state, ActionState::Ready | ActionState::Planned))
        .take(5)
        .collect();
    if next.is_empty() {
        out.push_str("Nothing scheduled.\n");
    }
    for a in next {
        out.push_str(&format!("- {}\n", a.title));
    }
    if !goal.checkpoints.is_empty() {
        out.push_str("\n## Checkpoints\n\n");
        for c in &goal.checkpoints {
            out.push_str(&format!(
                "- {} ({}): {:?}{} {}\n",
                c.label,
                c.contract,
                c.outcome,
                if c.late { " late" } else { "" },
                c.note
            ));
        }
    }
    out.push_str("\n## Evidence\n\n");
    if goal.evidence.is_empty() {
        out.push_str("None yet.\n");
    }
    for e in &goal.evidence {
        out.push_str(&format!(
            "- {} {}: {}\n",
            e.id,
            e.action_id.as_deref().unwrap_or("goal"),
            e.reference
        ));
    }
    out
}

/// Writes every artifact of `goal` under `root/<goal-id>/`, and `transitions.json` beside;
/// a file that already holds its content is left alone.
pub fn write_all(
    root: &Path,
    goal: &Goal,
    transitions: &[GoalTransition],
    now: i64,
) -> std::io::Result<()> {
    let dir = goal_dir(root, &goal.id);
    let pretty = |v: &Value| serde_json::to_vec_pretty(v).unwrap_or_default();
    write_if_changed(&dir.join("plan.json"), &pretty(&plan_json(goal)))?;
    for (name, run) in runs(goal) {
        write_if_changed(&dir.join("runs").join(name), &pretty(&run))?;
    }
    write_if_changed(&dir.join("status.md"), status_md(goal, now).as_bytes())?;
    let log = serde_json::to_value(transitions).unwrap_or(Value::Null);
    write_if_changed(&dir.join("transitions.json"), &pretty(&log))?;
    Ok(())
}
