//! The Hermes adapter (`kind = "hermes"`, crates/hermes) against the real, pinned Hermes Agent
//! (`.cache/hermes-venv`, `tests/clients/hermes/install.sh`; another venv with
//! `OPENPHONE_HERMES_VENV`), through the real daemon and the real CLI, with the scripted fake
//! model as Hermes' model. Without Hermes every test prints "skipped: Hermes not installed at
//! …" and returns. Each test starts its own daemon and Hermes gateway; run with
//! `--test-threads=1` (a gateway is ~150 MB).
//!
//! The turn time and the gateway's memory are printed (`hermes turn: …`), never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

use std::time::Duration;

use openphone_clock::Stopwatch;
use openphone_fake_model::{FakeModel, Script};
use serde_json::{Value, json};

#[path = "hermes_adapter/support.rs"]
mod support;

use support::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A read through the adapter, then `ask --runtime hermes` with the reply printed whole; a
/// second `ask --session main` continues the same Hermes conversation. Prints the turn time
/// and the gateway's RSS.
#[test]
fn hermes_reads_the_screen_and_ask_prints_the_reply_whole() {
    let Some(hermes) = hermes_bin() else { return };
    let rt = runtime();
    let fake = rt.block_on(FakeModel::start());
    fake.push(Script::tool_call(
        "phone_get_screen",
        json!({"reason": "see what is on the phone", "format": "compact"}),
    ));
    let reply = "The phone shows its home screen with Messages, Maps and Settings.";
    fake.push(Script::text(reply));
    fake.push(Script::text("You asked me what was on the screen."));
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), &fake);
    let daemon = Daemon::start(dir.path(), &config(&hermes, &home, ""));
    let clock = Stopwatch::start();
    let row = daemon.wait_ready();
    let ready_after = clock.elapsed();
    assert_eq!(row["kind"], "hermes", "{row}");
    assert_eq!(row["detail"], "ready", "{row}");
    // The plugin is in Hermes' home and enabled there.
    assert!(home.join("plugins/openphone/tools.json").exists());
    let yaml = std::fs::read_to_string(home.join("config.yaml")).unwrap();
    assert!(yaml.contains("openphone"), "{yaml}");

    let turn = Stopwatch::start();
    let (code, out, err) = daemon.cli(&[
        "ask",
        "--runtime",
        "hermes",
        "What is on my screen?",
        "--timeout-secs",
        "120",
    ]);
    let turn_time = turn.elapsed();
    assert_eq!(code, 0, "{out}\n{err}\n{}", daemon.log());
    assert_eq!(out.trim_end(), reply, "the reply, whole and once: {out:?}");
    // Hermes gave the model the phone's screen (the read ran through the bridge).
    let results = tool_results(&fake);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("elements") || results[0].contains("screen"),
        "{}",
        results[0]
    );
    // The model got the phone tools, not only Hermes' own.
    let first = &fake.requests()[0];
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"phone_tap"), "{names:?}");

    // The same phone session continues in the same Hermes conversation.
    let (code, out, err) = daemon.cli(&[
        "ask",
        "--runtime",
        "hermes",
        "--session",
        "main",
        "What did I ask before?",
        "--timeout-secs",
        "120",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(out.trim_end(), "You asked me what was on the screen.");
    let last = fake.requests().last().cloned().unwrap();
    let history = last["messages"].to_string();
    assert!(
        history.contains("What is on my screen?") && history.contains(reply),
        "the continued turn carries the first exchange: {history}"
    );
    let pid = gateway_pid(daemon.child.id()).expect("the daemon started hermes gateway");
    let (rss, hwm) = rss_kb(pid);
    println!(
        "hermes turn: {} ms (ask → reply, one read); gateway ready after {} ms; gateway RSS \
         {} MB (peak {} MB)",
        turn_time.as_millis(),
        ready_after.as_millis(),
        rss / 1024,
        hwm / 1024
    );
    // The read was audited as the hermes runtime's, in the phone session.
    let mut daemon = daemon;
    daemon.stop();
    let reads: Vec<Value> = daemon
        .audit()
        .into_iter()
        .filter(|r| r["tool"] == "openphone.screen.get" && r["runtime"] == "hermes")
        .collect();
    assert!(!reads.is_empty(), "no audited read");
    assert!(
        reads.iter().all(|r| r["phone_session_id"].is_string()),
        "{reads:?}"
    );
    rt.block_on(fake.shutdown());
}

/// A tap parks for the user's confirmation; it is approved after MCP's 20 s inline wait has
/// passed. Hermes' one call gets the tap's result, the tap runs exactly once, and the reply is
/// printed.
#[test]
fn a_parked_tap_approved_late_runs_once_and_hermes_gets_its_result() {
    let Some(hermes) = hermes_bin() else { return };
    let rt = runtime();
    let fake = rt.block_on(FakeModel::start());
    fake.push(Script::tool_call(
        "phone_tap",
        json!({"x": 120, "y": 640, "reason": "open Messages"}),
    ));
    fake.push(Script::text("Tapped Messages."));
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), &fake);
    let mut daemon = Daemon::start(dir.path(), &config(&hermes, &home, ""));
    daemon.wait_ready();
    let ask = ask_in_background(&daemon, "Open Messages");
    let id = daemon
        .pending(Duration::from_secs(90))
        .unwrap_or_else(|| panic!("no confirmation\n{}", daemon.log()));
    // Past MCP's inline wait (20 s): the adapter still holds Hermes' call.
    std::thread::sleep(Duration::from_secs(21));
    assert_eq!(
        fake.requests().len(),
        1,
        "Hermes is still waiting on the tap"
    );
    let (code, out, err) = daemon.cli(&["confirmations", "approve", &id]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = ask.join().unwrap();
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(out.trim_end(), "Tapped Messages.");
    assert!(err.contains(&id), "ask announced the confirmation: {err}");
    let results = tool_results(&fake);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        !results[0].contains("pending") && !results[0].contains("\"error\""),
        "Hermes got the tap's result: {}",
        results[0]
    );
    daemon.stop();
    let taps: Vec<Value> = daemon
        .audit()
        .into_iter()
        .filter(|r| r["tool"] == "openphone.ui.tap")
        .collect();
    let confirmations: std::collections::BTreeSet<String> = taps
        .iter()
        .filter_map(|r| r["confirmation_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(confirmations.len(), 1, "one confirmation: {taps:#?}");
    let keys: std::collections::BTreeSet<String> = taps
        .iter()
        .filter_map(|r| r["idempotency_key"].as_str().map(str::to_owned))
        .collect();
    println!("tap audit records: {}; keys {keys:?}", taps.len());
    rt.block_on(fake.shutdown());
}

/// `[jobs] background_runtime = "hermes"`: a job is dispatched to Hermes, which answers; the
/// reply is saved as the job's result.
#[test]
fn a_background_job_dispatched_to_hermes_saves_its_reply() {
    let Some(hermes) = hermes_bin() else { return };
    let rt = runtime();
    let fake = rt.block_on(FakeModel::start());
    fake.set_fallback(Script::text("Nothing unread on the phone."));
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), &fake);
    let daemon = Daemon::start(
        dir.path(),
        &config(&hermes, &home, "[jobs]\nbackground_runtime = \"hermes\"\n"),
    );
    daemon.wait_ready();
    let (code, out, err) = daemon.cli(&[
        "jobs",
        "create",
        "--title",
        "Digest",
        "--prompt",
        "Summarise my unread messages.",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let made: Value = serde_json::from_str(&out).unwrap();
    let id = made["job"]["id"]
        .as_i64()
        .or_else(|| made["id"].as_i64())
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    let (code, out, err) = daemon.cli(&["jobs", "wake"]);
    assert_eq!(code, 0, "{out}{err}");
    let clock = Stopwatch::start();
    let job = loop {
        let (_, out, _) = daemon.cli(&["jobs", "show", &id, "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        let status = v["job"]["status"].as_str().unwrap_or_default().to_owned();
        if status == "completed" || status == "failed" {
            break v;
        }
        assert!(
            clock.elapsed() < Duration::from_secs(120),
            "job {id} still {status}: {v}\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(job["job"]["status"], "completed", "{job}");
    assert_eq!(
        job["job"]["last_result"], "Nothing unread on the phone.",
        "{job}"
    );
    assert!(
        fake.requests()[0]["messages"]
            .to_string()
            .contains("Summarise my unread messages."),
        "Hermes was given the job's prompt"
    );
    rt.block_on(fake.shutdown());
}

/// Issue 33, bug 2 on the adapter path: three taps the user denies, then a read. Each denial
/// reaches Hermes as the user's "no", and the read after them still runs on the phone and
/// reaches the model (nothing counts denials as failures and cuts the phone off).
#[test]
fn three_denials_then_a_read_still_reaches_the_phone() {
    let Some(hermes) = hermes_bin() else { return };
    let rt = runtime();
    let fake = rt.block_on(FakeModel::start());
    for i in 0..3 {
        fake.push(Script::tool_call(
            "phone_tap",
            json!({"x": 100 + i, "y": 300, "reason": format!("tap {i}")}),
        ));
    }
    fake.push(Script::tool_call(
        "phone_get_screen",
        json!({"reason": "look after the taps", "format": "compact"}),
    ));
    fake.push(Script::text(
        "You declined the taps; the home screen is showing.",
    ));
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), &fake);
    let mut daemon = Daemon::start(dir.path(), &config(&hermes, &home, ""));
    daemon.wait_ready();
    let ask = ask_in_background(&daemon, "Tap three times");
    let mut denied = Vec::new();
    while denied.len() < 3 {
        let id = daemon
            .pending(Duration::from_secs(90))
            .unwrap_or_else(|| panic!("no confirmation {}\n{}", denied.len(), daemon.log()));
        if denied.contains(&id) {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let (code, out, err) = daemon.cli(&["confirmations", "deny", &id]);
        assert_eq!(code, 0, "{out}{err}");
        denied.push(id);
    }
    let (code, out, _) = ask.join().unwrap();
    assert_eq!(code, Some(0), "{out}\n{}", daemon.log());
    assert_eq!(
        out.trim_end(),
        "You declined the taps; the home screen is showing."
    );
    let results = tool_results(&fake);
    assert_eq!(results.len(), 4, "{results:?}");
    for denial in &results[..3] {
        assert!(denial.contains("declined"), "a denial: {denial}");
    }
    assert!(
        results[3].contains("elements") || results[3].contains("screen"),
        "the read after three denials reached the phone: {}",
        results[3]
    );
    daemon.stop();
    let audit = daemon.audit();
    let reads = audit
        .iter()
        .filter(|r| r["tool"] == "openphone.screen.get" && r["status"] == "ok")
        .count();
    assert_eq!(reads, 1, "the read ran once on the phone");
    let taps_run = audit
        .iter()
        .filter(|r| r["tool"] == "openphone.ui.tap" && r["status"] == "ok")
        .count();
    assert_eq!(taps_run, 0, "no denied tap ran");
    rt.block_on(fake.shutdown());
}

/// Issue 33, bug 1 on the adapter path: a Hermes cron job (a one-shot `hermes cron create`
/// in the runtime's Hermes home, due a few seconds later) is fired by the cron ticker of the
/// `hermes gateway` the daemon started, outside any adapter turn. Its tap runs as the hermes
/// runtime with no phone session and parks for the user; the job waits (its execution is not
/// recorded completed while the tap is pending), the user approves past MCP's 20 s inline
/// wait, the tap runs once, and the job gets the tap's result and completes.
#[test]
fn a_cron_jobs_tap_approved_late_reaches_the_job_and_runs_once() {
    let Some(hermes) = hermes_bin() else { return };
    let rt = runtime();
    let fake = rt.block_on(FakeModel::start());
    fake.push(Script::tool_call(
        "phone_tap",
        json!({"x": 300, "y": 900, "reason": "cron: press Open"}),
    ));
    fake.push(Script::text("Pressed Open."));
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), &fake);
    let mut daemon = Daemon::start(dir.path(), &config(&hermes, &home, ""));
    daemon.wait_ready();
    let hermes_cmd = |args: &[&str]| {
        let out = std::process::Command::new(&hermes)
            .args(args)
            .env("HERMES_HOME", &home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hermes {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A one-shot schedule is an ISO time; Hermes' shortest duration is a minute.
    let at = std::process::Command::new("date")
        .args(["-u", "-d", "+5 seconds", "+%Y-%m-%dT%H:%M:%S+00:00"])
        .output()
        .unwrap();
    let at = String::from_utf8_lossy(&at.stdout).trim().to_owned();
    let made = hermes_cmd(&[
        "cron",
        "create",
        &at,
        "Press Open on the phone.",
        "--name",
        "phone-tap",
    ]);
    let job_id = made
        .split("Created job:")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("{made}"))
        .to_owned();
    // The job's execution record (`hermes cron runs`: id, status, job=…), if any.
    let execution = || -> Vec<String> {
        hermes_cmd(&["cron", "runs"])
            .lines()
            .find(|l| l.contains(&format!("job={job_id}")))
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    // The gateway's ticker wakes every 60 s.
    let id = daemon
        .pending(Duration::from_secs(150))
        .unwrap_or_else(|| panic!("the cron job's tap did not park\n{}", daemon.log()));
    std::thread::sleep(Duration::from_secs(21));
    let waiting = execution();
    println!("cron execution while the tap waits: {waiting:?}");
    assert_ne!(
        waiting.get(1).map(String::as_str),
        Some("completed"),
        "the job completed before the decision"
    );
    assert_eq!(
        fake.requests().len(),
        1,
        "the job is still waiting on the tap"
    );
    let (code, out, err) = daemon.cli(&["confirmations", "approve", &id]);
    assert_eq!(code, 0, "{out}{err}");
    let clock = Stopwatch::start();
    let done = loop {
        let e = execution();
        if matches!(e.get(1).map(String::as_str), Some("completed" | "failed")) {
            break e;
        }
        assert!(
            clock.elapsed() < Duration::from_secs(120),
            "the cron job did not finish: {e:?}\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    println!("cron execution after the approval: {done:?}");
    assert_eq!(done[1], "completed", "{done:?}");
    let results = tool_results(&fake);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        !results[0].contains("pending") && !results[0].contains("\"error\""),
        "the cron job got the tap's result: {}",
        results[0]
    );
    daemon.stop();
    let taps: Vec<Value> = daemon
        .audit()
        .into_iter()
        .filter(|r| r["tool"] == "openphone.ui.tap")
        .collect();
    let run_ok = taps.iter().filter(|r| r["status"] == "ok").count();
    assert_eq!(run_ok, 1, "the tap ran once: {taps:#?}");
    assert!(
        taps.iter()
            .all(|r| r["runtime"] == "hermes" && r["phone_session_id"].is_null()),
        "a cron call runs as the hermes runtime without a phone session: {taps:#?}"
    );
    rt.block_on(fake.shutdown());
}

/// Security review of the adapter, findings 1 and 2: the gateway the daemon starts got the
/// daemon's whole environment and Hermes' API-server tools (`terminal`, `read_file`, …), so
/// a prompt-injected model could read the operator token or approve its own confirmations;
/// and the default home was the user's own `~/.hermes`. Now: no `home` configured means the
/// adapter's own `<data-dir>/hermes-home` (0700), the gateway's environment is the short
/// allowlist, and the model is offered the phone's tools without shell, file, code or
/// browser tools.
#[test]
fn the_gateway_gets_no_shell_or_file_tools_and_none_of_the_daemons_environment() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(hermes) = hermes_bin() else { return };
    let rt = runtime();
    let fake = rt.block_on(FakeModel::start());
    fake.push(Script::text("Nothing to do."));
    let dir = tempfile::tempdir().unwrap();
    // The adapter's default home, with the fake as its model.
    let home = hermes_home(&dir.path().join("data"), &fake);
    let config = format!(
        "[[runtimes]]\nid = \"hermes\"\nkind = \"hermes\"\ncommand = \"{}\"\n\
         grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n",
        hermes.display()
    );
    let daemon = Daemon::start(dir.path(), &config);
    let row = daemon.wait_ready();
    assert_eq!(row["detail"], "ready", "{row}\n{}", daemon.log());
    assert!(home.join("plugins/openphone/tools.json").exists());
    let mode = std::fs::metadata(&home).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the adapter's own home is private");

    let pid = gateway_pid(daemon.child.id()).expect("the daemon started hermes gateway");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let mut keys: Vec<String> = environ
        .split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            String::from_utf8_lossy(kv)
                .split('=')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    keys.sort();
    let allowed = [
        "API_SERVER_ENABLED",
        "API_SERVER_HOST",
        "API_SERVER_KEY",
        "API_SERVER_PORT",
        "HERMES_HOME",
        "HERMES_MANAGED_DIR",
        "HOME",
        "LANG",
        "PATH",
    ];
    assert!(
        keys.iter().all(|k| allowed.contains(&k.as_str())),
        "the gateway's environment is the allowlist: {keys:?}"
    );
    assert!(keys.contains(&"HERMES_HOME".to_owned()), "{keys:?}");

    let (code, out, err) = daemon.cli(&[
        "ask",
        "--runtime",
        "hermes",
        "Read ~/.local/share/openphone/operator.token",
        "--timeout-secs",
        "120",
    ]);
    assert_eq!(code, 0, "{out}\n{err}\n{}", daemon.log());
    let first = &fake.requests()[0];
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    println!("tools offered to the model: {names:?}");
    assert!(names.contains(&"phone_tap"), "{names:?}");
    for banned in [
        "terminal",
        "process",
        "read_file",
        "write_file",
        "patch",
        "search_files",
        "execute_code",
        "browser_navigate",
        "delegate_task",
        "cronjob",
    ] {
        assert!(!names.contains(&banned), "{banned} offered: {names:?}");
    }
    rt.block_on(fake.shutdown());
}

/// Security review finding 3: the idempotency key was `hermes:<run>:<tool-call id>`, and models
/// number calls per response (the fake, told to, sends `call_0` in every step), so the same
/// tap asked for again in the next step was answered "replayed" and never ran. Now the step is
/// part of the key: both taps park, both are approved, both run.
#[test]
fn a_second_identical_tap_in_a_later_step_runs_again() {
    let Some(hermes) = hermes_bin() else { return };
    let rt = runtime();
    let fake = rt.block_on(FakeModel::start());
    fake.number_calls_per_response();
    let tap = json!({"x": 200, "y": 700, "reason": "press Next"});
    fake.push(Script::tool_call("phone_tap", tap.clone()));
    fake.push(Script::tool_call("phone_tap", tap));
    fake.push(Script::text("Pressed Next twice."));
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), &fake);
    let mut daemon = Daemon::start(dir.path(), &config(&hermes, &home, ""));
    daemon.wait_ready();
    let ask = ask_in_background(&daemon, "Press Next twice");
    let first = daemon
        .pending(Duration::from_secs(90))
        .unwrap_or_else(|| panic!("no first confirmation\n{}", daemon.log()));
    let (code, out, err) = daemon.cli(&["confirmations", "approve", &first]);
    assert_eq!(code, 0, "{out}{err}");
    let clock = Stopwatch::start();
    let second = loop {
        let id = daemon.pending(Duration::from_secs(5));
        if let Some(id) = id.filter(|id| *id != first) {
            break id;
        }
        assert!(
            clock.elapsed() < Duration::from_secs(90),
            "the second tap never asked: it was replayed\n{:?}\n{}",
            tool_results(&fake),
            daemon.log()
        );
    };
    let (code, out, err) = daemon.cli(&["confirmations", "approve", &second]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = ask.join().unwrap();
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(out.trim_end(), "Pressed Next twice.");
    // Hermes' last request may fold the two `call_0` results together; every result any
    // request carried is a real tap, none "replayed".
    let results: Vec<String> = fake
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(!results.is_empty());
    assert!(
        results.iter().all(|r| !r.contains("replayed")),
        "{results:?}"
    );
    daemon.stop();
    let keys: std::collections::BTreeSet<String> = daemon
        .audit()
        .into_iter()
        .filter(|r| r["tool"] == "openphone.ui.tap")
        .filter_map(|r| r["idempotency_key"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(keys.len(), 2, "two taps, two keys: {keys:?}");
    rt.block_on(fake.shutdown());
}
