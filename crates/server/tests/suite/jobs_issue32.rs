//! Issue 32 (jobs): a failing job's delivery, delivery to the surface a job came from, the
//! background runtime's reply, job artifacts and the heartbeat's maintenance — each on a real
//! daemon (in process, on loopback) with the scripted fake model and WebSocket clients.

use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use openphone_server::Config;
use serde_json::{Value, json};

use super::support::{Client, RUNTIME_TOKEN, connect, start};

/// A configuration with the `hermes` runtime and a `[builtin]` table on `fake`, then `extra`.
fn config_with_model(fake: &FakeModel, extra: &str) -> Config {
    let text = format!(
        r#"
[[runtimes]]
id = "hermes"
token = "{RUNTIME_TOKEN}"
grants = ["safe_read", "private_read", "dangerous"]
max_autonomy = "trusted_actions"

[builtin]
base_url = "{}"
model = "fake-model"
request_timeout_secs = 10
{extra}
"#,
        fake.url()
    );
    Config::parse(&text, "test.toml").unwrap()
}

async fn operator(d: &super::support::Running) -> Client {
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    op
}

/// `jobs.get` until `done` holds for its result (bounded: 300 polls 50 ms apart).
async fn job_until(op: &mut Client, id: i64, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let got = op.call("jobs.get", json!({"job_id": id})).await;
        last = got["result"].clone();
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("job {id} never reached {what}: {last}");
}

/// The phone's notifications as the operator reads them (the tool's JSON result).
async fn shade(op: &mut Client, n: &str) -> Value {
    let listed = op
        .call(
            "tools.invoke",
            json!({"request_id": format!("shade-{n}"), "tool": "openphone.notifications.list",
                "params": {"limit": 100, "reason": "look"}}),
        )
        .await;
    assert_eq!(listed["result"]["status"], "ok", "{listed}");
    listed["result"]["result"].clone()
}

/// Makes job `id` due now (pause, resume) and wakes the scheduler, which claims it.
async fn run_now(op: &mut Client, id: i64) {
    let paused = op.call("jobs.pause", json!({"job_id": id})).await;
    assert_eq!(paused["result"]["job"]["status"], "paused", "{paused}");
    let resumed = op.call("jobs.resume", json!({"job_id": id})).await;
    assert_eq!(resumed["result"]["job"]["status"], "queued", "{resumed}");
    let woke = op.call("jobs.wake", json!({})).await;
    assert_eq!(woke["result"]["claimed"], json!([id]), "{woke}");
}

/// Issue 32 item 1: at the third failure in a row (notification mode) the phone got both the
/// failure alert and a "<title> finished" result notification. A failure announces a failure,
/// never a completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_announces_that_it_finished() {
    let fake = FakeModel::start().await;
    // Every model call fails with a 500 whose Retry-After is past what the client waits for:
    // one attempt per run, no retry wait.
    fake.set_fallback(Script::status_with_retry_after(500, "3600"));
    let d = start(config_with_model(&fake, "")).await;
    let mut op = operator(&d).await;
    let made = op
        .call(
            "jobs.create",
            json!({"title": "always fails", "prompt": "Check the release notes.",
                "delivery": {"mode": "notification"}}),
        )
        .await;
    let id = made["result"]["job"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{made}"));
    let woke = op.call("jobs.wake", json!({})).await;
    assert_eq!(woke["result"]["claimed"], json!([id]), "{woke}");
    for failures in 1..=3 {
        let job = job_until(&mut op, id, &format!("{failures} failures"), |j| {
            j["job"]["failure_count"] == failures && j["job"]["status"] == "queued"
        })
        .await;
        assert!(
            job["job"]["last_result"]
                .as_str()
                .unwrap_or("")
                .contains("500"),
            "{job}"
        );
        if failures < 3 {
            run_now(&mut op, id).await;
        }
    }
    // The alert is delivered (and recorded as such)…
    let job = job_until(&mut op, id, "a settled delivery", |j| {
        j["delivery_state"] != "pending" && !j["delivery_state"].is_null()
    })
    .await;
    assert_eq!(job["delivery_state"], "sent", "{job}");
    // Let anything else the daemon would post arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shown = shade(&mut op, "1").await.to_string();
    assert!(
        shown.contains("Background job failed: always fails"),
        "the failure alert is on the phone: {shown}"
    );
    assert!(
        shown.contains("Failed 3 times in a row"),
        "the alert says how often: {shown}"
    );
    assert!(
        !shown.contains("always fails finished"),
        "a failed job was announced as finished: {shown}"
    );
    d.daemon.shutdown().await;
}

/// The next event named `name` a client receives (others are skipped).
async fn event_named(c: &mut Client, name: &str) -> Value {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(30), c.next_event())
            .await
            .unwrap_or_else(|_| panic!("no {name} event within 30 s"));
        if e["params"]["event"] == name {
            return e["params"]["payload"].clone();
        }
    }
}

/// Issue 32 item 3: a job a runtime creates in its chat session delivers its result back to
/// that runtime, in that session (an attention request with source `background_job`), and the
/// delivery is recorded as `sent`; as a runtime's job it still never reaches the user's shade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_made_in_a_runtimes_session_delivers_its_result_back_to_that_session() {
    let d = start(super::support::config("max_autonomy = \"trusted_actions\"")).await;
    let mut op = operator(&d).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    // The user asks Hermes in a chat session; Hermes makes the job there and answers.
    let asked = op
        .call(
            "attention.request",
            json!({"surface": "chat", "runtime": "hermes", "text": "Ping me when done",
                "autonomy": "trusted_actions"}),
        )
        .await;
    let session = asked["result"]["phone_session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{asked}"))
        .to_owned();
    let first = event_named(&mut rt, "runtime.attention.requested").await;
    assert_eq!(first["phone_session_id"], session);
    let created = rt
        .call(
            "tools.invoke",
            json!({"request_id": "job-1", "tool": "openphone.jobs.create",
                "phone_session_id": session, "autonomy": "trusted_actions",
                "params": {"title": "Hermes ping", "prompt": "Ping.", "type": "system_event",
                    "notification_text": "Ping done", "delivery": {"mode": "notification"},
                    "reason": "the user asked"}}),
        )
        .await;
    assert_eq!(created["result"]["status"], "ok", "{created}");
    let id = created["result"]["result"]["job"]["id"].as_i64().unwrap();
    let replied = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "text": "I will ping you.", "final": true}),
        )
        .await;
    assert_eq!(replied["result"]["status"], "completed", "{replied}");
    let got = op.call("jobs.get", json!({"job_id": id})).await;
    assert_eq!(
        got["result"]["job"]["delivery_json"]["origin"],
        json!({"runtime": "hermes", "phone_session_id": session}),
        "{got}"
    );
    // A caller cannot name an origin itself.
    let forged = rt
        .call(
            "tools.invoke",
            json!({"request_id": "job-2", "tool": "openphone.jobs.create",
                "phone_session_id": session, "autonomy": "trusted_actions",
                "params": {"title": "x", "prompt": "p", "type": "system_event",
                    "delivery": {"mode": "notification",
                        "origin": {"runtime": "other", "phone_session_id": "s"}},
                    "reason": "forge"}}),
        )
        .await;
    assert!(forged.to_string().contains("delivery.origin"), "{forged}");

    let woke = op.call("jobs.wake", json!({})).await;
    assert_eq!(woke["result"]["claimed"], json!([id]), "{woke}");
    let back = event_named(&mut rt, "runtime.attention.requested").await;
    assert_eq!(
        back["phone_session_id"], session,
        "the session it came from: {back}"
    );
    assert_eq!(back["source"], "background_job", "{back}");
    let text = back["text"].as_str().unwrap_or("");
    assert!(text.contains("Ping done"), "{back}");
    assert!(text.contains("Hermes ping"), "{back}");
    let job = job_until(&mut op, id, "a settled delivery", |j| {
        j["delivery_state"] != "pending" && !j["delivery_state"].is_null()
    })
    .await;
    assert_eq!(job["delivery_state"], "sent", "{job}");
    let shown = shade(&mut op, "origin").await.to_string();
    assert!(
        !shown.contains("Ping done"),
        "a runtime's job in the shade: {shown}"
    );
    d.daemon.shutdown().await;
}

/// Issue 32 item 3: with `[jobs] background_runtime` naming a runtime, a job sent there
/// stayed `dispatched` forever. The runtime's final reply in the dispatched session is saved
/// as the job's result, the job completes, and the result is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_jobs_reply_is_saved_and_the_job_completes() {
    let config = Config::parse(
        &format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{RUNTIME_TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\n\
             [jobs]\nbackground_runtime = \"hermes\"\n"
        ),
        "test.toml",
    )
    .unwrap();
    let d = start(config).await;
    let mut op = operator(&d).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let made = op
        .call(
            "jobs.create",
            json!({"title": "Digest", "prompt": "Summarise my unread messages.",
                "delivery": {"mode": "notification"}}),
        )
        .await;
    let id = made["result"]["job"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{made}"));
    let woke = op.call("jobs.wake", json!({})).await;
    assert_eq!(woke["result"]["claimed"], json!([id]), "{woke}");
    let asked = event_named(&mut rt, "runtime.attention.requested").await;
    assert_eq!(asked["source"], "background_job", "{asked}");
    let session = asked["phone_session_id"].as_str().unwrap().to_owned();
    job_until(&mut op, id, "dispatched", |j| {
        j["job"]["status"] == "dispatched"
    })
    .await;
    // The runtime streams, then ends with a final message that does not repeat the text.
    let delta = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "text": "Three new messages, ", "final": false}),
        )
        .await;
    assert!(delta.get("result").is_some(), "{delta}");
    let fin = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "text": "", "final": true}),
        )
        .await;
    assert_eq!(fin["result"]["status"], "completed", "{fin}");
    let job = job_until(&mut op, id, "completed", |j| {
        j["job"]["status"] == "completed"
    })
    .await;
    assert_eq!(job["job"]["last_result"], "Three new messages,", "{job}");
    assert_eq!(job["job"]["phase"], "completed");
    let job = job_until(&mut op, id, "a settled delivery", |j| {
        j["delivery_state"] != "pending" && !j["delivery_state"].is_null()
    })
    .await;
    assert_eq!(job["delivery_state"], "sent", "{job}");
    let shown = shade(&mut op, "dispatch").await.to_string();
    assert!(shown.contains("Three new messages,"), "{shown}");
    // The artifacts hold the run and the reply.
    let run = d
        .dir
        .path()
        .join(format!("artifacts/jobs/{id}/runs/000001.json"));
    let run: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    assert_eq!(run["outcome"], "dispatched", "{run}");
    assert_eq!(run["result"], "Three new messages,", "{run}");
    d.daemon.shutdown().await;
}

/// Issue 32 item 8: a background job leaves its artifacts in the data directory, as goals do:
/// its spec, one file per run (prompt, tool calls, result) and `status.md`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_leaves_its_spec_its_runs_and_a_status_in_the_data_dir() {
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": "Alice", "reason": "find Alice"}),
    ));
    fake.push(Script::text("Alice is in your contacts."));
    let d = start(config_with_model(&fake, "")).await;
    let mut op = operator(&d).await;
    let made = op
        .call(
            "jobs.create",
            json!({"title": "Find Alice", "prompt": "Is Alice in my contacts?"}),
        )
        .await;
    let id = made["result"]["job"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{made}"));
    op.call("jobs.wake", json!({})).await;
    job_until(&mut op, id, "completed", |j| {
        j["job"]["status"] == "completed"
    })
    .await;
    let dir = d.dir.path().join(format!("artifacts/jobs/{id}"));
    // The event loop writes them right after the run's end: the run's file first, then
    // `status.md` (a loaded machine can read between the two, so both are waited for).
    let run_file = dir.join("runs/000001.json");
    for _ in 0..100 {
        if std::fs::read(&run_file)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|v| v["outcome"] == "succeeded")
            && std::fs::read_to_string(dir.join("status.md")).is_ok_and(|s| s.contains("completed"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spec: Value =
        serde_json::from_slice(&std::fs::read(dir.join("job.json")).unwrap()).unwrap();
    assert_eq!(spec["prompt"], "Is Alice in my contacts?");
    let run: Value = serde_json::from_slice(&std::fs::read(&run_file).unwrap()).unwrap();
    assert_eq!(run["outcome"], "succeeded", "{run}");
    assert_eq!(run["prompt"], "Is Alice in my contacts?");
    assert_eq!(run["tool_calls"][0]["tool"], "contacts_search", "{run}");
    assert_eq!(run["tool_calls"][0]["status"], "ok", "{run}");
    assert_eq!(run["answer"], "Alice is in your contacts.");
    assert!(
        run["result"]
            .as_str()
            .unwrap_or("")
            .starts_with("Alice is in your contacts."),
        "{run}"
    );
    let status = std::fs::read_to_string(dir.join("status.md")).unwrap();
    assert!(
        status.contains("Find Alice") && status.contains("completed"),
        "{status}"
    );
    d.daemon.shutdown().await;
}

/// Issue 32 item 9: a heartbeat wakes the agent runtime for maintenance, silently: it checks
/// the model (a failure is reported in its result, not as a failed run), removes the artifacts
/// of jobs no longer stored and records what it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_checks_the_model_prunes_artifacts_and_stays_silent() {
    let fake = FakeModel::start().await;
    fake.set_fallback(Script::text("OK"));
    let d = start(config_with_model(&fake, "")).await;
    let orphan = d.dir.path().join("artifacts/jobs/999/runs");
    std::fs::create_dir_all(&orphan).unwrap();
    let mut op = operator(&d).await;
    let made = op
        .call(
            "jobs.create",
            json!({"title": "Maintenance", "type": "heartbeat"}),
        )
        .await;
    let id = made["result"]["job"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{made}"));
    assert_eq!(made["result"]["job"]["delivery_json"]["mode"], "silent");
    op.call("jobs.wake", json!({})).await;
    let done = job_until(&mut op, id, "completed", |j| {
        j["job"]["status"] == "completed"
    })
    .await;
    let result = done["job"]["last_result"].as_str().unwrap_or("").to_owned();
    assert!(result.contains("model: ok (fake-model)"), "{result}");
    assert!(result.contains("1 orphan artifact dir(s)"), "{result}");
    assert!(!d.dir.path().join("artifacts/jobs/999").exists());
    assert_eq!(done["delivery_state"], "suppressed", "{done}");
    assert_eq!(fake.requests().len(), 1, "one health request");

    // The model fails: the heartbeat still completes, and says so.
    fake.set_fallback(Script::status(500));
    let again = op
        .call(
            "jobs.create",
            json!({"title": "Maintenance 2", "type": "heartbeat"}),
        )
        .await;
    let id2 = again["result"]["job"]["id"].as_i64().unwrap();
    op.call("jobs.wake", json!({})).await;
    let done = job_until(&mut op, id2, "completed", |j| {
        j["job"]["status"] == "completed"
    })
    .await;
    let result = done["job"]["last_result"].as_str().unwrap_or("").to_owned();
    assert!(result.contains("model: FAILED (fake-model"), "{result}");
    let shown = shade(&mut op, "heartbeat").await.to_string();
    assert!(!shown.contains("Maintenance"), "silent by default: {shown}");
    // What it did is in the audit log.
    let audit = op
        .call("audit.query", json!({"limit": 1000}))
        .await
        .to_string();
    assert!(
        audit.contains("assistant.background_job.maintenance"),
        "{audit}"
    );
    d.daemon.shutdown().await;
}

/// Regression (review finding 10): a dispatched job's runtime ended with a final message that
/// reported an error, and the job completed — a failure announced as finished. The run now
/// fails: the job is `failed` with the runtime's error as its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_runtimes_error_final_completed_the_job() {
    let config = Config::parse(
        &format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{RUNTIME_TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\n\
             [jobs]\nbackground_runtime = \"hermes\"\n"
        ),
        "test.toml",
    )
    .unwrap();
    let d = start(config).await;
    let mut op = operator(&d).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let made = op
        .call(
            "jobs.create",
            json!({"title": "Digest", "prompt": "Summarise my unread messages."}),
        )
        .await;
    let id = made["result"]["job"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{made}"));
    let woke = op.call("jobs.wake", json!({})).await;
    assert_eq!(woke["result"]["claimed"], json!([id]), "{woke}");
    let asked = event_named(&mut rt, "runtime.attention.requested").await;
    let session = asked["phone_session_id"].as_str().unwrap().to_owned();
    job_until(&mut op, id, "dispatched", |j| {
        j["job"]["status"] == "dispatched"
    })
    .await;
    let fin = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "text": "", "final": true,
                "error": "model quota exhausted"}),
        )
        .await;
    assert!(fin.get("result").is_some(), "{fin}");
    let job = job_until(&mut op, id, "failed", |j| {
        j["job"]["status"] != "dispatched"
    })
    .await;
    assert_eq!(job["job"]["status"], "failed", "{job}");
    let result = job["job"]["last_result"].as_str().unwrap_or("");
    assert!(
        result.contains("runtime_reported_error") && result.contains("model quota exhausted"),
        "{job}"
    );
    d.daemon.shutdown().await;
}
