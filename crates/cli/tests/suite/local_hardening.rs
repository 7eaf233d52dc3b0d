//! Local hardening through the real binary (issue 11, item 5): a key given twice in tool params
//! is refused on every surface that reads them (the endpoint, MCP over HTTP and over the socket,
//! the CLI), a keyed retry just after an expiry across a `kill -9` gets the recorded `timeout`,
//! MCP HTTP sessions stay bounded under an `initialize` flood, and one MCP host's waiting
//! calls leave room for another host on the same token.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openphone_clock::{Clock, SystemClock};
use openphone_mcp::{MAX_HTTP_SESSIONS, MAX_HTTP_SESSIONS_PER_PRINCIPAL};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_tungstenite::connect_async;

use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::harness::{Serve, TOKEN, cli, serve};

/// A data directory and a config: the scripted runtime `hermes`, then `extra`.
fn setup(extra: &str) -> (tempfile::TempDir, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = tmp.path().join("openphone.toml");
    std::fs::write(
        &config,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n{extra}"
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();
    (tmp, data, config)
}

/// The `/mcp` address and the default MCP token of the daemon on `data`.
fn mcp(data: &Path) -> (SocketAddr, String) {
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("endpoint.json")).unwrap())
            .unwrap();
    let url = info["mcp_url"].as_str().unwrap();
    let addr = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap()
        .parse()
        .unwrap();
    let token = std::fs::read_to_string(data.join("mcp.token")).unwrap();
    (addr, token.trim().to_owned())
}

fn pending(data: &Path) -> Vec<Value> {
    let (code, out, err) = cli(&["confirm", "list", "--json"], data);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["confirmations"].as_array().unwrap().clone()
}

/// The error object in the text of an `isError` tool result or of a policy outcome
/// (`isError: false` with `structuredContent.outcome`).
fn tool_error(answer: &Value) -> Value {
    let result = &answer["result"];
    let outcome = result["structuredContent"]["outcome"].is_string();
    assert_eq!(
        result["isError"], !outcome,
        "expected an error result or a policy outcome: {answer}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["error"].clone()
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC answer: the plain JSON body, or the last `data:` line carrying an id.
    fn json(&self) -> Value {
        if let Ok(v) = serde_json::from_str(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {:?}", self.body))
    }
}

/// One `POST /mcp` on a fresh connection; `body` is sent byte for byte.
async fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut raw))
        .await
        .expect("no answer within 30 s")
        .unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    Reply {
        status,
        body: if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
        headers,
    }
}

fn dechunk(raw: &str) -> String {
    let mut out = String::new();
    let mut rest = raw;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}

/// A 2026-07-28 `tools/call` of `tool` whose `arguments` are the raw JSON text `arguments`.
async fn modern_call(
    addr: SocketAddr,
    token: &str,
    tool: &str,
    arguments: &str,
    idempotency_key: Option<&str>,
) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    });
    if let Some(key) = idempotency_key {
        meta["dev.openphone/idempotencyKey"] = json!(key);
    }
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{meta}}}}}"#
    );
    let auth = format!("Bearer {token}");
    let reply = post(
        addr,
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &body,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()
}

/// An MCP host on `mcp.sock` with the default token, past `initialize`.
struct SocketHost {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl SocketHost {
    async fn connect(data: &Path, name: &str) -> SocketHost {
        let (_, token) = mcp(data);
        let stream = tokio::net::UnixStream::connect(data.join("mcp.sock"))
            .await
            .unwrap();
        let (read, writer) = stream.into_split();
        let mut host = SocketHost {
            reader: BufReader::new(read),
            writer,
        };
        host.send(&json!({"openphone_mcp_hello": {"token": token}}).to_string())
            .await;
        let hello = host.line().await;
        assert_eq!(hello["openphone_mcp_hello"], "ok", "{hello}");
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": name, "version": "1"}}});
        host.send(&init.to_string()).await;
        let answer = host.answer(0).await;
        assert!(answer.get("result").is_some(), "{answer}");
        host.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        host
    }

    async fn send(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
    }

    async fn line(&mut self) -> Value {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(30), self.reader.read_line(&mut line))
            .await
            .expect("no line within 30 s")
            .unwrap();
        assert!(n > 0, "the daemon closed the socket");
        serde_json::from_str(&line).unwrap()
    }

    /// The answer to request `id` (other messages are skipped).
    async fn answer(&mut self, id: u64) -> Value {
        loop {
            let message = self.line().await;
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Sends a `tools/call` of `tool` with the raw JSON `arguments` as request `id`.
    async fn call(&mut self, id: u64, tool: &str, arguments: &str) {
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
        ))
        .await;
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends one raw text frame and returns the next answer (a frame with an id).
async fn exchange(ws: &mut Ws, frame: &str) -> Value {
    ws.send(Message::text(frame)).await.unwrap();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .expect("no answer within 30 s")
            .expect("connection closed")
            .unwrap();
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v.get("id").is_some() {
                return v;
            }
        }
    }
}

/// Issue 11: `{"x":1,"x":2}` in params was accepted (the last value won) although the
/// protocol refuses duplicate keys. The endpoint refuses the frame naming the key, whether the
/// key repeats in the method's params or inside the tool's own params; the CLI refuses them
/// in its params argument before sending anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_keys_in_tool_params_are_refused() {
    let (_tmp, data, config) = setup("");
    let daemon = serve(&data, &config);
    let mut req = daemon.url.as_str().into_client_request().unwrap();
    req.headers_mut()
        .insert("Authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = connect_async(req).await.unwrap();
    let hello = exchange(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":{"min":1,"max":1},"client":{"name":"raw","version":"1"}}}"#,
    )
    .await;
    assert_eq!(hello["result"]["runtime"], "hermes", "{hello}");

    let envelope = exchange(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools.invoke","params":{"x":1,"x":2}}"#,
    )
    .await;
    assert_eq!(
        envelope,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602,
            "message": "`params` holds the key \"x\" more than once; duplicate keys are refused",
            "data": {"code": "invalid_params"}}})
    );
    let nested = exchange(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools.invoke","params":{"request_id":"dup-1","tool":"openphone.memory.save","params":{"text":"first","reason":"r","text":"second"}}}"#,
    )
    .await;
    assert_eq!(nested["id"], 3, "{nested}");
    assert_eq!(
        nested["error"]["data"]["code"], "invalid_params",
        "{nested}"
    );
    assert!(
        nested["error"]["message"]
            .as_str()
            .unwrap()
            .contains(r#""text""#),
        "{nested}"
    );
    // Nothing was asked or run, and the connection goes on.
    let list = exchange(
        &mut ws,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools.list","params":{}}"#,
    )
    .await;
    assert!(list["result"]["tools"].is_array(), "{list}");
    assert!(pending(&data).is_empty());

    // The CLI's params argument.
    let (code, out, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.memory.search",
            r#"{"query":"a","reason":"look","query":"b"}"#,
        ],
        &data,
    );
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains(r#"params hold the key "query" more than once"#),
        "{err}"
    );
}

/// Issue 11: MCP `tools/call` arguments holding a key twice were accepted (rmcp keeps the last
/// value). Over HTTP and over the socket, the call is answered `invalid_params` naming the key,
/// and nothing is asked or run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_keys_in_mcp_tool_arguments_are_refused() {
    let (_tmp, data, config) = setup("");
    let _daemon = serve(&data, &config);
    let (addr, token) = mcp(&data);
    let twice = r#"{"text":"first","reason":"remember it","text":"second"}"#;

    let answer = modern_call(addr, &token, "openphone_memory_save", twice, None).await;
    let error = tool_error(&answer);
    assert_eq!(error["code"], "invalid_params", "{answer}");
    assert!(
        error["message"].as_str().unwrap().contains(r#""text""#),
        "{answer}"
    );

    let mut host = SocketHost::connect(&data, "socket-host").await;
    host.call(1, "openphone_memory_save", twice).await;
    let answer = host.answer(1).await;
    let error = tool_error(&answer);
    assert_eq!(error["code"], "invalid_params", "{answer}");
    assert!(
        error["message"].as_str().unwrap().contains(r#""text""#),
        "{answer}"
    );
    // The same call with each key once is an ordinary request (it waits for the user).
    assert!(pending(&data).is_empty());
}

/// Issue 11: after a restart, a keyed retry arriving just after the confirmation's expiry got a
/// new confirmation instead of the recorded `timeout` (10 of 10 tries): the expiry timer ticks
/// once a second, and the replay step found neither a live confirmation nor a final result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_retry_after_expiry_across_a_restart_gets_the_recorded_timeout() {
    let (_tmp, data, config) =
        setup("[mcp]\nconfirmation_timeout_ms = 8000\nlocal_confirmation_wait_ms = 0\n");
    let args = r#"{"text":"the gate code is 2468","reason":"remember it"}"#;
    let mut first = serve(&data, &config);
    let (addr, token) = mcp(&data);
    let answer = modern_call(
        addr,
        &token,
        "openphone_memory_save",
        args,
        Some("expiry-key"),
    )
    .await;
    let meta = &answer["result"]["_meta"]["dev.openphone/toolResult"];
    assert_eq!(meta["status"], "needs_confirmation", "{answer}");
    let listed = pending(&data);
    assert_eq!(listed.len(), 1);
    let expires_at_ms = listed[0]["expires_at_ms"].as_i64().unwrap();

    // The daemon dies with the confirmation pending; a new one starts before it expires.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let _second: Serve = serve(&data, &config);
    let (addr, token) = mcp(&data);
    assert_eq!(
        pending(&data).len(),
        1,
        "the restart took longer than the confirmation's lifetime"
    );

    // The retry arrives just after the expiry, before the expiry timer's next tick.
    while SystemClock.now_ms() <= expires_at_ms {
        let left = u64::try_from(expires_at_ms - SystemClock.now_ms()).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(left.clamp(1, 50))).await;
    }
    let retry = modern_call(
        addr,
        &token,
        "openphone_memory_save",
        args,
        Some("expiry-key"),
    )
    .await;
    let meta = &retry["result"]["_meta"]["dev.openphone/toolResult"];
    assert_eq!(meta["status"], "timeout", "{retry}");
    assert_eq!(tool_error(&retry)["code"], "timeout", "{retry}");
    assert!(pending(&data).is_empty(), "the retry asked the user again");
}

/// Issue 11: 5,000 MCP `initialize` calls kept 280 MB: every HTTP session stayed until it was
/// idle for five minutes, with no cap. One past the cap closes the session used least recently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_sessions_stay_bounded_under_an_initialize_flood() {
    let (_tmp, data, config) = setup("[limits]\nrate_per_sec = 100000.0\nrate_burst = 100000.0\n");
    let _daemon = serve(&data, &config);
    let (addr, token) = mcp(&data);
    let auth = format!("Bearer {token}");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}})
    .to_string();
    let mut sessions = Vec::new();
    for _ in 0..=MAX_HTTP_SESSIONS {
        let reply = post(addr, &[("Authorization", &auth)], &initialize).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        sessions.push(reply.header("mcp-session-id").unwrap().to_owned());
    }
    // One token holds at most MAX_HTTP_SESSIONS_PER_PRINCIPAL (issue 28): its own oldest were
    // closed to make room; its newest ones still work.
    assert_eq!(ping(addr, &auth, &sessions[0]).await, 404);
    assert_eq!(ping(addr, &auth, &sessions[MAX_HTTP_SESSIONS]).await, 200);
    let oldest_kept = MAX_HTTP_SESSIONS + 1 - MAX_HTTP_SESSIONS_PER_PRINCIPAL;
    assert_eq!(ping(addr, &auth, &sessions[oldest_kept - 1]).await, 404);
    assert_eq!(ping(addr, &auth, &sessions[oldest_kept]).await, 200);
}

/// The HTTP status of a `ping` in session `id`.
async fn ping(addr: SocketAddr, auth: &str, id: &str) -> u16 {
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let headers = [
        ("Authorization", auth),
        ("Mcp-Session-Id", id),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    post(addr, &headers, &ping).await.status
}

/// Issue 11: the limit of 8 MCP calls in flight counted per token, so one host's 8 calls
/// waiting for the user blocked every other host sharing the default token. It counts per
/// client (connection or HTTP session) now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mcp_hosts_waiting_calls_do_not_block_another_host_on_the_same_token() {
    let (_tmp, data, config) = setup("[mcp]\nlocal_confirmation_wait_ms = 120000\n");
    let _daemon = serve(&data, &config);
    let mut busy = SocketHost::connect(&data, "busy-host").await;
    for id in 1..=8 {
        busy.call(
            id,
            "openphone_memory_save",
            &format!(r#"{{"text":"note {id}","reason":"remember it"}}"#),
        )
        .await;
    }
    // All eight wait for the user.
    for _ in 0..600 {
        if pending(&data).len() == 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pending(&data).len(), 8);
    // A ninth call of the same host is refused: the limit still holds per host …
    busy.call(
        9,
        "openphone_memory_save",
        r#"{"text":"note 9","reason":"r"}"#,
    )
    .await;
    let refused = busy.answer(9).await;
    assert_eq!(tool_error(&refused)["code"], "rate_limited", "{refused}");
    // … and another host on the same token is served.
    let mut other = SocketHost::connect(&data, "other-host").await;
    other
        .call(
            1,
            "openphone_memory_search",
            r#"{"query":"note","reason":"look"}"#,
        )
        .await;
    let answer = other.answer(1).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}
