//! Phone sessions through the real daemon.

use serde_json::{Value, json};

use super::harness::{Runtime, cli_async, serve, write_config};

/// Review of issue 15: `sessions.cancel` failed a remote runtime's session but left its pending
/// confirmations approvable, so the user could still run an action of a session they stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_session_withdraws_what_it_waits_for() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let serve = serve(&data, &write_config(tmp.path()));
    let token = std::fs::read_to_string(data.join("operator.token")).unwrap();
    let mut op = Runtime::connect_as(&serve.url, token.trim(), "operator").await;
    let mut rt = Runtime::connect(&serve.url).await;
    rt.call(
        "events.subscribe",
        json!({"events": ["runtime.attention.requested"]}),
    )
    .await;
    let asked = op
        .call(
            "attention.request",
            json!({"surface": "chat", "text": "tap around", "runtime": "hermes"}),
        )
        .await;
    let session = asked["result"]["phone_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    rt.event("runtime.attention.requested").await;
    let tap = rt
        .call(
            "tools.invoke",
            json!({"request_id": "t1", "tool": "openphone.ui.tap", "params": {"x": 1, "y": 2},
                   "reason": "a step", "phone_session_id": session, "wait": false}),
        )
        .await;
    assert_eq!(tap["result"]["status"], "needs_confirmation", "{tap}");
    let confirmation = tap["result"]["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let (code, out, err) = cli_async(
        vec![
            "sessions".into(),
            "cancel".into(),
            session.clone(),
            "--json".into(),
        ],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let cancelled: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cancelled["session"]["status"], "failed", "{out}");

    let pending = op.call("confirmations.list", json!({})).await;
    assert_eq!(pending["result"]["confirmations"], json!([]), "{pending}");
    let approve = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": confirmation, "decision": "approve"}),
        )
        .await;
    assert_eq!(
        approve["error"]["data"]["code"], "pending_confirmation_not_found",
        "{approve}"
    );
    // The retry of the same request gets the withdrawal, never a new prompt.
    let again = rt
        .call(
            "tools.invoke",
            json!({"request_id": "t1", "tool": "openphone.ui.tap", "params": {"x": 1, "y": 2},
                   "reason": "a step", "phone_session_id": session, "wait": false}),
        )
        .await;
    assert_eq!(again["result"]["status"], "cancelled", "{again}");
}
