//! The `mcp` mode: the wire-ceiling reference of `openphone bench mcp`.
//!
//! A Streamable HTTP MCP server on `/mcp` (hyper, HTTP/1.1 keep-alive, `TCP_NODELAY`) that
//! answers exactly what the benchmark's client sends, in both protocol eras, the way the
//! daemon frames it (`docs/mcp.md`):
//!
//! - `initialize` → a session (`Mcp-Session-Id`), the result as a `text/event-stream`;
//!   `notifications/initialized` (any notification) → 202; `DELETE` with the session → 202.
//! - `tools/call` inside a session (2025-11-25) → the result as an event stream, with the
//!   daemon's priming event; without a session but with `MCP-Protocol-Version: 2026-07-28`
//!   (the per-request era) → the result as JSON with `resultType: "complete"`. A call
//!   without either is refused with 400, an unknown session with 404, as the daemon does.
//! - The result is the daemon's: a one-line text summary, `structuredContent` = the
//!   fixture (`openphone_screen_get` → screen-get.json, any other tool → device-status.json),
//!   `isError: false` and `_meta."dev.openphone/toolResult"` with request and audit ids of
//!   the daemon's length.
//!
//! With `--token` every request must carry `Authorization: Bearer TOKEN` (401 otherwise), so
//! the client sends what it sends to the daemon. No policy, storage, validation of the tool's
//! arguments or device work happens: the request is parsed (borrowed, no tree) only as far as
//! its `id`, `method` and tool name.

use std::borrow::Cow;
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// The endpoint's path, as on the daemon.
const PATH: &str = "/mcp";

/// The per-request era's protocol version.
const PER_REQUEST: &str = "2026-07-28";

/// The handshake era's protocol version, which `initialize` answers.
const HANDSHAKE: &str = "2025-11-25";

/// The largest request body read.
const MAX_BODY: usize = 1024 * 1024;

/// A JSON-RPC message, as far as the server reads it.
#[derive(Deserialize)]
struct RpcRequest<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow, default)]
    params: Option<CallParams<'a>>,
}

/// `tools/call`'s params, as far as the server reads them.
#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// One tool's fixed answer, serialised once: everything of the `result` object but the ids.
struct ToolAnswer {
    /// From `"content"` to the start of the audit id's value.
    middle: String,
}

/// What every connection shares.
pub(crate) struct Shared {
    /// `Bearer TOKEN`, when a token is required.
    bearer: Option<String>,
    device_status: ToolAnswer,
    screen_get: ToolAnswer,
    /// `initialize`'s `result`, serialised once.
    initialize: String,
    sessions: Mutex<HashSet<String>>,
    /// Numbers the sessions and the calls.
    counter: AtomicU64,
    /// Makes this process's ids differ from another's.
    salt: u32,
    /// With `--durable-log`: where each tool call's record goes before its answer.
    pub(crate) durable: Option<crate::durable::Log>,
}

/// The daemon's one-line text for a structured result: `Done. key: {N fields}, … The full
/// result is the structured content.`
fn summary(value: &Value) -> String {
    let parts: Vec<String> = match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| match v {
                Value::Object(o) => format!("{k}: {{{} fields}}", o.len()),
                Value::Array(a) => format!("{k}: [{} items]", a.len()),
                other => format!("{k}: {other}"),
            })
            .collect(),
        _ => Vec::new(),
    };
    format!(
        "Done. {}. The full result is the structured content.",
        parts.join(", ")
    )
}

impl ToolAnswer {
    fn new(fixture: &Value) -> ToolAnswer {
        let text = Value::String(summary(fixture));
        ToolAnswer {
            middle: format!(
                r#""content":[{{"type":"text","text":{text}}}],"structuredContent":{fixture},"isError":false,"_meta":{{"dev.openphone/toolResult":{{"audit_id":"runtime:mcp:"#
            ),
        }
    }
}

impl Shared {
    pub(crate) fn new(token: Option<String>) -> Result<Shared, String> {
        let device_status = crate::compact(crate::DEVICE_STATUS, "device-status")?;
        let screen_get = crate::compact(crate::SCREEN_GET, "screen-get")?;
        let initialize = serde_json::json!({
            "protocolVersion": HANDSHAKE,
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "openphone-null-server", "version": "0.0.0"},
        });
        Ok(Shared {
            bearer: token.map(|t| format!("Bearer {t}")),
            device_status: ToolAnswer::new(&device_status),
            screen_get: ToolAnswer::new(&screen_get),
            initialize: initialize.to_string(),
            sessions: Mutex::new(HashSet::new()),
            counter: AtomicU64::new(0),
            durable: None,
            salt: std::process::id() ^ 0x5eed_0000,
        })
    }

    /// A fresh id of a UUID's length.
    fn fresh_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{:08x}-0000-4000-8000-{n:012x}", self.salt)
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An answer: status, content type, session header, body.
#[derive(Debug, PartialEq)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) event_stream: bool,
    pub(crate) session: Option<String>,
    pub(crate) body: String,
    /// For a tool call's result (what `--durable-log` records before it leaves): the call's
    /// JSON-RPC id, as its text.
    pub(crate) record: Option<String>,
}

impl Reply {
    fn json(status: u16, body: String) -> Reply {
        Reply {
            status,
            event_stream: false,
            session: None,
            body,
            record: None,
        }
    }

    /// A response inside a session, framed as the daemon frames it: a priming event, then
    /// the message with its event id.
    fn event(message: &str) -> Reply {
        Reply {
            status: 200,
            event_stream: true,
            session: None,
            body: format!("data: \nid: 0/0\nretry: 3000\n\ndata: {message}\nid: 1/0\n\n"),
            record: None,
        }
    }

    fn empty(status: u16) -> Reply {
        Reply::json(status, String::new())
    }
}

/// A JSON-RPC error answer.
fn rpc_error(status: u16, id: Option<&RawValue>, code: i64, message: &str) -> Reply {
    let id = id.map_or("null", RawValue::get);
    let message = Value::String(message.to_owned());
    Reply::json(
        status,
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#),
    )
}

/// The answer to one request: its method, the headers the server reads, its body.
pub(crate) fn answer(
    shared: &Shared,
    method: &Method,
    authorization: Option<&[u8]>,
    session: Option<&str>,
    version: Option<&str>,
    body: &[u8],
) -> Reply {
    if let Some(bearer) = &shared.bearer
        && authorization != Some(bearer.as_bytes())
    {
        return rpc_error(401, None, -32001, "missing or wrong bearer token");
    }
    if *method == Method::DELETE {
        return match session {
            Some(s) if shared.sessions().remove(s) => Reply::empty(202),
            Some(_) => rpc_error(404, None, -32001, "unknown session"),
            None => rpc_error(400, None, -32600, "DELETE needs an Mcp-Session-Id"),
        };
    }
    if *method != Method::POST {
        return rpc_error(405, None, -32600, "only POST and DELETE are served");
    }
    let Ok(request) = serde_json::from_slice::<RpcRequest>(body) else {
        return rpc_error(400, None, -32700, "not a JSON-RPC request");
    };
    if let Some(s) = session
        && !shared.sessions().contains(s)
    {
        return rpc_error(404, request.id, -32001, "unknown session");
    }
    let Some(id) = request.id else {
        // A notification (`notifications/initialized`, …): accepted, nothing to answer.
        return Reply::empty(202);
    };
    match request.method.as_ref() {
        "initialize" => {
            let new = shared.fresh_id();
            shared.sessions().insert(new.clone());
            let mut reply = Reply::event(&format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
                id.get(),
                shared.initialize
            ));
            reply.session = Some(new);
            reply
        }
        "tools/call" => {
            let stateless = session.is_none();
            if stateless && version != Some(PER_REQUEST) {
                return rpc_error(
                    400,
                    Some(id),
                    -32600,
                    "no session: initialize first, or send MCP-Protocol-Version: 2026-07-28",
                );
            }
            let name = request.params.and_then(|p| p.name);
            let tool = match name.as_deref() {
                Some("openphone_screen_get") => &shared.screen_get,
                _ => &shared.device_status,
            };
            let request_id = format!("mcp-{}", shared.fresh_id());
            let message = format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{{}{}{request_id}","request_id":"{request_id}","status":"ok"}}}}}}}}"#,
                id.get(),
                if stateless {
                    r#""resultType":"complete","#
                } else {
                    ""
                },
                tool.middle,
            );
            let mut reply = if stateless {
                Reply::json(200, message)
            } else {
                Reply::event(&message)
            };
            reply.record = Some(id.get().to_owned());
            reply
        }
        "ping" => Reply::json(
            200,
            format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, id.get()),
        ),
        other => rpc_error(
            200,
            Some(id),
            -32601,
            &format!("the null MCP server answers initialize, tools/call and ping, not {other:?}"),
        ),
    }
}

/// A header's value as text.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn handle(
    request: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = if request.uri().path() != PATH {
        Reply::empty(404)
    } else {
        let (parts, body) = request.into_parts();
        match Limited::new(body, MAX_BODY).collect().await {
            Ok(body) => answer(
                &shared,
                &parts.method,
                parts
                    .headers
                    .get("authorization")
                    .map(HeaderValue::as_bytes),
                header(&parts.headers, "mcp-session-id"),
                header(&parts.headers, "mcp-protocol-version"),
                &body.to_bytes(),
            ),
            Err(_) => rpc_error(413, None, -32600, "the body is too large or broken"),
        }
    };
    let reply = match (&shared.durable, &reply.record) {
        (Some(log), Some(id)) => match log.append(reply.body.as_bytes()).await {
            Ok(()) => reply,
            Err(e) => {
                let id = RawValue::from_string(id.clone()).ok();
                rpc_error(500, id.as_deref(), -32603, &e)
            }
        },
        _ => reply,
    };
    let has_body = !reply.body.is_empty();
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    if reply.event_stream {
        headers.insert(
            "content-type",
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    } else if has_body {
        headers.insert("content-type", HeaderValue::from_static("application/json"));
    }
    if let Some(session) = reply.session
        && let Ok(v) = HeaderValue::from_str(&session)
    {
        headers.insert("mcp-session-id", v);
    }
    Ok(response)
}

/// Serves MCP on `listen` until SIGINT or SIGTERM.
pub(crate) async fn run(
    listen: &str,
    token: Option<String>,
    durable: Option<&crate::durable::Spec>,
) -> Result<(), String> {
    let mut shared = Shared::new(token)?;
    shared.durable = durable.map(crate::durable::Log::start).transpose()?;
    let shared = Arc::new(shared);
    let listener = crate::bind(listen, "http", PATH).await?;
    tokio::select! {
        () = serve(listener, shared) => Ok(()),
        end = crate::stopped() => end,
    }
}

/// Accepts connections on `listener` and serves each on a task of its own, forever.
pub(crate) async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                eprintln!("openphone-null-server: accept failed: {e}");
                // Out of descriptors, say: let the others finish before trying again.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let service =
                hyper::service::service_fn(move |request| handle(request, Arc::clone(&shared)));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;
