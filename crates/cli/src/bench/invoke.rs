//! `openphone bench invoke`: N WebSocket connections, each saying `hello` and then calling
//! `tools.invoke` one call at a time, waiting for every answer.
//!
//! The target is the daemon of the data directory (the `url` of its `endpoint.json`, with the
//! operator token), or any server speaking the endpoint protocol: `--url ws://…/v1/runtime`
//! with `--token` or `--token-file` (the bearer token of the upgrade). Connections are plain
//! TCP with `TCP_NODELAY`, as a runtime's would be.
//!
//! `--method jobs.create` calls `jobs.create` instead, with `--params` as the job's arguments
//! (every call creates one job: the figure of "creating 10 k jobs through the endpoint"; the
//! daemon must keep that many, `[jobs] max_jobs`).
//!
//! The endpoint rate-limits each credential (20/s by default): load a daemon started with a
//! config that raises `[limits] rate_per_sec` and `rate_burst`, or the figures measure the
//! limiter. Answers refused with `rate_limited` are counted apart and do not fail the run.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use openphone_clock::Stopwatch;
use openphone_protocol::endpoint::{
    ClientInfo, Hello, HelloParams, JobsCreate, JobsCreateParams, Method, Request, RequestId,
    ServerMessage, ToolsInvoke, ToolsInvokeParams, VersionRange,
};
use openphone_server::TOKEN_FILE;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{WebSocketStream, client_async};

use super::{Load, Outcome, Pacer, Run, Server, answer, call_timeout, gather, rss_kib};
use crate::data_dir::DataDir;

/// Options of `bench invoke`.
#[derive(Debug, clap::Args)]
pub struct InvokeBench {
    /// Concurrent connections.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// The command to invoke (a read is the sensible choice).
    #[arg(long, default_value = "openphone.screen.get")]
    pub tool: String,
    /// The endpoint method each call makes: `tools.invoke` (default) or `jobs.create`
    /// (operator only; `--params` are the job's arguments, `--tool` is ignored).
    #[arg(long, default_value = "tools.invoke", value_parser = ["tools.invoke", "jobs.create"])]
    pub method: String,
    /// Its params as JSON.
    #[arg(
        long,
        default_value = r#"{"reason": "load test", "include_screenshot": false}"#
    )]
    pub params: String,
    /// The server's WebSocket URL (ws://host:port/v1/runtime) instead of the data directory's
    /// daemon.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub server: Server,
    #[command(flatten)]
    pub load: Load,
    #[command(flatten)]
    pub data_dir: DataDir,
}

/// Where the connections go and how they authenticate.
#[derive(Debug)]
struct Target {
    url: String,
    /// `host:port` to connect to.
    addr: String,
    token: Option<String>,
}

/// Checks that `url` is a `ws://` URL and finds the address to connect to.
fn ws_target(url: &str, token: Option<String>) -> Result<Target> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("ws") => {}
        Some("wss") => bail!(
            "--url {url:?}: wss:// is not supported by the benchmark (it speaks no TLS); use a ws:// URL"
        ),
        _ => bail!("--url must be a ws:// URL such as ws://127.0.0.1:7788/v1/runtime, not {url:?}"),
    }
    let req = url
        .into_client_request()
        .with_context(|| format!("--url {url:?} is not a usable WebSocket URL"))?;
    let authority = req
        .uri()
        .authority()
        .with_context(|| format!("--url {url:?} names no host"))?;
    let addr = match authority.port_u16() {
        Some(_) => authority.as_str().to_owned(),
        None => format!("{}:80", authority.host()),
    };
    Ok(Target {
        url: url.to_owned(),
        addr,
        token,
    })
}

/// The target and the server's pid: `--url` or the data directory's daemon.
fn resolve(opts: &InvokeBench) -> Result<(Target, Option<u32>)> {
    let token = opts.server.token()?;
    if let Some(url) = &opts.url {
        return Ok((ws_target(url, token)?, opts.server.pid));
    }
    let dir = opts.data_dir.resolve()?;
    let endpoint = super::read_endpoint(&dir)?;
    let token = match token {
        Some(t) => t,
        None => super::read_token_file(&dir.join(TOKEN_FILE))?,
    };
    let target = ws_target(&endpoint.url, Some(token))?;
    Ok((target, opts.server.pid.or(Some(endpoint.pid))))
}

/// One connection, after `hello`.
struct WsBench {
    ws: WebSocketStream<TcpStream>,
    next_id: u64,
}

/// How long the upgrade and `hello` may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl WsBench {
    /// Connects, upgrades with the bearer token and says `hello`.
    async fn connect(target: &Target) -> Result<WsBench> {
        tokio::time::timeout(CONNECT_TIMEOUT, WsBench::open(target))
            .await
            .with_context(|| format!("{} did not complete hello in time", target.url))?
    }

    async fn open(target: &Target) -> Result<WsBench> {
        let stream = TcpStream::connect(&target.addr)
            .await
            .with_context(|| format!("connecting to {}", target.addr))?;
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        let mut req = target
            .url
            .as_str()
            .into_client_request()
            .context("bad WebSocket URL")?;
        if let Some(token) = &target.token {
            req.headers_mut().insert(
                "Authorization",
                format!("Bearer {token}")
                    .parse()
                    .context("the token cannot go in an HTTP header")?,
            );
        }
        let (ws, _) = client_async(req, stream).await.with_context(|| {
            format!(
                "the WebSocket upgrade to {} failed{}",
                target.url,
                if target.token.is_none() {
                    " (no token given: pass --token or --token-file)"
                } else {
                    ""
                }
            )
        })?;
        let mut conn = WsBench { ws, next_id: 0 };
        let hello = HelloParams {
            protocol: VersionRange {
                min: openphone_protocol::MIN_VERSION,
                max: openphone_protocol::MAX_VERSION,
            },
            client: ClientInfo {
                name: "openphone-bench".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            token: None,
        };
        match conn.exchange::<Hello>(hello).await? {
            Answer::Result(r) => {
                r.result_as::<Hello>()
                    .context("the server's hello answer is malformed")?;
            }
            Answer::Error(code, message) => {
                let hint = if target.token.is_none() {
                    " (no token given: pass --token or --token-file)"
                } else {
                    ""
                };
                bail!("the server refused hello: {message} ({code}){hint}")
            }
        }
        Ok(conn)
    }

    /// Sends one request; returns its id.
    async fn send<M: Method>(&mut self, params: M::Params) -> Result<u64> {
        self.next_id += 1;
        let id = self.next_id;
        let frame = serde_json::to_string(&Request::new::<M>(id, params))
            .with_context(|| format!("writing a {} request", M::NAME))?;
        self.ws
            .send(Message::text(frame))
            .await
            .context("sending a frame")?;
        Ok(id)
    }

    /// The next text frame (binary frames and pings are skipped).
    async fn next_text(&mut self) -> Result<tokio_tungstenite::tungstenite::Utf8Bytes> {
        loop {
            let Some(frame) = self.ws.next().await else {
                bail!("the server closed the connection");
            };
            match frame.context("reading a frame")? {
                Message::Text(t) => return Ok(t),
                Message::Close(_) => bail!("the server closed the connection"),
                Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    }

    /// Sends one request and waits for the answer with its id (events and other frames are
    /// skipped).
    async fn exchange<M: Method>(&mut self, params: M::Params) -> Result<Answer> {
        let ours = RequestId::from(self.send::<M>(params).await?);
        loop {
            let text = self.next_text().await?;
            match ServerMessage::parse(text.as_str()).context("the server sent a bad frame")? {
                ServerMessage::Response(r) if r.id == ours => return Ok(Answer::Result(r)),
                ServerMessage::Error(e) if e.id.as_ref() == Some(&ours) => {
                    return Ok(Answer::Error(
                        e.error.data.code.as_str().to_owned(),
                        e.error.message,
                    ));
                }
                _ => {}
            }
        }
    }

    /// One `tools.invoke`, classified from the answer's id, status and error code alone
    /// ([`answer::tool_answer`]: the tool's own result is skipped, not parsed).
    async fn invoke(&mut self, params: ToolsInvokeParams) -> Result<Outcome> {
        let ours = self.send::<ToolsInvoke>(params).await?;
        loop {
            let text = self.next_text().await?;
            if let Some(outcome) =
                answer::tool_answer(text.as_str(), ours).context("the server sent a bad frame")?
            {
                return Ok(outcome);
            }
        }
    }

    /// One `jobs.create`, classified.
    async fn create_job(&mut self, args: serde_json::Map<String, Value>) -> Result<Outcome> {
        Ok(
            match self.exchange::<JobsCreate>(JobsCreateParams(args)).await? {
                Answer::Result(r) => match r.result_as::<JobsCreate>() {
                    Ok(_) => Outcome::Ok,
                    Err(_) => Outcome::failed("bad_answer"),
                },
                Answer::Error(code, _) => Outcome::Failed(code),
            },
        )
    }

    async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// A JSON-RPC answer to one request.
enum Answer {
    Result(openphone_protocol::endpoint::Response),
    /// `error.data.code` and the message.
    Error(String, String),
}

/// `bench invoke`.
pub fn invoke(opts: InvokeBench) -> Result<ExitCode> {
    let plan = opts.load.plan(opts.connections, "--connections")?;
    let params: Value = serde_json::from_str(&opts.params).context("--params is not JSON")?;
    let jobs = opts.method == "jobs.create";
    if jobs && !params.is_object() {
        bail!("--params must be a JSON object of job arguments with --method jobs.create");
    }
    let (target, pid) = resolve(&opts)?;
    let target = Arc::new(target);
    let timeout = call_timeout(opts.server.timeout);
    let rt = opts.load.runtime()?;
    rt.block_on(async move {
        let mut clients = Vec::with_capacity(opts.connections);
        for _ in 0..opts.connections {
            clients.push(WsBench::connect(&target).await?);
        }
        // Request ids unique to this run, so runs against one daemon never share one.
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        let rss_before = pid.and_then(rss_kib);
        let started = Stopwatch::start();
        let mut tasks = tokio::task::JoinSet::new();
        for (n, mut client) in clients.into_iter().enumerate() {
            let tool = opts.tool.clone();
            let params = params.clone();
            let target = Arc::clone(&target);
            let prefix = format!("bench-{}-{n}", &run_id[..8]);
            tasks.spawn(async move {
                let mut pacer = Pacer::new(plan, started);
                let mut warned = false;
                while pacer.more() {
                    let (i, call) = pacer.begin();
                    let call_once = async {
                        if jobs {
                            let args = params.as_object().cloned().unwrap_or_default();
                            client.create_job(args).await
                        } else {
                            let request = ToolsInvokeParams {
                                request_id: format!("{prefix}-{i}"),
                                tool: tool.clone(),
                                params: Some(params.clone()),
                                ..ToolsInvokeParams::default()
                            };
                            client.invoke(request).await
                        }
                    };
                    let broken = match tokio::time::timeout(timeout, call_once).await {
                        Ok(Ok(outcome)) => {
                            pacer.record(call, outcome);
                            continue;
                        }
                        Ok(Err(e)) => {
                            if !warned {
                                eprintln!("openphone bench invoke: {e:#}; reconnecting");
                                warned = true;
                            }
                            "connection"
                        }
                        Err(_) => "timeout",
                    };
                    // The connection is broken, or may still deliver the late answer: count
                    // the call, then go on over a new connection.
                    pacer.record(call, Outcome::failed(broken));
                    match WsBench::connect(&target).await {
                        Ok(fresh) => client = fresh,
                        Err(e) => {
                            eprintln!("openphone bench invoke: {e:#}");
                            return pacer.finish();
                        }
                    }
                }
                client.close().await;
                pacer.finish()
            });
        }
        let all = gather(tasks).await?;
        Run {
            mode: "invoke",
            target: &target.url,
            tool: if jobs { "jobs.create" } else { &opts.tool },
            extra: vec![("connections", json!(opts.connections))],
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
    use super::super::RATE_LIMITED;
    use super::*;

    #[test]
    fn only_ws_urls_are_targets() {
        let t = ws_target("ws://127.0.0.1:9000/v1/runtime", None).unwrap();
        assert_eq!(t.addr, "127.0.0.1:9000");
        assert_eq!(
            ws_target("ws://localhost/v1/runtime", None).unwrap().addr,
            "localhost:80"
        );
        let err = ws_target("http://127.0.0.1:9000/mcp", None).unwrap_err();
        assert!(err.to_string().contains("must be a ws:// URL"), "{err}");
        let err = ws_target("wss://example.test/v1/runtime", None).unwrap_err();
        assert!(err.to_string().contains("no TLS"), "{err}");
        assert!(ws_target("127.0.0.1:9000", None).is_err());
    }

    #[test]
    fn rate_limited_is_the_endpoint_code() {
        assert_eq!(
            openphone_protocol::endpoint::EndpointErrorCode::Catalogue(
                openphone_protocol::ErrorCode::RateLimited
            )
            .as_str(),
            RATE_LIMITED
        );
    }
}
