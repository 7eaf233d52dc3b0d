//! Sender allowlists (`[wake]`, issue 32 item 11) on every path a phone event takes to a
//! runtime's work, on the real daemon: a watcher's attention request and a goal's `wait`. A
//! sender off the list wakes nothing there, and each refusal is a `wake.dropped` audit record
//! naming what it would have woken, without the message's text.

use std::time::Duration;

use openphone_goals::{ActionState, GoalSpec, GoalState, Owner};
use serde_json::{Value, json};

use super::support::{Client, RUNTIME_TOKEN, config, connect, start};

/// The next event with this name (others are skipped).
async fn event_named(c: &mut Client, name: &str) -> Value {
    loop {
        let e = c.next_event().await;
        if e["params"]["event"] == name {
            return e["params"]["payload"].clone();
        }
    }
}

/// The `wake.dropped` records once there are `n` of them, read every 100 ms for at most 60 s.
async fn dropped(op: &mut Client, n: usize) -> Vec<Value> {
    for _ in 0..600 {
        let audit = op.call("audit.query", json!({"limit": 1000})).await;
        let records: Vec<Value> = audit["result"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["tool"] == "wake.dropped")
            .cloned()
            .collect();
        if records.len() >= n {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("fewer than {n} wake.dropped records after 60 s");
}

async fn inject(op: &mut Client, params: Value) {
    let r = op.call("sim.inject", params).await;
    assert!(r.get("result").is_some(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_from_an_app_off_the_wake_allowlist_raises_no_attention_request() {
    let d = start(config(
        "[routing]\nbackground = \"hermes\"\n[wake]\napps = [\"Calendar\"]\n",
    ))
    .await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    // Every notification fires it; its reaction is an attention request to hermes.
    let created = op
        .call(
            "tools.invoke",
            json!({"request_id": "watch-1", "tool": "openphone.watchers.create",
                   "params": {"title": "Any notification", "source": "notification",
                              "match_any": true},
                   "reason": "test", "autonomy": "trusted_actions"}),
        )
        .await;
    let watcher = created["result"]["result"]["watcher"]["watcher_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{created}"));

    // The Clock is not on the list: no attention request, the drop audited.
    inject(
        &mut op,
        json!({"kind": "notification", "app": "Clock", "title": "Alarm",
               "text": "the clock's secret"}),
    )
    .await;
    let records = dropped(&mut op, 1).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let proof = &records[0]["policy_proof"];
    assert_eq!(proof["source"], "notification");
    assert_eq!(proof["list"], "apps");
    assert_eq!(proof["sender"]["package"], "com.android.deskclock");
    assert_eq!(proof["watcher_ids"], json!([watcher]));
    assert!(!records[0].to_string().contains("the clock's secret"));

    // The Calendar is: its notification is the first attention request hermes receives.
    inject(
        &mut op,
        json!({"kind": "notification", "app": "Calendar", "title": "Dentist"}),
    )
    .await;
    let attention = event_named(&mut rt, "runtime.attention.requested").await;
    let context = attention["context"]["data"].to_string();
    assert!(
        context.contains("Dentist") && !context.contains("Alarm"),
        "{attention}"
    );
    assert_eq!(dropped(&mut op, 1).await.len(), 1);
    d.daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_wait_is_not_ended_by_a_sender_off_the_wake_allowlist() {
    let d = start(config("[wake]\ncontacts = [\"Alice Martin\"]\n")).await;
    let engine = d.daemon.goal_engine();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "when someone writes, look up the dentist",
        "plan": [
            {"id": "reply", "title": "Wait for a message", "kind": "wait",
             "until_ms": engine.now() + 3_600_000,
             "on": {"event": "phone.message.received"}},
            {"id": "find", "title": "Find the dentist", "kind": "tool",
             "command": "openphone.calendar.search", "params": {"query": "Dentist"},
             "depends_on": ["reply"]}
        ]
    }))
    .unwrap();
    let owner = Owner {
        surface: "test".to_owned(),
        phone_session: None,
        runtime: None,
    };
    let goal = engine.create(&spec, owner).unwrap();
    engine.tick(&goal.id).await.unwrap();
    assert_eq!(
        engine.get(&goal.id).unwrap().action("reply").unwrap().state,
        ActionState::Running
    );
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;

    // Bob is not on the list: his message ends no wait, the drop names the goal.
    inject(
        &mut op,
        json!({"kind": "message", "address": "+49 170 555 0101", "text": "Bob's secret"}),
    )
    .await;
    let records = dropped(&mut op, 1).await;
    let proof = &records[0]["policy_proof"];
    assert_eq!(proof["source"], "message");
    assert_eq!(proof["list"], "contacts");
    assert_eq!(proof["goal_ids"], json!([goal.id]));
    assert!(!records[0].to_string().contains("Bob's secret"));
    let waiting = engine.get(&goal.id).unwrap();
    assert_eq!(
        waiting.action("reply").unwrap().state,
        ActionState::Running,
        "{waiting:#?}"
    );

    // Alice is: her message ends it, and the goal finishes.
    inject(
        &mut op,
        json!({"kind": "message", "address": "+49 151 2345 6789", "text": "Alice here"}),
    )
    .await;
    let mut done = None;
    for _ in 0..600 {
        let goal = engine.get(&goal.id).unwrap();
        if goal.state.is_terminal() {
            done = Some(goal);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = done.expect("the goal never finished after Alice's message");
    assert_eq!(done.state, GoalState::Done, "{done:#?}");
    let evidence: Vec<_> = done
        .evidence
        .iter()
        .filter(|e| e.action_id.as_deref() == Some("reply"))
        .collect();
    assert_eq!(evidence.len(), 1, "{evidence:?}");
    assert!(evidence[0].reference.contains("Alice here"), "{evidence:?}");
    assert_eq!(dropped(&mut op, 1).await.len(), 1);
    d.daemon.shutdown().await;
}
