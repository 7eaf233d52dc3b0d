//! One WebSocket connection: authentication, `hello`, dispatch, events, limits.
//!
//! A reader loop parses frames and spawns one task per request (capped per connection); a
//! single writer task owns the socket's sink and numbers event notifications (`seq`). On
//! shutdown the reader stops, in-flight requests are answered (a request still waiting for a
//! confirmation is answered with its `needs_confirmation` result: the confirmation stays
//! durable), then the connection closes with 1001.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::{SinkExt, StreamExt};
use openphone_core::{
    AttentionRequest, ConfirmDecision, Operator, Presence, RuntimeMessage, Surface, waiting_on,
};
use openphone_policy::{Caller, Context, Role};
use openphone_protocol::{MAX_VERSION, MIN_VERSION, ToolRequest, VersionAdvertisement};
use openphone_store::{ConfirmationFilter, ConfirmationState, SessionFilter, SessionStatus};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::{JoinHandle, JoinSet};

use crate::auth::Principal;
use crate::rpc::{self, RpcError};
use crate::state::AppState;

/// Close codes.
const CLOSE_NORMAL: u16 = 1000;
const CLOSE_GOING_AWAY: u16 = 1001;
const CLOSE_POLICY: u16 = 1008;
const CLOSE_TOO_BIG: u16 = 1009;

enum Out {
    Json(Value),
    Event { event: String, payload: Value },
    Ping,
    Close(u16, &'static str),
}

/// What a connection knows after `hello`.
struct Session {
    principal: Principal,
    caller: Caller,
    /// For a runtime: its presence, held while the connection lives (dropping it is the
    /// disconnect: the runtime's active sessions fail).
    _presence: Option<Presence>,
}

struct Conn {
    state: Arc<AppState>,
    session: Session,
    out: mpsc::Sender<Out>,
    subscriptions: Mutex<HashSet<String>>,
    forwarder: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(h) = self
            .forwarder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            h.abort();
        }
    }
}

async fn send(out: &mpsc::Sender<Out>, v: Value) {
    let _ = out.send(Out::Json(v)).await;
}

/// Whether the read error is the frame/message size limit.
fn is_too_big(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        let text = e.to_string();
        if text.contains("Space limit exceeded") || text.contains("too long") {
            return true;
        }
        source = e.source();
    }
    false
}

/// Serves one upgraded socket. `pre_auth` is the credential of the upgrade's bearer token.
pub async fn serve_socket(state: Arc<AppState>, socket: WebSocket, pre_auth: Option<Principal>) {
    state.connections.fetch_add(1, Ordering::SeqCst);
    run(state.clone(), socket, pre_auth).await;
    state.connections.fetch_sub(1, Ordering::SeqCst);
    state.connection_closed.notify_waiters();
}

async fn run(state: Arc<AppState>, socket: WebSocket, pre_auth: Option<Principal>) {
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Out>(256);
    let writer = tokio::spawn(async move {
        let mut seq: u64 = 0;
        while let Some(out) = out_rx.recv().await {
            let msg = match out {
                Out::Json(v) => Message::Text(Utf8Bytes::from(v.to_string())),
                Out::Event { event, payload } => {
                    seq += 1;
                    let v = json!({"jsonrpc": "2.0", "method": "event",
                        "params": {"event": event, "payload": payload, "seq": seq}});
                    Message::Text(Utf8Bytes::from(v.to_string()))
                }
                Out::Ping => Message::Ping(Default::default()),
                Out::Close(code, reason) => {
                    let _ = sink
                        .send(Message::Close(Some(CloseFrame {
                            code,
                            reason: Utf8Bytes::from_static(reason),
                        })))
                        .await;
                    break;
                }
            };
            if sink.send(msg).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });

    let limits = state.limits.clone();
    let inflight = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut conn: Option<Arc<Conn>> = None;
    let mut shutdown = state.shutdown.clone();
    let ping_every = Duration::from_millis(limits.ping_interval_ms.max(10));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    let mut last_seen = Instant::now();
    let mut going_away = *shutdown.borrow();

    while !going_away {
        tokio::select! {
            msg = stream.next() => {
                let msg = match msg {
                    None => break,
                    Some(Err(e)) => {
                        if is_too_big(&e) {
                            tracing::warn!(limit = limits.max_frame_bytes, "frame over the size limit; closing with 1009");
                            state.audit_oversize(conn.as_ref().map(|c| &c.session.caller));
                            let _ = out_tx.send(Out::Close(CLOSE_TOO_BIG, "frame too large")).await;
                        } else {
                            tracing::debug!(error = %e, "websocket read failed");
                        }
                        break;
                    }
                    Some(Ok(m)) => m,
                };
                last_seen = Instant::now();
                let text = match msg {
                    Message::Text(t) => t,
                    Message::Binary(_) => {
                        send(&out_tx, RpcError::invalid_request("binary frames are not accepted; send JSON text").to_json(&Value::Null)).await;
                        continue;
                    }
                    Message::Ping(_) | Message::Pong(_) => continue,
                    Message::Close(_) => break,
                };
                let req = match rpc::parse_request(text.as_str()) {
                    Ok(r) => r,
                    Err((id, e)) => {
                        send(&out_tx, e.to_json(&id)).await;
                        continue;
                    }
                };
                match &conn {
                    None => {
                        match handshake(&state, &req, pre_auth.as_ref(), &out_tx).await {
                            Handshake::Ok(session) => {
                                conn = Some(Arc::new(Conn {
                                    state: state.clone(),
                                    session,
                                    out: out_tx.clone(),
                                    subscriptions: Mutex::new(HashSet::new()),
                                    forwarder: Mutex::new(None),
                                }));
                            }
                            Handshake::Refused => {}
                            Handshake::Close(code) => {
                                let _ = out_tx.send(Out::Close(code, "refused")).await;
                                break;
                            }
                        }
                    }
                    Some(c) => {
                        if let Err(retry) = state.rate.take(&c.session.principal.bucket_key()) {
                            let e = RpcError::app("rate_limited", "too many requests; slow down")
                                .with("retry_after_ms", json!(retry));
                            send(&out_tx, e.to_json(&req.id)).await;
                            continue;
                        }
                        let Ok(permit) = inflight.clone().try_acquire_owned() else {
                            let e = RpcError::app("rate_limited", format!("more than {} requests in flight on this connection", limits.max_in_flight))
                                .with("retry_after_ms", json!(100));
                            send(&out_tx, e.to_json(&req.id)).await;
                            continue;
                        };
                        let c = c.clone();
                        tasks.spawn(async move {
                            let answer = match dispatch(&c, &req).await {
                                Ok(result) => rpc::response(&req.id, result),
                                Err(e) => e.to_json(&req.id),
                            };
                            send(&c.out, answer).await;
                            drop(permit);
                        });
                    }
                }
            }
            _ = ping.tick() => {
                if last_seen.elapsed() > ping_every * 3 {
                    tracing::debug!("peer silent for three keepalive intervals; closing");
                    let _ = out_tx.send(Out::Close(CLOSE_GOING_AWAY, "keepalive timeout")).await;
                    break;
                }
                let _ = out_tx.send(Out::Ping).await;
            }
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    going_away = true;
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    // Answer what is in flight (waiting invokes answer at once on shutdown), then close.
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
    }
    // Always end with a close frame: it also ends the writer, even while a detached task
    // (a `wait: false` follow-up) still holds a sender.
    let (code, reason) = if going_away {
        (CLOSE_GOING_AWAY, "daemon shutting down")
    } else {
        (CLOSE_NORMAL, "bye")
    };
    let _ = out_tx.send(Out::Close(code, reason)).await;
    drop(conn);
    drop(out_tx);
    let _ = writer.await;
}

enum Handshake {
    Ok(Session),
    Refused,
    Close(u16),
}

#[derive(Deserialize)]
struct HelloParams {
    protocol: VersionRange,
    #[serde(default)]
    client: ClientInfo,
}

#[derive(Deserialize)]
struct VersionRange {
    min: u32,
    max: u32,
}

#[derive(Deserialize, Default)]
struct ClientInfo {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
}

async fn handshake(
    state: &Arc<AppState>,
    req: &rpc::Request,
    pre_auth: Option<&Principal>,
    out: &mpsc::Sender<Out>,
) -> Handshake {
    if req.method != "hello" {
        return match pre_auth {
            None => {
                let e = RpcError::app(
                    "unauthorized",
                    "authenticate first: a bearer token on the upgrade or `token` in `hello`",
                );
                send(out, e.to_json(&req.id)).await;
                Handshake::Close(CLOSE_POLICY)
            }
            Some(_) => {
                let e = RpcError::app("hello_required", "say `hello` first");
                send(out, e.to_json(&req.id)).await;
                Handshake::Refused
            }
        };
    }
    let token = req.params.get("token").and_then(Value::as_str);
    let principal = match (pre_auth, token) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => match state.credentials.authenticate(t) {
            Some(p) => p,
            None => {
                tracing::warn!("hello with an unknown token refused");
                let e = RpcError::app("unauthorized", "unknown token");
                send(out, e.to_json(&req.id)).await;
                return Handshake::Close(CLOSE_POLICY);
            }
        },
        (None, None) => {
            let e = RpcError::app(
                "unauthorized",
                "no token: send a bearer token on the upgrade or `token` in `hello`",
            );
            send(out, e.to_json(&req.id)).await;
            return Handshake::Close(CLOSE_POLICY);
        }
    };
    if let Err(retry) = state.rate.take(&principal.bucket_key()) {
        let e = RpcError::app("rate_limited", "too many requests; slow down")
            .with("retry_after_ms", json!(retry));
        send(out, e.to_json(&req.id)).await;
        return Handshake::Refused;
    }
    let params: HelloParams = match serde_json::from_value(req.params.clone()) {
        Ok(p) => p,
        Err(e) => {
            send(
                out,
                RpcError::invalid_params(format!("hello: {e}")).to_json(&req.id),
            )
            .await;
            return Handshake::Refused;
        }
    };
    if params.protocol.max < MIN_VERSION
        || params.protocol.min > MAX_VERSION
        || params.protocol.min > params.protocol.max
    {
        let e = RpcError::app(
            "unsupported_version",
            format!(
                "no common protocol version: client {}..{}, daemon {MIN_VERSION}..{MAX_VERSION}",
                params.protocol.min, params.protocol.max
            ),
        )
        .with("runtime_protocol", json!(VersionAdvertisement::current()));
        send(out, e.to_json(&req.id)).await;
        return Handshake::Close(CLOSE_POLICY);
    }
    let chosen = params.protocol.max.min(MAX_VERSION);
    let caller = principal.caller(&params.client.name);
    tracing::info!(role = principal.role().as_str(), runtime = principal.runtime_id(),
        client = %params.client.name, client_version = %params.client.version, "hello");
    let registry = state.registry;
    let result = json!({
        "protocol_version": chosen,
        "role": principal.role().as_str(),
        "runtime": principal.runtime_id(),
        "runtime_protocol": VersionAdvertisement::current(),
        "phone": state.profile,
        "manifests": {
            "commands_version": registry.commands_version(),
            "commands": registry.commands().map(|c| c.name.clone()).collect::<Vec<_>>(),
            "events": registry.events().iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
            "capabilities": registry.capabilities().iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        },
    });
    let presence = match caller.role {
        Role::Operator => None,
        Role::Runtime => match state.runtimes.connect(&caller.runtime) {
            Ok(p) => Some(p),
            Err(e) => {
                let err = RpcError::app(e.code.as_str(), e.message);
                send(out, err.to_json(&req.id)).await;
                return Handshake::Close(CLOSE_POLICY);
            }
        },
    };
    send(out, rpc::response(&req.id, result)).await;
    Handshake::Ok(Session {
        principal,
        caller,
        _presence: presence,
    })
}

fn parse<T: for<'de> Deserialize<'de>>(method: &str, params: &Value) -> Result<T, RpcError> {
    serde_json::from_value(params.clone())
        .map_err(|e| RpcError::invalid_params(format!("{method}: {e}")))
}

fn operator_only(conn: &Conn, method: &str) -> Result<(), RpcError> {
    match conn.session.caller.role {
        Role::Operator => Ok(()),
        Role::Runtime => Err(RpcError::app(
            "forbidden",
            format!("{method} is for operators; runtime credentials cannot call it"),
        )),
    }
}

fn internal(e: impl std::fmt::Display) -> RpcError {
    tracing::error!(error = %e, "request failed");
    RpcError::app("tool_error", format!("internal error: {e}"))
}

async fn dispatch(conn: &Arc<Conn>, req: &rpc::Request) -> Result<Value, RpcError> {
    match req.method.as_str() {
        "hello" => Err(RpcError::invalid_request(
            "hello was already said on this connection",
        )),
        "tools.list" => tools_list(conn),
        "tools.invoke" => tools_invoke(conn, &req.params).await,
        "confirmations.list" => confirmations_list(conn),
        "confirmations.resolve" => confirmations_resolve(conn, &req.params).await,
        "events.subscribe" => events_subscribe(conn, &req.params),
        "sessions.list" => sessions_list(conn, &req.params),
        "sessions.get" => sessions_get(conn, &req.params),
        "audit.query" => audit_query(conn, &req.params),
        "attention.request" => attention_request(conn, &req.params).await,
        "runtime.message" => runtime_message(conn, &req.params),
        "runtime.list" => runtime_list(conn),
        "runtime.select" => runtime_select(conn, &req.params),
        other => Err(RpcError::method_not_found(other)),
    }
}

fn tools_list(conn: &Conn) -> Result<Value, RpcError> {
    let state = &conn.state;
    let caller = &conn.session.caller;
    let policy = state.tool_policy.clone();
    let mut tools = Vec::new();
    for command in state.registry.commands() {
        if !openphone_policy::visible(command, caller, &policy) {
            continue;
        }
        tools.push(json!({
            "name": command.name,
            "aliases": command.aliases,
            "android_tool": command.android_tool,
            "description": command.description,
            "category": command.category,
            "input_schema": command.input_schema,
            "risk": command.risk.as_str(),
            "confirmation": command.confirmation.as_str(),
            "default_exposure": command.default_exposure.as_str(),
            "mutating": openphone_policy::is_mutating(command),
            "supported": state.profile.supported_tools.iter().any(|t| t == &command.name),
        }));
    }
    Ok(json!({"tools": tools}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InvokeParams {
    #[serde(default)]
    request_id: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    runtime_session_id: Option<String>,
    #[serde(default)]
    phone_session_id: Option<String>,
    #[serde(default)]
    autonomy: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    timeout_ms: Option<i64>,
    #[serde(default)]
    wait: Option<bool>,
}

async fn tools_invoke(conn: &Arc<Conn>, params: &Value) -> Result<Value, RpcError> {
    let p: InvokeParams = parse("tools.invoke", params)?;
    let caller = conn.session.caller.clone();
    let request = ToolRequest {
        request_id: p.request_id,
        runtime: Some(caller.runtime.clone()),
        runtime_session_id: p.runtime_session_id.unwrap_or_default(),
        phone_session_id: p.phone_session_id,
        tool: p.tool,
        params: p.params.unwrap_or_else(|| json!({})),
        reason: p.reason,
        autonomy: p.autonomy,
        idempotency_key: p.idempotency_key,
        timeout_ms: p.timeout_ms,
    };
    let bridge = conn.state.bridge.clone();
    let first = bridge.invoke(&caller, request, Context::Interactive).await;
    let Some(confirmation_id) = waiting_on(&first) else {
        return serde_json::to_value(&first).map_err(internal);
    };
    if p.wait.unwrap_or(true) {
        let mut shutdown = conn.state.shutdown.clone();
        let final_result = tokio::select! {
            r = bridge.wait_final(&confirmation_id) => r,
            _ = crate::daemon::stopped(&mut shutdown) => None,
        };
        let result = match final_result {
            Some(r) => r.readdressed(&caller.runtime, &first.request_id),
            None => first,
        };
        return serde_json::to_value(&result).map_err(internal);
    }
    // wait:false — the final result follows as a `runtime.tool.result` event (sent here unless
    // the connection subscribed to that event on the bus, which delivers it already).
    let weak = Arc::downgrade(conn);
    let bridge = conn.state.bridge.clone();
    let mut shutdown = conn.state.shutdown.clone();
    let request_id = first.request_id.clone();
    tokio::spawn(async move {
        let result = tokio::select! {
            r = bridge.wait_final(&confirmation_id) => r,
            _ = crate::daemon::stopped(&mut shutdown) => None,
        };
        let (Some(result), Some(c)) = (result, weak.upgrade()) else {
            return;
        };
        let subscribed = c
            .subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains("runtime.tool.result");
        if !subscribed {
            let result = result.readdressed(&c.session.caller.runtime, &request_id);
            let payload = serde_json::to_value(&result).unwrap_or(Value::Null);
            let out = c.out.clone();
            drop(c);
            let _ = out
                .send(Out::Event {
                    event: "runtime.tool.result".into(),
                    payload,
                })
                .await;
        }
    });
    serde_json::to_value(&first).map_err(internal)
}

fn confirmations_list(conn: &Conn) -> Result<Value, RpcError> {
    operator_only(conn, "confirmations.list")?;
    let records = conn
        .state
        .bridge
        .store()
        .list_confirmations(&ConfirmationFilter {
            state: Some(ConfirmationState::Pending),
            ..Default::default()
        })
        .map_err(internal)?;
    let list: Vec<Value> = records
        .iter()
        .map(|r| {
            json!({
                "confirmation_id": r.confirmation_id,
                "tool": r.identity.tool,
                "runtime": r.identity.runtime,
                "request_id": r.request_id,
                "phone_session_id": r.phone_session_id,
                "summary": r.summary,
                "risk": r.risk.as_str(),
                "created_at_ms": r.created_at_ms,
                "expires_at_ms": r.expires_at_ms,
            })
        })
        .collect();
    Ok(json!({"confirmations": list}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveParams {
    confirmation_id: String,
    decision: ConfirmDecision,
}

async fn confirmations_resolve(conn: &Conn, params: &Value) -> Result<Value, RpcError> {
    let Some(operator) = Operator::from_caller(&conn.session.caller) else {
        return Err(RpcError::app(
            "forbidden",
            "a runtime can never resolve a confirmation; only the user (operator) can",
        ));
    };
    let p: ResolveParams = parse("confirmations.resolve", params)?;
    match conn
        .state
        .bridge
        .resolve(&operator, &p.confirmation_id, p.decision)
        .await
    {
        Ok(result) => serde_json::to_value(&result).map_err(internal),
        Err(e) => Err(RpcError::app(e.code().as_str(), e.to_string())),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscribeParams {
    events: Vec<String>,
}

fn events_subscribe(conn: &Arc<Conn>, params: &Value) -> Result<Value, RpcError> {
    let p: SubscribeParams = parse("events.subscribe", params)?;
    if let Some(bad) = p
        .events
        .iter()
        .find(|e| conn.state.registry.event(e).is_none())
    {
        return Err(RpcError::new(
            rpc::INVALID_PARAMS,
            "event_unsupported",
            format!("{bad:?} is not an event of the events manifest"),
        ));
    }
    let all: Vec<String> = {
        let mut subs = conn
            .subscriptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        subs.extend(p.events.iter().cloned());
        let mut v: Vec<String> = subs.iter().cloned().collect();
        v.sort();
        v
    };
    let mut forwarder = conn
        .forwarder
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if forwarder.is_none() {
        let mut rx = conn.state.bridge.events().subscribe();
        let weak = Arc::downgrade(conn);
        *forwarder = Some(tokio::spawn(async move {
            loop {
                let event = match rx.recv().await {
                    Ok(e) => e,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "event subscriber lagged");
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                let Some(c) = weak.upgrade() else { break };
                let wanted = c
                    .subscriptions
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .contains(&event.name);
                let audience_ok = match c.session.caller.role {
                    Role::Operator => event.audience.operators,
                    Role::Runtime => {
                        event.audience.runtime.as_deref() == Some(c.session.caller.runtime.as_str())
                    }
                };
                if wanted && audience_ok {
                    let out = c.out.clone();
                    drop(c);
                    if out
                        .send(Out::Event {
                            event: event.name,
                            payload: event.payload,
                        })
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }));
    }
    Ok(json!({"subscribed": all}))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SessionsListParams {
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

fn sessions_list(conn: &Conn, params: &Value) -> Result<Value, RpcError> {
    let p: SessionsListParams = parse("sessions.list", params)?;
    let runtime = match conn.session.caller.role {
        Role::Operator => p.runtime,
        Role::Runtime => {
            let own = conn.session.caller.runtime.clone();
            if p.runtime.as_ref().is_some_and(|r| *r != own) {
                return Err(RpcError::app(
                    "forbidden",
                    "a runtime sees only its own sessions",
                ));
            }
            Some(own)
        }
    };
    let status = match p.status.as_deref() {
        None => None,
        Some(s) => Some(
            SessionStatus::parse(s)
                .ok_or_else(|| RpcError::invalid_params(format!("unknown status {s:?}")))?,
        ),
    };
    let sessions = conn
        .state
        .bridge
        .store()
        .list_sessions(&SessionFilter {
            runtime,
            status,
            limit: Some(p.limit.unwrap_or(50).min(500)),
        })
        .map_err(internal)?;
    Ok(json!({"sessions": sessions}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionsGetParams {
    phone_session_id: String,
}

fn sessions_get(conn: &Conn, params: &Value) -> Result<Value, RpcError> {
    let p: SessionsGetParams = parse("sessions.get", params)?;
    let found = conn
        .state
        .bridge
        .store()
        .get_session(&p.phone_session_id)
        .map_err(internal)?;
    let visible = found.filter(|s| match conn.session.caller.role {
        Role::Operator => true,
        Role::Runtime => s.runtime_kind == conn.session.caller.runtime,
    });
    match visible {
        Some(s) => Ok(json!({"session": s})),
        None => Err(RpcError::app(
            "not_found",
            format!("no phone session {:?}", p.phone_session_id),
        )),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AuditParams {
    #[serde(default)]
    after: Option<i64>,
    #[serde(default)]
    limit: Option<usize>,
}

fn audit_query(conn: &Conn, params: &Value) -> Result<Value, RpcError> {
    operator_only(conn, "audit.query")?;
    let p: AuditParams = parse("audit.query", params)?;
    let records = conn
        .state
        .bridge
        .store()
        .export_audit(p.after.unwrap_or(0), p.limit.unwrap_or(100).clamp(1, 1000))
        .map_err(internal)?;
    let next_after = records.last().map(|r| r.seq);
    Ok(json!({"records": records, "next_after": next_after}))
}

fn runtime_error(e: openphone_core::RuntimeError) -> RpcError {
    RpcError::app(e.code.as_str(), e.message)
}

/// `attention.request {surface, text, runtime?, autonomy?, include_screen?, context?}`
/// (operator): a phone session routed to a runtime, which receives
/// `runtime.attention.requested`.
async fn attention_request(conn: &Arc<Conn>, params: &Value) -> Result<Value, RpcError> {
    operator_only(conn, "attention.request")?;
    let mut req: AttentionRequest = parse("attention.request", params)?;
    req.screen = None;
    if req.include_screen {
        // The screen preflight is a read through the bridge (audited like any other).
        let read = ToolRequest {
            request_id: format!("attention-screen-{}", uuid_like()),
            tool: "openphone.screen.get".into(),
            params: json!({"reason": "screen attached to an attention request", "include_screenshot": false}),
            ..ToolRequest::default()
        };
        let result = conn
            .state
            .bridge
            .invoke(&conn.session.caller, read, Context::Interactive)
            .await;
        if result.status == openphone_protocol::ToolStatus::Ok {
            req.screen = Some(Value::Object(result.result));
        }
    }
    let accepted = conn
        .state
        .runtimes
        .request_attention(req)
        .map_err(runtime_error)?;
    serde_json::to_value(accepted).map_err(internal)
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{nanos:x}")
}

/// `runtime.message {phone_session_id, runtime_session_id?, text, final, output?, error?}`
/// (runtime): a reply for one of the caller's own sessions.
fn runtime_message(conn: &Arc<Conn>, params: &Value) -> Result<Value, RpcError> {
    if conn.session.caller.role != Role::Runtime {
        return Err(RpcError::app(
            "forbidden",
            "runtime.message is for runtimes",
        ));
    }
    let msg: RuntimeMessage = parse("runtime.message", params)?;
    let session = conn
        .state
        .runtimes
        .runtime_message(&conn.session.caller.runtime, msg)
        .map_err(runtime_error)?;
    Ok(json!({"phone_session_id": session.phone_session_id, "status": session.status.as_str()}))
}

/// `runtime.list {}` (operator): runtimes, their status and routed surfaces.
fn runtime_list(conn: &Conn) -> Result<Value, RpcError> {
    operator_only(conn, "runtime.list")?;
    Ok(json!({
        "status": conn.state.runtimes.aggregate_status(),
        "runtimes": conn.state.runtimes.list(),
    }))
}

/// `runtime.select {surface, runtime}` (operator): route a surface to a runtime.
fn runtime_select(conn: &Conn, params: &Value) -> Result<Value, RpcError> {
    operator_only(conn, "runtime.select")?;
    #[derive(Deserialize)]
    struct Select {
        surface: String,
        runtime: String,
    }
    let p: Select = parse("runtime.select", params)?;
    let surface = Surface::parse(&p.surface).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "unknown surface {:?} (chat, volume, background)",
            p.surface
        ))
    })?;
    conn.state
        .runtimes
        .select(surface, &p.runtime)
        .map_err(runtime_error)?;
    Ok(json!({"surface": surface.as_str(), "runtime": conn.state.runtimes.routed(surface)}))
}
