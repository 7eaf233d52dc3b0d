//! What the direct path's tests share (`direct.rs`, `direct_sessions.rs`): two services over
//! backends in the same state — the direct path on and off —, requests as clients send them in
//! either era, and the masking that compares two answers with the ids each call draws hidden.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use openphone_clock::ManualClock;
use openphone_core::{BridgeConfig, EventBus, ToolBridge};
use openphone_device::SimPhone;
use openphone_mcp::{
    CancellationToken, HTTP_SESSION_IDLE, HttpOptions, McpBackend, McpHttpService, McpPrincipal,
    McpSettings, StateSeal, ToolTable, http_service,
};
use openphone_policy::{Caller, ExposureGrants, ToolPolicy, Transport};
use openphone_store::Store;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower_service::Service;

use super::registry;

pub(super) struct Pair {
    pub(super) _dirs: [tempfile::TempDir; 2],
    pub(super) _clocks: [ManualClock; 2],
    /// The bridge behind `direct` and `rmcp_same`.
    pub(super) bridge: Arc<ToolBridge>,
    /// The direct path on.
    pub(super) direct: McpHttpService,
    /// Off, over a second backend in the same state as the first: each case runs on both.
    pub(super) rmcp: McpHttpService,
    /// Off, over the first backend.
    pub(super) rmcp_same: McpHttpService,
    pub(super) principal: Arc<McpPrincipal>,
}

/// A fresh bridge (its own data directory, the simulated phone at the demo's start) and an MCP
/// backend over it.
pub(super) fn backend(
    wait: Duration,
) -> (
    tempfile::TempDir,
    ManualClock,
    Arc<ToolBridge>,
    Arc<McpBackend>,
) {
    let dir = tempfile::tempdir().unwrap();
    let (phone, clock) = SimPhone::demo().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let events = Arc::new(EventBus::new(registry(), 256));
    let bridge = Arc::new(ToolBridge::new(
        registry(),
        store,
        Arc::new(phone),
        Arc::new(clock.clone()),
        events,
        BridgeConfig::default(),
    ));
    let settings = McpSettings {
        local_confirmation_wait: wait,
        ..McpSettings::default()
    };
    let backend = Arc::new(McpBackend::new(
        Arc::clone(&bridge),
        ToolTable::new(registry()).unwrap(),
        ToolPolicy::default(),
        settings,
        // A `requestState` key: a confirming host is asked through `input_required`.
        Some(StateSeal::new(&[7u8; 32]).unwrap()),
    ));
    (dir, clock, bridge, backend)
}

pub(super) fn service(backend: &Arc<McpBackend>, direct_calls: bool) -> McpHttpService {
    service_idle(backend, direct_calls, HTTP_SESSION_IDLE)
}

pub(super) fn service_idle(
    backend: &Arc<McpBackend>,
    direct_calls: bool,
    idle: Duration,
) -> McpHttpService {
    http_service(
        Arc::clone(backend),
        HttpOptions {
            extra_allowed_origins: Vec::new(),
            shutdown: CancellationToken::new(),
            direct_calls,
            session_idle: idle,
        },
    )
}

/// The principal of runtime `id`'s token, granted every exposure class.
pub(super) fn runtime(id: &str) -> Arc<McpPrincipal> {
    let mut caller = Caller::remote(id, Transport::Mcp, &format!("token:{id}"));
    caller.grants = ExposureGrants::ALL;
    Arc::new(McpPrincipal {
        caller,
        confirming_host: false,
    })
}

/// `wait`: how long a call waits for the user before it answers `pending`.
pub(super) fn pair(wait: Duration) -> Pair {
    let (dir_a, clock_a, bridge, a) = backend(wait);
    let (dir_b, clock_b, _, b) = backend(wait);
    Pair {
        _dirs: [dir_a, dir_b],
        _clocks: [clock_a, clock_b],
        bridge,
        direct: service(&a, true),
        rmcp: service(&b, false),
        rmcp_same: service(&a, false),
        principal: runtime("hermes"),
    }
}

/// A 2026-07-28 `tools/call` as a client sends it, with `extra` headers besides.
pub(super) fn request(
    principal: &Arc<McpPrincipal>,
    name: &str,
    arguments: Value,
    meta: Value,
    extra: &[(&str, &str)],
) -> http::Request<Full<Bytes>> {
    let mut full_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "pair-test", "version": "1"},
    });
    for (k, v) in meta.as_object().unwrap() {
        if v.is_null() {
            // A key the test leaves out.
            full_meta.as_object_mut().unwrap().remove(k);
        } else {
            full_meta[k] = v.clone();
        }
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": 41,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": full_meta},
    });
    let mut builder = post("127.0.0.1:7777", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name);
    for (header, value) in extra {
        builder = builder.header(*header, *value);
    }
    with_body(builder, principal, &body)
}

/// A `POST /mcp` to `host` stating protocol `version`, as a client sends it.
pub(super) fn post(host: &str, version: &str) -> http::request::Builder {
    http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
}

/// The request `builder` makes with `body`, as `principal` (what the guard in front adds).
pub(super) fn with_body(
    builder: http::request::Builder,
    principal: &Arc<McpPrincipal>,
    body: &Value,
) -> http::Request<Full<Bytes>> {
    let mut request = builder
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    request.extensions_mut().insert(Arc::clone(principal));
    request
}

/// Status, content type and JSON body of `service`'s answer.
pub(super) async fn send(
    service: &McpHttpService,
    request: http::Request<Full<Bytes>>,
) -> (u16, String, Value) {
    let response = service.clone().call(request).await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(body.to_vec()).unwrap();
    let json = if kind.starts_with("application/json") {
        serde_json::from_str(&text).unwrap()
    } else {
        // An SSE answer: its one JSON-RPC message.
        let data = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| d.starts_with('{'))
            .unwrap_or_else(|| panic!("no message in {text}"));
        serde_json::from_str(data).unwrap()
    };
    (status, kind, json)
}

/// `value` with every id a call draws (request, confirmation, audit ids: UUID-shaped or
/// `mcp-` prefixed) replaced by a placeholder, in strings and in the text of JSON texts.
pub(super) fn masked(value: &Value) -> Value {
    match value {
        Value::String(s) => {
            if let Ok(inner) = serde_json::from_str::<Value>(s)
                && (inner.is_object() || inner.is_array())
            {
                return Value::String(masked(&inner).to_string());
            }
            Value::String(mask_ids(s))
        }
        Value::Array(items) => Value::Array(items.iter().map(masked).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    // A sealed state differs by its nonce each time.
                    let v = if k == "requestState" {
                        json!("<sealed>")
                    } else {
                        masked(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `text` with every UUID in it replaced by `<id>`.
pub(super) fn mask_ids(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if i + 36 <= bytes.len() && is_uuid(&bytes[i..i + 36]) {
            out.push_str("<id>");
            i += 36;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

pub(super) fn is_uuid(b: &[u8]) -> bool {
    b.iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

/// The calls both paths answer in the comparisons: reads, a refused shape, a mutation that
/// waits for the user, and the caller's own `_meta` keys (a bad one, a phone that is not
/// there). Tool, arguments, `_meta` (besides the era's own).
pub(super) fn cases() -> Vec<(&'static str, Value, Value)> {
    vec![
        // Reads.
        ("openphone_device_status", json!({"reason": "r"}), json!({})),
        ("openphone_screen_get", json!({"reason": "r"}), json!({})),
        // No reason; arguments the manifest refuses.
        ("openphone_device_status", json!({}), json!({})),
        ("openphone_device_status", json!({"reason": 5}), json!({})),
        // A mutation: it waits for the user, then answers pending.
        (
            "openphone_clipboard_set",
            json!({"text": "hello", "reason": "r"}),
            json!({}),
        ),
        // The caller's own keys in `_meta`: a bad one, and a phone that is not there.
        (
            "openphone_device_status",
            json!({"reason": "r"}),
            json!({"dev.openphone/idempotencyKey": ""}),
        ),
        (
            "openphone_device_status",
            json!({"reason": "r"}),
            json!({"openphone/device_id": "no-such-phone"}),
        ),
    ]
}

/// A handshake-era POST on `session` (none: `initialize`) carrying `body`.
pub(super) fn session_post(
    principal: &Arc<McpPrincipal>,
    session: Option<&str>,
    body: &Value,
) -> http::Request<Full<Bytes>> {
    let mut builder = post("localhost:7777", "2025-11-25");
    if let Some(id) = session {
        builder = builder.header("mcp-session-id", id);
    }
    with_body(builder, principal, body)
}

/// Opens a 2025-11-25 session on `service` (`initialize`, then `notifications/initialized`)
/// for a client declaring `capabilities`; its id.
pub(super) async fn open_session(
    service: &McpHttpService,
    principal: &Arc<McpPrincipal>,
    capabilities: Value,
) -> String {
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "session-test", "version": "2"},
        },
    });
    let response = service
        .clone()
        .call(session_post(principal, None, &init))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.into_body().collect().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = service
        .clone()
        .call(session_post(principal, Some(&id), &initialized))
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    id
}

/// A plain `openphone_device_status` call on `session`.
pub(super) fn status_call(
    principal: &Arc<McpPrincipal>,
    session: &str,
    id: u64,
) -> http::Request<Full<Bytes>> {
    session_call(
        principal,
        session,
        id,
        "openphone_device_status",
        json!({"reason": "r"}),
        json!({}),
    )
}

pub(super) fn session_call(
    principal: &Arc<McpPrincipal>,
    session: &str,
    id: u64,
    name: &str,
    arguments: Value,
    meta: Value,
) -> http::Request<Full<Bytes>> {
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    });
    session_post(principal, Some(session), &body)
}

pub(super) async fn send_status(
    service: &McpHttpService,
    request: http::Request<Full<Bytes>>,
) -> u16 {
    let response = service.clone().call(request).await.unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

/// `n` calls of `principal` that wait for the user (a mutation each), started on `service`, on
/// `session` when one is named (else in the 2026-07-28 era, without `clientInfo`); returns
/// once the bridge holds all their confirmations.
pub(super) async fn fill_places(
    p: &Pair,
    service: &McpHttpService,
    session: Option<&str>,
    n: usize,
) -> Vec<tokio::task::JoinHandle<(u16, String, Value)>> {
    let before = p.bridge.pending_confirmations(None).unwrap().len();
    let mut calls = Vec::new();
    for k in 0..n {
        let arguments = json!({"text": format!("fill {k}"), "reason": "r"});
        let call = match session {
            Some(session) => session_call(
                &p.principal,
                session,
                100 + k as u64,
                "openphone_clipboard_set",
                arguments,
                json!({}),
            ),
            None => request(
                &p.principal,
                "openphone_clipboard_set",
                arguments,
                json!({"io.modelcontextprotocol/clientInfo": null}),
                &[],
            ),
        };
        let service = service.clone();
        calls.push(tokio::spawn(async move { send(&service, call).await }));
    }
    for _ in 0..250 {
        if p.bridge.pending_confirmations(None).unwrap().len() == before + n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        p.bridge.pending_confirmations(None).unwrap().len(),
        before + n
    );
    calls
}

/// The tool result status of an MCP answer.
pub(super) fn status_of(answer: &Value) -> Value {
    answer["result"]["_meta"]["dev.openphone/toolResult"]["status"].clone()
}

/// The tool result error code of an MCP answer.
pub(super) fn code_of(answer: &Value) -> Value {
    answer["result"]["_meta"]["dev.openphone/toolResult"]["error"]["code"].clone()
}
