//! Regression tests, named after the bug they guard (issue number in a comment).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Client, RUNTIME_TOKEN, config, connect, start};

fn tap(request_id: &str, key: &str, wait: bool) -> Value {
    json!({
        "request_id": request_id,
        "tool": "openphone.ui.tap",
        "params": {"x": 10, "y": 20, "reason": "open the app"},
        "idempotency_key": key,
        "wait": wait,
    })
}

/// The id of the first pending confirmation, once there is one.
async fn pending(op: &mut Client) -> String {
    loop {
        let list = op.call("confirmations.list", json!({})).await;
        if let Some(first) = list["result"]["confirmations"].as_array().unwrap().first() {
            return first["confirmation_id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The addressing of a tool result: `(request_id, audit_id, status, replayed)`, with a
/// missing `replayed` read as `false` (the wire omits it then).
fn addressing(result: &Value) -> (Value, Value, Value, bool) {
    (
        result["request_id"].clone(),
        result["audit_id"].clone(),
        result["status"].clone(),
        result
            .get("replayed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    )
}

/// Issue 10: the endpoint marked a freshly approved and executed result `replayed: true`,
/// both as the answer of a waiting `tools.invoke` and as the `runtime.tool.result` event of a
/// `wait: false` one. A result the call waited for was not recorded before the call arrived,
/// so it is not a replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freshly_approved_result_is_not_marked_replayed() {
    let d = start(config("")).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;

    // wait: true — the answer is the final result, addressed to this request.
    let waiting = rt
        .request("tools.invoke", tap("fresh-1", "fresh-1", true))
        .await;
    let cid = pending(&mut op).await;
    let approved = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "approve"}),
        )
        .await;
    assert_eq!(approved["result"]["status"], "ok", "{approved}");
    let answer = rt.response(waiting).await;
    assert_eq!(
        addressing(&answer["result"]),
        (
            json!("fresh-1"),
            json!("runtime:hermes:fresh-1"),
            json!("ok"),
            false
        ),
        "{answer}"
    );

    // wait: false — the final result follows as an event, addressed to this request.
    let quick = rt
        .call("tools.invoke", tap("fresh-2", "fresh-2", false))
        .await;
    assert_eq!(quick["result"]["status"], "needs_confirmation", "{quick}");
    let cid = quick["result"]["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approved = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "approve"}),
        )
        .await;
    assert_eq!(approved["result"]["status"], "ok", "{approved}");
    let event = loop {
        let m = rt.next_event().await;
        if m["params"]["event"] == "runtime.tool.result" {
            break m;
        }
    };
    assert_eq!(
        addressing(&event["params"]["payload"]),
        (
            json!("fresh-2"),
            json!("runtime:hermes:fresh-2"),
            json!("ok"),
            false
        ),
        "{event}"
    );
    d.daemon.shutdown().await;
}

/// The other half of the rule: a keyed retry that arrives after the final result was
/// recorded is answered from the record, addressed to the retry, and marked `replayed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_retry_after_the_final_result_is_marked_replayed() {
    let d = start(config("")).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;

    let waiting = rt
        .request("tools.invoke", tap("first", "same-key", true))
        .await;
    let cid = pending(&mut op).await;
    op.call(
        "confirmations.resolve",
        json!({"confirmation_id": cid, "decision": "approve"}),
    )
    .await;
    let answer = rt.response(waiting).await;
    assert_eq!(answer["result"]["status"], "ok", "{answer}");

    let retry = rt
        .call("tools.invoke", tap("retry", "same-key", true))
        .await;
    assert_eq!(
        addressing(&retry["result"]),
        (
            json!("retry"),
            json!("runtime:hermes:retry"),
            json!("ok"),
            true
        ),
        "{retry}"
    );
    // The same outcome, not a second execution.
    assert_eq!(
        retry["result"]["openphone_task_id"],
        answer["result"]["openphone_task_id"]
    );
    assert_eq!(retry["result"]["result"], answer["result"]["result"]);
    d.daemon.shutdown().await;
}

/// `tools.list` said `supported: false` for the runtime-owned commands (memory, watchers),
/// which the daemon serves itself: it only asked the device (found in issue 12's first-contact
/// sweep).
#[tokio::test]
async fn tools_list_marks_runtime_owned_commands_supported() {
    let d = start(config("")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let tools = op.call("tools.list", json!({})).await;
    let supported = |name: &str| {
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed"))["supported"]
            .clone()
    };
    assert_eq!(supported("openphone.memory.save"), json!(true));
    assert_eq!(supported("openphone.screen.get"), json!(true));
}
