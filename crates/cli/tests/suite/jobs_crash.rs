//! Issue 16: crash safety of background jobs with the real binary. The daemon is killed with
//! SIGKILL during a run, while a review is being created, and between an approval and the
//! approved call's execution; after each restart the test checks that nothing was lost,
//! nothing ran twice, nothing ran unreviewed, and an unknown outcome was never replayed.
//! Run with `--nocapture` to see the cycle and invariant counts it prints.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use serde_json::{Value, json};

use super::harness::{Delays, cli, kill, serve, write_config};

fn jobs(args: &[&str], data: &Path) -> (i32, Value) {
    let mut all: Vec<&str> = vec!["jobs"];
    all.extend(args);
    all.push("--json");
    let (code, out, _) = cli(&all, data);
    (code, serde_json::from_str(&out).unwrap_or(Value::Null))
}

fn show(data: &Path, id: i64) -> Value {
    let (code, out, err) = cli(&["jobs", "show", &id.to_string(), "--json"], data);
    assert_eq!(code, 0, "jobs show {id}: {out}{err}");
    serde_json::from_str(&out).unwrap()
}

/// Polls until the job leaves `running` (and `waiting`) or 10 s pass.
fn settle(data: &Path, id: i64) -> Value {
    let mut shown = show(data, id);
    for _ in 0..100 {
        let status = shown["job"]["status"].as_str().unwrap_or("").to_owned();
        if status != "running" && status != "waiting" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        shown = show(data, id);
    }
    shown
}

/// What the audit log says about the sends of job `id`: how many began (the durable record
/// written before a state-changing call runs), how many finished ok, and how many ran without
/// a background review as the proof's source. The log survives kills; the simulated phone's
/// own state starts afresh with every daemon.
#[derive(Debug, Default, Clone, Copy)]
struct Sends {
    begun: usize,
    ok: usize,
    unreviewed: usize,
}

fn sends(audit: &str, id: i64) -> Sends {
    let session = format!("background-job:{id}");
    let mut out = Sends::default();
    for line in audit.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        if record["kind"] != "tool_request"
            || record["tool"] != "openphone.messages.send"
            || record["runtime_session_id"] != session.as_str()
            || record["decision"] != "allow"
        {
            continue;
        }
        if record["status"].is_null() {
            out.begun += 1;
            if !record["policy_proof"]
                .to_string()
                .contains("background_review")
            {
                out.unreviewed += 1;
            }
        } else if record["status"] == "ok" {
            out.ok += 1;
        }
    }
    out
}

#[test]
fn a_daemon_killed_at_any_moment_of_a_reviewed_job_never_runs_anything_twice_or_unreviewed() {
    const CYCLES: u64 = 20;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let seed = u64::from(std::process::id()) ^ 0x5eed;
    let mut delays = Delays(seed);
    let mut daemon = serve(&data, &config);
    let mut kills = BTreeMap::<&str, u32>::new();
    let mut jobs_made = Vec::new();

    for cycle in 0..CYCLES {
        let body = format!("crash-{cycle}");
        let payload = json!({"tool_call": {"tool": "messages_send", "arguments": {
            "to": "+49 151 2345 6789", "body": body, "reason": "crash test"}}});
        let (code, made) = jobs(
            &[
                "create",
                "--title",
                &body,
                "--type",
                "system_event",
                "--payload",
                &payload.to_string(),
            ],
            &data,
        );
        assert_eq!(code, 0, "{made}");
        let id = made["job"]["id"].as_i64().unwrap();
        jobs_made.push((id, body));

        // Kill during the run / the creation of its review, or not at all.
        let waker = {
            let data = data.clone();
            std::thread::spawn(move || jobs(&["wake"], &data))
        };
        if cycle % 3 != 2 {
            std::thread::sleep(Duration::from_millis(delays.next(60)));
            kill(&mut daemon);
            *kills
                .entry("during the run or review creation")
                .or_default() += 1;
            let _ = waker.join();
            daemon = serve(&data, &config);
        } else {
            let _ = waker.join();
        }
        let mut shown = settle(&data, id);
        if shown["job"]["status"] == "queued" && shown["job"]["phase"] != "waiting" {
            jobs(&["wake"], &data);
            shown = settle(&data, id);
        }
        if shown["job"]["status"] != "awaiting_review" {
            // The run was cut off and repaired: it retries after its backoff.
            continue;
        }
        let cid = shown["job"]["pending_confirmation_id"]
            .as_str()
            .unwrap()
            .to_owned();

        // Kill between the approval and the approved call's execution, or not at all.
        let approver = {
            let data = data.clone();
            let cid = cid.clone();
            std::thread::spawn(move || jobs(&["approve", &cid], &data))
        };
        if cycle % 2 == 0 {
            std::thread::sleep(Duration::from_millis(delays.next(40)));
            kill(&mut daemon);
            *kills.entry("between approval and execution").or_default() += 1;
            let _ = approver.join();
            daemon = serve(&data, &config);
        } else {
            let _ = approver.join();
        }
        settle(&data, id);
        jobs(&["wake"], &data);
        settle(&data, id);
    }

    // A last restart and wake: whatever is left settles; nothing runs again.
    kill(&mut daemon);
    daemon = serve(&data, &config);
    jobs(&["wake"], &data);
    let audit = || cli(&["audit", "export", "--format", "jsonl"], &data).1;
    let log = audit();
    let mut outcomes = BTreeMap::<String, u32>::new();
    let (mut doubles, mut unreviewed, mut replayed_unknown, mut sent) = (0, 0, 0, 0);
    for (id, body) in &jobs_made {
        let shown = settle(&data, *id);
        let job = &shown["job"];
        let n = sends(&log, *id);
        sent += n.ok;
        let state = format!(
            "{}/{}",
            job["status"].as_str().unwrap_or("?"),
            job["phase"].as_str().unwrap_or("?")
        );
        *outcomes.entry(state.clone()).or_default() += 1;
        if n.begun > 1 || n.ok > 1 {
            doubles += 1;
        }
        unreviewed += n.unreviewed;
        // A completed job's approved send ran exactly once; a job still waiting for its review
        // (or its backoff) sent nothing.
        match state.as_str() {
            "completed/completed" => assert_eq!((n.begun, n.ok), (1, 1), "{body}: {shown}"),
            "awaiting_review/awaiting_review" | "queued/waiting" | "queued/queued" => {
                assert_eq!(n.begun, 0, "{body}: {shown}");
            }
            _ => {}
        }
        if state == "failed/review_resolution_unknown" {
            // Never replayed: another wake leaves it as it is.
            jobs(&["wake"], &data);
            if sends(&audit(), *id).begun != n.begun {
                replayed_unknown += 1;
            }
        }
        assert_ne!(
            job["status"], "running",
            "left running after restarts: {shown}"
        );
    }
    let (code, verify, _) = cli(&["audit", "verify"], &data);
    println!(
        "jobs crash test (seed {seed}): {CYCLES} cycles, kills {kills:?}; outcomes {outcomes:?}; \
         sends run {sent}; run twice {doubles}, run unreviewed {unreviewed}, \
         unknown outcomes replayed {replayed_unknown}; audit verify exit {code}"
    );
    assert_eq!(doubles, 0);
    assert_eq!(unreviewed, 0);
    assert_eq!(replayed_unknown, 0);
    assert_eq!(code, 0, "{verify}");
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_during_its_model_call_is_repaired_at_start_and_runs_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let fake = FakeModel::start().await;
    fake.set_fallback(Script::delay(Duration::from_secs(20), Script::text("late")));
    let config = tmp.path().join("openphone.toml");
    std::fs::write(
        &config,
        format!(
            "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nrequest_timeout_secs = 30\n",
            fake.url()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();
    let data2 = data.clone();
    let config2 = config.clone();
    let (_, shown) = tokio::task::spawn_blocking(move || {
        let mut daemon = serve(&data2, &config2);
        let (_, made) = jobs(&["create", "--title", "Slow", "--prompt", "think"], &data2);
        let id = made["job"]["id"].as_i64().unwrap();
        jobs(&["wake"], &data2);
        let mut running = show(&data2, id);
        for _ in 0..100 {
            if running["job"]["status"] == "running" {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            running = show(&data2, id);
        }
        assert_eq!(running["job"]["status"], "running", "{running}");
        kill(&mut daemon);
        let _daemon = serve(&data2, &config2);
        (id, show(&data2, id))
    })
    .await
    .unwrap();
    let job = &shown["job"];
    // Repaired at start, without waiting out the stale threshold, as a failure with backoff.
    assert_eq!(job["status"], "queued", "{shown}");
    assert_eq!(job["phase"], "waiting", "{shown}");
    assert_eq!(job["failure_count"], 1, "{shown}");
    assert_eq!(job["last_result"], "stuck_running_repaired", "{shown}");
    let runs = shown["runs"].as_array().unwrap();
    assert_eq!(
        runs.len(),
        1,
        "one attempt, never a second at once: {shown}"
    );
    assert_eq!(runs[0]["outcome"], "interrupted", "{shown}");
}
