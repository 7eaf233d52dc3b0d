//! `openphone bench invoke`: a load tool for a running daemon. N concurrent connections (with
//! the operator credential) each invoke a tool M times, waiting for every answer; it prints
//! calls/s, p50, p99 and the daemon's resident memory (now and peak, from /proc on Linux).
//!
//! The endpoint rate-limits each credential (20/s by default): benchmark a daemon started with
//! a config that raises `[limits] rate_per_sec` and `rate_burst`, or the figures measure the
//! limiter. Answers refused with `rate_limited` are counted separately.
//!
//! `openphone bench mcp` does the same through `/mcp`: N keep-alive HTTP clients, each calling
//! an MCP tool M times in the 2026-07-28 era (no session), with the default MCP token.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use openphone_clock::Stopwatch;
use openphone_protocol::endpoint::{EndpointErrorCode, ToolsInvoke, ToolsInvokeParams};
use openphone_protocol::{ErrorCode, ToolStatus};
use openphone_server::EndpointInfo;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::client::{DaemonClient, RpcFailure};
use crate::data_dir::DataDir;

/// Options of `bench invoke`.
#[derive(Debug, clap::Args)]
pub struct InvokeBench {
    /// Concurrent connections.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Calls per connection.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// The command to invoke (a read is the sensible choice).
    #[arg(long, default_value = "openphone.screen.get")]
    pub tool: String,
    /// Its params as JSON.
    #[arg(
        long,
        default_value = r#"{"reason": "load test", "include_screenshot": false}"#
    )]
    pub params: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data_dir: DataDir,
}

#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    ok: usize,
    rate_limited: usize,
    other: usize,
}

/// Waits for every load task and adds up their tallies.
async fn gather(mut tasks: tokio::task::JoinSet<Tally>) -> Result<Tally> {
    let mut all = Tally::default();
    while let Some(done) = tasks.join_next().await {
        let t = done.context("a load task failed")?;
        all.latencies.extend(t.latencies);
        all.ok += t.ok;
        all.rate_limited += t.rate_limited;
        all.other += t.other;
    }
    Ok(all)
}

/// Whether the daemon refused a call with `rate_limited`.
fn is_rate_limited(e: &anyhow::Error) -> bool {
    e.downcast_ref::<RpcFailure>()
        .is_some_and(|f| f.code == EndpointErrorCode::Catalogue(ErrorCode::RateLimited))
}

/// Resident set size now and at its peak (KiB), from `/proc/<pid>/status`.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

pub fn invoke(opts: InvokeBench) -> Result<ExitCode> {
    if opts.connections == 0 || opts.calls == 0 {
        bail!("--connections and --calls must be at least 1");
    }
    let params: Value = serde_json::from_str(&opts.params).context("--params is not JSON")?;
    let dir = opts.data_dir.resolve()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let mut clients = Vec::with_capacity(opts.connections);
        for _ in 0..opts.connections {
            clients.push(DaemonClient::connect(&dir).await?);
        }
        let pid = clients.first().map_or(0, |c| c.endpoint.pid);
        let rss_before = rss_kib(pid);
        let started = Stopwatch::start();
        let mut tasks = tokio::task::JoinSet::new();
        for (n, mut client) in clients.into_iter().enumerate() {
            let tool = opts.tool.clone();
            let params = params.clone();
            let calls = opts.calls;
            tasks.spawn(async move {
                let mut tally = Tally::default();
                for i in 0..calls {
                    let t = Stopwatch::start();
                    let answer = client
                        .call::<ToolsInvoke>(ToolsInvokeParams {
                            request_id: format!("bench-{n}-{i}"),
                            tool: tool.clone(),
                            params: Some(params.clone()),
                            ..ToolsInvokeParams::default()
                        })
                        .await;
                    tally.latencies.push(t.elapsed());
                    match answer {
                        Ok(r) if r.status == ToolStatus::Ok => tally.ok += 1,
                        Ok(_) => tally.other += 1,
                        Err(e) if is_rate_limited(&e) => tally.rate_limited += 1,
                        Err(_) => tally.other += 1,
                    }
                }
                client.close().await;
                tally
            });
        }
        let all = gather(tasks).await?;
        let code = report(
            &opts.tool,
            opts.connections,
            all,
            started,
            pid,
            rss_before,
            opts.json,
        )?;
        Ok(code)
    })
}

/// Prints the figures of a finished run; exit 1 when some answers were neither ok nor
/// rate-limited.
fn report(
    tool: &str,
    connections: usize,
    mut all: Tally,
    started: Stopwatch,
    pid: u32,
    rss_before: Option<(u64, u64)>,
    json_out: bool,
) -> Result<ExitCode> {
    let elapsed = started.elapsed();
    let rss_after = rss_kib(pid);
    all.latencies.sort_unstable();
    let total = all.latencies.len();
    let at = |q: f64| {
        let i = ((total as f64 * q) as usize).min(total.saturating_sub(1));
        all.latencies.get(i).copied().unwrap_or_default()
    };
    let calls_per_sec = total as f64 / elapsed.as_secs_f64();
    let report = json!({
        "tool": tool,
        "connections": connections,
        "calls": total,
        "ok": all.ok,
        "rate_limited": all.rate_limited,
        "other": all.other,
        "seconds": elapsed.as_secs_f64(),
        "calls_per_sec": calls_per_sec,
        "p50_ms": at(0.50).as_secs_f64() * 1000.0,
        "p99_ms": at(0.99).as_secs_f64() * 1000.0,
        "daemon_pid": pid,
        "daemon_rss_kib_before": rss_before.map(|r| r.0),
        "daemon_rss_kib_after": rss_after.map(|r| r.0),
        "daemon_peak_rss_kib": rss_after.map(|r| r.1),
    });
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} × {} calls of {}: {:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms ({} ok, {} rate_limited, {} other)",
            connections,
            total / connections.max(1),
            tool,
            calls_per_sec,
            at(0.50).as_secs_f64() * 1000.0,
            at(0.99).as_secs_f64() * 1000.0,
            all.ok,
            all.rate_limited,
            all.other
        );
        match (rss_before, rss_after) {
            (Some(b), Some(a)) => println!(
                "daemon pid {pid}: RSS {} KiB before, {} KiB after, peak {} KiB",
                b.0, a.0, a.1
            ),
            _ => println!("daemon pid {pid}: RSS not available (no /proc)"),
        }
    }
    Ok(if all.other == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Options of `bench mcp`.
#[derive(Debug, clap::Args)]
pub struct McpBench {
    /// Concurrent HTTP clients (each one keep-alive connection).
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Calls per client.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// The MCP tool to call (a read is the sensible choice).
    #[arg(long, default_value = "openphone_screen_get")]
    pub tool: String,
    /// Its arguments as JSON.
    #[arg(
        long,
        default_value = r#"{"reason": "load test", "include_screenshot": false}"#
    )]
    pub args: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data_dir: DataDir,
}

/// The part of an MCP JSON-RPC message the benchmark reads.
#[derive(Debug, Default, Deserialize)]
struct McpAnswer {
    /// Present on a response (absent on a notification).
    #[serde(default)]
    id: Option<Value>,
    /// Present on a success.
    #[serde(default)]
    result: Option<McpCallResult>,
}

/// A `tools/call` result, as far as the benchmark looks.
#[derive(Debug, Deserialize)]
struct McpCallResult {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}

impl McpAnswer {
    /// A `tools/call` result that says it is not an error.
    fn is_success(&self) -> bool {
        self.result.as_ref().and_then(|r| r.is_error) == Some(false)
    }
}

const CLOSED: &str = "the daemon closed the connection before answering";

/// One keep-alive HTTP/1.1 connection to `/mcp` speaking the 2026-07-28 era (stateless: every
/// request carries its `_meta`, no session).
struct McpHttp {
    stream: tokio::io::BufReader<tokio::net::TcpStream>,
    authority: String,
    token: String,
    /// The server said `Connection: close` (it may, e.g. after refusing a request without
    /// reading its body): the next call opens a new connection.
    closed: bool,
}

impl McpHttp {
    async fn connect(authority: &str, token: &str) -> Result<McpHttp> {
        let stream = tokio::net::TcpStream::connect(authority)
            .await
            .with_context(|| format!("connecting to {authority}"))?;
        stream.set_nodelay(true)?;
        Ok(McpHttp {
            stream: tokio::io::BufReader::new(stream),
            authority: authority.to_owned(),
            token: token.to_owned(),
            closed: false,
        })
    }

    /// `tools/call`, on a fresh connection when the server closed the last one before
    /// answering (a closed keep-alive connection is normal HTTP, not a failed call).
    async fn call(&mut self, id: usize, tool: &str, args: &Value) -> Result<(u16, McpAnswer)> {
        if self.closed {
            *self = McpHttp::connect(&self.authority, &self.token).await?;
        }
        match self.exchange(id, tool, args).await {
            Err(e) if e.to_string() == CLOSED => {
                *self = McpHttp::connect(&self.authority, &self.token).await?;
                self.exchange(id, tool, args).await
            }
            other => other,
        }
    }

    /// `tools/call`; returns the HTTP status and the JSON-RPC message.
    async fn exchange(&mut self, id: usize, tool: &str, args: &Value) -> Result<(u16, McpAnswer)> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "openphone-bench", "version": env!("CARGO_PKG_VERSION")},
            }}})
        .to_string();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n\
             Content-Length: {}\r\n\r\n",
            self.authority,
            self.token,
            body.len()
        );
        // A write that fails, or an end before any answer byte, means the server never took
        // this request: only those are retried on a new connection.
        let w = self.stream.get_mut();
        let sent = async {
            w.write_all(head.as_bytes()).await?;
            w.write_all(body.as_bytes()).await
        };
        if sent.await.is_err() {
            bail!("{CLOSED}");
        }
        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            bail!("{CLOSED}");
        }
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("no HTTP status line: {line:?}"))?;
        let mut length = None;
        let mut chunked = false;
        loop {
            line.clear();
            if self.stream.read_line(&mut line).await? == 0 {
                bail!("the daemon closed the connection mid-response");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "content-length" {
                    length = v.parse::<usize>().ok();
                } else if k == "transfer-encoding" && v.contains("chunked") {
                    chunked = true;
                } else if k == "connection" && v.eq_ignore_ascii_case("close") {
                    self.closed = true;
                }
            }
        }
        let mut body = Vec::new();
        if let Some(n) = length {
            body.resize(n, 0);
            self.stream.read_exact(&mut body).await?;
        } else if chunked {
            loop {
                line.clear();
                self.stream.read_line(&mut line).await?;
                let n = usize::from_str_radix(line.trim(), 16).context("bad chunk size")?;
                let mut chunk = vec![0; n + 2];
                self.stream.read_exact(&mut chunk).await?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            bail!("a response without a length");
        }
        let text = String::from_utf8_lossy(&body);
        let message = serde_json::from_str(&text).unwrap_or_else(|_| {
            // An SSE body: the last data line carrying the response.
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<McpAnswer>(d.trim()).ok())
                .rfind(|m| m.id.is_some())
                .unwrap_or_default()
        });
        Ok((status, message))
    }
}

/// `bench mcp`: concurrent MCP `tools/call` over Streamable HTTP.
pub fn mcp(opts: McpBench) -> Result<ExitCode> {
    if opts.connections == 0 || opts.calls == 0 {
        bail!("--connections and --calls must be at least 1");
    }
    let args: Value = serde_json::from_str(&opts.args).context("--args is not JSON")?;
    let dir = opts.data_dir.resolve()?;
    let endpoint: EndpointInfo = serde_json::from_str(
        &std::fs::read_to_string(dir.join(openphone_server::ENDPOINT_FILE))
            .context("no daemon serves this data directory (no endpoint.json)")?,
    )?;
    let url = endpoint
        .mcp_url
        .as_deref()
        .context("the daemon serves no MCP (disabled in its config)")?;
    let authority = url
        .strip_prefix("http://")
        .and_then(|r| r.strip_suffix("/mcp"))
        .context("unexpected mcp_url")?
        .to_owned();
    let pid = endpoint.pid;
    let token = std::fs::read_to_string(dir.join(openphone_server::MCP_TOKEN_FILE))
        .context("no mcp.token in the data directory")?
        .trim()
        .to_owned();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let mut clients = Vec::with_capacity(opts.connections);
        for _ in 0..opts.connections {
            clients.push(McpHttp::connect(&authority, &token).await?);
        }
        let rss_before = rss_kib(pid);
        let started = Stopwatch::start();
        let mut tasks = tokio::task::JoinSet::new();
        for (n, mut client) in clients.into_iter().enumerate() {
            let tool = opts.tool.clone();
            let args = args.clone();
            let calls = opts.calls;
            tasks.spawn(async move {
                let mut tally = Tally::default();
                for i in 0..calls {
                    let t = Stopwatch::start();
                    let answer = client.call(n * calls + i, &tool, &args).await;
                    tally.latencies.push(t.elapsed());
                    match answer {
                        Ok((200, m)) if m.is_success() => tally.ok += 1,
                        Ok((429, _)) => tally.rate_limited += 1,
                        Ok(_) => tally.other += 1,
                        Err(e) => {
                            tally.other += 1;
                            eprintln!("openphone bench mcp: {e:#}");
                            break;
                        }
                    }
                }
                tally
            });
        }
        let all = gather(tasks).await?;
        report(
            &opts.tool,
            opts.connections,
            all,
            started,
            pid,
            rss_before,
            opts.json,
        )
    })
}
