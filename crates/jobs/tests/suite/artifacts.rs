//! Issue 32 items 8 and 9 (jobs side): every job's artifacts (spec, one file per run, status)
//! rendered from the real store, and the heartbeat's retention and repair.

use std::sync::Arc;

use openphone_jobs::{FailureReason, JobArtifacts, MaintenanceRunner};
use openphone_protocol::background_job_session;
use serde_json::{Value, json};

use super::support::{Harness, Step};

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// What the built-in loop stores for one run: the opening message, a model turn with two tool
/// calls, their answers, the final answer and the run's outcome.
fn record_run(h: &Harness, job_id: i64, attempt: i64) {
    let session = background_job_session(job_id);
    if h.store.get_session(&session).unwrap().is_none() {
        h.store
            .create_session(
                &openphone_store::NewPhoneSession {
                    phone_session_id: session.clone(),
                    runtime_kind: "builtin".into(),
                    runtime_session_id: session.clone(),
                    attention_id: String::new(),
                    source: "background_job".into(),
                    autonomy: openphone_store::Autonomy::AskBeforeAction,
                    summary: "job".into(),
                },
                h.now(),
            )
            .unwrap();
    }
    let entries = [
        (
            "user",
            json!({"job_id": job_id, "attempt": attempt,
            "message": {"role": "user", "content": "Check the calendar."}}),
        ),
        (
            "assistant",
            json!({"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "calendar_list", "arguments": "{\"days\":1}"}},
            {"id": "c2", "type": "function",
             "function": {"name": "messages_search", "arguments": "{\"query\":\"Sam\"}"}}]}}),
        ),
        (
            "tool",
            json!({"tool": "openphone.calendar.list", "status": "ok",
            "request_id": format!("job-{job_id}-{attempt}-1"), "result_digest": "sha256:aa",
            "message": {"role": "tool", "tool_call_id": "c1", "content": "2 events"}}),
        ),
        (
            "tool",
            json!({"tool": "openphone.messages.search", "status": "ok",
            "request_id": format!("job-{job_id}-{attempt}-2"),
            "message": {"role": "tool", "tool_call_id": "c2", "content": "1 message"}}),
        ),
        (
            "assistant",
            json!({"message": {"role": "assistant", "content": "Two meetings today."}}),
        ),
        (
            "status",
            json!({"job_id": job_id, "attempt": attempt, "outcome": "completed"}),
        ),
    ];
    for (role, body) in entries {
        h.store
            .append_transcript(&session, role, &body, h.now())
            .unwrap();
    }
}

#[tokio::test]
async fn every_job_leaves_its_spec_one_file_per_run_and_a_status() {
    let h = Harness::new();
    let root = tempfile::tempdir().unwrap();
    let artifacts = JobArtifacts::at(root.path().join("jobs"));
    let job = h.create(json!({"title": "Calendar", "prompt": "Check the calendar.",
                              "notification_text": "Calendar checked"}));
    let id = job.job.id;
    artifacts.write(&h.store, id, h.now()).unwrap();
    let spec = read_json(&artifacts.dir(id).join("job.json"));
    assert_eq!(spec["title"], "Calendar");
    assert_eq!(spec["prompt"], "Check the calendar.");
    assert_eq!(spec["created_by"], "operator");
    assert_eq!(
        spec["delivery_json"]["notification_text"],
        "Calendar checked"
    );
    assert!(!artifacts.run_file(id, 1).exists(), "no run yet");

    h.tick().await;
    record_run(&h, id, 1);
    artifacts.write(&h.store, id, h.now()).unwrap();
    let run = read_json(&artifacts.run_file(id, 1));
    assert_eq!(run["attempt"], 1);
    assert_eq!(run["outcome"], "succeeded");
    assert_eq!(run["prompt"], "Check the calendar.");
    assert_eq!(run["result"], "done");
    assert_eq!(run["answer"], "Two meetings today.");
    let calls = run["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{run}");
    assert_eq!(calls[0]["tool"], "calendar_list");
    assert_eq!(calls[0]["arguments"], json!({"days": 1}));
    assert_eq!(calls[0]["status"], "ok");
    assert_eq!(calls[0]["result_digest"], "sha256:aa");
    // A command that reads private data keeps its arguments as a digest only.
    assert_eq!(calls[1]["command"], "openphone.messages.search");
    assert!(calls[1].get("arguments").is_none(), "{run}");
    assert!(calls[1]["arguments_digest"].is_string());
    let status = std::fs::read_to_string(artifacts.dir(id).join("status.md")).unwrap();
    assert!(status.starts_with("# Job 1: Calendar"), "{status}");
    assert!(status.contains("completed"), "{status}");
    assert!(status.contains("attempt 1 — succeeded"), "{status}");

    // A failed run's file says why; an ended run's file is never rewritten.
    let failing = h.create(json!({"title": "Flaky", "prompt": "p"}));
    h.script
        .push(Step::Fail(FailureReason::job_error("model_http_500")));
    h.tick().await;
    artifacts.write(&h.store, failing.job.id, h.now()).unwrap();
    let run = read_json(&artifacts.run_file(failing.job.id, 1));
    assert_eq!(run["outcome"], "failed");
    assert_eq!(run["failure"], "job_error:model_http_500");
    let before = std::fs::read(artifacts.run_file(id, 1)).unwrap();
    let written = artifacts.write(&h.store, id, h.now()).unwrap();
    assert_eq!(written.files, 0, "nothing changed, nothing written");
    assert_eq!(std::fs::read(artifacts.run_file(id, 1)).unwrap(), before);
}

#[tokio::test]
async fn a_heartbeat_removes_orphans_and_old_run_files_and_renders_live_jobs() {
    let h = Harness::new();
    let root = tempfile::tempdir().unwrap();
    let artifacts = JobArtifacts::at(root.path().join("jobs"));
    let live = h.create(json!({"title": "Digest", "prompt": "p", "interval_ms": 3_600_000}));
    let id = live.job.id;
    // An orphan (no such job) and more run files than are kept.
    std::fs::create_dir_all(artifacts.dir(999).join("runs")).unwrap();
    std::fs::create_dir_all(artifacts.dir(id).join("runs")).unwrap();
    for n in 1..=60 {
        std::fs::write(artifacts.run_file(id, n), b"{}").unwrap();
    }
    let maintenance = MaintenanceRunner::new(Arc::clone(&h.store), artifacts.clone(), None);
    let report = maintenance.maintain(h.now(), None).await;
    assert_eq!(report.orphans_removed, 1, "{report:?}");
    assert!(!artifacts.dir(999).exists());
    assert_eq!(report.runs_pruned, 10, "{report:?}");
    assert!(!artifacts.run_file(id, 10).exists());
    assert!(artifacts.run_file(id, 11).exists());
    assert_eq!(report.jobs_rendered, 1, "{report:?}");
    assert!(artifacts.dir(id).join("status.md").exists());
    assert!(report.problems.is_empty(), "{report:?}");
    let line = report.line();
    assert!(
        line.starts_with("maintenance: model: not configured"),
        "{line}"
    );
    assert!(
        line.contains("1 orphan artifact dir(s), 10 old run file(s) removed"),
        "{line}"
    );
}
