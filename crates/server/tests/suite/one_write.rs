//! An answer leaves in one write (issue 13). A handshake-era (2025-11-25) `tools/call` over
//! `/mcp` is answered as SSE, which rmcp opens with a priming event before the tool has run;
//! unheld, the headers and priming event went out in one write and the answer in a later one.
//! Here a keep-alive client sends each request in one write and then reads exactly once: that
//! single read must hold the whole HTTP response. Nothing is timed.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::{config, start};

/// One HTTP response as read off the socket.
struct Raw {
    head: String,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The body's SSE `data:` messages that are JSON-RPC messages.
    fn messages(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    }
}

/// `bytes` as one response when they hold all of it (a `Content-Length` body or every chunk up
/// to the last), else `None`.
fn complete(bytes: &[u8]) -> Option<Raw> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut raw = Raw {
        head,
        body: Vec::new(),
    };
    let mut rest = &bytes[end + 4..];
    if let Some(length) = raw.header("content-length") {
        let length: usize = length.parse().ok()?;
        raw.body = rest.to_vec();
        return (rest.len() == length).then_some(raw);
    }
    // Chunked: size line, data, CRLF … until the zero-size chunk.
    loop {
        let line = rest.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line]).ok()?.trim(), 16).ok()?;
        rest = &rest[line + 2..];
        if size == 0 {
            return (rest == b"\r\n").then_some(raw);
        }
        raw.body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

fn request(addr: SocketAddr, token: &str, session: Option<&str>, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    if let Some(session) = session {
        head.push_str(&format!(
            "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        ));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Writes `request` in one write, then reads once (waiting as long as it takes for the first
/// bytes); the bytes of that one read.
async fn one_read(stream: &mut TcpStream, request: &[u8]) -> Vec<u8> {
    stream.write_all(request).await.unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let n = tokio::time::timeout(std::time::Duration::from_secs(30), stream.read(&mut buf))
        .await
        .expect("no answer within 30 s")
        .unwrap();
    buf.truncate(n);
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_era_sse_answer_arrives_in_one_read() {
    let d = start(config("")).await;
    let addr = d.daemon.addr();
    let token = std::fs::read_to_string(d.dir.path().join("mcp.token")).unwrap();
    let token = token.trim();
    let mut stream = TcpStream::connect(addr).await.unwrap();

    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "one-read", "version": "1"}}});
    let bytes = one_read(&mut stream, &request(addr, token, None, &init)).await;
    let answer = complete(&bytes).unwrap_or_else(|| {
        panic!(
            "initialize: not one whole response: {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    let session = answer.header("mcp-session-id").unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let bytes = one_read(
        &mut stream,
        &request(addr, token, Some(&session), &initialized),
    )
    .await;
    assert!(
        bytes.starts_with(b"HTTP/1.1 202"),
        "{}",
        String::from_utf8_lossy(&bytes)
    );

    // A call asking for progress is rmcp's (an event stream, held); a plain one is the direct
    // path's (JSON). Each leaves in one write.
    for id in 1..=6 {
        let streams = id % 2 == 1;
        let meta = if streams {
            json!({"progressToken": format!("p{id}")})
        } else {
            json!({})
        };
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "openphone_device_status", "arguments": {"reason": "one read"},
            "_meta": meta}});
        let bytes = one_read(&mut stream, &request(addr, token, Some(&session), &call)).await;
        let answer = complete(&bytes).unwrap_or_else(|| {
            panic!(
                "call {id}: the first read does not hold the whole answer: {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert!(answer.head.starts_with("HTTP/1.1 200"), "{}", answer.head);
        assert!(
            answer.header("transfer-encoding").is_none(),
            "{}",
            answer.head
        );
        let messages = if streams {
            assert_eq!(answer.header("content-type"), Some("text/event-stream"));
            answer.messages()
        } else {
            assert_eq!(answer.header("content-type"), Some("application/json"));
            vec![serde_json::from_slice(&answer.body).unwrap()]
        };
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(messages[0]["id"], json!(id));
        assert_eq!(
            messages[0]["result"]["isError"],
            json!(false),
            "{}",
            messages[0]
        );
    }
}
