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

/// Regression (review finding 14): the heartbeat kept 50 run files while the writer rendered
/// every run of the ledger (100), so each job event recreated the files the heartbeat had
/// just removed. Both now use `KEEP_RUNS`: the writer renders only the newest runs the
/// retention keeps, and the heartbeat finds nothing to prune.
#[tokio::test]
async fn artifact_writing_recreated_the_run_files_the_heartbeat_pruned() {
    use openphone_jobs::artifacts::KEEP_RUNS;
    use openphone_store::{AttemptFinish, ClaimRequest, JobStatus, RunOutcome};
    let h = Harness::new();
    let root = tempfile::tempdir().unwrap();
    let artifacts = JobArtifacts::at(root.path().join("jobs"));
    let id = h
        .create(json!({"title": "Digest", "prompt": "p", "interval_ms": 3_600_000}))
        .job
        .id;
    let runs = KEEP_RUNS + 5;
    for n in 0..runs {
        let now = h.now() + i64::try_from(n).unwrap() * 10;
        let mut due = h.job(id);
        due.job.next_run_at = now;
        h.store.update_job(&due).unwrap();
        let claimed = h
            .store
            .claim_due_jobs(&ClaimRequest {
                now_ms: now,
                limit: 1,
                owner: "me".into(),
                started_at_ms: 0,
            })
            .unwrap();
        assert_eq!(claimed.len(), 1, "run {n} was not claimed");
        let running = claimed.into_iter().next().unwrap().job;
        let mut next = running.clone();
        next.job.status = JobStatus::Queued;
        next.job.running_at = 0;
        let finish = AttemptFinish {
            attempt: running.attempt,
            owner: "me".into(),
            outcome: RunOutcome::Succeeded,
            reason: String::new(),
            output_ref: String::new(),
            finished_at: now + 1,
        };
        h.store.finish_job_attempt(&next, &finish).unwrap();
    }
    assert_eq!(h.store.job_runs(id).unwrap().len(), runs);
    artifacts.write(&h.store, id, h.now()).unwrap();
    let files = || {
        std::fs::read_dir(artifacts.dir(id).join("runs"))
            .unwrap()
            .flatten()
            .count()
    };
    assert_eq!(files(), KEEP_RUNS);
    let oldest_kept = i64::try_from(runs - KEEP_RUNS + 1).unwrap();
    assert!(!artifacts.run_file(id, oldest_kept - 1).exists());
    assert!(artifacts.run_file(id, oldest_kept).exists());
    let maintenance = MaintenanceRunner::new(Arc::clone(&h.store), artifacts.clone(), None);
    let report = maintenance.maintain(h.now(), None).await;
    assert_eq!(report.runs_pruned, 0, "{report:?}");
    let again = artifacts.write(&h.store, id, h.now()).unwrap();
    assert_eq!(again.files, 0, "the writer recreated pruned files");
    assert_eq!(files(), KEEP_RUNS);
}

/// Regression (review finding 14): concurrent writers of one artifact shared one temporary
/// file name, so a write could rename another's half-written file into place (or fail to find
/// its own). Every write now has its own temporary file.
#[test]
fn concurrent_artifact_writers_shared_one_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("status.md");
    let writers: Vec<_> = (0..4u8)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let bytes = vec![b'a' + w; 256 * 1024];
                for _ in 0..40 {
                    openphone_jobs::artifacts::write_if_changed(&path, &bytes).unwrap();
                    let _ = std::fs::remove_file(&path);
                }
                bytes
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    // Whatever is left is one writer's whole bytes, and no temporary file is left behind.
    if let Ok(bytes) = std::fs::read(&path) {
        assert_eq!(bytes.len(), 256 * 1024);
        assert!(bytes.iter().all(|b| *b == bytes[0]));
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
