//! Issue 18: goals in the real daemon — `openphone goals …` against `openphone serve`, the
//! operator-only `goals.*` methods, the `goal.*` events, the approval path through
//! `openphone confirmations approve`, delivery of the reports to the phone's shade, and the
//! export of a goal with its audit slice.

use std::path::{Path, PathBuf};
use std::time::Duration;

use openphone_clock::{Clock, SystemClock};
use serde_json::{Value, json};

use super::harness::{Runtime, cli, cli_async, serve, write_config};

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

pub(super) async fn goals(args: &[&str], data: &Path) -> Value {
    let mut all: Vec<String> = vec!["goals".into()];
    all.extend(args.iter().map(|s| (*s).to_owned()));
    all.push("--json".into());
    let (code, out, err) = cli_async(all, data).await;
    assert_eq!(code, 0, "goals {args:?}: {out} {err}");
    json_of(&out)
}

async fn operator(url: &str, data: &Path) -> Runtime {
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    Runtime::connect_as(url, token.trim(), "operator").await
}

/// The dentist goal of `crates/goals/examples`, for the real daemon: the deadline nine hours
/// from now, the reports to the phone's shade, and without the `agent_turn` step (no runtime
/// backend is attached to goals in the daemon yet).
pub(super) fn dentist(dir: &Path, with_expect: bool) -> PathBuf {
    let deadline = SystemClock.now_ms() + 9 * 3_600_000;
    let moved =
        json!({"pointer": "/events/0/start_at", "op": "equals", "value": 1_773_410_400_000_i64});
    let mut criteria = vec![json!({"id": "all_done", "description": "every step done",
                                   "check": {"kind": "all_actions_done"}})];
    let mut mv = json!({"id": "move", "title": "Move the dentist appointment to Friday",
        "kind": "tool", "command": "openphone.calendar.update",
        "params": {"event_id": 103, "start_at": 1_773_410_400_000_i64, "duration_minutes": 45},
        "depends_on": ["find"], "estimate_ms": 120_000});
    if with_expect {
        criteria.insert(
            0,
            json!({"id": "moved", "description": "the dentist is on Friday",
                   "check": {"kind": "tool_predicate", "command": "openphone.calendar.search",
                             "params": {"query": "Dentist"}, "predicate": moved}}),
        );
        mv["expect"] = json!({"command": "openphone.calendar.search",
                              "params": {"query": "Dentist"}, "predicate": moved});
    }
    let goal = json!({"goal": {
        "objective": "by 18:00 move my dentist appointment to Friday and tell Alice",
        "deadline_at": deadline,
        "delivery": "notification",
        // Telling Alice is a high-risk command: the goal must be allowed that much.
        "risk_level": "high",
        "success_criteria": criteria,
        "plan": [
            {"id": "find", "title": "Find the dentist appointment", "kind": "tool",
             "command": "openphone.calendar.search", "params": {"query": "Dentist"}},
            mv,
            {"id": "tell", "title": "Tell Alice about Friday", "kind": "tool",
             "command": "openphone.messages.send",
             "params": {"to": "+49 151 2345 6789", "body": "My dentist appointment moved to Friday."},
             "depends_on": ["move"]}
        ]
    }});
    let path = dir.join("dentist.goal.json");
    std::fs::write(&path, serde_json::to_string_pretty(&goal).unwrap()).unwrap();
    path
}

pub(super) fn action<'a>(goal: &'a Value, id: &str) -> &'a Value {
    goal["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no action {id}: {goal}"))
}

/// Polls `goals show` until `done(goal)` holds (up to 20 s, counted polls).
async fn until(data: &Path, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = goals(&["show", id], data).await;
        if done(&last["goal"]) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("goal {id} never reached {what}: {last}");
}

/// Runs a `how_to_resolve` line (`openphone …`) as the user would type it.
async fn run_line(line: &str, data: &Path) -> (i32, String, String) {
    let words: Vec<String> = line
        .strip_prefix("openphone ")
        .unwrap_or_else(|| panic!("not an openphone command: {line}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    cli_async(words, data).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_parks_for_approval_runs_once_approved_verifies_and_reports_done_in_the_shade() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let serve = serve(&data, &write_config(tmp.path()));
    let mut op = operator(&serve.url, &data).await;
    let subscribed = op
        .call(
            "events.subscribe",
            json!({"events": ["goal.created", "goal.approval.requested",
                              "goal.approval.resolved", "goal.report"]}),
        )
        .await;
    assert!(subscribed["result"].is_object(), "{subscribed}");

    // Created from the CLI: the read runs at once, the calendar edit parks for approval.
    let file = dentist(tmp.path(), true);
    let made = goals(&["create", file.to_str().unwrap()], &data).await;
    let id = made["goal"]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("goal_"), "{made}");
    let created = op.event("goal.created").await;
    assert_eq!(created["goal_id"], id.as_str(), "{created}");
    let requested = op.event("goal.approval.requested").await;
    assert_eq!(requested["action_id"], "move", "{requested}");
    let shown = goals(&["show", &id], &data).await;
    let goal = &shown["goal"];
    assert_eq!(action(goal, "find")["state"], "DONE", "{shown}");
    assert_eq!(action(goal, "move")["state"], "NEEDS_APPROVAL", "{shown}");
    assert_eq!(goal["state"], "blocked", "{shown}");
    let blocker = &goal["blockers"][0];
    assert_eq!(blocker["kind"], "approval", "{shown}");
    let cid = requested["confirmation_id"].as_str().unwrap();
    assert_eq!(
        blocker["how_to_resolve"],
        format!("openphone confirmations approve {cid}"),
        "{shown}"
    );

    // `goals approve` resolves the action's confirmation: the stored request runs once.
    let approved = goals(&["approve", &id, "move"], &data).await;
    assert_eq!(approved["status"], "ok", "{approved}");
    let resolved = op.event("goal.approval.resolved").await;
    assert_eq!(resolved["action_id"], "move", "{resolved}");

    // The message parks next; its blocker's line is a real command: run it as written.
    let shown = until(&data, &id, "tell waiting", |g| {
        action(g, "tell")["state"] == "NEEDS_APPROVAL"
    })
    .await;
    assert_eq!(action(&shown["goal"], "move")["state"], "DONE", "{shown}");
    let line = shown["goal"]["blockers"][0]["how_to_resolve"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, out, err) = run_line(&format!("{line} --json"), &data).await;
    assert_eq!(code, 0, "{line}: {out} {err}");

    // Verified (the criteria read the phone) and done; the report reaches the shade.
    let done = until(&data, &id, "done", |g| g["state"] == "done").await;
    assert!(
        done["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["action_id"] == "move"
                && t["to_state"] == "DONE"
                && t["source"] == "verifier"),
        "{done}"
    );
    let mut shown = done;
    for _ in 0..100 {
        if shown["reports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["report"]["state"] == "done" && r["delivery"] == "sent")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        shown = goals(&["show", &id], &data).await;
    }
    let reports = shown["reports"].as_array().unwrap();
    assert!(
        reports
            .iter()
            .any(|r| r["report"]["state"] == "done" && r["delivery"] == "sent"),
        "{shown}"
    );
    let (code, shade, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.notifications.list",
            r#"{"reason": "see the goal's report"}"#,
            "--json",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        shade.contains("move my dentist appointment to Friday and tell Alice"),
        "the report is in the shade: {shade}"
    );
    let report = op.event("goal.report").await;
    assert_eq!(report["goal_id"], id.as_str(), "{report}");

    // Explain names the decision and the attempts; the export bundles artifacts and audit.
    let (code, explained, err) = cli(&["goals", "explain", &id, "move"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(explained.contains("state: DONE"), "{explained}");
    assert!(explained.contains(&format!("{id}:move:1")), "{explained}");
    let out = tmp.path().join("export");
    let exported = goals(&["export", &id, "--out", out.to_str().unwrap()], &data).await;
    assert_eq!(exported["audit_intact"], true, "{exported}");
    for file in [
        "plan.json",
        "status.md",
        "transitions.json",
        "goal.json",
        "audit.jsonl",
    ] {
        assert!(out.join(file).is_file(), "{file} missing: {exported}");
    }
    let slice = std::fs::read_to_string(out.join("audit.jsonl")).unwrap();
    assert!(
        slice.contains("goals.create"),
        "the operator's act: {slice}"
    );
    assert!(
        slice.contains("openphone.calendar.update"),
        "the action's request: {slice}"
    );
    assert!(
        slice.lines().all(|l| l.contains(&id)),
        "only this goal's records: {slice}"
    );
    let (code, all, _) = cli(&["audit", "export", "--goal", &id], &data);
    assert_eq!(code, 0);
    assert_eq!(all, slice, "audit export --goal is the same slice");
    let (code, out, _) = cli(&["audit", "verify"], &data);
    assert_eq!(code, 0, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goal_commands_answer_retry_pause_abort_and_refuse_bad_input_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let serve = serve(&data, &write_config(tmp.path()));

    // A question for the user: the goal waits, `goals answer` moves it on.
    let file = tmp.path().join("ask.json");
    std::fs::write(
        &file,
        json!({"objective": "pick a day", "delivery": "none",
               "plan": [{"id": "ask", "title": "Which day?", "kind": "ask_user",
                         "question": "Which day suits you?"}]})
        .to_string(),
    )
    .unwrap();
    let made = goals(&["create", file.to_str().unwrap()], &data).await;
    let id = made["goal"]["id"].as_str().unwrap().to_owned();
    assert_eq!(made["goal"]["state"], "blocked", "{made}");
    assert_eq!(
        made["goal"]["blockers"][0]["how_to_resolve"],
        format!("openphone goals answer {id} ask \"<your answer>\""),
        "{made}"
    );
    let listed = goals(&["list", "--state", "blocked"], &data).await;
    assert_eq!(listed["count"], 1, "{listed}");
    let answered = goals(&["answer", &id, "ask", "Friday"], &data).await;
    assert_eq!(answered["goal"]["state"], "done", "{answered}");

    // A long wait keeps the goal active: pause, resume, a retry with nothing blocked, abort.
    let file = tmp.path().join("wait.json");
    std::fs::write(
        &file,
        json!({"objective": "wait a while", "delivery": "none",
               "plan": [{"id": "later", "title": "Later", "kind": "wait",
                         "until_ms": SystemClock.now_ms() + 3_600_000}]})
        .to_string(),
    )
    .unwrap();
    let made = goals(&["create", file.to_str().unwrap()], &data).await;
    let wid = made["goal"]["id"].as_str().unwrap().to_owned();
    assert_eq!(action(&made["goal"], "later")["state"], "RUNNING", "{made}");
    let paused = goals(&["pause", &wid], &data).await;
    assert_eq!(paused["goal"]["state"], "paused", "{paused}");
    let (code, _, err) = cli(&["goals", "pause", &wid, "--json"], &data);
    assert_eq!(code, 0, "pausing twice is harmless: {err}");
    let resumed = goals(&["resume", &wid], &data).await;
    assert_eq!(resumed["goal"]["state"], "active", "{resumed}");
    let (code, _, err) = cli(&["goals", "retry", &wid], &data);
    assert_ne!(code, 0);
    assert!(err.contains("invalid_params"), "nothing is blocked: {err}");
    let aborted = goals(&["abort", &wid], &data).await;
    assert_eq!(aborted["goal"]["state"], "aborted", "{aborted}");
    assert_eq!(action(&aborted["goal"], "later")["state"], "ABORTED");

    // Bad input names the field; unknown ids have their own codes.
    let bad = tmp.path().join("bad.json");
    std::fs::write(
        &bad,
        json!({"objective": "x", "plan": [{"id": "a", "title": "A", "kind": "tool",
                                           "command": "openphone.nope", "params": {}}]})
        .to_string(),
    )
    .unwrap();
    let (code, _, err) = cli(&["goals", "create", bad.to_str().unwrap()], &data);
    assert_ne!(code, 0);
    assert!(err.contains("plan[0]"), "{err}");
    let (code, _, err) = cli(&["goals", "show", "goal_nope"], &data);
    assert_ne!(code, 0);
    assert!(err.contains("goal_not_found"), "{err}");
    let (code, _, err) = cli(&["goals", "explain", &id, "nope"], &data);
    assert_ne!(code, 0);
    assert!(err.contains("goal_action_not_found"), "{err}");
    let (code, _, err) = cli(&["goals", "list", "--state", "sleepy"], &data);
    assert_ne!(code, 0);
    assert!(err.contains("state"), "{err}");

    // A runtime may not use the operator's goal methods.
    let mut rt = Runtime::connect(&serve.url).await;
    let refused = rt.call("goals.list", json!({})).await;
    assert_eq!(refused["error"]["data"]["code"], "forbidden", "{refused}");
}

/// Issue 32 item 6 on the real binary: a step the goal's risk ceiling denies gets the
/// planner's alternative, and `goals show` and `goals explain` say why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goals_show_and_explain_say_why_the_planner_proposed_a_draft() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let _serve = serve(&data, &write_config(tmp.path()));
    let file = tmp.path().join("tell.goal.json");
    let goal = json!({"objective": "tell Alice the dentist moved", "risk_level": "medium",
        "plan": [{"id": "tell", "title": "Tell Alice", "kind": "tool",
                  "command": "openphone.messages.send",
                  "params": {"to": "+49 151 2345 6789", "body": "The dentist moved to Friday."}}]});
    std::fs::write(&file, goal.to_string()).unwrap();
    let made = goals(&["create", file.to_str().unwrap()], &data).await;
    let id = made["goal"]["id"].as_str().unwrap().to_owned();
    let shown = until(&data, &id, "a proposal", |g| {
        g["actions"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["id"] == "tell-safer"))
    })
    .await;
    let safer = action(&shown["goal"], "tell-safer");
    assert_eq!(safer["command"], "openphone.messages.draft", "{shown}");
    assert_eq!(safer["proposal"]["by"], "manifest", "{shown}");

    let (code, out, err) = cli_async(vec!["goals".into(), "show".into(), id.clone()], &data).await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(
        out.contains("proposed by the planner (manifest): tell would be denied by goal_risk"),
        "{out}"
    );
    let (code, out, err) = cli_async(
        vec!["goals".into(), "explain".into(), id.clone(), "tell".into()],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(
        out.contains("the planner proposed tell-safer (tool) in its place"),
        "{out}"
    );
}
