//! The null MCP server's answers, checked as the benchmark's client and the daemon shape them.

use super::*;

const TOKEN: &str = "Bearer t0k";

fn shared() -> Shared {
    Shared::new(Some("t0k".to_owned())).unwrap()
}

fn post(shared: &Shared, session: Option<&str>, version: Option<&str>, body: &str) -> Reply {
    answer(
        shared,
        &Method::POST,
        Some(TOKEN.as_bytes()),
        session,
        version,
        body.as_bytes(),
    )
}

/// The JSON message of a reply: its body, or its event stream's last `data:` line.
fn message(reply: &Reply) -> Value {
    let text = if reply.event_stream {
        reply
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .rfind(|d| !d.is_empty())
            .unwrap()
    } else {
        reply.body.as_str()
    };
    serde_json::from_str(text).unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}"#;

fn call(id: u64, tool: &str, meta: bool) -> String {
    let mut params = serde_json::json!({"name": tool, "arguments": {"reason": "benchmark"}});
    if meta {
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": PER_REQUEST,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "b", "version": "1"},
        });
    }
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
        .to_string()
}

#[test]
fn the_handshake_era_gets_a_session_and_event_stream_answers() {
    let shared = shared();
    let init = post(&shared, None, None, INITIALIZE);
    assert_eq!((init.status, init.event_stream), (200, true));
    let session = init.session.clone().unwrap();
    assert_eq!(session.len(), 36, "a UUID's length");
    assert_eq!(message(&init)["result"]["protocolVersion"], HANDSHAKE);
    assert_eq!(message(&init)["id"], 1);

    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(
        post(&shared, Some(&session), Some(HANDSHAKE), note).status,
        202
    );

    let reply = post(
        &shared,
        Some(&session),
        Some(HANDSHAKE),
        &call(7, "openphone_device_status", false),
    );
    assert_eq!((reply.status, reply.event_stream), (200, true));
    assert!(
        reply.body.starts_with("data: \nid: 0/0\nretry: 3000\n\n"),
        "{}",
        reply.body
    );
    let m = message(&reply);
    assert_eq!(m["id"], 7);
    let result = &m["result"];
    assert_eq!(result["isError"], false);
    assert!(result.get("resultType").is_none());
    let fixture: Value = serde_json::from_str(crate::DEVICE_STATUS).unwrap();
    assert_eq!(result["structuredContent"], fixture);
    assert_eq!(
        result["content"][0]["text"],
        "Done. device: {15 fields}, next_event: {12 fields}. The full result is the structured content."
    );
    let meta = &result["_meta"]["dev.openphone/toolResult"];
    let request_id = meta["request_id"].as_str().unwrap();
    assert_eq!(request_id.len(), "mcp-".len() + 36);
    assert_eq!(meta["audit_id"], format!("runtime:mcp:{request_id}"));
    assert_eq!(meta["status"], "ok");

    let delete = answer(
        &shared,
        &Method::DELETE,
        Some(TOKEN.as_bytes()),
        Some(&session),
        Some(HANDSHAKE),
        b"",
    );
    assert_eq!(delete.status, 202);
    let after = post(
        &shared,
        Some(&session),
        Some(HANDSHAKE),
        &call(8, "openphone_device_status", false),
    );
    assert_eq!(after.status, 404, "a deleted session is unknown");
}

#[test]
fn the_per_request_era_is_answered_as_json_without_a_session() {
    let shared = shared();
    let reply = post(
        &shared,
        None,
        Some(PER_REQUEST),
        &call(3, "openphone_screen_get", true),
    );
    assert_eq!(
        (reply.status, reply.event_stream, reply.session.as_deref()),
        (200, false, None)
    );
    let m = message(&reply);
    assert_eq!(m["id"], 3);
    assert_eq!(m["result"]["resultType"], "complete");
    let fixture: Value = serde_json::from_str(crate::SCREEN_GET).unwrap();
    assert_eq!(m["result"]["structuredContent"], fixture);
    assert_eq!(shared.sessions().len(), 0);
}

#[test]
fn bad_requests_are_refused_as_the_daemon_refuses_them() {
    let shared = shared();
    let no_token = answer(
        &shared,
        &Method::POST,
        None,
        None,
        None,
        INITIALIZE.as_bytes(),
    );
    assert_eq!(no_token.status, 401);
    let wrong = answer(
        &shared,
        &Method::POST,
        Some(b"Bearer x"),
        None,
        None,
        INITIALIZE.as_bytes(),
    );
    assert_eq!(wrong.status, 401);
    let no_era = post(&shared, None, Some(HANDSHAKE), &call(2, "x", false));
    assert_eq!(no_era.status, 400);
    assert_eq!(message(&no_era)["id"], 2);
    assert_eq!(post(&shared, None, None, "not json").status, 400);
    let unknown = post(&shared, Some("nope"), Some(HANDSHAKE), &call(4, "x", false));
    assert_eq!(unknown.status, 404);
    let other = post(
        &shared,
        None,
        Some(PER_REQUEST),
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
    );
    assert_eq!(message(&other)["error"]["code"], -32601);
    assert_eq!(
        answer(
            &shared,
            &Method::GET,
            Some(TOKEN.as_bytes()),
            None,
            None,
            b""
        )
        .status,
        405
    );
    let open = Shared::new(None).unwrap();
    assert_eq!(
        answer(
            &open,
            &Method::POST,
            None,
            None,
            None,
            INITIALIZE.as_bytes()
        )
        .status,
        200,
        "without --token no header is needed"
    );
}

/// Over a real loopback connection, two keep-alive requests: the HTTP framing hyper adds.
#[test]
fn keep_alive_requests_over_loopback_get_length_delimited_answers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, Arc::new(shared())));
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        for id in [1, 2] {
            let body = call(id, "openphone_device_status", true);
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {TOKEN}\r\n\
                 MCP-Protocol-Version: {PER_REQUEST}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let text = loop {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the server closed the connection");
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(str::to_owned)
                        })
                        .unwrap()
                        .parse()
                        .unwrap();
                    if body.len() >= length {
                        break text;
                    }
                }
            };
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
            assert!(
                text.to_ascii_lowercase()
                    .contains("content-type: application/json")
            );
            let body: Value = serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap();
            assert_eq!(body["id"], id);
        }
    });
}

#[test]
fn only_a_tool_calls_answer_is_recorded_and_it_carries_the_calls_id() {
    let shared = shared();
    let init = post(&shared, None, None, INITIALIZE);
    assert_eq!(init.record, None, "initialize is not a tool call");
    let session = init.session.clone().unwrap();
    let answered = post(
        &shared,
        Some(&session),
        None,
        &call(7, "openphone_device_status", false),
    );
    assert_eq!(answered.record.as_deref(), Some("7"));
    let stateless = post(&shared, None, Some(PER_REQUEST), &call(8, "x", true));
    assert_eq!(stateless.record.as_deref(), Some("8"));
    let refused = post(&shared, None, None, &call(9, "x", false));
    assert_eq!((refused.status, refused.record), (400, None));
}
