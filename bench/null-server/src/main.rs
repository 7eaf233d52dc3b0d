//! `openphone-null-server`: the wire-ceiling reference of `openphone bench invoke`.
//!
//! A WebSocket server on `/v1/runtime` that speaks the smallest useful part of the daemon's
//! endpoint protocol (`docs/endpoint.md`): the bearer token on the upgrade (or in `hello`),
//! `hello`, and `tools.invoke`, which it answers — whatever the tool — with a fixed tool result
//! whose `result` is the daemon's `openphone.device.status` answer on the simulated phone
//! (`bench/fixtures/device-status.json`), so the frames have the daemon's shape and size. There
//! is no policy, no storage and no device behind it: what it reaches is what the loopback
//! network, tokio and tokio-tungstenite allow, the ceiling a daemon can approach.
//!
//! Usage: `openphone-null-server --token TOKEN [--listen 127.0.0.1:0]`. It prints one line,
//! `listening on ws://<addr>/v1/runtime`, once it accepts connections, and stops on SIGINT or
//! SIGTERM. Requests on one connection are answered in order, one at a time.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::accept_hdr_async;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

/// The daemon's `openphone.device.status` result, captured once from the simulated phone.
const DEVICE_STATUS: &str = include_str!("../../fixtures/device-status.json");

/// The endpoint's path, as on the daemon.
const PATH: &str = "/v1/runtime";

/// The command line.
struct Args {
    listen: String,
    token: String,
}

const USAGE: &str = "usage: openphone-null-server --token TOKEN [--listen ADDR:PORT]";

fn parse_args() -> Result<Args, String> {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut token = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value("--listen")?,
            "--token" => token = Some(value("--token")?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    let token = token.ok_or(format!("--token is required; {USAGE}"))?;
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        return Err("--token must be non-empty and without whitespace".to_owned());
    }
    Ok(Args { listen, token })
}

/// What every connection shares: the token and the pre-serialised parts of the answers.
struct Shared {
    bearer: String,
    token: String,
    /// The tool result's `result` object, serialised once.
    fixed_result: String,
    /// The `hello` result, serialised once.
    hello: String,
    /// Numbers the `openphone_task_id` of each answer.
    tasks: AtomicU64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("openphone-null-server: {e}");
            return ExitCode::from(2);
        }
    };
    let fixed: Value = match serde_json::from_str(DEVICE_STATUS) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("openphone-null-server: the built-in fixture is not JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let hello = json!({
        "protocol_version": 1,
        "role": "runtime",
        "runtime": "null",
        "runtime_protocol": {"name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1},
        "phone": {"platform": "null", "model": "openphone-null-server", "os_version": "none",
                  "screen_width": 1080, "screen_height": 2400,
                  "supported_tools": ["openphone.device.status"]},
        "manifests": {"commands_version": 1, "commands": ["openphone.device.status"],
                      "events": [], "capabilities": []},
    });
    let shared = Arc::new(Shared {
        bearer: format!("Bearer {}", args.token),
        token: args.token,
        fixed_result: fixed.to_string(),
        hello: hello.to_string(),
        tasks: AtomicU64::new(0),
    });
    let listener = match TcpListener::bind(&args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "openphone-null-server: cannot listen on {}: {e}",
                args.listen
            );
            return ExitCode::from(2);
        }
    };
    match listener.local_addr() {
        Ok(addr) => println!("listening on ws://{addr}{PATH}"),
        Err(e) => {
            eprintln!("openphone-null-server: no local address: {e}");
            return ExitCode::from(2);
        }
    }
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("openphone-null-server: cannot watch SIGTERM: {e}");
            return ExitCode::from(2);
        }
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(serve(stream, Arc::clone(&shared)));
                }
                Err(e) => eprintln!("openphone-null-server: accept failed: {e}"),
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
    ExitCode::SUCCESS
}

/// A refusal of the upgrade with `status` and no body.
fn refuse(status: StatusCode) -> ErrorResponse {
    let mut response = ErrorResponse::new(None);
    *response.status_mut() = status;
    response
}

/// Serves one connection until the peer closes it.
// The upgrade callback's error type is tungstenite's own (an HTTP response), not ours to box.
#[allow(clippy::result_large_err)]
async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    // As the daemon does: small answers go out at once instead of waiting for an ACK.
    let _ = stream.set_nodelay(true);
    let mut bearer_ok = false;
    let check = |req: &Request, response: Response| {
        if req.uri().path() != PATH {
            return Err(refuse(StatusCode::NOT_FOUND));
        }
        match req.headers().get("authorization") {
            None => Ok(response),
            Some(v) if v.as_bytes() == shared.bearer.as_bytes() => {
                bearer_ok = true;
                Ok(response)
            }
            Some(_) => Err(refuse(StatusCode::UNAUTHORIZED)),
        }
    };
    let Ok(mut ws) = accept_hdr_async(stream, check).await else {
        return;
    };
    let mut conn = Connection {
        shared: &shared,
        bearer_ok,
        said_hello: false,
    };
    while let Some(frame) = ws.next().await {
        let text = match frame {
            Ok(Message::Text(text)) => text,
            Ok(Message::Binary(_)) => {
                let answer = error(
                    &Value::Null,
                    -32600,
                    "binary frames are not supported",
                    "invalid_request",
                );
                if ws.send(Message::text(answer)).await.is_err() {
                    break;
                }
                continue;
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
        };
        let (answer, close) = conn.answer(text.as_str());
        if ws.send(Message::text(answer)).await.is_err() {
            break;
        }
        if close {
            let _ = ws.close(None).await;
            break;
        }
    }
}

/// The state of one connection.
struct Connection<'a> {
    shared: &'a Shared,
    /// The upgrade carried the right bearer token.
    bearer_ok: bool,
    said_hello: bool,
}

impl Connection<'_> {
    /// The answer to one text frame, and whether to close the connection after it.
    fn answer(&mut self, text: &str) -> (String, bool) {
        let Ok(request) = serde_json::from_str::<Value>(text) else {
            return (
                error(&Value::Null, -32700, "not JSON", "parse_error"),
                false,
            );
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let Some(method) = request.get("method").and_then(Value::as_str) else {
            return (error(&id, -32600, "no method", "invalid_request"), false);
        };
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        match method {
            "hello" if self.said_hello => (
                error(&id, -32600, "hello was already said", "invalid_request"),
                false,
            ),
            "hello" => {
                let token_ok =
                    params.get("token").and_then(Value::as_str) == Some(self.shared.token.as_str());
                if !(self.bearer_ok || token_ok) {
                    return (
                        error(&id, -32000, "missing or wrong token", "unauthorized"),
                        true,
                    );
                }
                self.said_hello = true;
                (
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#,
                        self.shared.hello
                    ),
                    false,
                )
            }
            _ if !self.said_hello && !self.bearer_ok => (
                error(&id, -32000, "missing or wrong token", "unauthorized"),
                true,
            ),
            _ if !self.said_hello => (
                error(&id, -32000, "say hello first", "hello_required"),
                false,
            ),
            "tools.invoke" => {
                let Some(request_id) = params.get("request_id").and_then(Value::as_str) else {
                    return (
                        error(&id, -32602, "`request_id` is required", "invalid_params"),
                        false,
                    );
                };
                (self.tool_result(&id, request_id), false)
            }
            other => (
                error(
                    &id,
                    -32601,
                    &format!("the null server answers only hello and tools.invoke, not {other:?}"),
                    "method_not_found",
                ),
                false,
            ),
        }
    }

    /// The fixed `ok` tool result, addressed to `request_id`, with the fields the daemon's
    /// answer has (`audit_id`, `openphone_task_id` of the daemon's length).
    fn tool_result(&self, id: &Value, request_id: &str) -> String {
        let task = self.shared.tasks.fetch_add(1, Ordering::Relaxed);
        let audit_id = Value::String(format!("runtime:null:{request_id}"));
        let request_id = Value::String(request_id.to_owned());
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"request_id":{request_id},"status":"ok","requires_confirmation":false,"result":{},"audit_id":{audit_id},"openphone_task_id":"task-{task:036x}"}}}}"#,
            self.shared.fixed_result
        )
    }
}

/// A JSON-RPC error answer in the daemon's shape (`error.data.code`).
fn error(id: &Value, code: i64, message: &str, data_code: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message,
           "data": {"code": data_code}}})
    .to_string()
}
