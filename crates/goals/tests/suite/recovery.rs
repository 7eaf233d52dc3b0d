//! Idempotent attempts across crashes (§8): an attempt left RUNNING by a process that died is
//! re-sent with the same idempotency key first — a recorded result replays, nothing runs twice.

use openphone_clock::Clock;
use openphone_goals::GoalSpec;
use openphone_goals::engine::{from_stored, to_stored};
use openphone_goals::model::{ActionState, AttemptOutcome, GoalState};
use openphone_store::NewStandingApproval;
use serde_json::json;

use super::support::{DAY, DENTIST, DENTIST_START, Harness};

/// A standing approval for background work, so the goal's calendar edit runs without asking.
fn allow_calendar_edits(h: &Harness) {
    h.store
        .create_approval(
            &NewStandingApproval {
                runtime: "builtin".to_owned(),
                tool: "openphone.calendar.update".to_owned(),
                constraints: json!({}),
                expires_at_ms: None,
                background: true,
                phone_session_id: None,
                confirmation_id: None,
                created_by: Some("test".to_owned()),
                note: None,
            },
            h.clock.now_ms(),
        )
        .unwrap();
}

fn move_spec() -> GoalSpec {
    serde_json::from_value(json!({
        "objective": "move the dentist to Friday",
        "plan": [{"id": "move", "title": "Move the dentist", "kind": "tool",
                  "command": "openphone.calendar.update",
                  "params": {"event_id": DENTIST, "start_at": DENTIST_START + DAY}}]
    }))
    .unwrap()
}

/// Rewrites the stored goal to what it was when `move` had just become RUNNING: the state a
/// process killed at that point leaves behind.
fn back_to_running(h: &Harness, goal_id: &str) {
    let stored = h.store.get_goal(goal_id).unwrap().unwrap();
    let mut goal = from_stored(&stored).unwrap();
    let action = goal.action_mut("move").unwrap();
    action.state = ActionState::Running;
    let attempt = action.attempts.last_mut().unwrap();
    attempt.outcome = AttemptOutcome::Running;
    attempt.finished_at = None;
    attempt.summary.clear();
    goal.evidence.clear();
    goal.state = GoalState::Active;
    h.store
        .update_goal(&to_stored(&goal).unwrap(), vec![], vec![])
        .unwrap();
}

#[tokio::test]
async fn killed_after_the_phone_ran_the_attempt_replays_and_nothing_runs_twice() {
    let mut h = Harness::new();
    allow_calendar_edits(&h);
    let goal = h.engine.create(&move_spec(), Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(h.phone_actions().len(), 1);
    back_to_running(&h, &goal.id);

    h.restart();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let mv = g.action("move").unwrap();
    assert_eq!(mv.state, ActionState::Done);
    assert_eq!(
        mv.attempts.len(),
        1,
        "the same attempt was re-sent, not a new one"
    );
    assert_eq!(mv.attempts[0].summary, "ok (replayed)");
    assert_eq!(
        h.phone_actions().len(),
        1,
        "the edit ran once: {:?}",
        h.phone_actions()
    );
    assert_eq!(g.state, GoalState::Done);
    let sources: Vec<String> = h
        .store
        .goal_transitions(&goal.id)
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}>{}:{}",
                t.transition.from_state, t.transition.to_state, t.transition.source
            )
        })
        .collect();
    assert_eq!(
        sources
            .iter()
            .filter(|s| s.as_str() == "READY>RUNNING:policy")
            .count(),
        1
    );
}

#[tokio::test]
async fn killed_before_the_request_reached_the_bridge_it_runs_once_on_restart() {
    let mut h = Harness::new();
    allow_calendar_edits(&h);
    let goal = h.engine.create(&move_spec(), Harness::owner()).unwrap();
    // Make the RUNNING record by hand: the attempt was stored, the process died before the
    // bridge saw the request.
    let stored = h.store.get_goal(&goal.id).unwrap().unwrap();
    let mut g = from_stored(&stored).unwrap();
    let action = g.action_mut("move").unwrap();
    action.state = ActionState::Running;
    action.attempts.push(openphone_goals::Attempt {
        n: 1,
        idempotency_key: format!("{}:move:1", goal.id),
        started_at: h.clock.now_ms(),
        finished_at: None,
        outcome: AttemptOutcome::Running,
        decision_proof_digest: String::new(),
        result_digest: String::new(),
        summary: String::new(),
        confirmation_id: None,
        approval_expires_at: None,
        job_id: None,
    });
    h.store
        .update_goal(&to_stored(&g).unwrap(), vec![], vec![])
        .unwrap();
    assert!(h.phone_actions().is_empty());

    h.restart();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.action("move").unwrap().state, ActionState::Done);
    assert_eq!(g.action("move").unwrap().attempts[0].summary, "ok");
    assert_eq!(h.phone_actions().len(), 1);
    // Another tick runs nothing.
    h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(h.phone_actions().len(), 1);
}

/// Regression (issue 18, the daemon's kill -9 test): a process killed after storing an
/// action's NEEDS_APPROVAL but before recording its confirmation left the action waiting on
/// nothing — no confirmation id, no blocker, no wake: a silent stop. The next tick asks again
/// with the same key, joins the confirmation the bridge made, and the approval runs it once.
#[tokio::test]
async fn a_needs_approval_action_killed_before_its_confirmation_was_recorded_waits_on_it_again() {
    let mut h = Harness::new();
    let goal = h.engine.create(&move_spec(), Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let parked = h.engine.get(&goal.id).unwrap();
    let first = parked.action("move").unwrap();
    assert_eq!(first.state, ActionState::NeedsApproval);
    let cid = first.attempts[0].confirmation_id.clone().unwrap();

    // What the killed process left: the transition stored, the confirmation not recorded.
    let stored = h.store.get_goal(&goal.id).unwrap().unwrap();
    let mut g = from_stored(&stored).unwrap();
    let action = g.action_mut("move").unwrap();
    action.resume_token = None;
    let attempt = action.attempts.last_mut().unwrap();
    attempt.confirmation_id = None;
    attempt.approval_expires_at = None;
    g.blockers.clear();
    h.store
        .update_goal(&to_stored(&g).unwrap(), vec![], vec![])
        .unwrap();

    h.restart();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let mv = g.action("move").unwrap();
    assert_eq!(mv.state, ActionState::NeedsApproval);
    assert_eq!(mv.attempts.len(), 1, "the same attempt, not a new one");
    assert_eq!(
        mv.attempts[0].confirmation_id.as_deref(),
        Some(cid.as_str()),
        "the confirmation the bridge already had"
    );
    assert_eq!(g.state, GoalState::Blocked);
    assert!(
        g.blockers
            .iter()
            .any(|b| b.how_to_resolve == format!("openphone confirmations approve {cid}")),
        "{:?}",
        g.blockers
    );

    h.approve(&cid).await;
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.action("move").unwrap().state, ActionState::Done);
    assert_eq!(h.phone_actions().len(), 1);
}
