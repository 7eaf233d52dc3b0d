//! The direct path of `/mcp` (issue 34): a plain `tools/call` answered without rmcp's
//! service machinery — for a 2026-07-28 request its per-request service (an untagged parse, a
//! service spawned per request, a header validator re-serialising the message, an answer
//! channel); for a handshake-era session its session worker, service loop and SSE answer —
//! about a quarter of such a call's CPU.
//!
//! **Only the plain case is taken; everything else goes to rmcp unchanged**, so every refusal
//! and every rarer shape keeps rmcp's answer. [`recognize`] takes a request only when all of
//! this holds, and each check is one rmcp would pass:
//!
//! - `POST` without `Origin` (a browser's request keeps rmcp's second `Origin` check), with a
//!   loopback `Host` (the guard checked it first), `Content-Type: application/json`, an
//!   `Accept` naming `application/json` and `text/event-stream` with no weights or quotes to
//!   interpret, and no `Mcp-Param-*` header;
//! - a body that is one JSON-RPC request object with only `jsonrpc: "2.0"`, an integer or
//!   string `id`, `method: "tools/call"` and `params`, whose keys are only `name` (an exposed
//!   tool's name, its input schema asking for no `Mcp-Param-*` header), `arguments` (an
//!   object or null) and `_meta`, which holds no `progressToken` (a call reporting progress
//!   streams); no key given twice (`strict.rs` flags those, and rmcp's path refuses them);
//! - **2026-07-28**: no `Mcp-Session-Id`; exactly one `MCP-Protocol-Version`, `2026-07-28`;
//!   exactly one `Mcp-Method: tools/call` and one `Mcp-Name`, the tool's name as is (not
//!   Base64); `_meta` carrying `protocolVersion` equal to the header, `clientCapabilities`,
//!   and a readable `clientInfo` if any;
//! - **handshake era**: exactly one `Mcp-Session-Id` of a session the direct path may serve
//!   ([`McpSessions::plain_session`]: open, initialized, its client declaring no elicitation,
//!   opened by this request's runtime), exactly one `MCP-Protocol-Version` equal to the
//!   version the session negotiated, no `Mcp-Method` or `Mcp-Name`, and no
//!   `io.modelcontextprotocol/` key in `_meta`.
//!
//! The call then runs exactly as under rmcp — the same handler code ([`crate::server`]'s
//! `answer`; on a session, through a clone of the session's own handler, so its calls in
//! flight, its place count and an explicit `notifications/cancelled` are shared) — in a task
//! of its own, so a client that goes away cannot stop a device action half-way (its token is
//! cancelled instead). The answer is rmcp's own message type serialised, as
//! `application/json` (a session's POST may be answered either way; rmcp answers it as a
//! one-message event stream): rmcp's status for the 2026-07-28 era, 200 on a session.
//!
//! Where a session's direct call differs from rmcp's, knowingly: a JSON answer cannot be
//! resumed (`Last-Event-ID`), so when its request is dropped the call stops waiting for the
//! user at once instead of waiting on for a reader that cannot come (the confirmation stays
//! pending either way, for the user and the keyed retry); and it stops waiting when its session
//! closes (deleted, idle, evicted) or the daemon stops, as rmcp's calls do.

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

use crate::finish::{Finish, Panicked};
use crate::server::{
    McpBackend, McpPrincipal, Site, StructuredText, answer_direct, answer_in_session,
};
use crate::sessions::McpSessions;
use crate::transport::HttpResponse;

/// The `_meta` key of a progress token.
const PROGRESS_TOKEN: &str = "progressToken";
/// The `_meta` key of the client's declared identity in the 2026-07-28 era.
const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The prefix of the `_meta` keys MCP itself defines.
const MCP_META_PREFIX: &str = "io.modelcontextprotocol/";

/// What the direct path needs: the backend, the daemon's shutdown token, and the tools it may
/// answer (their input schemas ask for no `Mcp-Param-*` header).
pub(crate) struct Direct {
    backend: Arc<McpBackend>,
    sessions: Arc<McpSessions>,
    shutdown: CancellationToken,
    tools: HashSet<String>,
    /// Calls answered here (`McpHttpService::direct_answers`).
    answered: AtomicU64,
    /// Of them, those whose result went into the answer as the phone's text
    /// (`McpHttpService::direct_text_answers`).
    as_text: AtomicU64,
}

impl Direct {
    pub(crate) fn new(
        backend: Arc<McpBackend>,
        sessions: Arc<McpSessions>,
        shutdown: CancellationToken,
    ) -> Direct {
        let tools = backend.plain_tools();
        Direct {
            backend,
            sessions,
            shutdown,
            tools,
            answered: AtomicU64::new(0),
            as_text: AtomicU64::new(0),
        }
    }

    /// How many calls the direct path has answered.
    pub(crate) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// How many of them carried their result as the phone's text.
    pub(crate) fn answered_as_text(&self) -> u64 {
        self.as_text.load(Ordering::Relaxed)
    }

    /// The answer to `body` sent with `headers`, when it is a plain `tools/call`
    /// ([`recognize`]); `None` hands the request to rmcp.
    pub(crate) async fn answer(
        &self,
        headers: &HeaderMap,
        principal: Option<&Arc<McpPrincipal>>,
        body: &[u8],
    ) -> Option<HttpResponse> {
        let principal = Arc::clone(principal?);
        let plain = recognize(headers, body, |name| self.tools.contains(name))?;
        let id = plain.id.clone();
        let backend = Arc::clone(&self.backend);
        let structured = StructuredText::default();
        let (task, ct, capabilities, session) = match plain.session {
            None => {
                let ct = self.shutdown.child_token();
                let site = Site {
                    id: plain.id,
                    client: plain.meta.client_info(),
                    meta: plain.meta,
                    ct: ct.clone(),
                    peer: None,
                    structured_text: Some(structured.clone()),
                };
                let capabilities = site.meta.client_capabilities();
                let task = Finish::new(answer_direct(backend, principal, site, plain.params));
                (task, ct, capabilities, false)
            }
            Some(asked) => {
                let session = self.sessions.plain_session(&asked.id).await?;
                // A call whose id is already in flight on the session is rmcp's to sort out.
                if session.version.as_str() != asked.version
                    || !session.handler.serves(&principal.caller.runtime)
                    || session.handler.in_flight(&plain.id)
                {
                    return None;
                }
                // Its wait also ends when the session closes, as rmcp's calls' do (and when the
                // daemon stops: the session's token is the shutdown's child).
                let ct = session.closed.child_token();
                let site = Site {
                    id: plain.id,
                    client: Some(session.client),
                    meta: plain.meta,
                    ct: ct.clone(),
                    peer: None,
                    structured_text: Some(structured.clone()),
                };
                let task = Finish::new(answer_in_session(
                    session.handler,
                    backend,
                    principal,
                    site,
                    plain.params,
                ));
                (task, ct, None, true)
            }
        };
        self.answered.fetch_add(1, Ordering::Relaxed);
        // A dropped request cancels the call's token (this guard) but never drops the call
        // half-way: the awaited `Finish`, a temporary of the await and so dropped before this
        // guard, hands the rest of the call to a task of its own, which then sees the token
        // cancelled (as a call spawned from the start did).
        let cancel_if_dropped = ct.drop_guard();
        let outcome = task.await;
        cancel_if_dropped.disarm();
        // A read kept as text ([`TextAnswer`](crate::server::TextAnswer)): the call answered
        // with the placeholder, and the answer's bytes are written from what it kept — a
        // success, so 200 in either era, as `status_of` gives a response.
        if let Ok(Ok(CallToolResponse::Complete(result))) = &outcome
            && StructuredText::is_placeholder(result)
            && let Some(answer) = structured.get()
        {
            self.as_text.fetch_add(1, Ordering::Relaxed);
            return Some(respond_with(answer.write(&id, !session), StatusCode::OK));
        }
        let message = match outcome {
            Ok(outcome) => message_of(outcome, capabilities.as_ref(), !session, id),
            Err(Panicked) => {
                tracing::error!("direct mcp call panicked");
                ServerJsonRpcMessage::error(
                    McpError::internal_error("the call's task failed", None),
                    Some(id),
                )
            }
        };
        // A session keeps rmcp's status for its era: 200, the error in the message.
        let status = if session {
            StatusCode::OK
        } else {
            status_of(&message)
        };
        Some(respond(&message, status))
    }
}

/// rmcp's answer for a handler's `tools/call` outcome, shaped as its handler layer shapes it
/// for the era (`modern`: 2026-07-28): a task handle only for a client that declared tasks
/// (never made here; kept as rmcp has it); `input_required` only in the 2026-07-28 era; the
/// 2026-07-28 era's cache hints filled in, the older era's `resultType: "complete"` left out;
/// a missing resource `INVALID_PARAMS` in the 2026-07-28 era.
fn message_of(
    outcome: Result<CallToolResponse, McpError>,
    capabilities: Option<&ClientCapabilities>,
    modern: bool,
    id: RequestId,
) -> ServerJsonRpcMessage {
    let shaped = outcome.and_then(|response| {
        if matches!(response, CallToolResponse::Task(_))
            && !capabilities.is_some_and(ClientCapabilities::supports_tasks)
        {
            return Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let mut result = ServerResult::from(response);
        if matches!(result, ServerResult::InputRequiredResult(_)) && !modern {
            return Err(McpError::invalid_request(
                "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                None,
            ));
        }
        if modern {
            result.fill_missing_cache_hints();
        } else {
            result.strip_result_type_for_legacy_peer();
        }
        Ok(result)
    });
    match shaped {
        Ok(result) => ServerJsonRpcMessage::response(result, id),
        Err(mut error) => {
            if modern && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            ServerJsonRpcMessage::error(error, Some(id))
        }
    }
}

/// The HTTP answer for `message` with `status`.
fn respond(message: &ServerJsonRpcMessage, status: StatusCode) -> HttpResponse {
    respond_with(serde_json::to_vec(message), status)
}

/// The HTTP answer with `written`'s bytes and `status` (500 when it could not be written).
fn respond_with(written: serde_json::Result<Vec<u8>>, status: StatusCode) -> HttpResponse {
    let (status, body) = match written {
        Ok(body) => (status, body),
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

/// A plain `tools/call`, taken apart as rmcp would: `_meta` moved out of the params.
#[derive(Debug)]
pub(crate) struct Plain {
    pub(crate) id: RequestId,
    pub(crate) meta: RequestMetaObject,
    pub(crate) params: CallToolRequestParams,
    /// The handshake-era session it names; `None` for a 2026-07-28 request.
    pub(crate) session: Option<Asked>,
}

/// The session a handshake-era request names, and the version its header states.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Asked {
    pub(crate) id: String,
    pub(crate) version: String,
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
    #[serde(rename = "_meta", default)]
    meta: Option<Map<String, Value>>,
}

/// The request, when it is a plain `tools/call` of a tool `answerable` names (see the
/// module's list; whether a named session may be served is [`McpSessions::plain_session`]'s to
/// say); `None` otherwise.
pub(crate) fn recognize(
    headers: &HeaderMap,
    body: &[u8],
    answerable: impl Fn(&str) -> bool,
) -> Option<Plain> {
    if headers.contains_key(ORIGIN)
        || !loopback_host(headers)
        || !is_json(headers)
        || !accepts_both(headers)
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
    {
        return None;
    }
    let version = sole(headers, "mcp-protocol-version")?;
    let session = if headers.contains_key("mcp-session-id") {
        if headers.contains_key("mcp-method") || headers.contains_key("mcp-name") {
            return None;
        }
        Some(Asked {
            id: sole(headers, "mcp-session-id")?.to_owned(),
            version: version.to_owned(),
        })
    } else {
        if version != ProtocolVersion::V_2026_07_28.as_str()
            || sole(headers, "mcp-method")? != "tools/call"
        {
            return None;
        }
        None
    };
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
    if !answerable(&params.name) {
        return None;
    }
    let meta = params.meta.unwrap_or_default();
    if meta.contains_key(PROGRESS_TOKEN) {
        return None;
    }
    let meta = RequestMetaObject(MetaObject(meta));
    if session.is_some() {
        // The session's `initialize` speaks for the client: nothing of the 2026-07-28 era's
        // own in `_meta`.
        if meta.0.0.keys().any(|k| k.starts_with(MCP_META_PREFIX)) {
            return None;
        }
    } else {
        // The header names the tool as is: a Base64 form (or any other) is rmcp's to decode.
        let modern = ProtocolVersion::V_2026_07_28;
        if sole(headers, "mcp-name")? != params.name
            || meta.protocol_version()? != modern
            || meta.client_capabilities().is_none()
            || !meta.missing_required_keys(&modern).is_empty()
            || (meta.0.0.contains_key(CLIENT_INFO) && meta.client_info().is_none())
        {
            return None;
        }
    }
    let mut call = CallToolRequestParams::new(params.name);
    call.arguments = params.arguments;
    Some(Plain {
        id,
        meta,
        params: call,
        session,
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

/// `Host` is one well-formed authority naming a loopback address (`name` or `name:port`, the
/// port digits only), as the guard requires.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = sole(headers, HOST.as_str()) else {
        return false;
    };
    let (name, rest) = match host.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((name, rest)) => (name, rest),
            None => return false,
        },
        None => match host.find(':') {
            Some(colon) => (&host[..colon], &host[colon..]),
            None => (host, ""),
        },
    };
    let port_ok = rest.is_empty()
        || rest.strip_prefix(':').is_some_and(|port| {
            !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
        });
    port_ok && matches!(name, "localhost" | "127.0.0.1" | "::1")
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
        assert!(!with("host", "[::1]x"));
        assert!(!with("host", "127.0.0.1:abc"));
        assert!(!with("host", "user@127.0.0.1"));
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

    const SESSION_HEADERS: [(&str, &str); 5] = [
        ("host", "localhost:7777"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", "s-1"),
    ];

    fn session_body() -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": "c-1",
            "method": "tools/call",
            "params": {
                "name": "openphone_device_status",
                "arguments": {"reason": "r"},
                "_meta": {"dev.openphone/idempotencyKey": "k2"}
            }
        })
    }

    #[test]
    fn a_plain_session_call_names_its_session_and_version() {
        let plain = take(&SESSION_HEADERS, &session_body()).expect("taken");
        assert_eq!(
            plain.session,
            Some(Asked {
                id: "s-1".into(),
                version: "2025-11-25".into(),
            })
        );
        assert_eq!(plain.id, NumberOrString::String("c-1".into()));
        assert_eq!(plain.meta.0.0["dev.openphone/idempotencyKey"], "k2");
        // No `_meta` at all is the plain case too.
        let mut body = session_body();
        body["params"].as_object_mut().unwrap().remove("_meta");
        assert!(take(&SESSION_HEADERS, &body).is_some());
        // A modern request names no session.
        assert_eq!(take(&PLAIN_HEADERS, &plain_body()).unwrap().session, None);
    }

    #[test]
    fn a_session_call_beyond_the_plain_case_goes_to_rmcp() {
        let body = session_body();
        let added = |name: &str, value: &str| {
            let mut pairs = SESSION_HEADERS.to_vec();
            pairs.push((name, value));
            take(&pairs, &body).is_some()
        };
        assert!(!added("mcp-session-id", "s-2"));
        assert!(!added("mcp-protocol-version", "2025-11-25"));
        assert!(!added("mcp-method", "tools/call"));
        assert!(!added("mcp-name", "openphone_device_status"));
        assert!(!added("origin", "http://localhost:7777"));
        let without: Vec<_> = SESSION_HEADERS
            .iter()
            .copied()
            .filter(|(n, _)| *n != "mcp-protocol-version")
            .collect();
        assert!(take(&without, &body).is_none(), "the version is stated");
        let meta = |key: &str| {
            let mut body = session_body();
            body["params"]["_meta"][key] = json!("x");
            take(&SESSION_HEADERS, &body).is_some()
        };
        assert!(!meta("progressToken"));
        assert!(!meta("io.modelcontextprotocol/protocolVersion"));
        assert!(!meta("io.modelcontextprotocol/clientInfo"));
        assert!(meta("dev.openphone/autonomy"));
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
