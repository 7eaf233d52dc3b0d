//! `openphone sim inject` against a real daemon: a subscriber sees the phone event, a message
//! watcher fires, and the audit log has the operator's record, written first.

use serde_json::{Value, json};

use super::harness::{Runtime, cli, cli_async, serve, write_config};

async fn operator(url: &str, data: &std::path::Path) -> Runtime {
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    Runtime::connect_as(url, token.trim(), "operator").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_inject_message_reaches_subscribers_fires_a_watcher_and_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(dir.path());
    let serve = serve(&data, &config);
    let mut op = operator(&serve.url, &data).await;
    let sub = op
        .call(
            "events.subscribe",
            json!({"events": ["phone.message.received", "watcher.fired"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");

    // A watcher for Bob's messages, made by the operator without asking.
    let (code, out, err) = cli_async(
        vec![
            "tools".into(),
            "invoke".into(),
            "openphone.watchers.create".into(),
            json!({"title": "Bob writes", "source": "message", "address": "Bob Nguyen"})
                .to_string(),
            "--autonomy".into(),
            "trusted_actions".into(),
            "--reason".into(),
            "test".into(),
            "--json".into(),
        ],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let watcher_id = created["result"]["watcher"]["watcher_id"].as_i64().unwrap();

    let (code, out, err) = cli(
        &[
            "sim",
            "inject",
            "message",
            "--from",
            "+49 170 555 0101",
            "--text",
            "Running late",
            "--json",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    let injected: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(injected["events"][0]["event"], "phone.message.received");
    let seq = injected["audit_seq"].as_i64().unwrap();

    let message = op.event("phone.message.received").await;
    assert_eq!(message["text"], "Running late");
    assert_eq!(message["name"], "Bob Nguyen");
    let fired = op.event("watcher.fired").await;
    assert_eq!(fired["watcher_id"], watcher_id);
    assert_eq!(fired["trigger"], "event");

    let audit = op
        .call("audit.query", json!({"after": seq - 1, "limit": 1}))
        .await;
    let record = &audit["result"]["records"][0];
    assert_eq!(record["kind"], "operator_action", "{audit}");
    assert_eq!(record["tool"], "sim.inject.message");
    assert!(!record.to_string().contains("Running late"));
    let all = op.call("audit.query", json!({"limit": 1000})).await;
    let fired_record = all["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "watcher.fired")
        .cloned()
        .expect("the firing is audited");
    assert!(
        fired_record["seq"].as_i64().unwrap() > seq,
        "audited before it applied"
    );

    // Text output, and a refusal exits 1.
    let (code, out, _) = cli(
        &["sim", "inject", "call", "--from", "+49 30 1234567"],
        &data,
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("missed incoming call from +49301234567"),
        "{out}"
    );
    let (code, _, err) = cli(
        &[
            "sim", "inject", "action", "--key", "nope", "--action", "approve",
        ],
        &data,
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nope"), "{err}");
}
