//! The direct path of `/mcp` (issue 34): a plain 2026-07-28 `tools/call` answered without
//! rmcp's per-request service (its untagged parse, a service spawned per request, its header
//! validator re-serialising the message, its answer channel) — about a quarter of such a
//! call's CPU.
//!
//! **Only the plain case is taken; everything else goes to rmcp unchanged**, so every refusal
//! and every rarer shape keeps rmcp's answer. [`recognize`] takes a request only when all of
//! this holds, and each check is one rmcp would pass:
//!
//! - `POST` without `Mcp-Session-Id` or `Origin` (a browser's request keeps rmcp's second
//!   `Origin` check) and with a loopback `Host` (the guard checked it first);
//! - `Content-Type: application/json`; `Accept` naming `application/json` and
//!   `text/event-stream` with no weights or quotes to interpret;
//! - exactly one `MCP-Protocol-Version`, `2026-07-28`; exactly one `Mcp-Method: tools/call`;
//!   exactly one `Mcp-Name`, the tool's name as is (not Base64); no `Mcp-Param-*` header, and
//!   a tool whose input schema asks for none (no `x-mcp-header` in it);
//! - a body that is one JSON-RPC request object with only `jsonrpc: "2.0"`, an integer or
//!   string `id`, `method: "tools/call"` and `params`, whose keys are only `name` (an exposed
//!   tool's name), `arguments` (an object or null) and `_meta`; no key given twice (`strict.rs`
//!   flags those, and rmcp's path refuses them);
//! - `_meta` carrying `protocolVersion` equal to the header, `clientCapabilities`, a readable
//!   `clientInfo` if any, and no `progressToken` (a call reporting progress streams: rmcp).
//!
//! The call then runs exactly as under rmcp — the same handler code ([`crate::server`]'s
//! `answer`), in a task of its own so a client that goes away cannot stop a device action
//! half-way (its token is cancelled instead, as rmcp's is) — and its answer is rmcp's own
//! message type serialised, with rmcp's status for this era.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Full};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ErrorCode, MetaObject,
    NumberOrString, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerResult,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::server::{McpBackend, McpPrincipal, Site, answer_direct};
use crate::transport::HttpResponse;

/// The `_meta` key of a progress token.
const PROGRESS_TOKEN: &str = "progressToken";
/// The `_meta` key of the client's declared identity in the 2026-07-28 era.
const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// What the direct path needs: the backend, the daemon's shutdown token, and the tools it may
/// answer (their input schemas ask for no `Mcp-Param-*` header).
pub(crate) struct Direct {
    backend: Arc<McpBackend>,
    shutdown: CancellationToken,
    tools: HashSet<String>,
    /// Calls answered here (`McpHttpService::direct_answers`).
    answered: AtomicU64,
}

impl Direct {
    pub(crate) fn new(backend: Arc<McpBackend>, shutdown: CancellationToken) -> Direct {
        let tools = backend.plain_tools();
        Direct {
            backend,
            shutdown,
            tools,
            answered: AtomicU64::new(0),
        }
    }

    /// How many calls the direct path has answered.
    pub(crate) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// The answer to `body` sent with `headers`, when it is a plain 2026-07-28 `tools/call`
    /// ([`recognize`]); `None` hands the request to rmcp.
    pub(crate) async fn answer(
        &self,
        headers: &HeaderMap,
        principal: Option<&Arc<McpPrincipal>>,
        body: &[u8],
    ) -> Option<HttpResponse> {
        let principal = Arc::clone(principal?);
        let plain = recognize(headers, body, |name| self.tools.contains(name))?;
        self.answered.fetch_add(1, Ordering::Relaxed);
        let id = plain.id.clone();
        let ct = self.shutdown.child_token();
        let site = Site {
            id: plain.id,
            client: plain.meta.client_info(),
            meta: plain.meta,
            ct: ct.clone(),
            peer: None,
        };
        let backend = Arc::clone(&self.backend);
        let capabilities = site.meta.client_capabilities();
        // Its own task, as under rmcp: a dropped request cancels the call's token (the guard
        // below) but never drops the call half-way.
        let task = tokio::spawn(answer_direct(backend, principal, site, plain.params));
        let cancel_if_dropped = ct.drop_guard();
        let outcome = task.await;
        cancel_if_dropped.disarm();
        let message = match outcome {
            Ok(Ok(response)) => message_of(response, capabilities.as_ref(), id),
            Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(id)),
            Err(e) => {
                tracing::error!(error = %e, "direct mcp call task failed");
                ServerJsonRpcMessage::error(
                    McpError::internal_error("the call's task failed", None),
                    Some(id),
                )
            }
        };
        Some(respond(&message))
    }
}

/// rmcp's answer for a handler's `tools/call` response: a task handle only for a client that
/// declared tasks (never made here; kept as rmcp has it).
fn message_of(
    response: CallToolResponse,
    capabilities: Option<&ClientCapabilities>,
    id: RequestId,
) -> ServerJsonRpcMessage {
    if matches!(response, CallToolResponse::Task(_))
        && !capabilities.is_some_and(ClientCapabilities::supports_tasks)
    {
        return ServerJsonRpcMessage::error(
            McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ),
            Some(id),
        );
    }
    ServerJsonRpcMessage::response(ServerResult::from(response), id)
}

/// The HTTP answer for `message`, with rmcp's status for a 2026-07-28 request.
fn respond(message: &ServerJsonRpcMessage) -> HttpResponse {
    let (status, body) = match serde_json::to_vec(message) {
        Ok(body) => (status_of(message), body),
        Err(e) => {
            tracing::error!(error = %e, "direct mcp answer could not be serialised");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                b"Internal Server Error: the answer could not be serialised".to_vec(),
            )
        }
    };
    let mut response = http::Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The HTTP status rmcp gives a 2026-07-28 answer: 200, but 400 for a version, capability or
/// header problem and 404 for an unknown method. (Its 400 for malformed `_meta` cannot occur:
/// such a request is not taken.)
fn status_of(message: &ServerJsonRpcMessage) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A plain 2026-07-28 `tools/call`, taken apart as rmcp would: `_meta` moved out of the
/// params.
#[derive(Debug)]
pub(crate) struct Plain {
    pub(crate) id: RequestId,
    pub(crate) meta: RequestMetaObject,
    pub(crate) params: CallToolRequestParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    jsonrpc: String,
    id: Value,
    method: String,
    params: Params,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(rename = "_meta")]
    meta: Map<String, Value>,
}

/// The request, when it is a plain 2026-07-28 `tools/call` of a tool `answerable` names (see
/// the module's list); `None` otherwise.
pub(crate) fn recognize(
    headers: &HeaderMap,
    body: &[u8],
    answerable: impl Fn(&str) -> bool,
) -> Option<Plain> {
    let version = ProtocolVersion::V_2026_07_28;
    if headers.contains_key("mcp-session-id")
        || headers.contains_key(ORIGIN)
        || !loopback_host(headers)
        || !is_json(headers)
        || !accepts_both(headers)
        || sole(headers, "mcp-protocol-version")? != version.as_str()
        || sole(headers, "mcp-method")? != "tools/call"
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
    {
        return None;
    }
    let envelope: Envelope = serde_json::from_slice(body).ok()?;
    if envelope.jsonrpc != "2.0" || envelope.method != "tools/call" {
        return None;
    }
    let id = match envelope.id {
        Value::Number(n) => NumberOrString::Number(n.as_i64()?),
        Value::String(s) => NumberOrString::String(s.into()),
        _ => return None,
    };
    let params = envelope.params;
    // The header names the tool as is: a Base64 form (or any other) is rmcp's to decode.
    if sole(headers, "mcp-name")? != params.name || !answerable(&params.name) {
        return None;
    }
    if params.meta.contains_key(PROGRESS_TOKEN) {
        return None;
    }
    let meta = RequestMetaObject(MetaObject(params.meta));
    let declared = meta.protocol_version()?;
    if declared != version
        || meta.client_capabilities().is_none()
        || !meta.missing_required_keys(&version).is_empty()
        || (meta.0.0.contains_key(CLIENT_INFO) && meta.client_info().is_none())
    {
        return None;
    }
    let mut call = CallToolRequestParams::new(params.name);
    call.arguments = params.arguments;
    Some(Plain {
        id,
        meta,
        params: call,
    })
}

/// The only value of header `name`, as text; `None` when absent, repeated or not text.
fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// `Host` names a loopback address (any port), as the guard requires.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = sole(headers, HOST.as_str()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    matches!(name, "localhost" | "127.0.0.1" | "::1")
}

/// `Content-Type` is `application/json` (parameters allowed, as rmcp allows them).
fn is_json(headers: &HeaderMap) -> bool {
    sole(headers, CONTENT_TYPE.as_str()).is_some_and(|value| {
        let essence = value.split(';').next().unwrap_or_default();
        essence.trim().eq_ignore_ascii_case("application/json")
    })
}

/// `Accept` names both `application/json` and `text/event-stream`, in a form with nothing to
/// interpret (no parameters, no quotes): anything else is rmcp's to read.
fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains(['"', ';']) {
            return false;
        }
        for range in value.split(',') {
            let range = range.trim();
            json |= range.eq_ignore_ascii_case("application/json");
            sse |= range.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    const PLAIN_HEADERS: [(&str, &str); 6] = [
        ("host", "127.0.0.1:7777"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "openphone_device_status"),
    ];

    fn plain_body() -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {
                "name": "openphone_device_status",
                "arguments": {"x": 1},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                    "dev.openphone/idempotencyKey": "k1"
                }
            }
        })
    }

    fn take(pairs: &[(&str, &str)], body: &Value) -> Option<Plain> {
        recognize(&headers(pairs), body.to_string().as_bytes(), |name| {
            name == "openphone_device_status"
        })
    }

    #[test]
    fn a_plain_modern_call_is_taken_apart_as_rmcp_would() {
        let plain = take(&PLAIN_HEADERS, &plain_body()).expect("taken");
        assert_eq!(plain.id, NumberOrString::Number(7));
        assert_eq!(plain.params.name, "openphone_device_status");
        assert_eq!(
            plain.params.arguments,
            Some(json!({"x": 1}).as_object().unwrap().clone())
        );
        // `_meta` moved out of the params, whole.
        assert!(plain.params.meta.is_none());
        assert_eq!(plain.meta.0.0["dev.openphone/idempotencyKey"], "k1");
        assert_eq!(plain.meta.client_info().unwrap().name, "t");
        let mut body = plain_body();
        body["id"] = json!("abc");
        body["params"]["arguments"] = Value::Null;
        let plain = take(&PLAIN_HEADERS, &body).expect("taken");
        assert_eq!(plain.id, NumberOrString::String("abc".into()));
        assert_eq!(plain.params.arguments, None);
        // Only the tool's name is needed of the params besides `_meta`.
        let mut body = plain_body();
        body["params"].as_object_mut().unwrap().remove("arguments");
        assert!(take(&PLAIN_HEADERS, &body).is_some());
    }

    /// Every header that is absent, repeated, different or beyond the plain case sends the
    /// request to rmcp.
    #[test]
    fn any_other_header_shape_goes_to_rmcp() {
        let body = plain_body();
        let with = |name: &str, value: &str| {
            let mut pairs: Vec<(&str, &str)> = PLAIN_HEADERS
                .iter()
                .copied()
                .filter(|(n, _)| *n != name)
                .collect();
            if !value.is_empty() {
                pairs.push((name, value));
            }
            take(&pairs, &body).is_some()
        };
        let added = |name: &str, value: &str| {
            let mut pairs = PLAIN_HEADERS.to_vec();
            pairs.push((name, value));
            take(&pairs, &body).is_some()
        };
        for (name, value) in PLAIN_HEADERS {
            assert!(!with(name, ""), "without {name}");
            // `Accept` is a list: its values are read together, as rmcp reads them.
            assert_eq!(added(name, value), name == "accept", "{name} twice");
        }
        assert!(with("host", "localhost"));
        assert!(with("host", "[::1]:80"));
        assert!(!with("host", "example.com"));
        assert!(!with("host", "127.0.0.2:7777"));
        assert!(with("content-type", "application/json; charset=utf-8"));
        assert!(!with("content-type", "text/plain"));
        assert!(with("accept", "text/event-stream,application/json"));
        assert!(!with("accept", "application/json"));
        let mut split = PLAIN_HEADERS.to_vec();
        split.retain(|(n, _)| *n != "accept");
        split.push(("accept", "application/json"));
        split.push(("accept", "text/event-stream"));
        assert!(take(&split, &body).is_some());
        assert!(!with("accept", "application/json;q=0, text/event-stream"));
        assert!(!with("accept", "*/*"));
        assert!(!with("mcp-protocol-version", "2025-11-25"));
        assert!(!with("mcp-method", "tools/list"));
        assert!(!with("mcp-name", "openphone_device_other"));
        assert!(!with(
            "mcp-name",
            "=?base64?b3BlbnBob25lX2RldmljZV9zdGF0dXM=?="
        ));
        assert!(!added("mcp-session-id", "abc"));
        assert!(!added("origin", "http://127.0.0.1:7777"));
        assert!(!added("mcp-param-x", "1"));
    }

    /// Every body beyond the plain case goes to rmcp, which answers it (or refuses it) itself.
    #[test]
    fn any_other_body_goes_to_rmcp() {
        let changed = |f: &dyn Fn(&mut Value)| {
            let mut body = plain_body();
            f(&mut body);
            take(&PLAIN_HEADERS, &body).is_some()
        };
        assert!(!changed(&|b| b["jsonrpc"] = json!("1.0")));
        assert!(!changed(&|b| b["method"] = json!("tools/list")));
        assert!(!changed(&|b| b["extra"] = json!(1)));
        assert!(!changed(&|b| b["id"] = json!(1.5)));
        assert!(!changed(&|b| b["id"] = json!(u64::MAX)));
        assert!(!changed(&|b| b["id"] = Value::Null));
        assert!(!changed(&|b| b["params"]["requestState"] = json!("s")));
        assert!(!changed(&|b| b["params"]["inputResponses"] = json!({})));
        assert!(!changed(&|b| b["params"]["task"] = json!({})));
        assert!(!changed(&|b| b["params"]["arguments"] = json!([1])));
        assert!(!changed(
            &|b| b["params"]["name"] = json!("openphone_unknown")
        ));
        assert!(!changed(&|b| {
            b["params"].as_object_mut().unwrap().remove("_meta");
        }));
        let meta = |f: &dyn Fn(&mut Map<String, Value>)| {
            changed(&|b| f(b["params"]["_meta"].as_object_mut().unwrap()))
        };
        assert!(!meta(&|m| {
            m.insert("progressToken".into(), json!(1));
        }));
        assert!(!meta(&|m| {
            m.insert(
                "io.modelcontextprotocol/protocolVersion".into(),
                json!("2025-11-25"),
            );
        }));
        assert!(!meta(&|m| {
            m.remove("io.modelcontextprotocol/protocolVersion");
        }));
        assert!(!meta(&|m| {
            m.remove("io.modelcontextprotocol/clientCapabilities");
        }));
        assert!(!meta(&|m| {
            m.insert(
                "io.modelcontextprotocol/clientCapabilities".into(),
                json!("none"),
            );
        }));
        assert!(!meta(&|m| {
            m.insert("io.modelcontextprotocol/clientInfo".into(), json!(3));
        }));
        // No `clientInfo` at all is the plain case still (it is optional).
        assert!(meta(&|m| {
            m.remove("io.modelcontextprotocol/clientInfo");
        }));
        // Not JSON, or a key twice.
        assert!(recognize(&headers(&PLAIN_HEADERS), b"{", |_| true).is_none());
        let twice = plain_body().to_string().replacen(
            "\"method\"",
            "\"method\":\"tools/call\",\"method\"",
            1,
        );
        assert!(recognize(&headers(&PLAIN_HEADERS), twice.as_bytes(), |_| true).is_none());
    }

    #[test]
    fn statuses_are_rmcps_for_the_era() {
        let error = |code| {
            ServerJsonRpcMessage::error(McpError::new(code, "x", None), Some(RequestId::Number(1)))
        };
        assert_eq!(
            status_of(&error(ErrorCode::HEADER_MISMATCH)),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(&error(ErrorCode::UNSUPPORTED_PROTOCOL_VERSION)),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(&error(ErrorCode::METHOD_NOT_FOUND)),
            StatusCode::NOT_FOUND
        );
        assert_eq!(status_of(&error(ErrorCode::INVALID_PARAMS)), StatusCode::OK);
        assert_eq!(status_of(&error(ErrorCode::INTERNAL_ERROR)), StatusCode::OK);
    }
}
