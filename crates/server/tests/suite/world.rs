//! The phone's world over the endpoint: `sim.inject` (operator only, audited before it is
//! applied), the `phone.*` events, and what `hello`, `tools.list` and MCP report as supported.

use serde_json::{Value, json};

use super::support::{RUNTIME_TOKEN, config, connect, error_code, start};

async fn event_named(c: &mut super::support::Client, name: &str) -> Value {
    loop {
        let e = c.next_event().await;
        if e["params"]["event"] == name {
            return e["params"]["payload"].clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_injects_a_message_audited_first_and_subscribers_see_it() {
    let d = start(config("")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let sub = op
        .call(
            "events.subscribe",
            json!({"events": ["phone.message.received", "phone.notification.posted"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");

    let r = op
        .call(
            "sim.inject",
            json!({"kind": "message", "address": "+49 170 555 0101", "text": "Secret dinner plans"}),
        )
        .await;
    let result = &r["result"];
    assert_eq!(
        result["events"][0]["event"], "phone.message.received",
        "{r}"
    );
    assert_eq!(result["events"][0]["payload"]["name"], "Bob Nguyen");
    assert_eq!(result["events"][1]["event"], "phone.notification.posted");
    let seq = result["audit_seq"].as_i64().unwrap();

    let payload = event_named(&mut op, "phone.message.received").await;
    assert_eq!(payload["text"], "Secret dinner plans");

    let audit = op
        .call("audit.query", json!({"after": seq - 1, "limit": 1}))
        .await;
    let record = &audit["result"]["records"][0];
    assert_eq!(record["seq"], seq);
    assert_eq!(record["kind"], "operator_action");
    assert_eq!(record["tool"], "sim.inject.message");
    assert!(
        record["params_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        !record.to_string().contains("Secret dinner"),
        "no raw text: {record}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_cannot_inject_and_a_refused_injection_changes_nothing() {
    let d = start(config("")).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let r = rt
        .call(
            "sim.inject",
            json!({"kind": "notification_action", "key": "job-1-review", "action": "approve"}),
        )
        .await;
    assert_eq!(error_code(&r).1, "forbidden", "{r}");

    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let r = op
        .call(
            "sim.inject",
            json!({"kind": "notification", "app": "NoSuchApp", "title": "x"}),
        )
        .await;
    assert_eq!(error_code(&r).1, "invalid_params", "{r}");
    let audit = op.call("audit.query", json!({"limit": 1000})).await;
    let records: Vec<&Value> = audit["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "operator_action")
        .collect();
    assert_eq!(records.len(), 2, "the attempt, then its refusal");
    assert_eq!(records[1]["error_code"], "app_not_found");
    let r = op
        .call(
            "sim.inject",
            json!({"kind": "sms", "address": "a", "text": "b"}),
        )
        .await;
    assert_eq!(error_code(&r).1, "invalid_params");
}

/// REGRESSION: `hello` reported only the device's commands as supported, so a client saw
/// memory and watchers (served by the daemon itself) as unsupported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_hello_and_tools_list_report_runtime_served_commands_as_supported() {
    let d = start(config("")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    let hello = op.hello().await;
    let supported: Vec<&str> = hello["phone"]["supported_tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in [
        "openphone.memory.save",
        "openphone.watchers.create",
        "openphone.watchers.list",
        "openphone.screen.get",
    ] {
        assert!(
            supported.contains(&name),
            "{name} missing from {supported:?}"
        );
    }
    let tools = op.call("tools.list", json!({})).await;
    for tool in tools["result"]["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        assert_eq!(
            tool["supported"].as_bool().unwrap(),
            supported.contains(&name),
            "{name}: tools.list and hello disagree"
        );
    }
}
