//! `openphone bench mcp`: N keep-alive HTTP/1.1 clients calling one MCP tool over Streamable
//! HTTP, one call at a time each.
//!
//! Two protocol eras (`--era`), as `docs/mcp.md` describes them:
//!
//! - `2025-11-25`, the handshake era most hosts speak today: each client sends `initialize`
//!   (then `notifications/initialized`), keeps the `Mcp-Session-Id` the server gives and sends
//!   it with `MCP-Protocol-Version` on every call; answers come as JSON or as a
//!   `text/event-stream` whose `data:` lines carry the response. A session the server forgot
//!   (404) is counted as `session_expired` and initialised again.
//! - `2026-07-28`, the per-request era: no session; every `tools/call` carries its
//!   `_meta` (protocol version, capabilities, client info) and the `Mcp-Method`/`Mcp-Name`
//!   headers. Each client declares its own `clientInfo` name, as separate hosts would.
//!
//! The target is the daemon of the data directory (its `mcp_url`, with `mcp.token`), or any
//! MCP server: `--url http://…` with an optional `--token`/`--token-file` (sent as
//! `Authorization: Bearer`; without one no such header is sent). The HTTP client is written
//! here (`mcp/http.rs`), small and strict: it sets `TCP_NODELAY`, reads `Content-Length`,
//! chunked and close-delimited bodies, and opens a new connection when the server closed the
//! last one. This file holds the options, the MCP messages as far as the benchmark reads
//! them, the clients of both eras and the run.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use openphone_clock::Stopwatch;
use openphone_server::MCP_TOKEN_FILE;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Load, Outcome, Pacer, RATE_LIMITED, Run, Server, call_timeout, gather, rss_kib};
use crate::data_dir::DataDir;

mod http;

use http::{HttpAnswer, HttpConn, HttpError, Target, excerpt, http_target};

/// The MCP protocol era the clients speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Era {
    /// `initialize` per connection, `Mcp-Session-Id`, answers as JSON or SSE.
    #[value(name = "2025-11-25")]
    Handshake,
    /// Stateless: `_meta` on every request, no session.
    #[value(name = "2026-07-28")]
    PerRequest,
}

impl Era {
    fn as_str(self) -> &'static str {
        match self {
            Era::Handshake => "2025-11-25",
            Era::PerRequest => "2026-07-28",
        }
    }
}

/// Options of `bench mcp`.
#[derive(Debug, clap::Args)]
pub struct McpBench {
    /// Concurrent HTTP clients (each one keep-alive connection).
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// The MCP tool to call (a read is the sensible choice).
    #[arg(long, default_value = "openphone_screen_get")]
    pub tool: String,
    /// Its arguments as JSON.
    #[arg(
        long,
        default_value = r#"{"reason": "load test", "include_screenshot": false}"#
    )]
    pub args: String,
    /// The protocol era: 2025-11-25 (initialize, sessions, SSE) or 2026-07-28 (stateless).
    #[arg(long, value_enum, default_value = "2026-07-28")]
    pub era: Era,
    /// The server's MCP URL (http://host:port/path) instead of the data directory's daemon.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub server: Server,
    #[command(flatten)]
    pub load: Load,
    #[command(flatten)]
    pub data_dir: DataDir,
}

/// The target and the server's pid: `--url` or the data directory's daemon.
fn resolve(opts: &McpBench) -> Result<(Target, Option<u32>)> {
    let token = opts.server.token()?;
    if let Some(url) = &opts.url {
        return Ok((http_target(url, token)?, opts.server.pid));
    }
    let dir = opts.data_dir.resolve()?;
    let endpoint = super::read_endpoint(&dir)?;
    let url = endpoint
        .mcp_url
        .as_deref()
        .context("the daemon serves no MCP (disabled in its config, or not on loopback)")?;
    let token = match token {
        Some(t) => t,
        None => super::read_token_file(&dir.join(MCP_TOKEN_FILE))?,
    };
    Ok((
        http_target(url, Some(token))?,
        opts.server.pid.or(Some(endpoint.pid)),
    ))
}

/// A JSON-RPC message as far as the benchmark reads it.
#[derive(Debug, Deserialize)]
struct RpcMessage {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

#[derive(Debug, Deserialize)]
struct RpcError {
    code: i64,
    #[serde(default)]
    message: String,
}

/// The part of `initialize`'s result the benchmark uses.
#[derive(Debug, Deserialize)]
struct InitializeResult {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
}

/// The part of a `CallToolResult` the benchmark uses.
#[derive(Debug, Deserialize)]
struct CallResult {
    #[serde(rename = "isError", default)]
    is_error: bool,
    #[serde(default)]
    content: Vec<ContentBlock>,
    /// A policy outcome (pending, denied, expired) is `isError: false` with
    /// `structuredContent.outcome`: not done either.
    #[serde(rename = "structuredContent", default)]
    structured: Option<PolicyOutcome>,
}

/// The `outcome` member of a policy outcome's `structuredContent`.
#[derive(Debug, Deserialize)]
struct PolicyOutcome {
    #[serde(default)]
    outcome: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct ContentBlock {
    #[serde(default)]
    text: Option<String>,
}

/// The daemon's failure text, `{"error": {"code": …}}`.
#[derive(Debug, Deserialize)]
struct FailureText {
    error: FailureCode,
}

#[derive(Debug, Deserialize)]
struct FailureCode {
    code: String,
}

/// The `data:` payloads of an event stream, one per event (multi-line data joined by `\n`).
fn sse_data(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data = String::new();
    let mut has_data = false;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if has_data {
                events.push(std::mem::take(&mut data));
                has_data = false;
            }
            continue;
        }
        if let Some(value) = line.strip_prefix("data:") {
            if has_data {
                data.push('\n');
            }
            data.push_str(value.strip_prefix(' ').unwrap_or(value));
            has_data = true;
        }
    }
    if has_data {
        events.push(data);
    }
    events
}

/// The response to request `id` in an answer: its JSON body, or the event of its event stream
/// that carries it.
fn response_to(answer: &HttpAnswer, id: u64) -> Option<RpcMessage> {
    let text = String::from_utf8_lossy(&answer.body);
    let ours = |m: &RpcMessage| m.id.as_ref() == Some(&json!(id));
    if answer.event_stream {
        sse_data(&text)
            .iter()
            .filter_map(|d| serde_json::from_str::<RpcMessage>(d).ok())
            .find(ours)
    } else {
        serde_json::from_str::<RpcMessage>(&text).ok().filter(ours)
    }
}

/// How a `tools/call` answer counts.
fn classify(answer: &HttpAnswer, id: u64) -> Outcome {
    match answer.status {
        200 => {}
        429 => return Outcome::failed(RATE_LIMITED),
        status => return Outcome::failed(format!("http_{status}")),
    }
    let Some(message) = response_to(answer, id) else {
        return Outcome::failed("no_answer");
    };
    if let Some(e) = message.error {
        return Outcome::failed(format!("rpc_{}", e.code));
    }
    let Some(result) = message
        .result
        .and_then(|r| serde_json::from_value::<CallResult>(r).ok())
    else {
        return Outcome::failed("bad_answer");
    };
    let outcome = result
        .structured
        .as_ref()
        .is_some_and(|s| matches!(s.outcome, Some(serde_json::Value::String(_))));
    if !result.is_error && !outcome {
        return Outcome::Ok;
    }
    let code = result
        .content
        .iter()
        .filter_map(|c| c.text.as_deref())
        .find_map(|t| serde_json::from_str::<FailureText>(t).ok())
        .map(|f| f.error.code);
    match code {
        Some(code) => Outcome::failed(format!("tool:{code}")),
        None => Outcome::failed("tool_error"),
    }
}

/// One MCP client: an HTTP connection and, in the handshake era, its session.
struct McpClient {
    conn: HttpConn,
    target: Arc<Target>,
    era: Era,
    /// The `clientInfo` name this client declares.
    name: String,
    /// The negotiated protocol version (the `MCP-Protocol-Version` header).
    version: String,
    session: Option<String>,
    next_id: u64,
}

impl McpClient {
    /// Connects; in the handshake era also initialises a session.
    async fn connect(target: Arc<Target>, era: Era, n: usize) -> Result<McpClient> {
        let conn = HttpConn::connect(&target.addr).await?;
        let mut client = McpClient {
            conn,
            target,
            era,
            name: format!("openphone-bench-{n}"),
            version: era.as_str().to_owned(),
            session: None,
            next_id: 0,
        };
        if era == Era::Handshake {
            client.initialize().await?;
        }
        Ok(client)
    }

    /// Sends a request, over a new connection when the server closed this one before taking
    /// it.
    async fn send(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<HttpAnswer> {
        if self.conn.closed {
            self.conn = HttpConn::connect(&self.target.addr).await?;
        }
        match self
            .conn
            .exchange(&self.target, method, headers, body)
            .await
        {
            Ok(answer) => Ok(answer),
            Err(HttpError::NotTaken) => {
                self.conn = HttpConn::connect(&self.target.addr).await?;
                match self
                    .conn
                    .exchange(&self.target, method, headers, body)
                    .await
                {
                    Ok(answer) => Ok(answer),
                    Err(HttpError::NotTaken) => {
                        bail!("the server closed the connection before answering")
                    }
                    Err(HttpError::Broken(e)) => Err(e),
                }
            }
            Err(HttpError::Broken(e)) => Err(e),
        }
    }

    /// `initialize` and `notifications/initialized`: a new session.
    async fn initialize(&mut self) -> Result<()> {
        self.session = None;
        self.next_id += 1;
        let id = self.next_id;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": Era::Handshake.as_str(),
            "capabilities": {},
            "clientInfo": {"name": self.name, "version": env!("CARGO_PKG_VERSION")},
        }})
        .to_string();
        let answer = self.send("POST", &[], &body).await?;
        if answer.status != 200 {
            bail!(
                "{} answered initialize with HTTP {}: {}{}",
                self.target.url,
                answer.status,
                excerpt(&answer.body),
                if answer.status == 401 && self.target.token.is_none() {
                    " (no token given: pass --token or --token-file)"
                } else {
                    ""
                }
            );
        }
        let message = response_to(&answer, id)
            .with_context(|| format!("no answer to initialize in {}", excerpt(&answer.body)))?;
        if let Some(e) = message.error {
            bail!("initialize refused: {} ({})", e.message, e.code);
        }
        let result: InitializeResult = message
            .result
            .and_then(|r| serde_json::from_value(r).ok())
            .context("initialize answered without a protocolVersion")?;
        self.version = result.protocol_version;
        self.session = answer.session;
        let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        let headers = self.session_headers();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = self.send("POST", &headers, &body).await?;
        if !(200..300).contains(&answer.status) {
            bail!(
                "{} answered notifications/initialized with HTTP {}: {}",
                self.target.url,
                answer.status,
                excerpt(&answer.body)
            );
        }
        Ok(())
    }

    /// The headers of a request inside the session.
    fn session_headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("MCP-Protocol-Version", self.version.clone())];
        if let Some(session) = &self.session {
            headers.push(("Mcp-Session-Id", session.clone()));
        }
        headers
    }

    /// One `tools/call`, classified; an error means the connection is unusable.
    async fn call(&mut self, tool: &str, args: &Value) -> Result<Outcome> {
        self.next_id += 1;
        let id = self.next_id;
        let (body, headers) = match self.era {
            Era::Handshake => (
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}}),
                self.session_headers(),
            ),
            Era::PerRequest => (
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": tool, "arguments": args, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": Era::PerRequest.as_str(),
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo":
                        {"name": self.name, "version": env!("CARGO_PKG_VERSION")},
                }}}),
                vec![
                    ("MCP-Protocol-Version", Era::PerRequest.as_str().to_owned()),
                    ("Mcp-Method", "tools/call".to_owned()),
                    ("Mcp-Name", tool.to_owned()),
                ],
            ),
        };
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = self.send("POST", &headers, &body.to_string()).await?;
        if answer.status == 404 && self.era == Era::Handshake && self.session.is_some() {
            // The server forgot the session (as MCP allows): a new one for the next call.
            self.initialize().await?;
            return Ok(Outcome::failed("session_expired"));
        }
        Ok(classify(&answer, id))
    }

    /// Ends the session politely (handshake era), ignoring the answer.
    async fn end(mut self) {
        if self.session.is_none() {
            return;
        }
        let headers = self.session_headers();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let _ = self.send("DELETE", &headers, "").await;
    }
}

/// `bench mcp`.
pub fn mcp(opts: McpBench) -> Result<ExitCode> {
    let plan = opts.load.plan(opts.connections, "--connections")?;
    let args: Value = serde_json::from_str(&opts.args).context("--args is not JSON")?;
    let (target, pid) = resolve(&opts)?;
    let target = Arc::new(target);
    let timeout = call_timeout(opts.server.timeout);
    let era = opts.era;
    let rt = opts.load.runtime()?;
    rt.block_on(async move {
        let mut clients = Vec::with_capacity(opts.connections);
        for n in 0..opts.connections {
            let client =
                tokio::time::timeout(timeout, McpClient::connect(Arc::clone(&target), era, n))
                    .await
                    .with_context(|| format!("{} did not answer in time", target.url))??;
            clients.push(client);
        }
        let rss_before = pid.and_then(rss_kib);
        let started = Stopwatch::start();
        let mut tasks = tokio::task::JoinSet::new();
        for (n, mut client) in clients.into_iter().enumerate() {
            let tool = opts.tool.clone();
            let args = args.clone();
            let target = Arc::clone(&target);
            tasks.spawn(async move {
                let mut pacer = Pacer::new(plan, started);
                let mut warned = false;
                while pacer.more() {
                    let (_, call) = pacer.begin();
                    let broken =
                        match tokio::time::timeout(timeout, client.call(&tool, &args)).await {
                            Ok(Ok(outcome)) => {
                                pacer.record(call, outcome);
                                continue;
                            }
                            Ok(Err(e)) => {
                                if !warned {
                                    eprintln!("openphone bench mcp: {e:#}; reconnecting");
                                    warned = true;
                                }
                                "connection"
                            }
                            Err(_) => "timeout",
                        };
                    // The connection is unusable (or mid-answer): count the call, then go on
                    // with a new client.
                    pacer.record(call, Outcome::failed(broken));
                    let fresh = tokio::time::timeout(
                        timeout,
                        McpClient::connect(Arc::clone(&target), era, n),
                    )
                    .await;
                    match fresh {
                        Ok(Ok(fresh)) => client = fresh,
                        Ok(Err(e)) => {
                            eprintln!("openphone bench mcp: {e:#}");
                            return pacer.finish();
                        }
                        Err(_) => {
                            eprintln!("openphone bench mcp: {} did not answer in time", target.url);
                            return pacer.finish();
                        }
                    }
                }
                client.end().await;
                pacer.finish()
            });
        }
        let all = gather(tasks).await?;
        Run {
            mode: "mcp",
            target: &target.url,
            tool: &opts.tool,
            extra: vec![
                ("connections", json!(opts.connections)),
                ("era", json!(era.as_str())),
            ],
            plan,
            started,
            server_pid: pid,
            rss_before,
        }
        .report(all, opts.load.json)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_are_targets() {
        let t = http_target("http://127.0.0.1:7788/mcp", None).unwrap();
        assert_eq!(
            (t.authority.as_str(), t.addr.as_str(), t.path.as_str()),
            ("127.0.0.1:7788", "127.0.0.1:7788", "/mcp")
        );
        let t = http_target("http://localhost", None).unwrap();
        assert_eq!((t.addr.as_str(), t.path.as_str()), ("localhost:80", "/"));
        let t = http_target("http://[::1]:9000/mcp?x=1", None).unwrap();
        assert_eq!(
            (t.addr.as_str(), t.path.as_str()),
            ("[::1]:9000", "/mcp?x=1")
        );
        assert_eq!(http_target("http://[::1]/", None).unwrap().addr, "[::1]:80");
        let err = http_target("ws://127.0.0.1:7788/v1/runtime", None).unwrap_err();
        assert!(err.to_string().contains("must be an http:// URL"), "{err}");
        let err = http_target("https://example.test/mcp", None).unwrap_err();
        assert!(err.to_string().contains("no TLS"), "{err}");
        assert!(http_target("127.0.0.1:7788", None).is_err());
        assert!(http_target("http://user@host/mcp", None).is_err());
        assert!(http_target("http:///mcp", None).is_err());
    }

    #[test]
    fn event_streams_yield_each_events_data() {
        let text = "data: \nid: 0\nretry: 3000\n\nevent: message\ndata: {\"a\":\ndata: 1}\n\n: comment\r\ndata:{\"b\":2}\r\n";
        assert_eq!(sse_data(text), vec!["", "{\"a\":\n1}", "{\"b\":2}"]);
    }

    fn answer(status: u16, event_stream: bool, body: &str) -> HttpAnswer {
        HttpAnswer {
            status,
            session: None,
            event_stream,
            body: body.as_bytes().to_vec(),
        }
    }

    fn kind(o: Outcome) -> String {
        match o {
            Outcome::Ok => "ok".to_owned(),
            Outcome::Failed(k) => k,
        }
    }

    #[test]
    fn answers_are_classified() {
        let ok = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"{}"}]}}"#;
        assert_eq!(kind(classify(&answer(200, false, ok), 3)), "ok");
        assert_eq!(kind(classify(&answer(200, false, ok), 4)), "no_answer");
        let sse = format!("data: \nid: 0\n\nevent: message\ndata: {ok}\n\n");
        assert_eq!(kind(classify(&answer(200, true, &sse), 3)), "ok");
        assert_eq!(kind(classify(&answer(429, false, ""), 3)), RATE_LIMITED);
        assert_eq!(kind(classify(&answer(400, false, ""), 3)), "http_400");
        let rpc = r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool"}}"#;
        assert_eq!(kind(classify(&answer(200, false, rpc), 3)), "rpc_-32602");
        let failed = r#"{"jsonrpc":"2.0","id":3,"result":{"isError":true,"content":[{"type":"text","text":"{\"error\":{\"code\":\"rate_limited\",\"message\":\"x\"}}"}]}}"#;
        assert_eq!(
            kind(classify(&answer(200, false, failed), 3)),
            "tool:rate_limited"
        );
        let opaque = r#"{"jsonrpc":"2.0","id":3,"result":{"isError":true,"content":[]}}"#;
        assert_eq!(kind(classify(&answer(200, false, opaque), 3)), "tool_error");
        assert_eq!(
            kind(classify(&answer(200, false, "not json"), 3)),
            "no_answer"
        );
    }

    #[test]
    fn excerpts_are_short() {
        assert_eq!(excerpt(b""), "(no body)");
        assert_eq!(excerpt(" hi \n".as_bytes()), "hi");
        assert!(excerpt("é".repeat(500).as_bytes()).ends_with('…'));
    }
}
