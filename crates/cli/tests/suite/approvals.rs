//! Issue 14: the user shapes the policy — `confirmations approve --for-session` (session
//! grants) and `approvals grant | list | revoke` (standing approvals), through the real daemon,
//! a scripted runtime and the CLI as separate processes.

use std::path::Path;

use serde_json::{Value, json};

use super::harness::{Runtime, TOKEN, cli, cli_async, serve};

const OTHER_TOKEN: &str = "other-runtime-cli-test-token-0123456789";

/// Two runtimes with every exposure class: `hermes` and `other`.
fn config(dir: &Path) -> String {
    let path = dir.join("openphone.toml");
    std::fs::write(
        &path,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\n\
             [[runtimes]]\nid = \"other\"\ntoken = \"{OTHER_TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

async fn operator(url: &str, data: &Path) -> Runtime {
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    Runtime::connect_as(url, token.trim(), "operator").await
}

/// A phone session routed to `runtime` (which must be subscribed to attention requests).
async fn session(op: &mut Runtime, rt: &mut Runtime, runtime: &str) -> String {
    let asked = op
        .call(
            "attention.request",
            json!({"surface": "chat", "text": "a task", "runtime": runtime}),
        )
        .await;
    let id = asked["result"]["phone_session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{asked}"))
        .to_owned();
    rt.event("runtime.attention.requested").await;
    id
}

/// `tools.invoke` without waiting; the tool result.
async fn invoke(
    rt: &mut Runtime,
    n: &mut u32,
    tool: &str,
    params: Value,
    session: Option<&str>,
) -> Value {
    *n += 1;
    let mut req = json!({"request_id": format!("r-{n}"), "tool": tool, "params": params,
                         "reason": "a step of the task", "wait": false});
    if let Some(s) = session {
        req["phone_session_id"] = json!(s);
    }
    let answer = rt.call("tools.invoke", req).await;
    answer["result"].clone()
}

fn status(result: &Value) -> &str {
    result["status"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"))
}

fn confirmation_id(result: &Value) -> String {
    result["result"]["confirmation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"))
        .to_owned()
}

fn tap(x: i64) -> Value {
    json!({"x": x, "y": 300})
}

async fn cli_ok(args: &[&str], data: &Path) -> String {
    let (code, out, err) = cli_async(args.iter().map(|s| (*s).to_owned()).collect(), data).await;
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_step_ui_task_is_approved_once_for_its_session_and_no_further() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let serve = serve(&data, &config(tmp.path()));
    let mut op = operator(&serve.url, &data).await;
    let mut rt = Runtime::connect(&serve.url).await;
    let mut other = Runtime::connect_as(&serve.url, OTHER_TOKEN, "other").await;
    rt.call(
        "events.subscribe",
        json!({"events": ["runtime.attention.requested"]}),
    )
    .await;
    op.call(
        "events.subscribe",
        json!({"events": ["runtime.confirmation.resolved"]}),
    )
    .await;
    let s1 = session(&mut op, &mut rt, "hermes").await;
    let s2 = session(&mut op, &mut rt, "hermes").await;
    let n = &mut 0;

    // Step 1 asks; the list offers the session approval.
    let first = invoke(&mut rt, n, "openphone.ui.tap", tap(10), Some(&s1)).await;
    assert_eq!(status(&first), "needs_confirmation");
    let c1 = confirmation_id(&first);
    let listed = cli_ok(&["confirmations", "list"], &data).await;
    assert!(
        listed.contains(&c1) && listed.contains("[--for-session offered]"),
        "{listed}"
    );
    let out = cli_ok(&["confirmations", "approve", "--for-session", &c1], &data).await;
    assert!(out.contains("finished with status ok"), "{out}");
    assert!(out.contains(&format!("phone session {s1}")), "{out}");
    let resolved = op.event("runtime.confirmation.resolved").await;
    assert_eq!(resolved["resolution"], "approved_for_session", "{resolved}");
    let grant_id = resolved["grant_id"].as_str().unwrap().to_owned();
    assert!(
        out.contains(&format!("approvals revoke {grant_id}")),
        "{out}"
    );

    // Steps 2–10 run without asking, each recorded with the grant id.
    for step in 2..=10 {
        let r = invoke(&mut rt, n, "openphone.ui.tap", tap(10 * step), Some(&s1)).await;
        assert_eq!(status(&r), "ok", "step {step}: {r}");
    }
    let audit = op.call("audit.query", json!({"limit": 500})).await;
    let by_grant = audit["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        // Two records per direct run (the attempt, then its outcome): outcomes are counted.
        .filter(|r| {
            r["status"] == "ok"
                && r["policy_proof"].as_array().is_some_and(|proof| {
                    proof.iter().any(|v| {
                        v["source"] == json!({"kind": "session_grant", "grant_id": grant_id})
                    })
                })
        })
        .count();
    assert_eq!(
        by_grant, 9,
        "each of the nine steps is recorded with the grant id"
    );

    // Never another session, no session, another runtime.
    let in_s2 = invoke(&mut rt, n, "openphone.ui.tap", tap(1), Some(&s2)).await;
    assert_eq!(status(&in_s2), "needs_confirmation", "{in_s2}");
    let outside = invoke(&mut rt, n, "openphone.ui.tap", tap(2), None).await;
    assert_eq!(status(&outside), "needs_confirmation", "{outside}");
    // Another runtime may not even tag its call with this session (issue 28).
    let by_other = invoke(&mut other, n, "openphone.ui.tap", tap(3), Some(&s1)).await;
    assert_eq!(by_other["error"]["code"], "invalid_params", "{by_other}");
    // Nor another tool.
    let swipe = invoke(
        &mut rt,
        n,
        "openphone.ui.swipe",
        json!({"start_x": 1, "start_y": 500, "end_x": 1, "end_y": 100}),
        Some(&s1),
    )
    .await;
    assert_eq!(status(&swipe), "needs_confirmation", "{swipe}");

    // Never the risk floor: recorded as a plain approval, with the downgrade noted.
    let send = json!({"to": "+15550001", "body": "late"});
    let first_send = invoke(
        &mut rt,
        n,
        "openphone.messages.send",
        send.clone(),
        Some(&s1),
    )
    .await;
    let c_send = confirmation_id(&first_send);
    let (code, _, _) = cli(&["confirmations", "list"], &data);
    assert_eq!(code, 0);
    let listed: Value =
        serde_json::from_str(&cli_ok(&["confirmations", "list", "--json"], &data).await).unwrap();
    let entry = listed["confirmations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["confirmation_id"] == json!(c_send))
        .unwrap()
        .clone();
    assert_eq!(entry["session_grant_offered"], false, "{entry}");
    let out = cli_ok(
        &["confirmations", "approve", "--for-session", &c_send],
        &data,
    )
    .await;
    assert!(out.contains("approved this request only"), "{out}");
    let resolved = op.event("runtime.confirmation.resolved").await;
    assert_eq!(resolved["resolution"], "approved", "{resolved}");
    assert_eq!(resolved["downgraded"], "risk_floor", "{resolved}");
    let audit = op.call("audit.query", json!({"limit": 500})).await;
    assert!(
        audit["result"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| {
                r["confirmation_id"] == json!(c_send)
                    && r["policy_proof"]["downgraded"] == "risk_floor"
            }),
        "the approval of the risk-floor request notes the downgrade"
    );
    let again = invoke(
        &mut rt,
        n,
        "openphone.messages.send",
        json!({"to": "+15550001", "body": "later"}),
        Some(&s1),
    )
    .await;
    assert_eq!(status(&again), "needs_confirmation", "{again}");

    // The grant shows in status and the list; revoking it stops the next call.
    let status_out = cli_ok(&["status"], &data).await;
    assert!(
        status_out.contains("session_grant") && status_out.contains(&s1),
        "{status_out}"
    );
    let out = cli_ok(&["approvals", "revoke", &grant_id], &data).await;
    assert!(out.contains("revoked"), "{out}");
    let after = invoke(&mut rt, n, "openphone.ui.tap", tap(99), Some(&s1)).await;
    assert_eq!(status(&after), "needs_confirmation", "{after}");
    let all: Value =
        serde_json::from_str(&cli_ok(&["approvals", "list", "--all", "--json"], &data).await)
            .unwrap();
    let row = all["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["approval_id"] == json!(grant_id))
        .unwrap()
        .clone();
    assert_eq!(row["state"], "revoked", "{row}");
    assert_eq!(row["kind"], "session_grant", "{row}");
    assert_eq!(row["confirmation_id"], json!(c1), "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_grant_ends_with_its_session_and_keeps_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let serve = serve(&data, &config(tmp.path()));
    let mut op = operator(&serve.url, &data).await;
    let mut rt = Runtime::connect(&serve.url).await;
    rt.call(
        "events.subscribe",
        json!({"events": ["runtime.attention.requested"]}),
    )
    .await;
    let s1 = session(&mut op, &mut rt, "hermes").await;
    let n = &mut 0;

    let open = |app: &str| json!({"package_or_label": app});
    let first = invoke(
        &mut rt,
        n,
        "openphone.app.open",
        open("Settings"),
        Some(&s1),
    )
    .await;
    let c = confirmation_id(&first);
    cli_ok(&["confirmations", "approve", "--for-session", &c], &data).await;
    let list: Value =
        serde_json::from_str(&cli_ok(&["approvals", "list", "--json"], &data).await).unwrap();
    let grant = list["approvals"][0].clone();
    // Every target param is pinned: the approved app, and no `label` beside it.
    assert_eq!(
        grant["constraints"],
        json!({"package_or_label": "Settings", "label": null}),
        "{grant}"
    );
    // The same app runs; another app asks.
    let same = invoke(
        &mut rt,
        n,
        "openphone.app.open",
        open("Settings"),
        Some(&s1),
    )
    .await;
    assert_eq!(status(&same), "ok", "{same}");
    let other_app = invoke(&mut rt, n, "openphone.app.open", open("Camera"), Some(&s1)).await;
    assert_eq!(status(&other_app), "needs_confirmation", "{other_app}");

    // The session ends: the grant ends with it.
    let done = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": s1, "text": "done", "final": true}),
        )
        .await;
    assert!(done.get("result").is_some(), "{done}");
    // Keyed: without a key the same call would join the approved one for 5 minutes and get
    // its result (issue 28, `docs/mcp.md`), which would not show whether the grant still holds.
    let after = rt
        .call(
            "tools.invoke",
            json!({"request_id": "after-end", "tool": "openphone.app.open",
                   "params": open("Settings"), "reason": "a step of the task", "wait": false,
                   "phone_session_id": s1, "idempotency_key": "after-end"}),
        )
        .await["result"]
        .clone();
    assert_eq!(status(&after), "needs_confirmation", "{after}");
    let all: Value =
        serde_json::from_str(&cli_ok(&["approvals", "list", "--all", "--json"], &data).await)
            .unwrap();
    assert_eq!(all["approvals"][0]["state"], "ended", "{all}");
    let active: Value =
        serde_json::from_str(&cli_ok(&["approvals", "list", "--json"], &data).await).unwrap();
    assert_eq!(active["approvals"], json!([]), "{active}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standing_approvals_are_granted_listed_and_revoked_from_the_cli_and_the_endpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let serve = serve(&data, &config(tmp.path()));
    let mut op = operator(&serve.url, &data).await;
    let mut rt = Runtime::connect(&serve.url).await;
    let n = &mut 0;
    let open = |app: &str| json!({"package_or_label": app});

    let out = cli_ok(
        &[
            "approvals",
            "grant",
            "--runtime",
            "hermes",
            "--tool",
            "openphone.app.open",
            "--param",
            "package_or_label=Settings",
            "--expires-in",
            "2h",
            "--note",
            "daily check",
            "--json",
        ],
        &data,
    )
    .await;
    let granted: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(granted["kind"], "standing");
    assert_eq!(granted["state"], "active");
    assert_eq!(
        granted["tool"], "openphone.app.open",
        "canonical name stored"
    );
    assert!(granted["expires_at_ms"].is_i64(), "{granted}");
    let id = granted["approval_id"].as_str().unwrap().to_owned();

    // Any session or none: it applies to its runtime and target only.
    let ok = invoke(&mut rt, n, "openphone.app.open", open("Settings"), None).await;
    assert_eq!(status(&ok), "ok", "{ok}");
    let proof_source = op.call("audit.query", json!({"limit": 500})).await["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| {
            r["policy_proof"].as_array().is_some_and(|p| {
                p.iter()
                    .any(|v| v["source"] == json!({"kind": "standing_approval", "rule_id": id}))
            })
        });
    assert!(
        proof_source,
        "the use of the approval is audited with its id"
    );
    let camera = invoke(&mut rt, n, "openphone.app.open", open("Camera"), None).await;
    assert_eq!(status(&camera), "needs_confirmation", "{camera}");
    let mut other = Runtime::connect_as(&serve.url, OTHER_TOKEN, "other").await;
    let by_other = invoke(&mut other, n, "openphone.app.open", open("Settings"), None).await;
    assert_eq!(status(&by_other), "needs_confirmation", "{by_other}");

    // Listed by the CLI and the endpoint alike, and in status.
    let by_cli: Value =
        serde_json::from_str(&cli_ok(&["approvals", "list", "--json"], &data).await).unwrap();
    let by_endpoint = op.call("approvals.list", json!({})).await;
    assert_eq!(by_cli, by_endpoint["result"]);
    let text = cli_ok(&["approvals", "list"], &data).await;
    assert!(
        text.contains("openphone.app.open where package_or_label=\"Settings\""),
        "{text}"
    );
    let st: Value = serde_json::from_str(&cli_ok(&["status", "--json"], &data).await).unwrap();
    assert_eq!(st["approvals"][0]["approval_id"], json!(id), "{st}");

    // Revoked over the endpoint: the very next request asks.
    let revoked = op
        .call("approvals.revoke", json!({"approval_id": id}))
        .await;
    assert_eq!(revoked["result"]["state"], "revoked", "{revoked}");
    assert!(revoked["result"]["revoked_by"].is_string(), "{revoked}");
    let after = invoke(&mut rt, n, "openphone.app.open", open("Settings"), None).await;
    assert_eq!(status(&after), "needs_confirmation", "{after}");

    // Granted over the endpoint too; runtimes cannot touch approvals.
    let made = op
        .call(
            "approvals.grant",
            json!({"runtime": "hermes", "tool": "group:ui", "expires_in_ms": 60000}),
        )
        .await;
    assert_eq!(made["result"]["tool"], "group:ui", "{made}");
    // An alias is stored under the canonical name.
    let by_alias = op
        .call(
            "approvals.grant",
            json!({"runtime": "hermes", "tool": "tap"}),
        )
        .await;
    assert_eq!(by_alias["result"]["tool"], "openphone.ui.tap", "{by_alias}");
    for (method, params) in [
        (
            "approvals.grant",
            json!({"runtime": "hermes", "tool": "openphone.ui.swipe"}),
        ),
        ("approvals.list", json!({})),
        ("approvals.revoke", json!({"approval_id": "1"})),
    ] {
        let refused = rt.call(method, params).await;
        assert_eq!(
            refused["error"]["data"]["code"], "forbidden",
            "{method}: {refused}"
        );
    }
}

#[test]
fn grants_that_could_never_apply_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let _serve = serve(&data, &config(tmp.path()));
    for (args, expect) in [
        (
            vec!["--runtime", "hermes", "--tool", "openphone.messages.send"],
            "risk floor",
        ),
        (
            vec!["--runtime", "hermes", "--tool", "*"],
            "names the command",
        ),
        (
            vec!["--runtime", "hermes", "--tool", "openphone.screen.get"],
            "is a read",
        ),
        (
            vec!["--runtime", "nobody", "--tool", "openphone.ui.tap"],
            "no runtime \"nobody\"",
        ),
        (
            vec!["--runtime", "hermes", "--tool", "openphone.no.such"],
            "no command",
        ),
        (
            vec!["--runtime", "hermes", "--tool", "group:nothing"],
            "no category",
        ),
        (
            vec![
                "--runtime",
                "hermes",
                "--tool",
                "openphone.ui.tap",
                "--param",
                "colour=red",
            ],
            "does not take a param",
        ),
        (
            vec![
                "--runtime",
                "hermes",
                "--tool",
                "openphone.ui.tap",
                "--expires-in",
                "soon",
            ],
            "duration",
        ),
    ] {
        let mut full = vec!["approvals", "grant"];
        full.extend(args.iter().copied());
        let (code, out, err) = cli(&full, &data);
        assert_ne!(code, 0, "{full:?} was accepted: {out}");
        assert!(err.contains(expect), "{full:?}: {err}");
    }
    let (code, out, _) = cli(&["approvals", "list", "--all", "--json"], &data);
    assert_eq!(code, 0);
    let all: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(all["approvals"], json!([]), "nothing was stored");
    let (code, _, err) = cli(&["approvals", "revoke", "12345"], &data);
    assert_ne!(code, 0);
    assert!(err.contains("no approval \"12345\""), "{err}");
}
