//! Issue 16, "done when": a background `agent_turn` (a scripted fake model on loopback) wants
//! to send a message → the job parks for review → approved from the CLI → the message is sent
//! exactly once → the job runs again, completes and delivers its notification. And the
//! stored review record checked offline with `jobs check-review`: valid, tampered, unreadable.

use std::path::Path;
use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use serde_json::{Value, json};

use super::harness::{cli, fake_model_config, jobs_json, serve};
use super::support::run;

async fn until_status(data: &Path, id: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let (_, shown, _) = jobs_json(&["show", id], data).await;
        if shown["job"]["status"] == status {
            return shown;
        }
        last = shown;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("job {id} never became {status}: {last}");
}

/// How many messages on the phone contain `text`.
fn messages_with(data: &Path, text: &str) -> usize {
    let (code, out, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.messages.search",
            &json!({"query": text, "reason": "check the test's message"}).to_string(),
            "--json",
        ],
        data,
    );
    assert_eq!(code, 0, "{err}");
    let found: Value = serde_json::from_str(&out).unwrap();
    found["result"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["body"] == text)
        .count()
}

/// The phone's notification shade (`notifications.list`), as the CLI prints it in JSON.
fn shade(data: &Path) -> String {
    let (code, out, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.notifications.list",
            r#"{"reason": "look at the phone's notifications"}"#,
            "--json",
        ],
        data,
    );
    assert_eq!(code, 0, "{err}");
    out
}

/// A daemon whose background job has parked a send of `body` for review: the scripted model
/// asks to send it, then reports `report` on the run after the review.
struct Parked {
    tmp: tempfile::TempDir,
    data: std::path::PathBuf,
    _fake: FakeModel,
    _daemon: super::harness::Serve,
    /// The job's id.
    id: String,
    /// The review's id (`job-confirm-…`).
    cid: String,
    /// `jobs show` of the parked job.
    shown: Value,
}

async fn park_a_send(body: &str, report: &str) -> Parked {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let fake = FakeModel::start().await;
    // First run: the model wants to send. Second run (after the review): it reports.
    fake.push(Script::tool_call(
        "messages_send",
        json!({"to": "+49 151 2345 6789", "body": body,
               "reason": "tell Alice the user is running late"}),
    ));
    fake.push(Script::text(report));
    let daemon = serve(&data, &fake_model_config(tmp.path(), &fake));

    let (code, made, err) = jobs_json(
        &[
            "create",
            "--title",
            "Tell Alice",
            "--prompt",
            "Tell Alice I'm running late",
        ],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let id = made["job"]["id"].as_i64().unwrap().to_string();
    let (code, woke, _) = jobs_json(&["wake"], &data).await;
    assert_eq!(code, 0);
    assert_eq!(woke["claimed"][0].to_string(), id, "{woke}");
    let shown = until_status(&data, &id, "awaiting_review").await;
    let cid = shown["job"]["pending_confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(cid.starts_with("job-confirm-"), "{cid}");
    Parked {
        tmp,
        data,
        _fake: fake,
        _daemon: daemon,
        id,
        cid,
        shown,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_parks_a_send_for_review_and_after_approval_sends_it_once_and_delivers() {
    let parked = park_a_send(
        "Running late, sorry",
        "Alice now knows you are running late.",
    )
    .await;
    let tmp = &parked.tmp;
    let (data, id, cid) = (
        parked.data.as_path(),
        parked.id.as_str(),
        parked.cid.as_str(),
    );

    // Parked: nothing was sent; the review names the exact call.
    let review = &parked.shown["job"]["pending_tool_request_json"];
    assert_eq!(review["tool"], "messages_send", "{}", parked.shown);
    assert_eq!(review["params"]["body"], "Running late, sorry");
    assert_eq!(messages_with(data, "Running late, sorry"), 0);
    let (_, waiting, _) = jobs_json(&["list", "--status", "awaiting_review"], data).await;
    assert_eq!(waiting["count"], 1, "{waiting}");

    // The stored record checks out offline; a tampered copy does not; junk is unreadable.
    let record = tmp.path().join("record.json");
    std::fs::write(&record, review.to_string()).unwrap();
    let (code, out, err) = run(&["jobs", "check-review", record.to_str().unwrap()], "");
    assert_eq!(code, 0, "{out} {err}");
    let mut tampered = review.clone();
    tampered["params"]["to"] = json!("+1 555 0100");
    std::fs::write(&record, tampered.to_string()).unwrap();
    let (code, out, err) = run(&["jobs", "check-review", record.to_str().unwrap()], "");
    assert_eq!(code, 1, "{out} {err}");
    assert!(
        format!("{out}{err}").contains("params_digest"),
        "{out} {err}"
    );
    std::fs::write(&record, "{not json").unwrap();
    let (code, _, _) = run(&["jobs", "check-review", record.to_str().unwrap()], "");
    assert_eq!(code, 2);

    // Approve from the CLI: the stored call runs once; a second tap changes nothing.
    let (code, answer, err) = jobs_json(&["approve", cid], data).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(answer["code"], "background.review_resolved", "{answer}");
    assert_eq!(answer["result_status"], "ok", "{answer}");
    let (code, again, _) = jobs_json(&["deny", cid], data).await;
    assert_eq!(code, 1);
    assert_eq!(
        again["code"], "background.review_already_resolved",
        "{again}"
    );
    assert_eq!(messages_with(data, "Running late, sorry"), 1);

    // The job runs again with the outcome, completes and delivers.
    let (code, _, _) = jobs_json(&["wake"], data).await;
    assert_eq!(code, 0);
    let done = until_status(data, id, "completed").await;
    assert_eq!(
        messages_with(data, "Running late, sorry"),
        1,
        "sent exactly once"
    );
    assert_eq!(done["runs"].as_array().unwrap().len(), 2, "{done}");
    assert_eq!(done["runs"][0]["outcome"], "parked", "{done}");
    assert_eq!(done["runs"][1]["outcome"], "succeeded", "{done}");
    let mut delivered = done.clone();
    for _ in 0..100 {
        if delivered["delivery_state"] == "sent" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        delivered = jobs_json(&["show", id], data).await.1;
    }
    assert_eq!(delivered["delivery_state"], "sent", "{delivered}");
    let shown = shade(data);
    assert!(
        shown.contains("Alice now knows you are running late."),
        "the summary is the notification body: {shown}"
    );

    // The audit log holds the review's resolution (digests only) and the reviewed send.
    let (_, audit, _) = cli(&["audit", "export", "--format", "jsonl"], data);
    assert!(
        audit.contains("assistant.background_job.review_resolved"),
        "{audit}"
    );
    assert!(
        !audit.contains("Running late, sorry"),
        "no raw params in the audit"
    );
    let (code, out, _) = cli(&["audit", "verify"], data);
    assert_eq!(code, 0, "{out}");
}

/// The phone's side of a review (§9.4): the review's notification has Approve and Deny, and
/// a tap on Deny (the simulated phone's `sim inject action`) decides it — the parked send never
/// runs, the job goes on with the refusal. The tapped notification leaves the shade (a second
/// tap finds nothing to press), and a later approval from the CLI changes nothing.
/// Until now only `jobs approve|deny` had an end-to-end test; the taps are read by their own
/// task, queued in order and resolved one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tap_on_the_review_notifications_deny_decides_it_and_a_later_approval_changes_nothing() {
    let parked = park_a_send("Tapped away, sorry", "The user chose not to send it.").await;
    let (data, id, cid) = (
        parked.data.as_path(),
        parked.id.as_str(),
        parked.cid.as_str(),
    );
    let key = format!("review-{cid}");

    // The review's notification is in the phone's shade under that key.
    let mut shown = String::new();
    for _ in 0..100 {
        shown = shade(data);
        if shown.contains(&key) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown.contains(&key), "no notification keyed {key}: {shown}");

    // Deny on the phone: the review is decided and its notification leaves the shade.
    let (code, out, err) = cli(
        &["sim", "inject", "action", "--key", &key, "--action", "deny"],
        data,
    );
    assert_eq!(code, 0, "{out} {err}");
    let mut resolved = Value::Null;
    for _ in 0..100 {
        resolved = jobs_json(&["show", id], data).await.1;
        if resolved["job"]["status"] != "awaiting_review" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(resolved["job"]["status"], "awaiting_review", "{resolved}");
    let mut gone = false;
    for _ in 0..100 {
        if !shade(data).contains(&key) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the decided review's notification stays in the shade");
    // So a second tap finds nothing to press.
    let (code, out, err) = cli(
        &[
            "sim", "inject", "action", "--key", &key, "--action", "approve",
        ],
        data,
    );
    assert_ne!(code, 0, "{out} {err}");
    assert!(err.contains("no notification matches"), "{out} {err}");
    let (code, again, _) = jobs_json(&["approve", cid], data).await;
    assert_eq!(code, 1);
    assert_eq!(
        again["code"], "background.review_already_resolved",
        "{again}"
    );
    assert_eq!(
        messages_with(data, "Tapped away, sorry"),
        0,
        "denied on the phone: never sent"
    );
    let (_, audit, _) = cli(&["audit", "export", "--format", "jsonl"], data);
    let resolutions: Vec<Value> = audit
        .lines()
        .filter(|l| l.contains("assistant.background_job.review_resolved"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(resolutions.len(), 1, "one resolution: {resolutions:?}");
    assert_eq!(
        resolutions[0]["confirmation"], "denied",
        "the tap's decision: {}",
        resolutions[0]
    );
}
