//! Tool profiles through a real daemon: a runtime on profile `messaging` (with one allow and
//! one deny entry) sees exactly that surface in the endpoint's `tools.list` and in MCP's
//! `tools/list`, and a call outside it is refused with `tool_not_granted` naming the profile.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::support::{RUNTIME_TOKEN, config, connect, start};

/// `hermes` (granted all three exposure classes) on `messaging`, set with the `[[runtimes]]`
/// shorthand, plus `ui.tap` and minus `calls.place` in its tool-policy table.
const PROFILE: &str = r#"profile = "messaging"

[tool_policy.runtimes.hermes]
allow = ["openphone.ui.tap"]
deny = ["openphone.calls.place"]
"#;

/// The surface: messaging (minimal + messages, contacts, notifications, calls search/place,
/// share) + `ui.tap` − `calls.place`, sorted.
const EXPECTED: [&str; 14] = [
    "openphone.apps.search",
    "openphone.calls.search",
    "openphone.contacts.search",
    "openphone.device.status",
    "openphone.messages.draft",
    "openphone.messages.search",
    "openphone.messages.send",
    "openphone.notifications.list",
    "openphone.notifications.open",
    "openphone.notifications.search",
    "openphone.screen.get",
    "openphone.screen.understand_local",
    "openphone.share.text",
    "openphone.ui.tap",
];

/// An `mcp.sock` connection past the token hello and the MCP handshake.
struct McpSocket {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

impl McpSocket {
    async fn open(dir: &std::path::Path, token: &str) -> McpSocket {
        let stream = UnixStream::connect(dir.join("mcp.sock")).await.unwrap();
        let (read, write) = stream.into_split();
        let mut socket = McpSocket {
            lines: BufReader::new(read).lines(),
            write,
        };
        socket
            .send(&json!({"openphone_mcp_hello": {"token": token}}))
            .await;
        let hello = socket.next().await;
        assert_eq!(hello["openphone_mcp_hello"], "ok", "{hello}");
        let init = socket
            .call(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "profiles-test", "version": "1"}}),
            )
            .await;
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

    /// Sends a request with a fresh id and returns its response, skipping notifications.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.next().await;
            if message["id"] == json!(id) {
                return message;
            }
        }
    }
}

fn sorted_names(tools: &Value, key: &str) -> Vec<String> {
    let mut names: Vec<String> = tools
        .as_array()
        .unwrap_or_else(|| panic!("no tool array in {tools}"))
        .iter()
        .map(|t| t[key].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_shapes_tools_list_on_the_endpoint_and_over_mcp() {
    let d = start(config(PROFILE)).await;

    // The endpoint: exactly the profile's surface.
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let list = rt.call("tools.list", json!({})).await;
    assert_eq!(sorted_names(&list["result"]["tools"], "name"), EXPECTED);

    // Outside the profile: denied at once, the reason naming the profile and the way out.
    let swipe = rt
        .call(
            "tools.invoke",
            json!({"request_id": "p1", "tool": "openphone.ui.swipe",
                   "params": {"start_x": 1, "start_y": 2, "end_x": 3, "end_y": 4, "reason": "scroll"}}),
        )
        .await;
    let result = &swipe["result"];
    assert_eq!(result["status"], "denied", "{swipe}");
    assert_eq!(result["error"]["code"], "tool_not_granted", "{swipe}");
    assert_eq!(
        result["error"]["details"]["policy"], "tool_policy_deny",
        "{swipe}"
    );
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not in profile `messaging` of runtime `hermes`")
            && message.contains("add it with allow"),
        "{message}"
    );
    // The deny entry removes a command the profile holds.
    let place = rt
        .call(
            "tools.invoke",
            json!({"request_id": "p2", "tool": "openphone.calls.place",
                   "params": {"number": "+100", "reason": "call back"}}),
        )
        .await;
    assert_eq!(
        place["result"]["error"]["code"], "tool_not_granted",
        "{place}"
    );
    assert!(
        place["result"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deny entry `openphone.calls.place`"),
        "{place}"
    );
    // Inside the profile: runs.
    let status = rt
        .call(
            "tools.invoke",
            json!({"request_id": "p3", "tool": "openphone.device.status", "params": {},
                   "reason": "look"}),
        )
        .await;
    assert_eq!(status["result"]["status"], "ok", "{status}");

    // MCP, same runtime: the same surface less the commands MCP never offers
    // (`messages.send` is `mcp: false`), under MCP names.
    let mut mcp = McpSocket::open(d.dir.path(), RUNTIME_TOKEN).await;
    let list = mcp.call("tools/list", json!({})).await;
    assert!(list["result"].get("nextCursor").is_none(), "{list}");
    // MCP lists the connection's own status tool beside the profile's tools.
    let mut expected_mcp: Vec<String> = EXPECTED
        .iter()
        .filter(|n| **n != "openphone.messages.send")
        .map(|n| n.replace('.', "_"))
        .chain(["openphone_confirmation_status".to_owned()])
        .collect();
    expected_mcp.sort();
    assert_eq!(sorted_names(&list["result"]["tools"], "name"), expected_mcp);

    let call = mcp
        .call(
            "tools/call",
            json!({"name": "openphone_ui_swipe",
                   "arguments": {"start_x": 1, "start_y": 2, "end_x": 3, "end_y": 4, "reason": "scroll"}}),
        )
        .await;
    // A policy denial is a policy outcome, not an error result.
    assert_eq!(call["result"]["isError"], false, "{call}");
    assert_eq!(
        call["result"]["structuredContent"]["outcome"], "denied",
        "{call}"
    );
    let text = call["result"]["content"][0]["text"].as_str().unwrap();
    let tool_result: Value = serde_json::from_str(text).unwrap();
    assert_eq!(tool_result["error"]["code"], "tool_not_granted", "{text}");
    assert!(
        tool_result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("profile `messaging`"),
        "{text}"
    );

    // The operator is not a runtime on a profile: it still sees every command.
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let all = op.call("tools.list", json!({})).await;
    let count = all["result"]["tools"].as_array().unwrap().len();
    assert!(count > EXPECTED.len() + 10, "{count}");
    d.daemon.shutdown().await;
}
