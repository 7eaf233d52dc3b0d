//! The goal's wire record (`openphone_protocol::endpoint::GoalRecord`) writes the same JSON as
//! the goal document the endpoint showed before it was typed (`goal_json`), member for
//! member, and reads it back whole.

use openphone_clock::Clock;
use openphone_goals::{GoalSpec, action_record, goal_json, goal_record};
use openphone_protocol::endpoint::{GoalActionRecord, GoalRecord};
use serde_json::json;

use super::support::{Harness, MIN};

fn assert_same(goal: &openphone_goals::Goal) {
    let record = goal_record(goal);
    assert_eq!(serde_json::to_value(&record).unwrap(), goal_json(goal));
    let back: GoalRecord = serde_json::from_value(goal_json(goal)).unwrap();
    assert_eq!(back, record);
    for action in &goal.actions {
        let record = action_record(action);
        assert_eq!(
            serde_json::to_value(&record).unwrap(),
            serde_json::to_value(action).unwrap()
        );
        let back: GoalActionRecord =
            serde_json::from_value(serde_json::to_value(action).unwrap()).unwrap();
        assert_eq!(back, record);
    }
}

#[tokio::test]
async fn the_record_of_the_dentist_goal_is_its_document() {
    let h = Harness::new();
    let goal = h.ticked_dentist().await;
    // Parked for approval: a decision, an attempt with its confirmation, a blocker, evidence,
    // checkpoints and success criteria with a predicate.
    assert_same(&h.engine.get(&goal.id).unwrap());
}

#[tokio::test]
async fn the_record_of_every_action_kind_is_its_document() {
    let h = Harness::new();
    let now = h.clock.now_ms();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "every kind of step",
        "deadline_at": now + 60 * MIN,
        "success_criteria": [
            {"id": "yes", "description": "the user says so", "check": {"kind": "user_confirms"}}
        ],
        "plan": [
            {"id": "ask", "title": "Ask", "kind": "ask_user", "question": "Which day?"},
            {"id": "wait", "title": "Wait", "kind": "wait", "until_ms": now + MIN, "optional": true},
            {"id": "turn", "title": "Think", "kind": "agent_turn", "prompt": "think"},
            {"id": "job", "title": "Later", "kind": "job", "job_title": "later", "prompt": "p",
             "run_at": now + 2 * MIN},
            {"id": "check", "title": "Check", "kind": "verify", "depends_on": ["ask"]}
        ]
    }))
    .unwrap();
    let goal = h.engine.create(&spec, Harness::owner()).unwrap();
    assert_same(&h.engine.get(&goal.id).unwrap());
    h.engine.tick(&goal.id).await.unwrap();
    assert_same(&h.engine.get(&goal.id).unwrap());
}
