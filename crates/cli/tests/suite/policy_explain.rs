//! `openphone policy explain` against a real daemon: every outcome of the stack explained with
//! the change that would alter it, and the explanation a real denied or waiting call carries
//! (`error.details.explanation`) agreeing with the dry run.

use std::path::Path;

use serde_json::{Value, json};

use super::harness::{Runtime, TOKEN, cli_async, serve, terminate};

/// hermes: reads and `dangerous`, but not `private_read`; swipes denied for it by name, and
/// every `calls` command for everyone. watcher: may never go beyond `observe_only`.
fn config(dir: &Path) -> String {
    let path = dir.join("openphone.toml");
    std::fs::write(
        &path,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             grants = [\"safe_read\", \"dangerous\"]\n\n\
             [[runtimes]]\nid = \"watcher\"\ntoken = \"watcher-cli-test-token-0123456789\"\n\
             grants = [\"safe_read\", \"dangerous\"]\nmax_autonomy = \"observe_only\"\n\n\
             [tool_policy.global]\ndeny = [\"group:calls\"]\n\n\
             [tool_policy.runtimes.hermes]\ndeny = [\"openphone.ui.swipe\"]\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// `openphone policy explain <args> --json`: the explanation (exit 0 asserted).
async fn explain(data: &Path, args: &[&str]) -> Value {
    let mut all: Vec<String> = vec!["policy".into(), "explain".into()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all.push("--json".into());
    let (code, out, err) = cli_async(all, data).await;
    assert_eq!(code, 0, "{out}{err}");
    serde_json::from_str(&out).unwrap()
}

fn kinds(e: &Value) -> Vec<&str> {
    e["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect()
}

const TAP: &str = r#"{"x":540,"y":1200}"#;
const SWIPE: &str = r#"{"start_x":1,"start_y":2,"end_x":3,"end_y":400}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_is_explained_with_what_would_change_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut daemon = serve(&data, &config(tmp.path()));

    // a read: allowed, nothing to change
    let e = explain(
        &data,
        &["openphone.screen.get", "{}", "--runtime", "hermes"],
    )
    .await;
    assert_eq!(e["decision"], "allow", "{e}");
    assert_eq!(e["runtime"], "hermes");
    assert_eq!(e["layers"].as_array().unwrap().len(), 7);
    assert_eq!(kinds(&e), Vec::<&str>::new());

    // a tap from hermes: confirm; the standing approval with its exact command
    let e = explain(&data, &["tap", TAP, "--runtime", "hermes"]).await;
    assert_eq!(e["tool"], "openphone.ui.tap");
    assert_eq!(e["decision"], "confirm", "{e}");
    assert_eq!(e["one_shot"], false);
    assert_eq!(e["source"], json!({"kind": "policy", "layer": "autonomy"}));
    assert_eq!(kinds(&e), ["autonomy", "standing_approval"], "{e}");
    assert_eq!(e["changes"][0]["setting"], "runtimes.hermes.max_autonomy");
    assert_eq!(
        e["changes"][1]["command"],
        "openphone approvals grant --runtime hermes --tool openphone.ui.tap"
    );

    // a tool on hermes' deny list: deny naming the entry and its list
    let e = explain(&data, &["openphone.ui.swipe", SWIPE, "--runtime", "hermes"]).await;
    assert_eq!(e["decision"], "deny", "{e}");
    assert_eq!(e["layers"][1]["verdict"], "deny");
    assert_eq!(e["layers"][1]["code"], "tool_not_granted");
    assert_eq!(kinds(&e), ["tool_policy"]);
    assert_eq!(
        e["changes"][0]["setting"],
        "tool_policy.runtimes.hermes.deny"
    );
    assert_eq!(e["changes"][0]["value"], "openphone.ui.swipe");

    // a class hermes is not granted: add it to the grants
    let e = explain(
        &data,
        &["openphone.device.status", "{}", "--runtime", "hermes"],
    )
    .await;
    assert_eq!(e["decision"], "deny", "{e}");
    assert_eq!(kinds(&e), ["grant_exposure"]);
    assert_eq!(e["changes"][0]["setting"], "runtimes.hermes.grants");
    assert_eq!(e["changes"][0]["value"], "private_read");

    // observe_only: from the runtime's ceiling, and from the request
    let e = explain(&data, &["tap", TAP, "--runtime", "watcher"]).await;
    assert_eq!(e["decision"], "deny", "{e}");
    assert_eq!(e["effective_autonomy"], "observe_only");
    assert_eq!(kinds(&e), ["autonomy"]);
    assert_eq!(e["changes"][0]["setting"], "runtimes.watcher.max_autonomy");
    let e = explain(&data, &["tap", TAP, "--autonomy", "observe_only"]).await;
    assert_eq!(e["runtime"], "operator");
    assert_eq!(e["decision"], "deny", "{e}");
    assert_eq!(e["changes"][0]["value"], "ask_before_action");

    // the risk floor: confirm, one-shot, and nothing lowers it
    let e = explain(
        &data,
        &[
            "openphone.messages.send",
            r#"{"to":"+100","body":"hi"}"#,
            "--autonomy",
            "trusted_actions",
        ],
    )
    .await;
    assert_eq!(e["decision"], "confirm", "{e}");
    assert_eq!(e["one_shot"], true);
    assert_eq!(kinds(&e), ["risk_floor"]);
    assert_eq!(e["layers"][4]["verdict"], "confirm");

    // a background run parks
    let e = explain(&data, &["tap", TAP, "--runtime", "hermes", "--background"]).await;
    assert_eq!(e["decision"], "park", "{e}");
    assert_eq!(kinds(&e), ["background", "standing_approval"]);

    // a dry run writes nothing: the audit log is as long after a few as before
    let mut op = operator(&daemon.url, &data).await;
    let before = audit_count(&mut op).await;
    for (tool, params) in [("tap", TAP), ("openphone.ui.swipe", SWIPE)] {
        let params: Value = serde_json::from_str(params).unwrap();
        let answer = op
            .call(
                "policy.explain",
                json!({"tool": tool, "params": params, "runtime": "hermes"}),
            )
            .await;
        assert!(answer["result"]["decision"].is_string(), "{answer}");
    }
    assert_eq!(audit_count(&mut op).await, before);
    drop(op);
    terminate(&mut daemon.child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_denied_or_waiting_call_carries_the_dry_runs_explanation() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut daemon = serve(&data, &config(tmp.path()));
    let mut hermes = Runtime::connect(&daemon.url).await;

    let cases = [
        (
            "openphone.ui.swipe",
            serde_json::from_str::<Value>(SWIPE).unwrap(),
            "denied",
        ),
        ("openphone.calls.place", json!({"number": "+100"}), "denied"),
        (
            "openphone.ui.tap",
            serde_json::from_str::<Value>(TAP).unwrap(),
            "needs_confirmation",
        ),
    ];
    for (i, (tool, params, status)) in cases.into_iter().enumerate() {
        let dry = explain(&data, &[tool, &params.to_string(), "--runtime", "hermes"]).await;
        let mut with_reason = params.clone();
        with_reason["reason"] = json!("test");
        let answer = hermes
            .call(
                "tools.invoke",
                json!({"request_id": format!("r{i}"), "tool": tool, "params": with_reason,
                       "wait": false}),
            )
            .await;
        let result = &answer["result"];
        assert_eq!(result["status"], status, "{answer}");
        let details = &result["error"]["details"];
        let carried = &details["explanation"];
        assert_eq!(carried["decision"], dry["decision"], "{tool}: {carried}");
        assert_eq!(carried["layers"], dry["layers"], "{tool}");
        assert_eq!(carried["changes"], dry["changes"], "{tool}");
        if status == "denied" {
            // the denial's own members stay
            assert_eq!(details["policy"], "tool_policy_deny", "{details}");
            assert_eq!(details["runtime"], "hermes");
        }
    }
    // An allowed read carries none.
    let read = hermes
        .call(
            "tools.invoke",
            json!({"request_id": "r-read", "tool": "openphone.screen.get",
                   "params": {"reason": "look"}}),
        )
        .await;
    assert_eq!(read["result"]["status"], "ok", "{read}");
    assert!(read["result"].get("error").is_none());
    drop(hermes);
    terminate(&mut daemon.child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_and_the_text_form_lists_the_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut daemon = serve(&data, &config(tmp.path()));
    let run = |args: &[&str]| {
        cli_async(
            std::iter::once("policy")
                .chain(std::iter::once("explain"))
                .chain(args.iter().copied())
                .map(str::to_owned)
                .collect(),
            &data,
        )
    };

    let (code, _, err) = run(&["tap", "{}"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid_params"), "{err}");
    let (code, _, err) = run(&["openphone.nope"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown_tool"), "{err}");
    let (code, _, err) = run(&["tap", TAP, "--runtime", "nobody"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("runtime_not_configured"), "{err}");
    let (code, _, err) = run(&["tap", "not json"]).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["tap", TAP, "--transport", "pigeon"]).await;
    assert_eq!(code, 2, "{err}");

    // text: one line per layer, the decision, then the changes with their commands
    let (code, out, err) = run(&["tap", TAP, "--runtime", "hermes"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("L4 autonomy               confirm  ask_before_action"),
        "{out}"
    );
    assert!(out.contains("decision: confirm"), "{out}");
    assert!(out.contains("To change this:"), "{out}");
    assert!(
        out.contains("run: openphone approvals grant --runtime hermes --tool openphone.ui.tap"),
        "{out}"
    );
    // a denial is still exit 0: it is a dry run
    let (code, out, err) = run(&["openphone.ui.swipe", SWIPE, "--runtime", "hermes"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("decision: deny"), "{out}");
    terminate(&mut daemon.child);
}

/// The operator's own connection.
async fn operator(url: &str, data: &Path) -> Runtime {
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    Runtime::connect_as(url, token.trim(), "operator").await
}

/// How many audit records the daemon holds (`audit.query`).
async fn audit_count(op: &mut Runtime) -> usize {
    let answer = op.call("audit.query", json!({"limit": 1000})).await;
    answer["result"]["records"].as_array().unwrap().len()
}
