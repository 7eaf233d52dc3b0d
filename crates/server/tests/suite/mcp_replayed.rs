//! What `replayed` means over MCP (issue 10): a result recorded before the call arrived. The
//! final result a call waited for (approved while it waited) is not replayed; the same keyed
//! call again, answered from the stored final result, is. The WebSocket side of the same rule
//! is tested with the endpoint.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{McpSock, RUNTIME_TOKEN, config, connect, start, tool_result_meta};

impl McpSock {
    /// `tools/call` of `openphone_memory_save` with the idempotency key `key`.
    async fn call_keyed(&mut self, id: u64, key: &str, text: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "openphone_memory_save",
                "arguments": {"text": text, "reason": "remember it"},
                "_meta": {"dev.openphone/idempotencyKey": key},
            }}),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_waited_for_result_is_fresh_and_a_keyed_retry_is_replayed() {
    let d = start(config("")).await;
    let text = "a note approved while the call waited";
    let mut mcp = McpSock::open(
        d.dir.path(),
        RUNTIME_TOKEN,
        ("replayed-test", "1"),
        Duration::from_secs(30),
    )
    .await;
    mcp.call_keyed(2, "replayed-k1", text).await;

    // The call waits inline; the operator approves on the WebSocket endpoint meanwhile.
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let cid = loop {
        let list = op.call("confirmations.list", json!({})).await;
        let list = list["result"]["confirmations"].as_array().unwrap().clone();
        if let Some(first) = list.first() {
            break first["confirmation_id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let approved = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "approve"}),
        )
        .await;
    assert_eq!(approved["result"]["status"], "ok", "{approved}");

    let waited = mcp.response(2).await;
    assert_eq!(waited["result"]["isError"], false, "{waited}");
    assert_eq!(
        waited["result"]["structuredContent"]["memory"]["text"],
        json!(text)
    );
    let meta = tool_result_meta(&waited);
    assert_eq!(meta["request_id"], "mcp:replayed-k1", "{waited}");
    assert_eq!(meta["status"], "ok", "{waited}");
    assert_eq!(
        meta.get("replayed"),
        None,
        "a result this call waited for is not replayed: {waited}"
    );

    // The same keyed call again: answered from the stored final result, never run again.
    mcp.call_keyed(3, "replayed-k1", text).await;
    let retried = mcp.response(3).await;
    assert_eq!(retried["result"]["isError"], false, "{retried}");
    assert_eq!(
        retried["result"]["structuredContent"],
        waited["result"]["structuredContent"]
    );
    let meta = tool_result_meta(&retried);
    assert_eq!(meta["request_id"], "mcp:replayed-k1", "{retried}");
    assert_eq!(meta["replayed"], true, "{retried}");
}
