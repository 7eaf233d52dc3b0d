//! The `ws` mode: the wire-ceiling reference of `openphone bench invoke`.
//!
//! A WebSocket server on `/v1/runtime` that speaks the smallest useful part of the daemon's
//! endpoint protocol (`docs/endpoint.md`): the bearer token on the upgrade (or in `hello`),
//! `hello`, and `tools.invoke`, which it answers with a fixed tool result whose `result` is
//! the daemon's answer on the simulated phone: `openphone.screen.get`'s
//! (`bench/fixtures/screen-get.json`) for that tool, `openphone.device.status`'s
//! (`bench/fixtures/device-status.json`) for any other, so the frames have the daemon's shape
//! and size. There is no policy, no storage and no device behind it: what it reaches is what
//! the loopback network, tokio and tokio-tungstenite allow, the ceiling a daemon can approach.
//! Requests on one connection are answered in order, one at a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::accept_hdr_async;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

/// The endpoint's path, as on the daemon.
const PATH: &str = "/v1/runtime";

/// What every connection shares: the token and the pre-serialised parts of the answers.
struct Shared {
    bearer: String,
    token: String,
    /// `openphone.device.status`'s result, serialised once: the answer to any tool but
    /// `openphone.screen.get`.
    device_status: String,
    /// `openphone.screen.get`'s result, serialised once.
    screen_get: String,
    /// The `hello` result, serialised once.
    hello: String,
    /// Numbers the `openphone_task_id` of each answer.
    tasks: AtomicU64,
    /// With `--durable-log`: where each tool call's record goes before its answer.
    durable: Option<crate::durable::Log>,
}

/// Serves WebSocket connections on `listen` until SIGINT or SIGTERM.
pub(crate) async fn run(
    listen: &str,
    token: String,
    durable: Option<&crate::durable::Spec>,
) -> Result<(), String> {
    let device_status = crate::compact(crate::DEVICE_STATUS, "device-status")?;
    let screen_get = crate::compact(crate::SCREEN_GET, "screen-get")?;
    let hello = json!({
        "protocol_version": 1,
        "role": "runtime",
        "runtime": "null",
        "runtime_protocol": {"name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1},
        "phone": {"platform": "null", "model": "openphone-null-server", "os_version": "none",
                  "screen_width": 1080, "screen_height": 2400,
                  "supported_tools": ["openphone.device.status", "openphone.screen.get"]},
        "manifests": {"commands_version": 1,
                      "commands": ["openphone.device.status", "openphone.screen.get"],
                      "events": [], "capabilities": []},
    });
    let shared = Arc::new(Shared {
        bearer: format!("Bearer {token}"),
        token,
        device_status: device_status.to_string(),
        screen_get: screen_get.to_string(),
        hello: hello.to_string(),
        tasks: AtomicU64::new(0),
        durable: durable.map(crate::durable::Log::start).transpose()?,
    });
    let listener = crate::bind(listen, "ws", PATH).await?;
    let stopped = crate::stopped();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(serve(stream, Arc::clone(&shared)));
                }
                Err(e) => eprintln!("openphone-null-server: accept failed: {e}"),
            },
            end = &mut stopped => return end,
        }
    }
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
        tool_call: None,
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
        let (answer, close, record) = conn.answer(text.as_str());
        let answer = match (&shared.durable, record) {
            (Some(log), Some(id)) => match log.append(answer.as_bytes()).await {
                Ok(()) => answer,
                Err(e) => error(&id, -32603, &e, "internal_error"),
            },
            _ => answer,
        };
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
    /// The JSON-RPC id of the tool result [`Connection::reply`] just made, if it made one.
    tool_call: Option<Value>,
}

impl Connection<'_> {
    /// The answer to one text frame, whether to close the connection after it, and — when it
    /// is a tool call's result, what `--durable-log` records before it leaves — the call's
    /// JSON-RPC id.
    fn answer(&mut self, text: &str) -> (String, bool, Option<Value>) {
        let (answer, close) = self.reply(text);
        (answer, close, self.tool_call.take())
    }

    fn reply(&mut self, text: &str) -> (String, bool) {
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
                let tool = params
                    .get("tool")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let result = self.tool_result(&id, request_id, tool);
                self.tool_call = Some(id);
                (result, false)
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

    /// The fixed `ok` tool result of `tool`, addressed to `request_id`, with the fields the
    /// daemon's answer has (`audit_id`, `openphone_task_id` of the daemon's length).
    fn tool_result(&self, id: &Value, request_id: &str, tool: &str) -> String {
        let result = if tool == "openphone.screen.get" {
            &self.shared.screen_get
        } else {
            &self.shared.device_status
        };
        let task = self.shared.tasks.fetch_add(1, Ordering::Relaxed);
        let audit_id = Value::String(format!("runtime:null:{request_id}"));
        let request_id = Value::String(request_id.to_owned());
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"request_id":{request_id},"status":"ok","requires_confirmation":false,"result":{},"audit_id":{audit_id},"openphone_task_id":"task-{task:036x}"}}}}"#,
            result
        )
    }
}

/// A JSON-RPC error answer in the daemon's shape (`error.data.code`).
fn error(id: &Value, code: i64, message: &str, data_code: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message,
           "data": {"code": data_code}}})
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            bearer: "Bearer t".to_owned(),
            token: "t".to_owned(),
            device_status: "{}".to_owned(),
            screen_get: "{}".to_owned(),
            hello: "{}".to_owned(),
            tasks: AtomicU64::new(0),
            durable: None,
        }
    }

    #[test]
    fn only_a_tool_result_names_its_call_for_the_durable_log() {
        let shared = shared();
        let mut conn = Connection {
            shared: &shared,
            bearer_ok: true,
            said_hello: false,
            tool_call: None,
        };
        let hello = r#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{}}"#;
        let (_, close, record) = conn.answer(hello);
        assert_eq!((close, record), (false, None), "hello is not recorded");
        let invoke = r#"{"jsonrpc":"2.0","id":"a","method":"tools.invoke","params":{"request_id":"r","tool":"openphone.device.status"}}"#;
        let (answer, _, record) = conn.answer(invoke);
        assert_eq!(record, Some(Value::String("a".to_owned())));
        assert!(answer.contains(r#""status":"ok""#), "{answer}");
        let broken = r#"{"jsonrpc":"2.0","id":2,"method":"tools.invoke","params":{}}"#;
        let (answer, _, record) = conn.answer(broken);
        assert_eq!(record, None, "an error is not recorded: {answer}");
    }
}
