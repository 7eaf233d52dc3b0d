//! The client commands read the daemon's answers through the endpoint types: the nouns that
//! follow the methods (and the older spellings), one timeout spelling, and `--json` output that
//! is exactly what the daemon answered.

use serde_json::{Value, json};

use super::harness::{Runtime, cli, cli_async, pending_ids, serve, write_config};
use super::support::run;

#[test]
fn help_names_the_endpoint_nouns_and_one_timeout_spelling() {
    let (code, out, _) = run(&["--help"], "");
    assert_eq!(code, 0);
    for noun in ["tools", "confirmations", "runtimes", "sessions"] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{noun} "))),
            "{noun} missing from:\n{out}"
        );
    }
    let (code, out, _) = run(&["tools", "invoke", "--help"], "");
    assert_eq!(code, 0);
    assert!(out.contains("--timeout-secs"), "{out}");
    assert!(!out.contains("--timeout-ms"), "{out}");
    let (code, out, _) = run(&["ask", "--help"], "");
    assert_eq!(code, 0);
    assert!(out.contains("--timeout-secs"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_nouns_and_the_old_spellings_reach_the_same_methods() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let _serve = serve(&data, &config);

    // Each listing answers the same under the new noun and the old one.
    for (new, old) in [
        (["tools", "list", "--json"], ["tool", "list", "--json"]),
        (
            ["confirmations", "list", "--json"],
            ["confirm", "list", "--json"],
        ),
        (
            ["runtimes", "list", "--json"],
            ["runtime", "list", "--json"],
        ),
    ] {
        let (code, by_new, err) = cli(&new, &data);
        assert_eq!(code, 0, "{new:?}: {err}");
        let (code, by_old, err) = cli(&old, &data);
        assert_eq!(code, 0, "{old:?}: {err}");
        assert_eq!(by_new, by_old, "{new:?} vs {old:?}");
    }
    let (code, out, _) = cli(&["runtimes", "select", "chat", "hermes"], &data);
    assert_eq!((code, out.trim()), (0, "chat → hermes"));

    // `--timeout-secs` is the request's timeout; the older `--timeout-ms` still converts.
    let tap = |extra: &[&str]| {
        let mut args = vec![
            "tools",
            "invoke",
            "openphone.ui.tap",
            r#"{"x":1,"y":1}"#,
            "--no-wait",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = cli(&args, &data);
        assert_eq!(code, 3, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["result"]["timeout_ms"].clone()
    };
    assert_eq!(tap(&["--timeout-secs", "7"]), json!(7000));
    assert_eq!(tap(&["--timeout-ms", "1500"]), json!(1500));
    let (code, _, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.screen.get",
            "--timeout-secs",
            "1",
            "--timeout-ms",
            "1000",
        ],
        &data,
    );
    assert_eq!(code, 2, "{err}");

    let ids = pending_ids(&data).await;
    assert_eq!(ids.len(), 2, "{ids:?}");
    let (code, out, err) = cli(&["confirmations", "deny", &ids[0]], &data);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("denied {}: the request finished with status denied", ids[0])
    );
}

/// The same result with the address of one request removed (two requests never share it).
fn unaddressed(mut result: Value) -> Value {
    let body = result.as_object_mut().unwrap();
    assert!(body.remove("request_id").is_some(), "{result}");
    body.remove("audit_id");
    // The explanation describes each request's own caller (the CLI's transport is `cli`).
    if let Some(details) = body
        .get_mut("error")
        .and_then(|e| e.get_mut("details"))
        .and_then(Value::as_object_mut)
    {
        details.remove("explanation");
    }
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_is_the_daemons_answer_read_through_the_endpoint_types() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let serve = serve(&data, &config);
    let operator = std::fs::read_to_string(data.join("operator.token")).unwrap();
    let mut op = Runtime::connect_as(&serve.url, operator.trim(), "operator").await;
    let mut rt = Runtime::connect(&serve.url).await;

    // A finished phone session, a failed one and a pending confirmation to list.
    rt.call(
        "events.subscribe",
        json!({"events": ["runtime.attention.requested"]}),
    )
    .await;
    for (text, error) in [("first", Value::Null), ("second", json!("it broke"))] {
        let asked = op
            .call(
                "attention.request",
                json!({"surface": "chat", "text": text, "runtime": "hermes"}),
            )
            .await;
        let session = asked["result"]["phone_session_id"].clone();
        assert!(session.is_string(), "{asked}");
        rt.event("runtime.attention.requested").await;
        let mut reply = json!({"phone_session_id": session, "text": "done", "final": true});
        if !error.is_null() {
            reply["error"] = error;
        }
        let r = rt.call("runtime.message", reply).await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let (code, out, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.ui.tap",
            r#"{"x":3,"y":4}"#,
            "--no-wait",
            "--idempotency-key",
            "tap-json",
            "--json",
        ],
        &data,
    );
    assert_eq!(code, 3, "{err}");
    let by_cli: Value = serde_json::from_str(&out).unwrap();
    // The same request again on the raw endpoint joins the same confirmation.
    let raw = op
        .call(
            "tools.invoke",
            json!({"request_id": "raw-1", "tool": "openphone.ui.tap", "params": {"x": 3, "y": 4},
                   "reason": "requested by the user from the openphone CLI",
                   "idempotency_key": "tap-json", "wait": false}),
        )
        .await;
    assert_eq!(unaddressed(by_cli), unaddressed(raw["result"].clone()));

    let (code, out, _) = cli(&["tools", "invoke", "openphone.no.such", "--json"], &data);
    assert_eq!(code, 1, "{out}");
    let raw = op
        .call(
            "tools.invoke",
            json!({"request_id": "raw-2", "tool": "openphone.no.such", "params": {},
                   "reason": "requested by the user from the openphone CLI"}),
        )
        .await;
    assert_eq!(
        unaddressed(serde_json::from_str(&out).unwrap()),
        unaddressed(raw["result"].clone())
    );

    for (args, method) in [
        (&["tools", "list", "--json"][..], "tools.list"),
        (
            &["confirmations", "list", "--json"][..],
            "confirmations.list",
        ),
        (&["sessions", "list", "--json"][..], "sessions.list"),
        (&["runtimes", "list", "--json"][..], "runtime.list"),
    ] {
        let (code, out, err) = cli(args, &data);
        assert_eq!(code, 0, "{args:?}: {err}");
        let raw = op.call(method, json!({})).await;
        let mut by_cli: Value = serde_json::from_str(&out).unwrap();
        if method == "confirmations.list" {
            // Issue 31: the whole inbox next to the `confirmations` member it always had.
            let inbox = op.call("inbox.list", json!({})).await;
            let listed = by_cli.as_object_mut().unwrap();
            assert_eq!(listed.remove("items").unwrap(), inbox["result"]["items"]);
            assert_eq!(listed.remove("counts").unwrap(), inbox["result"]["counts"]);
        }
        assert_eq!(by_cli, raw["result"], "{args:?}");
    }
    let (_, out, _) = cli(&["sessions", "list", "--json"], &data);
    let sessions: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 2, "{out}");

    // Text output of the same answers.
    let (code, out, _) = cli(&["sessions", "list"], &data);
    assert_eq!(code, 0);
    let statuses: Vec<&str> = out.lines().map(|l| l.split("  ").nth(3).unwrap()).collect();
    assert_eq!(statuses.len(), 2, "{out}");
    assert!(
        statuses.contains(&"completed") && statuses.contains(&"failed"),
        "{out}"
    );
    let (code, out, _) = cli(&["tools", "list"], &data);
    assert_eq!(code, 0);
    let tap = out
        .lines()
        .find(|l| l.starts_with("openphone.ui.tap "))
        .unwrap();
    assert_eq!(
        tap.split_whitespace().collect::<Vec<_>>(),
        [
            "openphone.ui.tap",
            "medium",
            "ask_before_action",
            "dangerous"
        ],
        "{out}"
    );
    let (code, out, _) = cli(&["runtimes", "list"], &data);
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["hermes", "websocket", "connected"]),
        "{out}"
    );
    let (code, out, _) = cli(&["status"], &data);
    assert_eq!(code, 0);
    assert!(
        out.contains("waiting for you: 1 (1 confirmation, 0 job reviews, 0 goal approvals)"),
        "{out}"
    );
    let (code, out, _) = cli(
        &[
            "tools",
            "invoke",
            "openphone.ui.tap",
            r#"{"x":3,"y":4}"#,
            "--no-wait",
            "--idempotency-key",
            "tap-json",
        ],
        &data,
    );
    assert_eq!(code, 3);
    let cid = pending_ids(&data).await.remove(0);
    assert!(
        out.contains(&format!("confirmation: {cid}  ("))
            && out.contains(&format!(
                "approve with `openphone confirmations approve {cid}`"
            )),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_prints_the_reply_and_exits_1_when_the_runtime_reports_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let serve = serve(&data, &config);
    let data_dir = data.clone();
    let mut rt = Runtime::connect(&serve.url).await;
    rt.call(
        "events.subscribe",
        json!({"events": ["runtime.attention.requested"]}),
    )
    .await;
    let ask = tokio::spawn(async move {
        cli_async(
            vec![
                "ask".into(),
                "Book it".into(),
                "--runtime".into(),
                "hermes".into(),
                "--timeout-secs".into(),
                "60".into(),
            ],
            &data_dir,
        )
        .await
    });
    let attention = rt.event("runtime.attention.requested").await;
    let r = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": attention["phone_session_id"], "text": "Could not book.",
                   "final": true, "error": "calendar unavailable"}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let (code, out, err) = ask.await.unwrap();
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "Could not book.\n");
    assert!(
        err.contains("the runtime reported an error: calendar unavailable"),
        "{err}"
    );
}
