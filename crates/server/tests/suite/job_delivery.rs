//! What a runtime's background job delivers goes to the runtime that created it, never into
//! the user's notification shade (issue 28, item 5): the real daemon, a runtime over the
//! WebSocket endpoint, the operator's `jobs.*` and the simulated phone.

use serde_json::{Value, json};

use super::support::{Client, RUNTIME_TOKEN, config, connect, start};

/// Waits (bounded) until job `id`'s delivery is settled (neither none nor `pending`), and
/// returns the `jobs.get` result.
async fn delivered(op: &mut Client, id: i64) -> Value {
    for _ in 0..200 {
        let got = op.call("jobs.get", json!({"job_id": id})).await;
        let state = &got["result"]["delivery_state"];
        if !state.is_null() && *state != "pending" {
            return got["result"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("job {id} was never delivered");
}

/// The texts of the phone's notifications, as the operator reads them.
async fn shade(op: &mut Client, n: u32) -> String {
    let listed = op
        .call(
            "tools.invoke",
            json!({"request_id": format!("shade-{n}"), "tool": "openphone.notifications.list",
                "params": {"limit": 100, "reason": "look"}}),
        )
        .await;
    assert_eq!(listed["result"]["status"], "ok", "{listed}");
    listed["result"]["result"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimes_job_delivers_to_its_creator_not_the_users_shade() {
    let d = start(config("max_autonomy = \"trusted_actions\"")).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["background_job.delivered"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let created = rt
        .call(
            "tools.invoke",
            json!({"request_id": "job-1", "tool": "openphone.jobs.create",
                "autonomy": "trusted_actions",
                "params": {"title": "Hermes ping", "prompt": "Ping.", "type": "system_event",
                    "notification_text": "Hermes says hi",
                    "delivery": {"mode": "notification"}, "reason": "ping"}}),
        )
        .await;
    assert_eq!(created["result"]["status"], "ok", "{created}");
    let id = created["result"]["result"]["job"]["id"].as_i64().unwrap();

    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let mine = op
        .call(
            "jobs.create",
            json!({"title": "Operator ping", "prompt": "Ping.", "type": "system_event",
                "notification_text": "Operator says hi", "delivery": {"mode": "notification"}}),
        )
        .await;
    let my_id = mine["result"]["job"]["id"].as_i64().unwrap();
    assert_eq!(mine["result"]["created_by"], "operator", "{mine}");
    let woke = op.call("jobs.wake", json!({})).await;
    assert_eq!(woke["result"]["claimed"], json!([id, my_id]), "{woke}");

    // The runtime is sent its result.
    let event = loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(30), rt.next_event())
            .await
            .expect("the runtime was never sent its job's result");
        if e["params"]["event"] == "background_job.delivered" {
            break e["params"]["payload"].clone();
        }
    };
    assert_eq!(event["job_id"], id, "{event}");
    assert!(
        event["detail"]
            .as_str()
            .unwrap_or("")
            .contains("Hermes says hi"),
        "{event}"
    );

    let theirs = delivered(&mut op, id).await;
    assert_eq!(theirs["created_by"], "hermes");
    assert_eq!(theirs["delivery_state"], "unverified", "{theirs}");
    let ours = delivered(&mut op, my_id).await;
    assert_eq!(ours["delivery_state"], "sent", "{ours}");
    let shown = shade(&mut op, 1).await;
    assert!(shown.contains("Operator says hi"), "{shown}");
    assert!(!shown.contains("Hermes says hi"), "{shown}");
}
