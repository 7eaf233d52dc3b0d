//! Issue 32 item 5 in the engine with the real store: a `wait` `on` an event ends when the
//! event is observed (only a matching one, only one that came after the wait started), and is
//! BLOCKED naming what did not arrive when its time passes first.

use openphone_clock::Clock as _;
use openphone_goals::model::{ActionState, BlockerKind, EvidenceKind, GoalState};
use openphone_goals::{GoalSpec, Happening};
use serde_json::json;

use super::support::{Harness, MIN};

fn waiting_for_bob(until_ms: i64) -> GoalSpec {
    serde_json::from_value(json!({
        "objective": "when Bob answers, look up the dentist",
        "plan": [
            {"id": "reply", "title": "Wait for Bob", "kind": "wait", "until_ms": until_ms,
             "on": {"event": "phone.message.received",
                    "where": [{"pointer": "/address", "op": "equals", "value": "+49 170 555 0101"}]}},
            {"id": "find", "title": "Find the dentist", "kind": "tool",
             "command": "openphone.calendar.search", "params": {"query": "Dentist"},
             "depends_on": ["reply"]}
        ]
    }))
    .unwrap()
}

fn message(address: &str, at: i64) -> Happening {
    Happening {
        event: "phone.message.received".to_owned(),
        payload: json!({"thread_id": 1, "address": address, "name": "Bob", "text": "yes", "at_ms": at}),
        at,
        audience: None,
    }
}

#[tokio::test]
async fn a_wait_on_a_message_ends_when_the_message_is_observed() {
    let h = Harness::new();
    let now = h.clock.now_ms();
    let goal = h
        .engine
        .create(&waiting_for_bob(now + 60 * MIN), Harness::owner())
        .unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    // A message from someone else, and Bob's from before the wait started: nothing moves.
    assert!(
        h.engine
            .observe(&message("+1 555 0100", now))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        h.engine
            .observe(&message("+49 170 555 0101", now - 1))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        h.engine
            .get(&goal.id)
            .unwrap()
            .action("reply")
            .unwrap()
            .state,
        ActionState::Running
    );
    h.clock.advance(MIN);
    let woken = h
        .engine
        .observe(&message("+49 170 555 0101", h.clock.now_ms()))
        .await
        .unwrap();
    assert_eq!(woken, vec![goal.id.clone()]);
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.action("reply").unwrap().state, ActionState::Done);
    let ev = g
        .evidence
        .iter()
        .find(|e| e.action_id.as_deref() == Some("reply"))
        .unwrap();
    assert_eq!(ev.kind, EvidenceKind::Message);
    assert!(
        ev.reference.starts_with("phone.message.received: "),
        "{ev:?}"
    );
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.state, GoalState::Done, "{g:#?}");
}

#[tokio::test]
async fn a_wait_on_a_message_that_never_comes_blocks_naming_it() {
    let h = Harness::new();
    let now = h.clock.now_ms();
    let goal = h
        .engine
        .create(&waiting_for_bob(now + 10 * MIN), Harness::owner())
        .unwrap();
    let out = h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(out.next_wake, Some(now + 10 * MIN));
    h.clock.advance(10 * MIN);
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.action("reply").unwrap().state, ActionState::Blocked);
    assert_eq!(g.state, GoalState::Blocked);
    let b = g
        .blockers
        .iter()
        .find(|b| b.action_id.as_deref() == Some("reply"))
        .unwrap();
    assert_eq!(b.kind, BlockerKind::External);
    assert!(
        b.reason.contains("no phone.message.received where"),
        "{b:?}"
    );
    assert!(
        b.how_to_resolve.starts_with("openphone goals plan "),
        "{b:?}"
    );
}

fn waiting_for_a_final(until_ms: i64) -> GoalSpec {
    serde_json::from_value(json!({
        "objective": "when the reply comes, note it",
        "plan": [{"id": "reply", "title": "Wait for the reply", "kind": "wait",
                  "until_ms": until_ms, "on": {"event": "runtime.message.final"}}]
    }))
    .unwrap()
}

/// Every bus event reached every goal: a runtime's goal waiting on `runtime.message.final`
/// was ended by another runtime's reply, and the reply's text was kept as evidence its owner
/// reads through `goals get`. A runtime's goal sees only its owner's finals and firings, and
/// keeps an event's kind and digest, never its text.
#[tokio::test]
async fn regression_another_runtimes_final_ended_a_runtime_goals_wait() {
    let h = Harness::new();
    let now = h.clock.now_ms();
    let owner = openphone_goals::model::Owner {
        surface: "runtime".to_owned(),
        phone_session: None,
        runtime: Some("wide".to_owned()),
    };
    let goal = h
        .engine
        .create(&waiting_for_a_final(now + 60 * MIN), owner)
        .unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    h.clock.advance(MIN);
    let at = h.clock.now_ms();
    let final_of = |runtime: Option<&str>| Happening {
        event: "runtime.message.final".to_owned(),
        payload: json!({"phone_session_id": "s-1", "text": "the secret reply"}),
        at,
        audience: runtime.map(str::to_owned),
    };
    for other in [Some("hermes"), None] {
        assert!(
            h.engine.observe(&final_of(other)).await.unwrap().is_empty(),
            "{other:?}"
        );
    }
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.action("reply").unwrap().state, ActionState::Running);

    let woken = h.engine.observe(&final_of(Some("wide"))).await.unwrap();
    assert_eq!(woken, vec![goal.id.clone()]);
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.action("reply").unwrap().state, ActionState::Done);
    let text = serde_json::to_string(&g).unwrap();
    assert!(
        !text.contains("secret"),
        "the payload text was kept: {text}"
    );
    let ev = g
        .evidence
        .iter()
        .find(|e| e.action_id.as_deref() == Some("reply"))
        .unwrap();
    assert!(ev.reference.starts_with("runtime.message.final"), "{ev:?}");

    // The operator's goals keep today's behaviour: any final, its text as evidence.
    let mine = h
        .engine
        .create(&waiting_for_a_final(at + 60 * MIN), Harness::owner())
        .unwrap();
    h.engine.tick(&mine.id).await.unwrap();
    h.clock.advance(MIN);
    let mut other = final_of(Some("hermes"));
    other.at = h.clock.now_ms();
    assert_eq!(
        h.engine.observe(&other).await.unwrap(),
        vec![mine.id.clone()]
    );
    let ev = h
        .engine
        .get(&mine.id)
        .unwrap()
        .evidence
        .into_iter()
        .find(|e| e.action_id.as_deref() == Some("reply"))
        .unwrap();
    assert!(ev.reference.contains("secret"), "{ev:?}");
}
