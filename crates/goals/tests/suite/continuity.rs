//! The continuity rule (§3): a goal never stops silently. A denied action is BLOCKED with the
//! policy's reason and its alternative takes over; a goal that cannot move names a blocker
//! with the exact command.

use openphone_goals::GoalSpec;
use openphone_goals::model::{ActionState, BlockerKind, GoalState};
use serde_json::json;

use super::support::{DAY, DENTIST, DENTIST_START, Harness};

fn spec(alternative: bool) -> GoalSpec {
    let mut plan = vec![
        json!({"id": "move", "title": "Move the dentist", "kind": "tool",
        "command": "openphone.calendar.update",
        "params": {"event_id": DENTIST, "start_at": DENTIST_START + DAY},
        "alternatives": if alternative { vec!["ask"] } else { vec![] }}),
    ];
    if alternative {
        plan.push(
            json!({"id": "ask", "title": "Ask me to move it", "kind": "ask_user",
            "question": "I may not edit your calendar: could you move the dentist to Friday?",
            "optional": true}),
        );
    }
    serde_json::from_value(json!({
        "objective": "move the dentist", "autonomy": "observe_only", "plan": plan
    }))
    .unwrap()
}

#[tokio::test]
async fn a_denied_action_blocks_and_its_alternative_takes_over() {
    let h = Harness::new();
    let goal = h.engine.create(&spec(true), Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let mv = g.action("move").unwrap();
    assert_eq!(mv.state, ActionState::Blocked);
    assert_eq!(mv.decision.as_ref().unwrap().outcome, "deny");
    assert!(mv.attempts.is_empty(), "a denied action is never attempted");
    assert_eq!(g.action("ask").unwrap().state, ActionState::Running);
    assert_eq!(g.state, GoalState::Blocked);
    let input = g
        .blockers
        .iter()
        .find(|b| b.kind == BlockerKind::Input)
        .unwrap();
    assert_eq!(
        input.how_to_resolve,
        format!("openphone goals answer {} ask \"<your answer>\"", goal.id)
    );
    assert!(g.blockers.iter().any(|b| b.kind == BlockerKind::Policy));

    let g = h
        .engine
        .answer(&goal.id, "ask", "done, moved it")
        .await
        .unwrap();
    assert_eq!(g.action("ask").unwrap().state, ActionState::Done);
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.state, GoalState::Done, "{:#?}", g.blockers);
    assert!(h.phone_actions().is_empty());
}

#[tokio::test]
async fn a_goal_with_no_path_left_is_blocked_naming_the_command() {
    let h = Harness::new();
    let goal = h.engine.create(&spec(false), Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.state, GoalState::Blocked);
    assert!(!g.blockers.is_empty());
    for b in &g.blockers {
        assert!(b.how_to_resolve.contains("openphone "), "{b:?}");
        assert!(b.resume_token.is_some());
    }
    // Every action that is not done or moving is accounted for by a blocker.
    for a in g.actions.iter().filter(|a| a.state == ActionState::Blocked) {
        assert!(
            g.blockers
                .iter()
                .any(|b| b.action_id.as_deref() == Some(a.id.as_str()))
        );
    }
}

#[tokio::test]
async fn explain_prints_the_proof_layer_by_layer() {
    let h = Harness::new();
    let goal = h.engine.create(&spec(false), Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let log = h.store.goal_transitions(&goal.id).unwrap();
    let lines = openphone_goals::explain::explain(&g, "move", &log).unwrap();
    let text = lines.join("\n");
    assert!(text.contains("state: BLOCKED"), "{text}");
    assert!(text.contains("PLANNED -> READY (clock)"), "{text}");
    assert!(
        text.contains("READY -> BLOCKED (policy) denied by autonomy"),
        "{text}"
    );
    assert!(text.contains("policy (dry run at"), "{text}");
    // All seven layers, in order.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("  ") && l.contains(": ") && l.contains(" — "))
            .count(),
        7,
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "resolve with: openphone goals retry {} move",
            goal.id
        )) || text.contains("then openphone goals retry"),
        "{text}"
    );
    assert!(openphone_goals::explain::explain(&g, "nope", &log).is_none());
}
