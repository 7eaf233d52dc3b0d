//! The built-in runtime end to end: a real `openphone serve` whose `[builtin]` table points at
//! a scripted fake model on loopback, and `openphone ask` / `confirmations` / `sessions` run
//! as separate processes.

use std::path::Path;
use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use serde_json::{Value, json};

use super::harness::{cli, cli_async, pending_ids, serve, terminate};

fn config_for(dir: &Path, fake: &FakeModel) -> String {
    let path = dir.join("openphone.toml");
    std::fs::write(
        &path,
        format!(
            "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nrequest_timeout_secs = 10\n\
             run_budget_secs = 60\n",
            fake.url()
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// Polls `sessions list --json` (up to 30 s) until the newest session's status is `status`.
async fn newest_session(data: &Path, status: &str) -> Value {
    for _ in 0..300 {
        let (code, out, err) = cli_async(
            vec!["sessions".into(), "list".into(), "--json".into()],
            data,
        )
        .await;
        assert_eq!(code, 0, "{err}");
        let list: Value = serde_json::from_str(&out).unwrap();
        if let Some(newest) = list["sessions"].get(0)
            && newest["status"] == status
        {
            return newest.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no session became {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_the_builtin_runtime_to_tell_alice_then_continue_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": "Alice", "reason": "find Alice's number"}),
    ));
    fake.push(
        Script::tool_call(
            "messages_send",
            json!({"to": "+49 151 2345 6789", "body": "I'm 10 minutes late",
                   "reason": "tell Alice you are running late"}),
        )
        .with_content("I'll text Alice that you're 10 minutes late."),
    );
    fake.push(Script::text("Done: Alice knows you're 10 minutes late."));
    let config = config_for(tmp.path(), &fake);
    let mut daemon = serve(&data, &config);

    let (code, out, _) = cli(&["runtimes", "list", "--json"], &data);
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["runtimes"][0]["id"], "builtin");
    assert_eq!(list["runtimes"][0]["status"], "connected");

    let ask_dir = data.clone();
    let ask = tokio::spawn(async move {
        cli_async(
            vec!["ask".into(), "tell Alice I'm 10 minutes late".into()],
            &ask_dir,
        )
        .await
    });
    let waiting = newest_session(&data, "waiting_for_confirmation").await;
    let session = waiting["phone_session_id"].as_str().unwrap().to_owned();
    assert_eq!(waiting["runtime_kind"], "builtin");
    let pending = pending_ids(&data).await;
    assert_eq!(pending.len(), 1);
    let (code, _, err) = cli_async(
        vec!["confirmations".into(), "approve".into(), pending[0].clone()],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{err}");

    let (code, out, err) = ask.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "I'll text Alice that you're 10 minutes late.\n\n\
         Done: Alice knows you're 10 minutes late.\n"
    );
    assert!(err.contains("waiting for your confirmation"), "{err}");
    assert!(err.contains(&pending[0]), "{err}");

    // The message is on the phone.
    let (code, out, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.messages.search",
            r#"{"query": "10 minutes late", "reason": "check the test's message"}"#,
            "--json",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("I'm 10 minutes late"), "{out}");

    // After a restart the transcript is still there, and the session continues.
    terminate(&mut daemon.child);
    drop(daemon);
    {
        let store = openphone_store::Store::open(&data).unwrap();
        let transcript = store.transcript(&session).unwrap();
        let roles: Vec<&str> = transcript.iter().map(|e| e.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "assistant",
                "status"
            ]
        );
        assert_eq!(transcript[4].body["tool"], "openphone.messages.send");
        assert_eq!(transcript[4].body["status"], "ok");
    }
    let _daemon = serve(&data, &config);
    fake.push(Script::text("You asked me to tell Alice you're late."));
    let (code, out, err) = cli_async(
        vec![
            "ask".into(),
            "what did I ask you?".into(),
            "--session".into(),
            session.clone(),
        ],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "You asked me to tell Alice you're late.\n");
    assert!(err.contains(&session), "{err}");
    let last = fake.requests().pop().unwrap();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "user"
        ]
    );
    assert_eq!(
        last["messages"][1]["content"],
        "tell Alice I'm 10 minutes late"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_ask_prints_the_fix_and_a_run_can_be_cancelled() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let empty = tmp.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let daemon = serve(&data, empty.to_str().unwrap());
    let (code, out, err) = cli(&["ask", "hello?"], &data);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("add a [builtin] table with base_url and model"),
        "{err}"
    );
    drop(daemon);

    // A model that never answers; the user gives up with `sessions cancel`.
    let data = tmp.path().join("data2");
    let fake = FakeModel::start().await;
    fake.set_fallback(Script::Hang);
    let config = config_for(tmp.path(), &fake);
    let _daemon = serve(&data, &config);
    let ask_dir = data.clone();
    let ask =
        tokio::spawn(
            async move { cli_async(vec!["ask".into(), "think hard".into()], &ask_dir).await },
        );
    let running = newest_session(&data, "running").await;
    let session = running["phone_session_id"].as_str().unwrap().to_owned();
    for _ in 0..300 {
        if !fake.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (code, out, err) = cli_async(
        vec!["sessions".into(), "cancel".into(), session.clone()],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("its built-in run was stopped"), "{out}");
    let (code, _, err) = ask.await.unwrap();
    assert_eq!(code, 1);
    assert!(err.contains("cancelled"), "{err}");
    let (code, _, err) = cli_async(vec!["sessions".into(), "cancel".into(), session], &data).await;
    assert_eq!(code, 1);
    assert!(err.contains("session_mismatch"), "{err}");
    assert_eq!(fake.requests().len(), 1);
}
