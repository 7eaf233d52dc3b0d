//! The goal's `risk_level` ceiling (§1): an action whose command is riskier than the goal may
//! take is denied at dry-run time by the `goal_risk` layer — visible in the envelope — and
//! BLOCKED (`policy`) by the tick with a line saying how to resolve it.

use openphone_goals::{ActionState, BlockerKind, GoalSpec, risk};
use serde_json::json;

use super::support::{DENTIST, Harness};

fn goal_with(h: &Harness, level: &str, command: &str, params: serde_json::Value) -> String {
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "risk table",
        "risk_level": level,
        "plan": [{"id": "step", "title": "One step", "kind": "tool",
                  "command": command, "params": params}]
    }))
    .unwrap();
    h.engine.create(&spec, Harness::owner()).unwrap().id
}

#[test]
fn every_level_against_every_command_risk() {
    let search = ("openphone.calendar.search", json!({"query": "Dentist"})); // medium, read
    let memory = ("openphone.memory.search", json!({"query": "x"})); // low, read
    let update = (
        "openphone.calendar.update",
        json!({"event_id": DENTIST, "title": "Dentist (moved)"}),
    ); // medium, write
    let send = (
        "openphone.messages.send",
        json!({"to": "+49 151 2345 6789", "body": "hi"}),
    ); // high, risk floor
    // (goal level, command, expected outcome, deciding layer when the ceiling decides)
    let table = [
        ("low", &memory, "allow", None),
        ("low", &search, "deny", Some(risk::LAYER)),
        ("low", &update, "deny", Some(risk::LAYER)),
        ("low", &send, "deny", Some(risk::LAYER)),
        ("medium", &memory, "allow", None),
        ("medium", &search, "allow", None),
        ("medium", &update, "park", None),
        ("medium", &send, "deny", Some(risk::LAYER)),
        ("high", &memory, "allow", None),
        ("high", &search, "allow", None),
        ("high", &update, "park", None),
        ("high", &send, "park", None),
    ];
    let h = Harness::new();
    for (level, (command, params), outcome, layer) in table {
        let id = goal_with(&h, level, command, params.clone());
        let goal = h.engine.get(&id).unwrap();
        let envelope = h.engine.envelope(&goal);
        assert_eq!(envelope.len(), 1);
        let decision = &envelope[0].1;
        assert_eq!(
            decision.outcome, outcome,
            "{level} / {command}: {decision:?}"
        );
        if let Some(layer) = layer {
            assert_eq!(decision.layer, layer, "{level} / {command}");
            assert!(
                decision.reason.contains(&format!("at most {level} risk")),
                "{decision:?}"
            );
            // The proof keeps the policy's own layers, the ceiling last.
            assert!(
                decision
                    .layers
                    .last()
                    .unwrap()
                    .starts_with("goal_risk: deny")
            );
            assert!(decision.layers.len() > 1);
        } else {
            assert_ne!(decision.layer, risk::LAYER);
        }
    }
}

#[tokio::test]
async fn an_action_above_the_ceiling_is_blocked_with_how_to_resolve_it() {
    let h = Harness::new();
    let id = goal_with(
        &h,
        "medium",
        "openphone.messages.send",
        json!({"to": "+49 151 2345 6789", "body": "hi"}),
    );
    h.engine.tick(&id).await.unwrap();
    let goal = h.engine.get(&id).unwrap();
    let step = goal.action("step").unwrap();
    assert_eq!(step.state, ActionState::Blocked);
    assert!(step.resume_token.is_some());
    let blocker = goal
        .blockers
        .iter()
        .find(|b| b.action_id.as_deref() == Some("step"))
        .unwrap();
    assert_eq!(blocker.kind, BlockerKind::Policy);
    assert!(blocker.reason.contains("goal_risk"), "{blocker:?}");
    assert!(
        blocker
            .how_to_resolve
            .contains(&format!("openphone goals abort {id} step")),
        "{blocker:?}"
    );
    assert!(blocker.how_to_resolve.contains("risk_level high"));
    // Nothing was sent, and no approval was asked for.
    assert!(h.phone_actions().is_empty(), "{:?}", h.phone_actions());
    assert!(step.attempts.is_empty());
}
