//! The minimal approval package (§4) and `accept_for_session` on a goal's approval (§8): the
//! grant is scoped to that goal, these exact params, until its deadline — later attempts of
//! the same goal are not asked again, another goal still is. And a goal's approval waits
//! until the goal's deadline, not the bridge's ten minutes.

use openphone_core::{ConfirmDecision, Operator};
use openphone_goals::approval;
use openphone_goals::{ActionState, GoalSpec};
use openphone_policy::{Caller, Transport};
use serde_json::json;

use super::support::{DENTIST, Harness, MIN};

const MOVED: &str = "Dentist (moved)";

/// A goal whose two steps make the same calendar edit (a repeated attempt of one change).
fn edit_goal(h: &Harness, deadline: i64) -> String {
    let params = json!({"event_id": DENTIST, "title": MOVED});
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "rename the dentist",
        "deadline_at": deadline,
        "plan": [
            {"id": "edit", "title": "Rename the dentist", "kind": "tool",
             "command": "openphone.calendar.update", "params": params},
            {"id": "again", "title": "Rename the dentist again", "kind": "tool",
             "command": "openphone.calendar.update", "params": params, "depends_on": ["edit"]}
        ]
    }))
    .unwrap();
    h.engine.create(&spec, Harness::owner()).unwrap().id
}

fn confirmation_of(h: &Harness, goal: &str, action: &str) -> Option<String> {
    let goal = h.engine.get(goal).unwrap();
    let a = goal.action(action).unwrap();
    (a.state == ActionState::NeedsApproval)
        .then(|| a.last_attempt().and_then(|t| t.confirmation_id.clone()))
        .flatten()
}

async fn resolve(h: &Harness, cid: &str, decision: ConfirmDecision) {
    let operator =
        Operator::from_caller(&Caller::operator("cli", Transport::Cli, "tester")).unwrap();
    h.bridge.resolve(&operator, cid, decision).await.unwrap();
}

#[tokio::test]
async fn the_package_is_this_goal_this_tool_these_params_until_the_deadline() {
    let h = Harness::new();
    let deadline = h.engine.now() + 120 * MIN;
    let id = edit_goal(&h, deadline);
    let goal = h.engine.get(&id).unwrap();
    let edit = goal.action("edit").unwrap();
    let decision = h.engine.dry_run(&goal, edit).unwrap();
    let package = approval::package(&goal, edit, &decision, h.engine.now()).unwrap();
    assert_eq!(package.scope, format!("goal:{id}"));
    assert_eq!(package.goal_id, id);
    assert_eq!(package.tool, "openphone.calendar.update");
    assert_eq!(package.runtime, "builtin");
    assert_eq!(package.expires_at, deadline);
    assert_eq!(package.constraints["event_id"], json!(DENTIST));
    assert_eq!(package.constraints["title"], json!(MOVED));
    // Every other declared param is pinned to "absent"; the audit's reason is not pinned.
    assert_eq!(package.constraints["start_at"], json!(null));
    assert!(!package.constraints.contains_key("reason"));

    // The envelope as data carries it.
    let envelope = approval::envelope(&h.engine, &goal);
    assert_eq!(
        envelope[0]["approval_package"]["scope"],
        json!(format!("goal:{id}"))
    );
    assert_eq!(envelope[0]["approval_note"], json!(null));
}

#[tokio::test]
async fn no_package_for_the_risk_floor_nor_for_a_deny() {
    let h = Harness::new();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "tell Alice", "risk_level": "high",
        "plan": [
            {"id": "send", "title": "Tell Alice", "kind": "tool",
             "command": "openphone.messages.send",
             "params": {"to": "+49 151 2345 6789", "body": "hi"}}
        ]
    }))
    .unwrap();
    let goal = h.engine.create(&spec, Harness::owner()).unwrap();
    let entry = &approval::envelope(&h.engine, &goal)[0];
    assert_eq!(entry["approval_package"], json!(null));
    assert!(
        entry["approval_note"]
            .as_str()
            .unwrap()
            .contains("risk floor"),
        "{entry}"
    );

    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "tell Alice", "risk_level": "medium",
        "plan": [
            {"id": "send", "title": "Tell Alice", "kind": "tool",
             "command": "openphone.messages.send",
             "params": {"to": "+49 151 2345 6789", "body": "hi"}}
        ]
    }))
    .unwrap();
    let goal = h.engine.create(&spec, Harness::owner()).unwrap();
    let entry = &approval::envelope(&h.engine, &goal)[0];
    assert_eq!(entry["outcome"], "deny");
    assert_eq!(entry["approval_package"], json!(null));
    assert!(
        entry["approval_note"]
            .as_str()
            .unwrap()
            .contains("cannot lift a deny"),
        "{entry}"
    );
}

#[tokio::test]
async fn accept_for_session_on_a_goal_approval_covers_later_attempts_of_that_goal_only() {
    let h = Harness::new();
    let deadline = h.engine.now() + 120 * MIN;
    let first = edit_goal(&h, deadline);
    let second = edit_goal(&h, deadline);

    h.engine.tick(&first).await.unwrap();
    let cid = confirmation_of(&h, &first, "edit").expect("the first edit asks");
    resolve(&h, &cid, ConfirmDecision::AcceptForSession).await;

    // The grant the bridge made is the package: this goal, this tool, these params, the
    // deadline.
    let grants = h.store.list_approvals(Some("builtin")).unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    let grant = &grants[0];
    assert_eq!(
        grant.phone_session_id.as_deref(),
        Some(format!("goal:{first}").as_str())
    );
    assert_eq!(grant.tool, "openphone.calendar.update");
    assert_eq!(grant.expires_at_ms, Some(deadline));
    assert!(grant.background);
    assert_eq!(grant.constraints["event_id"], json!(DENTIST));

    // The approved edit runs; the same edit again in this goal is not asked again.
    h.engine.tick(&first).await.unwrap();
    let goal = h.engine.get(&first).unwrap();
    assert_eq!(goal.action("edit").unwrap().state, ActionState::Done);
    let again = goal.action("again").unwrap();
    assert_eq!(again.state, ActionState::Done, "{again:?}");
    assert!(
        again.attempts.iter().all(|a| a.confirmation_id.is_none()),
        "{again:?}"
    );
    assert_eq!(again.decision.as_ref().unwrap().outcome, "allow");

    // Another goal with the very same edit is still asked.
    h.engine.tick(&second).await.unwrap();
    assert!(
        confirmation_of(&h, &second, "edit").is_some(),
        "{:?}",
        h.engine.get(&second).unwrap().action("edit")
    );
}

#[tokio::test]
async fn a_plain_approval_makes_no_grant_and_the_next_attempt_asks_again() {
    let h = Harness::new();
    let id = edit_goal(&h, h.engine.now() + 120 * MIN);
    h.engine.tick(&id).await.unwrap();
    let cid = confirmation_of(&h, &id, "edit").unwrap();
    resolve(&h, &cid, ConfirmDecision::Approve).await;
    h.engine.tick(&id).await.unwrap();
    assert!(h.store.list_approvals(Some("builtin")).unwrap().is_empty());
    assert!(confirmation_of(&h, &id, "again").is_some());
}

#[tokio::test]
async fn a_goal_approval_waits_until_the_goal_deadline_not_ten_minutes() {
    let h = Harness::new();
    let deadline = h.engine.now() + 120 * MIN;
    let id = edit_goal(&h, deadline);
    h.engine.tick(&id).await.unwrap();
    let cid = confirmation_of(&h, &id, "edit").unwrap();
    let record = h.store.get_confirmation(&cid).unwrap().unwrap();
    assert_eq!(record.expires_at_ms, deadline);
    // Half an hour on, the same request still waits: not expired, not asked again.
    h.clock.advance(30 * MIN);
    h.engine.tick(&id).await.unwrap();
    assert_eq!(
        confirmation_of(&h, &id, "edit").as_deref(),
        Some(cid.as_str())
    );
}
