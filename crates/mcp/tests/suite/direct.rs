//! The direct path of `/mcp` (`direct.rs`): a plain 2026-07-28 `tools/call` answered without
//! rmcp's per-request service gets the answer rmcp gives, and everything else still goes to
//! rmcp. Two services over one backend — the direct path on and off — answer the same
//! requests; their answers are compared with the ids each call draws masked.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use openphone_clock::ManualClock;
use openphone_core::{BridgeConfig, EventBus, ToolBridge};
use openphone_device::SimPhone;
use openphone_mcp::{
    CancellationToken, HTTP_SESSION_IDLE, HttpOptions, MAX_IN_FLIGHT_PER_CLIENT, McpBackend,
    McpHttpService, McpPrincipal, McpSettings, StateSeal, ToolTable, http_service,
};
use openphone_policy::{Caller, ExposureGrants, ToolPolicy, Transport};
use openphone_store::Store;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower_service::Service;

use super::registry;

struct Pair {
    _dirs: [tempfile::TempDir; 2],
    _clocks: [ManualClock; 2],
    /// The bridge behind `direct` and `rmcp_same`.
    bridge: Arc<ToolBridge>,
    /// The direct path on.
    direct: McpHttpService,
    /// Off, over a second backend in the same state as the first: each case runs on both.
    rmcp: McpHttpService,
    /// Off, over the first backend.
    rmcp_same: McpHttpService,
    principal: Arc<McpPrincipal>,
}

/// A fresh bridge (its own data directory, the simulated phone at the demo's start) and an MCP
/// backend over it.
fn backend(
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

fn service(backend: &Arc<McpBackend>, direct_calls: bool) -> McpHttpService {
    service_idle(backend, direct_calls, HTTP_SESSION_IDLE)
}

fn service_idle(backend: &Arc<McpBackend>, direct_calls: bool, idle: Duration) -> McpHttpService {
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
fn runtime(id: &str) -> Arc<McpPrincipal> {
    let mut caller = Caller::remote(id, Transport::Mcp, &format!("token:{id}"));
    caller.grants = ExposureGrants::ALL;
    Arc::new(McpPrincipal {
        caller,
        confirming_host: false,
    })
}

/// `wait`: how long a call waits for the user before it answers `pending`.
fn pair(wait: Duration) -> Pair {
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
fn request(
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
fn post(host: &str, version: &str) -> http::request::Builder {
    http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
}

/// The request `builder` makes with `body`, as `principal` (what the guard in front adds).
fn with_body(
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
async fn send(
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
fn masked(value: &Value) -> Value {
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
fn mask_ids(text: &str) -> String {
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

fn is_uuid(b: &[u8]) -> bool {
    b.iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

/// The calls both paths answer in the comparisons: reads, a refused shape, a mutation that
/// waits for the user, and the caller's own `_meta` keys (a bad one, a phone that is not
/// there). Tool, arguments, `_meta` (besides the era's own).
fn cases() -> Vec<(&'static str, Value, Value)> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_modern_call_gets_the_answer_rmcp_gives() {
    let p = pair(Duration::from_millis(200));
    let cases = cases();
    let mut outcomes = Vec::new();
    let mut errors = Vec::new();
    for (n, (name, arguments, meta)) in cases.iter().enumerate() {
        let before = p.direct.direct_answers();
        let direct = send(
            &p.direct,
            request(&p.principal, name, arguments.clone(), meta.clone(), &[]),
        )
        .await;
        assert_eq!(p.direct.direct_answers(), before + 1, "case {n}: not taken");
        let rmcp = send(
            &p.rmcp,
            request(&p.principal, name, arguments.clone(), meta.clone(), &[]),
        )
        .await;
        assert_eq!(p.rmcp.direct_answers(), 0);
        assert_eq!(direct.0, rmcp.0, "case {n}: status");
        assert_eq!(direct.1, rmcp.1, "case {n}: content type");
        assert_eq!(masked(&direct.2), masked(&rmcp.2), "case {n}: answer");
        assert_eq!(direct.2["id"], json!(41), "case {n}");
        outcomes.push(direct.2["result"]["structuredContent"]["outcome"].clone());
        errors.push(direct.2["result"]["isError"] == json!(true));
    }
    // The cases reach the tool, the manifest's checks and the wait for the user.
    assert_eq!(errors, [false, false, true, true, false, true, true]);
    assert_eq!(outcomes[4], json!("pending"), "{outcomes:?}");
    // A keyed call answered on one path is the same call on the other: replayed, not run again.
    let keyed = json!({"dev.openphone/idempotencyKey": "same-key"});
    let first = send(
        &p.direct,
        request(
            &p.principal,
            "openphone_device_status",
            json!({"reason": "r"}),
            keyed.clone(),
            &[],
        ),
    )
    .await;
    let again = send(
        &p.rmcp_same,
        request(
            &p.principal,
            "openphone_device_status",
            json!({"reason": "r"}),
            keyed,
            &[],
        ),
    )
    .await;
    assert_eq!(
        first.2, again.2,
        "the replay is byte for byte the first answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_but_the_plain_case_still_goes_to_rmcp() {
    let p = pair(Duration::from_millis(200));
    let status = "openphone_device_status";
    let taken = |extra: &'static [(&'static str, &'static str)], meta: Value| {
        let request = request(&p.principal, status, json!({"reason": "r"}), meta, extra);
        let service = p.direct.clone();
        async move {
            let before = service.direct_answers();
            let answer = send(&service, request).await;
            (service.direct_answers() > before, answer)
        }
    };
    // A progress token: the call may stream, rmcp serves it.
    let (direct, answer) = taken(&[], json!({"progressToken": "p1"})).await;
    assert!(!direct);
    assert_eq!(answer.0, 200);
    assert_eq!(answer.2["result"]["isError"], json!(false), "{}", answer.2);
    // A browser's request: rmcp checks its Origin again.
    let (direct, answer) = taken(&[("origin", "http://127.0.0.1:7777")], json!({})).await;
    assert!(!direct);
    assert_eq!(answer.0, 200, "{}", answer.2);
    // A second Mcp-Name, contradicting the body: rmcp's refusal, untouched.
    let (direct, answer) = taken(&[("mcp-name", "openphone_screen_get")], json!({})).await;
    assert!(!direct);
    assert_eq!(answer.0, 400, "{}", answer.2);
    // A request without a principal (no guard in front): rmcp's answer too.
    let mut bare = request(&p.principal, status, json!({}), json!({}), &[]);
    bare.extensions_mut().clear();
    let before = p.direct.direct_answers();
    let _ = send(&p.direct, bare).await;
    assert_eq!(p.direct.direct_answers(), before);
}

/// A client that goes away while its call waits for the user does not withdraw the request,
/// and its call does not keep waiting unseen: the call's token is cancelled, its wait ends and
/// its place among the client's calls in flight comes back; the confirmation stays pending for
/// the user and the keyed retry — as when rmcp's response stream is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_direct_call_ends_its_wait_and_leaves_its_confirmation_pending() {
    // A long local wait: only the drop ends it.
    let p = pair(Duration::from_secs(60));
    let mut waiting = Vec::new();
    for n in 0..MAX_IN_FLIGHT_PER_CLIENT {
        let call = request(
            &p.principal,
            "openphone_clipboard_set",
            json!({"text": format!("text {n}"), "reason": "r"}),
            json!({"dev.openphone/idempotencyKey": format!("drop-{n}")}),
            &[],
        );
        let mut service = p.direct.clone();
        waiting.push(tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(500), service.call(call))
                .await
                .is_err()
        }));
    }
    for call in waiting {
        assert!(call.await.unwrap(), "each call waits for the user");
    }
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    // Every place is free again: had the dropped calls kept waiting (a minute), this one would
    // be refused (`rate_limited`) every time. The calls' tasks end a moment after the drops.
    let mut status = Value::Null;
    for _ in 0..100 {
        let after = send(
            &p.direct,
            request(
                &p.principal,
                "openphone_device_status",
                json!({"reason": "r"}),
                json!({}),
                &[],
            ),
        )
        .await;
        status = status_of(&after.2);
        if status == json!("ok") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, json!("ok"));
    let pending = p.bridge.pending_confirmations(None).unwrap();
    assert_eq!(
        pending.len(),
        MAX_IN_FLIGHT_PER_CLIENT,
        "none withdrawn: {pending:?}"
    );
}

/// A handshake-era POST on `session` (none: `initialize`) carrying `body`.
fn session_post(
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
async fn open_session(
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
fn status_call(
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

fn session_call(
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_session_call_gets_the_answer_rmcp_gives() {
    let p = pair(Duration::from_millis(200));
    let on = open_session(&p.direct, &p.principal, json!({})).await;
    let off = open_session(&p.rmcp, &p.principal, json!({})).await;
    let cases = cases();
    for (n, (name, arguments, meta)) in cases.iter().enumerate() {
        let before = p.direct.direct_answers();
        let call = |session: &str| {
            session_call(
                &p.principal,
                session,
                9,
                name,
                arguments.clone(),
                meta.clone(),
            )
        };
        let direct = send(&p.direct, call(&on)).await;
        assert_eq!(p.direct.direct_answers(), before + 1, "case {n}: not taken");
        let rmcp = send(&p.rmcp, call(&off)).await;
        assert_eq!(p.rmcp.direct_answers(), 0);
        assert_eq!((direct.0, rmcp.0), (200, 200), "case {n}");
        // rmcp answers a session's POST as an event stream, the direct path as JSON: both
        // are the client's to read (it accepts both), and the message is the same.
        assert_eq!(direct.1, "application/json");
        assert!(rmcp.1.starts_with("text/event-stream"), "{}", rmcp.1);
        assert_eq!(masked(&direct.2), masked(&rmcp.2), "case {n}: answer");
        assert_eq!(direct.2["id"], json!(9));
    }
    // The audit names the session's client, as under rmcp.
    let audit = p.bridge.audit_page(0, 10_000).unwrap();
    let caller = serde_json::to_string(&audit.last().unwrap().entry.caller).unwrap();
    assert!(caller.contains("client:session-test"), "{caller}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_call_that_is_not_plain_goes_to_rmcp() {
    let p = pair(Duration::from_millis(200));
    // A client that may be asked mid-call: its calls stay rmcp's.
    let elicits = open_session(&p.direct, &p.principal, json!({"elicitation": {}})).await;
    let reply = send(&p.direct, status_call(&p.principal, &elicits, 3)).await;
    assert_eq!(p.direct.direct_answers(), 0);
    assert_eq!(reply.2["result"]["isError"], json!(false), "{}", reply.2);
    // Another runtime's token on a session: rmcp's refusal, untouched.
    let plain = open_session(&p.direct, &p.principal, json!({})).await;
    let other = runtime("openclaw");
    let reply = send(&p.direct, status_call(&other, &plain, 4)).await;
    assert_eq!(p.direct.direct_answers(), 0);
    assert!(
        reply.2["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("another runtime")),
        "{}",
        reply.2
    );
    // A session that is not there: rmcp's 404.
    let gone = send_status(&p.direct, status_call(&p.principal, "no-such-session", 5)).await;
    assert_eq!(gone, 404);
    // The version the session did not negotiate: rmcp's.
    let mut stale = status_call(&p.principal, &plain, 6);
    stale.headers_mut().insert(
        "mcp-protocol-version",
        http::HeaderValue::from_static("2025-06-18"),
    );
    let _ = send_status(&p.direct, stale).await;
    assert_eq!(p.direct.direct_answers(), 0);
    // The plain call on the plain session is taken.
    let reply = send(&p.direct, status_call(&p.principal, &plain, 7)).await;
    assert_eq!(p.direct.direct_answers(), 1);
    assert_eq!(reply.2["result"]["isError"], json!(false), "{}", reply.2);
}

async fn send_status(service: &McpHttpService, request: http::Request<Full<Bytes>>) -> u16 {
    let response = service.clone().call(request).await.unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

/// `notifications/cancelled` reaches a call on the direct path as it reaches one under rmcp:
/// the request it was waiting on is withdrawn, so it never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_cancel_withdraws_a_direct_session_call() {
    let p = pair(Duration::from_secs(60));
    let session = open_session(&p.direct, &p.principal, json!({})).await;
    let call = session_call(
        &p.principal,
        &session,
        21,
        "openphone_clipboard_set",
        json!({"text": "never", "reason": "r"}),
        json!({}),
    );
    let service = p.direct.clone();
    let waiting = tokio::spawn(async move { send(&service, call).await });
    // The call waits for the user.
    for _ in 0..100 {
        if !p.bridge.pending_confirmations(None).unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(p.bridge.pending_confirmations(None).unwrap().len(), 1);
    assert_eq!(p.direct.direct_answers(), 1);
    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 21, "reason": "changed my mind"},
    });
    assert_eq!(
        send_status(
            &p.direct,
            session_post(&p.principal, Some(&session), &cancel)
        )
        .await,
        202
    );
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the cancel ends the wait")
        .unwrap();
    assert!(
        p.bridge.pending_confirmations(None).unwrap().is_empty(),
        "withdrawn"
    );
    assert_eq!(
        answer.2["result"]["_meta"]["dev.openphone/toolResult"]["error"]["code"],
        json!("cancelled"),
        "{}",
        answer.2
    );
}

/// rmcp's session worker sees none of the direct calls; the session must not be closed as idle
/// while they come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_in_use_on_the_direct_path_is_not_closed_as_idle() {
    let (_dir, _clock, _bridge, backend) = backend(Duration::from_millis(200));
    let principal = runtime("hermes");
    let idle = Duration::from_secs(1);
    let service = service_idle(&backend, true, idle);
    let used = open_session(&service, &principal, json!({})).await;
    let unused = open_session(&service, &principal, json!({})).await;
    // Direct calls only, for well over two idle times.
    for n in 0..24 {
        let reply = send(&service, status_call(&principal, &used, n)).await;
        assert_eq!(reply.2["result"]["isError"], json!(false), "{}", reply.2);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(service.direct_answers(), 24);
    let list = |session: &str| {
        session_post(
            &principal,
            Some(session),
            &json!({"jsonrpc": "2.0", "id": 99, "method": "tools/list"}),
        )
    };
    assert_eq!(send_status(&service, list(&used)).await, 200, "kept open");
    assert_eq!(
        send_status(&service, list(&unused)).await,
        404,
        "closed as idle"
    );
}

/// `n` calls of `principal` that wait for the user (a mutation each), started on `service`, on
/// `session` when one is named (else in the 2026-07-28 era, without `clientInfo`); returns
/// once the bridge holds all their confirmations.
async fn fill_places(
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
fn status_of(answer: &Value) -> Value {
    answer["result"]["_meta"]["dev.openphone/toolResult"]["status"].clone()
}

/// The tool result error code of an MCP answer.
fn code_of(answer: &Value) -> Value {
    answer["result"]["_meta"]["dev.openphone/toolResult"]["error"]["code"].clone()
}

/// A 2026-07-28 client's calls count under one key on both paths: eight waiting on the direct
/// path leave no place for a ninth that rmcp serves (it asks for progress), neither sending
/// `clientInfo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_paths_count_a_modern_clients_calls_together() {
    let p = pair(Duration::from_secs(60));
    let _waiting = fill_places(&p, &p.direct, None, MAX_IN_FLIGHT_PER_CLIENT).await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    let ninth = send(
        &p.direct,
        request(
            &p.principal,
            "openphone_device_status",
            json!({"reason": "r"}),
            json!({"progressToken": "p9", "io.modelcontextprotocol/clientInfo": null}),
            &[],
        ),
    )
    .await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    assert_eq!(code_of(&ninth.2), json!("rate_limited"), "{}", ninth.2);
}

/// A session's direct calls and its calls through rmcp share the session's places: the handler
/// the direct path uses is the session's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_direct_calls_share_its_places_with_rmcps() {
    let p = pair(Duration::from_secs(60));
    let session = open_session(&p.direct, &p.principal, json!({})).await;
    let _waiting = fill_places(&p, &p.direct, Some(&session), MAX_IN_FLIGHT_PER_CLIENT).await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    // Through rmcp (it asks for progress), on the same session.
    let ninth = send(
        &p.direct,
        session_call(
            &p.principal,
            &session,
            9,
            "openphone_device_status",
            json!({"reason": "r"}),
            json!({"progressToken": "p9"}),
        ),
    )
    .await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    assert_eq!(code_of(&ninth.2), json!("rate_limited"), "{}", ninth.2);
    // Another session of the same token has places of its own.
    let other = open_session(&p.direct, &p.principal, json!({})).await;
    let reply = send(&p.direct, status_call(&p.principal, &other, 1)).await;
    assert_eq!(status_of(&reply.2), json!("ok"), "{}", reply.2);
}

/// A session closed while its direct call waits for the user (the client deletes it) ends the
/// wait, as rmcp's service ends its own calls': the call answers pending at once, and the
/// confirmation stays for the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_ends_its_direct_calls_wait() {
    let p = pair(Duration::from_secs(60));
    let session = open_session(&p.direct, &p.principal, json!({})).await;
    let mut waiting = fill_places(&p, &p.direct, Some(&session), 1).await;
    let mut delete = http::Request::builder()
        .method("DELETE")
        .uri("/mcp")
        .header("host", "localhost:7777")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
    delete.extensions_mut().insert(Arc::clone(&p.principal));
    let status = send_status(&p.direct, delete).await;
    assert!(matches!(status, 200 | 202 | 204), "{status}");
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting.pop().unwrap())
        .await
        .expect("the close ends the wait")
        .unwrap();
    assert_eq!(
        status_of(&answer.2),
        json!("needs_confirmation"),
        "{}",
        answer.2
    );
    assert_eq!(p.bridge.pending_confirmations(None).unwrap().len(), 1);
}

/// A confirming host (the user trusts its prompt) is asked through `input_required` on both
/// paths alike: the direct path chooses the confirmation strategy from the same inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirming_host_is_asked_the_same_on_both_paths() {
    let p = pair(Duration::from_millis(200));
    let mut host = (*runtime("hermes")).clone();
    host.confirming_host = true;
    let host = Arc::new(host);
    let form = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let call = || {
        request(
            &host,
            "openphone_clipboard_set",
            json!({"text": "asked", "reason": "r"}),
            form.clone(),
            &[],
        )
    };
    let direct = send(&p.direct, call()).await;
    assert_eq!(p.direct.direct_answers(), 1);
    let rmcp = send(&p.rmcp, call()).await;
    assert_eq!((direct.0, direct.1.as_str()), (rmcp.0, rmcp.1.as_str()));
    assert_eq!(masked(&direct.2), masked(&rmcp.2));
    assert_eq!(
        direct.2["result"]["resultType"],
        json!("input_required"),
        "{}",
        direct.2
    );
    assert!(
        direct.2["result"]["requestState"].is_string(),
        "{}",
        direct.2
    );
}
