//! Elevated mode and sender allowlists against a real daemon (`docs/security.md`): an
//! elevation raises a runtime's autonomy for its window only — it expires, is revoked, is
//! refused above the configuration's cap, never passes the risk floor — and a sender not on
//! the `[wake]` allowlist wakes nothing while an allowlisted one does, the drop audited.

use serde_json::{Value, json};

use super::harness::{Runtime, TOKEN, cli, cli_async, serve, terminate};

const CAPPED_TOKEN: &str = "capped-cli-test-token-0123456789";

fn config(dir: &std::path::Path, extra: &str) -> String {
    let path = dir.join("openphone.toml");
    std::fs::write(
        &path,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\
             [[runtimes]]\nid = \"capped\"\ntoken = \"{CAPPED_TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\
             [elevation]\nmax_duration_secs = 900\n\
             [elevation.runtimes]\ncapped = \"ask_before_action\"\n{extra}"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// A tap asking for `trusted_actions`, not waiting: its status.
async fn tap(rt: &mut Runtime, n: u32) -> Value {
    let answer = rt
        .call(
            "tools.invoke",
            json!({"request_id": format!("tap-{n}"), "tool": "openphone.ui.tap",
                   "params": {"x": 10, "y": 10 + n}, "reason": "test",
                   "autonomy": "trusted_actions", "wait": false}),
        )
        .await;
    answer["result"].clone()
}

async fn audit(op: &mut Runtime) -> Vec<Value> {
    let all = op.call("audit.query", json!({"limit": 1000})).await;
    all["result"]["records"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elevation_raises_autonomy_for_its_window_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = config(dir.path(), "");
    let mut daemon = serve(&data, &config);
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    let mut op = Runtime::connect_as(&daemon.url, token.trim(), "operator").await;
    let mut rt = Runtime::connect(&daemon.url).await;

    // The configured ceiling (ask_before_action): the tap asks first.
    assert_eq!(tap(&mut rt, 1).await["status"], "needs_confirmation");

    let (code, out, err) = cli(
        &[
            "elevate",
            "hermes",
            "--to",
            "trusted_actions",
            "--for",
            "10m",
            "--json",
        ],
        &data,
    );
    assert_eq!(code, 0, "{out}{err}");
    let granted: Value = serde_json::from_str(&out).unwrap();
    let grant_id = granted["elevation"]["grant_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(granted["elevation"]["to"], "trusted_actions");
    let (code, out, _) = cli(&["status"], &data);
    assert_eq!(code, 0);
    assert!(
        out.contains("hermes → trusted_actions until") && out.contains(&grant_id),
        "{out}"
    );

    // Inside the window: the tap runs, and its audit record names the grant.
    let ran = tap(&mut rt, 2).await;
    assert_eq!(ran["status"], "ok", "{ran}");
    let records = audit(&mut op).await;
    let tap_record = records
        .iter()
        .rev()
        .find(|r| r["request_id"] == "tap-2")
        .unwrap();
    assert!(
        tap_record["policy_proof"].to_string().contains(&grant_id),
        "{tap_record}"
    );
    // The risk floor still asks.
    let send = rt
        .call(
            "tools.invoke",
            json!({"request_id": "send-1", "tool": "openphone.messages.send",
                   "params": {"to": "+100", "body": "hi"}, "reason": "test",
                   "autonomy": "trusted_actions", "wait": false}),
        )
        .await;
    assert_eq!(send["result"]["status"], "needs_confirmation", "{send}");

    // A restart inside the window keeps it.
    terminate(&mut daemon.child);
    drop(daemon);
    let daemon = serve(&data, &config);
    let mut op = Runtime::connect_as(&daemon.url, token_of(&data).trim(), "operator").await;
    let mut rt = Runtime::connect(&daemon.url).await;
    assert_eq!(tap(&mut rt, 3).await["status"], "ok");

    // Revoked: asked first again, and audited.
    let (code, out, err) = cli(&["elevate", "--revoke", "hermes"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("revoked"), "{out}");
    assert_eq!(tap(&mut rt, 4).await["status"], "needs_confirmation");
    let (code, out, _) = cli(&["status", "--json"], &data);
    assert_eq!(code, 0);
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["elevations"], json!([]));

    // Expiring on its own: a one-second grant ends, and its expiry is audited.
    let (code, _, err) = cli(
        &[
            "elevate",
            "hermes",
            "--to",
            "trusted_actions",
            "--for",
            "1s",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    let mut expired = false;
    // Up to 20 s: 100 polls 200 ms apart (counted, so no clock is read).
    for _ in 0..100 {
        if audit(&mut op)
            .await
            .iter()
            .any(|r| r["tool"] == "elevation.expired")
        {
            expired = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(expired, "no elevation.expired record");
    assert_eq!(tap(&mut rt, 5).await["status"], "needs_confirmation");
    let records = audit(&mut op).await;
    for what in [
        "elevation.granted",
        "elevation.revoked",
        "elevation.expired",
    ] {
        assert!(records.iter().any(|r| r["tool"] == what), "no {what}");
    }

    // Above the configuration's cap: refused, naming it; and a runtime cannot elevate itself.
    let (code, _, err) = cli(
        &[
            "elevate",
            "capped",
            "--to",
            "trusted_actions",
            "--for",
            "5m",
        ],
        &data,
    );
    assert_eq!(code, 1);
    assert!(err.contains("ask_before_action at most"), "{err}");
    let (code, _, err) = cli(
        &[
            "elevate",
            "hermes",
            "--to",
            "trusted_actions",
            "--for",
            "2h",
        ],
        &data,
    );
    assert_eq!(code, 1);
    assert!(err.contains("max_duration_secs"), "{err}");
    let refused = rt
        .call(
            "runtime.elevate",
            json!({"runtime": "hermes", "to": "trusted_actions", "duration_secs": 60}),
        )
        .await;
    assert_eq!(refused["error"]["data"]["code"], "forbidden", "{refused}");
}

fn token_of(data: &std::path::Path) -> String {
    std::fs::read_to_string(data.join("operator.token")).unwrap()
}

/// Creates a message watcher for `address` with an attention reaction, as the operator.
async fn watch(data: &std::path::Path, title: &str, address: &str) -> i64 {
    let (code, out, err) = cli_async(
        vec![
            "tools".into(),
            "invoke".into(),
            "openphone.watchers.create".into(),
            json!({"title": title, "source": "message", "address": address}).to_string(),
            "--autonomy".into(),
            "trusted_actions".into(),
            "--reason".into(),
            "test".into(),
            "--json".into(),
        ],
        data,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    created["result"]["watcher"]["watcher_id"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_off_the_wake_allowlist_does_not_wake_and_an_allowlisted_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = config(dir.path(), "[wake]\ncontacts = [\"Alice Martin\"]\n");
    let daemon = serve(&data, &config);
    let mut op = Runtime::connect_as(&daemon.url, token_of(&data).trim(), "operator").await;
    let sub = op
        .call("events.subscribe", json!({"events": ["watcher.fired"]}))
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let bob = watch(&data, "Bob writes", "Bob Nguyen").await;
    let alice = watch(&data, "Alice writes", "Alice Martin").await;

    // Bob is not on the allowlist: his message fires nothing, and the drop is audited.
    let (code, _, err) = cli(
        &[
            "sim",
            "inject",
            "message",
            "--from",
            "+49 170 555 0101",
            "--text",
            "Running late",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    // Alice is: hers fires her watcher (the first firing seen, so Bob's fired none).
    let (code, _, err) = cli(
        &[
            "sim",
            "inject",
            "message",
            "--from",
            "+49 151 2345 6789",
            "--text",
            "On my way",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    let fired = op.event("watcher.fired").await;
    assert_eq!(fired["watcher_id"], alice, "{fired}");

    let records = audit(&mut op).await;
    let dropped: Vec<&Value> = records
        .iter()
        .filter(|r| r["tool"] == "wake.dropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    let proof = &dropped[0]["policy_proof"];
    assert_eq!(proof["source"], "message");
    assert_eq!(proof["list"], "contacts");
    assert_eq!(proof["watcher_ids"], json!([bob]));
    assert!(!dropped[0].to_string().contains("Running late"));
    assert!(
        !records
            .iter()
            .any(|r| r["tool"] == "watcher.fired" && r["policy_proof"]["watcher_id"] == bob),
        "Bob's watcher fired"
    );
}
