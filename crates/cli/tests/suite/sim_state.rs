//! The simulated phone remembers (issue 30): a real daemon keeps the phone in
//! `sim-state.json`, through a graceful stop and through `kill -9` right after a change was
//! acknowledged; `openphone sim reset` starts over; a corrupt file stops the daemon with the
//! file's name and the fix.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{cli, cli_async, serve, terminate, write_config};
use super::support::openphone;

/// `tools invoke` by the operator at `trusted_actions`; the parsed result.
async fn invoke(data: &Path, command: &str, params: Value) -> Value {
    let (code, out, err) = cli_async(
        vec![
            "tools".into(),
            "invoke".into(),
            command.into(),
            params.to_string(),
            "--autonomy".into(),
            "trusted_actions".into(),
            "--json".into(),
        ],
        data,
    )
    .await;
    assert_eq!(code, 0, "{command}: {out}{err}");
    serde_json::from_str(&out).unwrap()
}

/// Sends a message (always confirmed): the invoke waits, the operator approves, the invoke
/// answers `ok`.
async fn send_message(data: &Path, to: &str, body: &str) {
    let child: Child = openphone()
        .args(["tools", "invoke", "openphone.messages.send"])
        .arg(json!({"to": to, "body": body, "reason": "test"}).to_string())
        .args(["--timeout-secs", "120", "--json", "--data-dir"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Up to 30 s, 50 ms apart: the confirmation is pending.
    let mut id = None;
    for _ in 0..600 {
        let (code, out, _) = cli(&["confirmations", "list", "--json"], data);
        if code == 0
            && let Ok(list) = serde_json::from_str::<Value>(&out)
            && let Some(c) = list["confirmations"].as_array().and_then(|a| a.first())
        {
            id = c["confirmation_id"].as_str().map(str::to_owned);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let id = id.expect("the send never asked for confirmation");
    let (code, out, err) = cli(&["confirmations", "approve", &id], data);
    assert_eq!(code, 0, "{out}{err}");
    let output = child.wait_with_output().unwrap();
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["status"], "ok", "{result}");
}

async fn inject_message(data: &Path, from: &str, text: &str) {
    let (code, out, err) = cli_async(
        vec![
            "sim".into(),
            "inject".into(),
            "message".into(),
            "--from".into(),
            from.into(),
            "--text".into(),
            text.into(),
        ],
        data,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
}

/// The message bodies `messages.search` finds for `query`.
async fn messages_with(data: &Path, query: &str) -> Vec<String> {
    let found = invoke(
        data,
        "openphone.messages.search",
        json!({"query": query, "reason": "test"}),
    )
    .await;
    let mut bodies = Vec::new();
    collect_strings(&found["result"], "body", &mut bodies);
    collect_strings(&found["result"], "text", &mut bodies);
    bodies.retain(|b| b.contains(query));
    bodies
}

/// The event titles `calendar.search` finds for `query`.
async fn events_with(data: &Path, query: &str) -> Vec<String> {
    let found = invoke(
        data,
        "openphone.calendar.search",
        json!({"query": query, "reason": "test"}),
    )
    .await;
    let mut titles = Vec::new();
    collect_strings(&found["result"], "title", &mut titles);
    titles.retain(|t| t.contains(query));
    titles
}

fn collect_strings(v: &Value, key: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if k == key
                    && let Some(s) = v.as_str()
                {
                    out.push(s.to_owned());
                }
                collect_strings(v, key, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, key, out)),
        _ => {}
    }
}

async fn foreground(data: &Path) -> Value {
    let screen = invoke(
        data,
        "openphone.screen.get",
        json!({"reason": "test", "include_ui_tree": false}),
    )
    .await;
    screen["result"]["package"].clone()
}

fn saved_state(data: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(data.join("sim-state.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_forgets_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut daemon = serve(&data, &config);

    inject_message(&data, "+49 170 555 0101", "Incoming before the restart").await;
    send_message(&data, "+1 555 0199", "Sent before the restart").await;
    let start = 4_102_444_800_000i64; // 2100-01-01
    invoke(
        &data,
        "openphone.calendar.add",
        json!({"title": "Dentist kept", "start_at": start, "duration_minutes": 30, "reason": "t"}),
    )
    .await;
    invoke(
        &data,
        "openphone.clipboard.set",
        json!({"text": "copied before the restart", "reason": "t"}),
    )
    .await;
    invoke(
        &data,
        "openphone.app.open",
        json!({"package_or_label": "Notes", "reason": "t"}),
    )
    .await;
    assert_eq!(foreground(&data).await, "com.android.notes");

    // A graceful stop, then a new daemon on the same data directory.
    terminate(&mut daemon.child);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.join("sim-state.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let mut daemon = serve(&data, &config);
    assert_eq!(
        messages_with(&data, "Incoming before the restart")
            .await
            .len(),
        1
    );
    assert_eq!(
        messages_with(&data, "Sent before the restart").await.len(),
        1
    );
    assert_eq!(events_with(&data, "Dentist kept").await.len(), 1);
    assert_eq!(foreground(&data).await, "com.android.notes");
    assert_eq!(saved_state(&data)["clipboard"], "copied before the restart");

    // kill -9 right after the changes were acknowledged: they are on disk already.
    inject_message(&data, "+49 170 555 0101", "Incoming before the crash").await;
    send_message(&data, "+1 555 0199", "Sent before the crash").await;
    invoke(
        &data,
        "openphone.calendar.add",
        json!({"title": "Crash proof", "start_at": start, "duration_minutes": 15, "reason": "t"}),
    )
    .await;
    invoke(
        &data,
        "openphone.app.open",
        json!({"package_or_label": "Calendar", "reason": "t"}),
    )
    .await;
    daemon.child.kill().unwrap(); // SIGKILL
    daemon.child.wait().unwrap();
    let mut daemon = serve(&data, &config);
    assert_eq!(
        messages_with(&data, "Incoming before the crash")
            .await
            .len(),
        1
    );
    assert_eq!(messages_with(&data, "Sent before the crash").await.len(), 1);
    assert_eq!(messages_with(&data, "before the restart").await.len(), 2);
    assert_eq!(events_with(&data, "Crash proof").await.len(), 1);
    assert_eq!(foreground(&data).await, "com.android.calendar");

    // `sim reset` is refused while the daemon runs, and starts over once it is stopped.
    let (code, out, err) = cli(&["sim", "reset"], &data);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("stop it first"), "{err}");
    terminate(&mut daemon.child);
    let (code, out, err) = cli(&["sim", "reset", "--json"], &data);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["moved"].as_array().unwrap().len(), 1, "{report}");
    assert!(data.join("sim-state.json.bak").exists());
    let mut daemon = serve(&data, &config);
    assert!(messages_with(&data, "before the crash").await.is_empty());
    assert!(events_with(&data, "Crash proof").await.is_empty());
    terminate(&mut daemon.child);
}

#[test]
fn a_corrupt_saved_phone_stops_the_daemon_with_the_file_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut daemon = serve(&data, &config);
    terminate(&mut daemon.child);
    let saved = data.join("sim-state.json");
    assert!(saved.exists(), "a fresh daemon saves its phone");
    std::fs::write(&saved, "{\"version\": 1, \"threads\": [ {\"id\": ").unwrap();

    let mut child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--config", &config])
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Up to 30 s, 20 ms apart: it refuses to start.
    let mut exited = false;
    for _ in 0..1500 {
        if child.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !exited {
        let _ = child.kill();
    }
    let output = child.wait_with_output().unwrap();
    assert!(exited, "serve started on a corrupt saved phone");
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains(&saved.display().to_string()), "{err}");
    assert!(err.contains("openphone sim reset"), "{err}");
    // Nothing was replaced.
    assert!(
        std::fs::read_to_string(&saved)
            .unwrap()
            .starts_with("{\"version\": 1, \"threads\"")
    );
}
