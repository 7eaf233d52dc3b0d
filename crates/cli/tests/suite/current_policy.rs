//! Issue 11, item 4, through the real binary: a confirmation approved after the configuration
//! changed is decided under the configuration **now** — edit the config file, restart,
//! approve → refused; a disabled or removed runtime's confirmation is withdrawn at start.

use std::path::Path;

use serde_json::{Value, json};

use super::harness::{Runtime, TOKEN, cli_async, pending_ids, serve, terminate};

const OPENCLAW_TOKEN: &str = "openclaw-cli-test-token-0123456789";

/// Writes the config with hermes' `grants` and `enabled`, and openclaw unless `openclaw` is
/// false.
fn config(dir: &Path, hermes_grants: &str, hermes_enabled: bool, openclaw: bool) -> String {
    let path = dir.join("openphone.toml");
    let mut text = format!(
        "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\ngrants = {hermes_grants}\n\
         enabled = {hermes_enabled}\n"
    );
    if openclaw {
        text.push_str(&format!(
            "\n[[runtimes]]\nid = \"openclaw\"\ntoken = \"{OPENCLAW_TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n"
        ));
    }
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

const ALL: &str = r#"["safe_read", "private_read", "dangerous"]"#;

/// `memory.save` without waiting: the confirmation id it parks on.
async fn park_save(rt: &mut Runtime, request_id: &str, text: &str) -> String {
    let params = json!({
        "request_id": request_id,
        "tool": "openphone.memory.save",
        "params": {"text": text, "reason": "remember"},
        "wait": false,
        "timeout_ms": 600_000,
    });
    let parked = rt.call("tools.invoke", params).await;
    assert_eq!(parked["result"]["status"], "needs_confirmation", "{parked}");
    parked["result"]["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// How many memories the operator finds for `query`.
async fn memories(data: &Path, query: &str) -> i64 {
    let params = json!({"query": query, "reason": "check"}).to_string();
    let (code, out, err) = cli_async(
        vec![
            "tools".into(),
            "invoke".into(),
            "openphone.memory.search".into(),
            params,
            "--json".into(),
        ],
        data,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["result"]["count"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_after_the_config_removed_the_grant_does_not_run() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut first = serve(&data, &config(tmp.path(), ALL, true, false));
    let mut rt = Runtime::connect(&first.url).await;
    let cid = park_save(&mut rt, "g1", "the spare key is under the mat").await;
    drop(rt);
    terminate(&mut first.child);

    // The user takes `dangerous` away from hermes and restarts.
    let mut second = serve(&data, &config(tmp.path(), r#"["safe_read"]"#, true, false));
    assert_eq!(pending_ids(&data).await, vec![cid.clone()]);
    let (code, out, err) = cli_async(
        vec![
            "confirm".into(),
            "approve".into(),
            cid.clone(),
            "--json".into(),
        ],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["status"], "denied", "{result}");
    assert_eq!(result["error"]["code"], "tool_not_granted", "{result}");
    assert_eq!(memories(&data, "spare key").await, 0, "nothing was saved");
    terminate(&mut second.child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_or_removed_runtimes_confirmation_is_withdrawn_at_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut first = serve(&data, &config(tmp.path(), ALL, true, true));
    let mut hermes = Runtime::connect(&first.url).await;
    let mut openclaw = Runtime::connect_as(&first.url, OPENCLAW_TOKEN, "openclaw").await;
    let of_hermes = park_save(&mut hermes, "w1", "hermes was here").await;
    let of_openclaw = park_save(&mut openclaw, "w2", "openclaw was here").await;
    drop((hermes, openclaw));
    first.child.kill().unwrap(); // SIGKILL: the confirmations stay pending in the file
    first.child.wait().unwrap();

    // hermes disabled, openclaw removed.
    let mut second = serve(&data, &config(tmp.path(), ALL, false, false));
    assert_eq!(pending_ids(&data).await, Vec::<String>::new());
    for cid in [&of_hermes, &of_openclaw] {
        let (code, out, err) =
            cli_async(vec!["confirm".into(), "approve".into(), cid.clone()], &data).await;
        assert_ne!(code, 0, "{out}");
        assert!(err.contains("pending_confirmation_not_found"), "{err}");
    }
    assert_eq!(memories(&data, "was here").await, 0);
    // The withdrawal is audited with its reason's code.
    let (code, out, err) = cli_async(
        vec![
            "audit".into(),
            "export".into(),
            "--format".into(),
            "jsonl".into(),
        ],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let denied: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["confirmation"] == "denied")
        .collect();
    assert_eq!(denied.len(), 2, "{out}");
    assert!(
        denied.iter().all(|r| r["error_code"] == "tool_not_granted"),
        "{out}"
    );
    terminate(&mut second.child);
}
