//! Issue 28, item 6 and the low items of the jobs, goals and `--autonomy` commands, with the
//! real binary: a background review's summary and its phone notification show bidi and
//! zero-width characters escaped, as foreground confirmations do; an unknown review id is
//! "no such review", not "already resolved"; an interval below the floor, an unknown autonomy
//! mode and a goal file with a duplicate key are refused with an error that says what is wrong.
//! (A job review given to `confirmations approve` is decided now, issue 31: `inbox.rs`.)

use std::path::Path;
use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use serde_json::{Value, json};

use super::harness::{Serve, cli, fake_model_config, jobs_json, serve};
use super::support::run;

/// A daemon whose background job (titled `title`) wants `messages_send` with `params`, parked
/// for review: the daemon, the job's id and what `jobs show --json` shows.
async fn parked_send(
    tmp: &Path,
    data: &Path,
    title: &str,
    params: Value,
) -> (Serve, FakeModel, String, Value) {
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call("messages_send", params));
    let daemon = serve(data, &fake_model_config(tmp, &fake));
    let (code, made, err) = jobs_json(
        &["create", "--title", title, "--prompt", "Send the message"],
        data,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let id = made["job"]["id"].as_i64().unwrap().to_string();
    let (code, _, err) = jobs_json(&["wake"], data).await;
    assert_eq!(code, 0, "{err}");
    for _ in 0..300 {
        let (_, shown, _) = jobs_json(&["show", &id], data).await;
        if shown["job"]["status"] == "awaiting_review" {
            return (daemon, fake, id, shown);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("job {id} never parked");
}

/// Every string in `value`, at any depth.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidi_override_in_a_background_review_is_shown_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let to = "+1555\u{202e}6660\u{202c}";
    let (_daemon, _fake, id, shown) = parked_send(
        tmp.path(),
        &data,
        "Pay the plumber",
        json!({"to": to, "body": "on my way", "reason": "tell the plumber"}),
    )
    .await;
    let record = &shown["job"]["pending_tool_request_json"];
    // What runs is exactly what was asked; what the user reads shows the override escaped.
    assert_eq!(record["params"]["to"], to, "{record}");
    let summary = record["summary"].as_str().unwrap();
    assert!(
        summary.contains(r#""to":"+1555\u{202E}6660\u{202C}""#),
        "{summary}"
    );
    assert!(
        !summary.contains('\u{202e}') && !summary.contains('\u{202c}'),
        "{summary}"
    );
    // `jobs show` as text: the review line reads the same, with no raw override.
    let (code, text, err) = cli(&["jobs", "show", &id], &data);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains(r"+1555\u{202E}6660\u{202C}"), "{text}");
    assert!(!text.contains('\u{202e}'), "{text}");
    // The record, escaped summary included, still checks out offline.
    let file = tmp.path().join("record.json");
    std::fs::write(&file, record.to_string()).unwrap();
    let (code, out, err) = run(&["jobs", "check-review", file.to_str().unwrap()], "");
    assert_eq!(code, 0, "{out} {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_width_character_in_a_review_notification_is_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (_daemon, _fake, _id, _) = parked_send(
        tmp.path(),
        &data,
        "Rent\u{200b}check",
        json!({"to": "+15550100", "body": "pay\u{200b}now", "reason": "remind"}),
    )
    .await;
    // The review's notification on the phone, read back from the simulated shade.
    let mut found = None;
    for _ in 0..100 {
        let (code, out, err) = cli(
            &[
                "tools",
                "invoke",
                "openphone.notifications.list",
                r#"{"reason": "see the review's notification"}"#,
                "--json",
            ],
            &data,
        );
        assert_eq!(code, 0, "{err}");
        let shade: Value = serde_json::from_str(&out).unwrap();
        let mut all = Vec::new();
        strings(&shade, &mut all);
        if all.iter().any(|s| s.starts_with("Review: ")) {
            found = Some(all);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all = found.expect("the review's notification is in the shade");
    let title = all.iter().find(|s| s.starts_with("Review: ")).unwrap();
    assert_eq!(title, r"Review: Rent\u{200B}check");
    let body = all.iter().find(|s| s.contains("Expires in")).unwrap();
    assert!(body.contains(r#""body":"pay\u{200B}now""#), "{body}");
    assert!(
        all.iter().all(|s| !s.contains('\u{200b}')),
        "no raw zero-width character reaches the phone: {all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_review_id_is_not_found_and_a_resolved_one_stays_already_resolved() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (_daemon, _fake, _id, shown) = parked_send(
        tmp.path(),
        &data,
        "Tell Sam",
        json!({"to": "+15550100", "body": "late", "reason": "tell Sam"}),
    )
    .await;
    let cid = shown["job"]["pending_confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let unknown = "job-confirm-00000000-0000-4000-8000-000000000000";
    let (code, answer, _) = jobs_json(&["approve", unknown], &data).await;
    assert_eq!(code, 1);
    assert_eq!(answer["code"], "job_not_found", "{answer}");
    assert_eq!(answer["reason"], "no_such_review", "{answer}");
    let (code, text, _) = cli(&["jobs", "deny", unknown], &data);
    assert_eq!(code, 1);
    assert!(
        text.contains(&format!("no such review: {unknown}")),
        "{text}"
    );
    // The real review: decided once, then "already resolved", never "not found".
    let (code, answer, err) = jobs_json(&["deny", &cid], &data).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(answer["code"], "background.review_resolved", "{answer}");
    let (code, again, _) = jobs_json(&["approve", &cid], &data).await;
    assert_eq!(code, 1);
    assert_eq!(
        again["code"], "background.review_already_resolved",
        "{again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_create_every_1s_is_refused_below_the_15_s_floor() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let fake = FakeModel::start().await;
    let _daemon = serve(&data, &fake_model_config(tmp.path(), &fake));
    let (code, out, err) = cli(
        &[
            "jobs", "create", "--title", "t", "--prompt", "p", "--every", "1s",
        ],
        &data,
    );
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("interval_ms") && err.contains("15000 ms"),
        "{err}"
    );
    let (_, list, _) = jobs_json(&["list"], &data).await;
    assert_eq!(list["count"], 0, "nothing was created: {list}");
    let (code, _, err) = cli(
        &[
            "jobs", "create", "--title", "t", "--prompt", "p", "--every", "15s",
        ],
        &data,
    );
    assert_eq!(code, 0, "the floor itself is accepted: {err}");
}

#[test]
fn autonomy_god_is_refused_with_the_valid_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    for args in [
        vec![
            "tools",
            "invoke",
            "openphone.screen.get",
            "{}",
            "--autonomy",
            "god",
        ],
        vec!["ask", "hello", "--autonomy", "god"],
    ] {
        let mut all = args.clone();
        all.extend(["--data-dir", dir]);
        let (code, _, err) = run(&all, "");
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("unknown autonomy mode \"god\""), "{err}");
        assert!(
            err.contains("observe_only, ask_before_action, trusted_actions"),
            "{err}"
        );
    }
}

#[test]
fn goals_create_refuses_a_file_with_a_duplicate_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let file = tmp.path().join("goal.json");
    std::fs::write(
        &file,
        r#"{"objective": "pay the bill", "risk_level": "low", "risk_level": "high"}"#,
    )
    .unwrap();
    let (code, _, err) = run(
        &["goals", "create", file.to_str().unwrap(), "--data-dir", dir],
        "",
    );
    assert_ne!(code, 0);
    assert!(err.contains("risk_level") && err.contains("twice"), "{err}");
    let (code, _, err) = run(&["goals", "simulate", file.to_str().unwrap()], "");
    assert_ne!(code, 0);
    assert!(err.contains("twice"), "{err}");
}
