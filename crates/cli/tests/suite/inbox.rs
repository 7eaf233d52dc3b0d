//! Issue 31, item 1 ("two queues, and one of them is invisible") and the id-prefix and expiry
//! parts of item 6, with the real binary against a real daemon: a background job's review shows
//! in `openphone status`, `openphone inbox` and `openphone confirmations list`; `confirmations
//! approve job-confirm-…` decides it instead of answering "unknown"; every kind — runtime
//! confirmation, job review, goal approval — is approved by a unique prefix of its short id; an
//! ambiguous prefix is refused naming the candidates; an expired one says when it expired; and
//! a review whose record changed after it was parked is still refused.

use std::path::Path;
use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use serde_json::{Value, json};

use super::goals::{action, dentist, goals};
use super::harness::{Runtime, Serve, cli, cli_async, fake_model_config, jobs_json, serve};

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// `openphone args… --json`: the parsed output (the command must succeed).
async fn cli_json(args: &[&str], data: &Path) -> Value {
    let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    all.push("--json".into());
    let (code, out, err) = cli_async(all, data).await;
    assert_eq!(code, 0, "{args:?}: {out} {err}");
    json_of(&out)
}

async fn operator(url: &str, data: &Path) -> Runtime {
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    Runtime::connect_as(url, token.trim(), "operator").await
}

/// A daemon whose background job wants to send `body`, parked for review: the daemon, the
/// fake model, the job id and the review's id.
async fn parked(tmp: &Path, data: &Path, body: &str) -> (Serve, FakeModel, String, String) {
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "messages_send",
        json!({"to": "+49 151 2345 6789", "body": body, "reason": "tell Alice"}),
    ));
    let daemon = serve(data, &fake_model_config(tmp, &fake));
    let (id, cid) = park(data, body).await;
    (daemon, fake, id, cid)
}

/// Creates a job and runs it until it parks its call for review: the job id and review id.
async fn park(data: &Path, title: &str) -> (String, String) {
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
            let cid = shown["job"]["pending_confirmation_id"].as_str().unwrap();
            return (id, cid.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("job {id} never parked");
}

/// How many messages on the phone have exactly `text` as their body.
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
    json_of(&out)["result"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["body"] == text)
        .count()
}

/// The inbox item with `id`.
fn item<'a>(inbox: &'a Value, id: &str) -> &'a Value {
    inbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not in the inbox: {inbox}"))
}

/// A tap asked for through `tools invoke --no-wait` (it needs confirmation): its id.
fn asked_tap(data: &Path, timeout_secs: &str) -> String {
    let (code, out, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.ui.tap",
            r#"{"x":1,"y":1,"reason":"open the app"}"#,
            "--no-wait",
            "--timeout-secs",
            timeout_secs,
            "--json",
        ],
        data,
    );
    assert_eq!(code, 3, "{out}{err}");
    json_of(&out)["result"]["confirmation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no confirmation id: {out}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_review_shows_in_status_and_confirmations_list() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "messages_send",
        json!({"to": "+49 151 2345 6789", "body": "Running late", "reason": "tell Alice"}),
    ));
    let daemon = serve(&data, &fake_model_config(tmp.path(), &fake));
    // A surface learns that the review waits from `background_job.review_required`.
    let mut op = operator(&daemon.url, &data).await;
    let subscribed = op
        .call(
            "events.subscribe",
            json!({"events": ["background_job.review_required"]}),
        )
        .await;
    assert!(subscribed["result"].is_object(), "{subscribed}");
    let (_, cid) = park(&data, "Tell Alice").await;
    let announced = op.event("background_job.review_required").await;
    assert_eq!(announced["confirmation_id"], cid.as_str(), "{announced}");

    // `status` counts it by kind (it used to say "pending confirmations: 0").
    let status = cli_json(&["status"], &data).await;
    assert_eq!(status["pending"]["job_review"], 1, "{status}");
    assert_eq!(status["pending"]["total"], 1, "{status}");
    assert_eq!(status["pending_confirmations"], 1, "{status}");
    let (code, out, err) = cli(&["status"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("waiting for you: 1 (0 confirmations, 1 job review, 0 goal approvals)"),
        "{out}"
    );

    // The inbox and `confirmations list` show it, with its short id.
    let inbox = cli_json(&["inbox"], &data).await;
    let review = item(&inbox, &cid);
    assert_eq!(review["kind"], "job_review", "{inbox}");
    assert_eq!(review["state"], "pending", "{inbox}");
    assert_eq!(review["tool"], "messages_send", "{inbox}");
    assert_eq!(
        review["short_id"],
        &cid["job-confirm-".len()..][..8],
        "{inbox}"
    );
    assert_eq!(inbox["counts"]["job_review"], 1, "{inbox}");
    let (code, out, err) = cli(&["confirmations", "list"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&cid) && out.contains("job review"), "{out}");
    let listed = cli_json(&["confirmations", "list"], &data).await;
    assert_eq!(listed["confirmations"], json!([]), "{listed}");
    assert_eq!(item(&listed, &cid)["kind"], "job_review");

    // `confirmations approve job-confirm-…` decides it (it used to say "unknown, expired or
    // already resolved"): the call runs once, and the inbox is empty again.
    let (code, out, err) = cli(&["confirmations", "approve", &cid], &data);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("the call ran once"), "{out}");
    assert_eq!(messages_with(&data, "Running late"), 1);
    let inbox = cli_json(&["inbox"], &data).await;
    assert_eq!(inbox["counts"]["total"], 0, "{inbox}");
    let (code, out, err) = cli(&["inbox"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Nothing waits for you"), "{out}");
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_is_approved_by_a_prefix_of_its_short_id() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (daemon, _fake, job, review) = parked(tmp.path(), &data, "On my way").await;

    // A goal whose calendar edit waits for approval, and a runtime's tap.
    let file = dentist(tmp.path(), false);
    let made = goals(&["create", file.to_str().unwrap()], &data).await;
    let goal = made["goal"]["id"].as_str().unwrap().to_owned();
    let mut approval = None;
    for _ in 0..200 {
        let shown = goals(&["show", &goal], &data).await;
        if action(&shown["goal"], "move")["state"] == "NEEDS_APPROVAL" {
            approval = shown["goal"]["blockers"][0]["resume_token"]
                .as_str()
                .map(str::to_owned);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let approval = approval.expect("the goal's edit never waited for approval");
    let tap = asked_tap(&data, "300");

    let inbox = cli_json(&["inbox"], &data).await;
    assert_eq!(
        inbox["counts"],
        json!({"confirmation": 1, "job_review": 1, "goal_approval": 1, "total": 3}),
        "{inbox}"
    );
    let of_goal = item(&inbox, &approval);
    assert_eq!(of_goal["kind"], "goal_approval", "{inbox}");
    assert_eq!(of_goal["goal_id"], goal.as_str(), "{inbox}");
    assert_eq!(of_goal["action_id"], "move", "{inbox}");
    assert_eq!(item(&inbox, &tap)["kind"], "confirmation", "{inbox}");
    let status = cli_json(&["status"], &data).await;
    assert_eq!(status["pending"], inbox["counts"], "{status}");

    // Six characters of each short id are enough; each goes to its own path.
    for (id, kind) in [
        (&review, "job_review"),
        (&approval, "goal_approval"),
        (&tap, "confirmation"),
    ] {
        let short = item(&inbox, id)["short_id"].as_str().unwrap().to_owned();
        let answer = cli_json(&["inbox", "approve", &short[..6]], &data).await;
        assert_eq!(answer["id"], id.as_str(), "{answer}");
        assert_eq!(answer["kind"], kind, "{answer}");
        assert_eq!(answer["outcome"], "approved", "{answer}");
    }
    assert_eq!(messages_with(&data, "On my way"), 1);
    let (_, shown, _) = jobs_json(&["show", &job], &data).await;
    assert_ne!(shown["job"]["status"], "awaiting_review", "{shown}");
    // The goal moves on once its engine hears of the approval.
    let mut shown = Value::Null;
    for _ in 0..200 {
        shown = goals(&["show", &goal], &data).await;
        if action(&shown["goal"], "move")["state"] != "NEEDS_APPROVAL" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(
        action(&shown["goal"], "move")["state"],
        "NEEDS_APPROVAL",
        "{shown}"
    );
    // Decided items leave the inbox (the goal's next step may ask anew).
    let inbox = cli_json(&["inbox"], &data).await;
    for id in [&review, &approval, &tap] {
        assert!(!inbox.to_string().contains(id.as_str()), "{id}: {inbox}");
    }
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_or_unknown_prefix_is_refused_naming_the_candidates_or_the_inbox() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let daemon = serve(&data, &super::harness::write_config(tmp.path()));
    let first = asked_tap(&data, "300");
    let second = asked_tap(&data, "300");

    // `runtime-confirm-` begins both ids but names neither (a kind prefix alone is not an id):
    // refused, nothing decided. (Two uuids sharing a prefix: the unit test in inbox.rs.)
    let (code, out, err) = cli(&["inbox", "approve", "runtime-confirm-"], &data);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("too short"), "{err}");
    assert!(first != second);
    let inbox = cli_json(&["inbox"], &data).await;
    assert_eq!(inbox["counts"]["confirmation"], 2, "{inbox}");

    // Too short, and no match at all.
    let (code, _, err) = cli(&["inbox", "deny", "ab"], &data);
    assert_ne!(code, 0);
    assert!(err.contains("at least 4 characters"), "{err}");
    let (code, _, err) = cli(&["inbox", "deny", "zzzzzz"], &data);
    assert_ne!(code, 0);
    assert!(err.contains("`openphone inbox`"), "{err}");

    // `confirmations deny` takes a prefix too.
    let short = &first["runtime-confirm-".len()..][..8];
    let (code, out, err) = cli(&["confirmations", "deny", short], &data);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("denied {first}: the request finished with status denied")
    );
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_confirmation_says_when_it_expired() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let daemon = serve(&data, &super::harness::write_config(tmp.path()));
    let id = asked_tap(&data, "1");
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Gone from the inbox; listed as expired with `--all`.
    let inbox = cli_json(&["inbox"], &data).await;
    assert_eq!(inbox["items"], json!([]), "{inbox}");
    let all = cli_json(&["inbox", "--all"], &data).await;
    assert_eq!(item(&all, &id)["state"], "expired", "{all}");
    assert_eq!(all["counts"]["total"], 0, "{all}");
    let (code, out, err) = cli(&["inbox", "--all"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("EXPIRED at"), "{out}");

    // Approving it, by prefix or by the full id through the old name, says when it expired.
    let short = &id["runtime-confirm-".len()..][..8];
    for args in [
        vec!["inbox", "approve", short],
        vec!["confirmations", "approve", id.as_str()],
    ] {
        let (code, out, err) = cli(&args, &data);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(err.contains("expired at"), "{args:?}: {err}");
        assert!(err.contains("UTC"), "{args:?}: {err}");
    }
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_whose_params_changed_after_parking_is_refused_through_the_inbox() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (daemon, _fake, job, cid) = parked(tmp.path(), &data, "See you at 6").await;

    // Someone with the data file rewrites what the review would send.
    let db = rusqlite::Connection::open(data.join("openphone.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let changed = db
        .execute(
            "UPDATE agent_jobs SET pending_tool_request_json = \
             json_set(pending_tool_request_json, '$.params.body', 'send me your codes') \
             WHERE id = ?1",
            [job.parse::<i64>().unwrap()],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);

    // Approved by prefix: the digests no longer match, so nothing is sent.
    let short = &cid["job-confirm-".len()..][..8];
    let (code, out, err) = cli(&["inbox", "approve", short, "--json"], &data);
    assert_eq!(code, 1, "{out} {err}");
    let answer = json_of(&out);
    assert_eq!(answer["outcome"], "refused", "{answer}");
    assert_eq!(
        answer["result"]["result_status"], "background.review_error",
        "{answer}"
    );
    assert_eq!(messages_with(&data, "send me your codes"), 0);
    assert_eq!(messages_with(&data, "See you at 6"), 0);
    drop(daemon);
}
