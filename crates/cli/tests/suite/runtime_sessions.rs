//! A remote runtime's replies and sessions against a real daemon: `openphone ask` prints the
//! whole reply whatever the runtime's streaming style, a `runtimes select` survives a restart,
//! and a runtime's own session key is recorded, shown and handed back when the session goes on.

use serde_json::{Value, json};

use super::harness::{Runtime, cli, cli_async, serve, terminate, write_config};

/// `openphone ask --runtime hermes <text>` while the scripted runtime answers with `replies`
/// (`(text, final)` pairs); the exit code and stdout.
async fn ask_answered(
    data: &std::path::Path,
    rt: &mut Runtime,
    replies: &[(&str, bool)],
) -> (i32, String) {
    let dir = data.to_path_buf();
    let ask = tokio::spawn(async move {
        cli_async(
            vec![
                "ask".into(),
                "--runtime".into(),
                "hermes".into(),
                "When is lunch?".into(),
            ],
            &dir,
        )
        .await
    });
    let attention = rt.event("runtime.attention.requested").await;
    let session = attention["phone_session_id"].as_str().unwrap().to_owned();
    for (text, is_final) in replies {
        let answer = rt
            .call(
                "runtime.message",
                json!({"phone_session_id": session, "text": text, "final": is_final,
                       "attention_id": attention["attention_id"]}),
            )
            .await;
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let (code, out, err) = ask.await.unwrap();
    assert_eq!(code, 0, "{out}{err}");
    (code, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_dropped_the_final_after_partial_text() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(dir.path());
    let serve = serve(&data, &config);
    let mut rt = Runtime::connect(&serve.url).await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");

    // Deltas, then a final that repeats them and goes on: the rest was dropped.
    let (_, out) = ask_answered(
        &data,
        &mut rt,
        &[
            ("Lunch ", false),
            ("with ", false),
            ("Lunch with Sam at 12:30", true),
        ],
    )
    .await;
    assert_eq!(out, "Lunch with Sam at 12:30\n");
    // Deltas, then an empty final.
    let (_, out) = ask_answered(
        &data,
        &mut rt,
        &[("Lunch with ", false), ("Sam at 12:30", false), ("", true)],
    )
    .await;
    assert_eq!(out, "Lunch with Sam at 12:30\n");
    // Only a final.
    let (_, out) = ask_answered(&data, &mut rt, &[("Lunch with Sam at 12:30", true)]).await;
    assert_eq!(out, "Lunch with Sam at 12:30\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtimes_select_was_forgotten_at_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(dir.path());
    let routed = |data: &std::path::Path| {
        let (code, out, err) = cli(&["runtimes", "list", "--json"], data);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let hermes = v["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == "hermes")
            .cloned()
            .unwrap();
        hermes["surfaces"].clone()
    };
    let mut daemon = serve(&data, &config);
    assert_eq!(routed(&data), json!([]));
    let (code, out, err) = cli(&["runtimes", "select", "chat", "hermes"], &data);
    assert_eq!((code, out.trim()), (0, "chat → hermes"), "{err}");
    assert_eq!(routed(&data), json!(["chat"]));

    // A real restart: the choice holds.
    terminate(&mut daemon.child);
    drop(daemon);
    let mut daemon = serve(&data, &config);
    assert_eq!(routed(&data), json!(["chat"]));

    // Selecting the configured route again forgets the choice; a restart keeps that too.
    let (code, _, err) = cli(&["runtimes", "select", "chat", "builtin"], &data);
    assert_eq!(code, 0, "{err}");
    terminate(&mut daemon.child);
    drop(daemon);
    let mut daemon = serve(&data, &config);
    assert_eq!(routed(&data), json!([]));

    // A choice whose runtime left the configuration gives way to the configuration.
    let (code, _, err) = cli(&["runtimes", "select", "volume", "hermes"], &data);
    assert_eq!(code, 0, "{err}");
    terminate(&mut daemon.child);
    drop(daemon);
    let bare = dir.path().join("bare.toml");
    std::fs::write(&bare, "").unwrap();
    let daemon = serve(&data, bare.to_str().unwrap());
    let (code, out, err) = cli(&["runtimes", "list", "--json"], &data);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let builtin = v["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "builtin")
        .cloned()
        .unwrap();
    assert_eq!(builtin["surfaces"], json!(["chat", "volume", "background"]));
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimes_own_session_key_was_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(dir.path());
    let serve = serve(&data, &config);
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    let mut op = Runtime::connect_as(&serve.url, token.trim(), "operator").await;
    let mut rt = Runtime::connect(&serve.url).await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");

    let asked = op
        .call(
            "attention.request",
            json!({"surface": "chat", "runtime": "hermes", "text": "plan my day"}),
        )
        .await;
    let session = asked["result"]["phone_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = rt.event("runtime.attention.requested").await;
    assert_eq!(
        first["runtime_session_id"],
        session.as_str(),
        "not known yet"
    );

    // The runtime names its own thread in its reply: recorded with the mapping.
    let reply = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "runtime_session_id": "thread-42",
                   "text": "Here is your day", "final": true}),
        )
        .await;
    assert_eq!(reply["result"]["status"], "completed", "{reply}");

    // Shown by `sessions list`, text and JSON.
    let (code, out, err) = cli(&["sessions", "list", "--json"], &data);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let listed = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["phone_session_id"] == session.as_str())
        .cloned()
        .unwrap();
    assert_eq!(listed["runtime_session_id"], "thread-42");
    let (code, out, _) = cli(&["sessions", "list"], &data);
    assert_eq!(code, 0);
    assert!(out.contains("runtime session thread-42"), "{out}");

    // Audited, with both ids.
    let audit = op.call("audit.query", json!({"limit": 1000})).await;
    let bound = audit["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "runtime.session_bound")
        .cloned()
        .expect("the mapping is audited");
    assert_eq!(bound["phone_session_id"], session.as_str());
    assert_eq!(bound["runtime_session_id"], "thread-42");

    // Continuing the session hands the runtime its own key back.
    let again = op
        .call(
            "attention.request",
            json!({"surface": "chat", "runtime": "hermes", "text": "and tomorrow?",
                   "session_target": format!("session:{session}")}),
        )
        .await;
    assert_eq!(
        again["result"]["runtime_session_id"], "thread-42",
        "{again}"
    );
    let next = rt.event("runtime.attention.requested").await;
    assert_eq!(next["phone_session_id"], session.as_str());
    assert_eq!(next["runtime_session_id"], "thread-42");

    // A key over the limit is refused, and the stored one stays.
    let long = "k".repeat(300);
    let refused = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "runtime_session_id": long,
                   "text": "x", "final": false}),
        )
        .await;
    assert_eq!(
        refused["error"]["data"]["code"], "payload_too_large",
        "{refused}"
    );
}
