//! What `replayed` means over MCP (issue 10): a result recorded before the call arrived. The
//! final result a call waited for (approved while it waited) is not replayed; the same keyed
//! call again, answered from the stored final result, is. The WebSocket side of the same rule
//! is tested with the endpoint.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::support::{RUNTIME_TOKEN, config, connect, start};

/// An `mcp.sock` connection past the token hello and the MCP handshake.
struct Socket {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

impl Socket {
    async fn open(dir: &std::path::Path, token: &str) -> Socket {
        let stream = UnixStream::connect(dir.join("mcp.sock")).await.unwrap();
        let (read, write) = stream.into_split();
        let mut socket = Socket {
            lines: BufReader::new(read).lines(),
            write,
        };
        socket
            .send(&json!({"openphone_mcp_hello": {"token": token}}))
            .await;
        let hello = socket.next().await;
        assert_eq!(hello["openphone_mcp_hello"], "ok", "{hello}");
        socket
            .send(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "replayed-test", "version": "1"}}}),
            )
            .await;
        let init = socket.response(1).await;
        assert!(init.get("result").is_some(), "{init}");
        socket
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        socket
    }

    async fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("no line within 30 s")
            .unwrap()
            .expect("the socket closed");
        serde_json::from_str(&line).unwrap()
    }

    /// The response to `id`, skipping notifications.
    async fn response(&mut self, id: u64) -> Value {
        loop {
            let message = self.next().await;
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

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

/// `_meta["dev.openphone/toolResult"]` of a call's response.
fn tool_result_meta(response: &Value) -> &Value {
    &response["result"]["_meta"]["dev.openphone/toolResult"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_waited_for_result_is_fresh_and_a_keyed_retry_is_replayed() {
    let d = start(config("")).await;
    let text = "a note approved while the call waited";
    let mut mcp = Socket::open(d.dir.path(), RUNTIME_TOKEN).await;
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
