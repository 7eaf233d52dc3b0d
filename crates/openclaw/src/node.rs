//! The node connection (`openclaw-node.md` §3, §13, §14): one WebSocket with `role: "node"`,
//! kept alive with reconnect backoff and a tick watchdog.
//!
//! One task owns the loop: connect → `connect.challenge` → signed `connect` → `hello-ok` →
//! publish tools, resubscribe, presence → read until the socket ends or the watchdog fires →
//! back off → again. The read loop only decodes and hands off (invokes and posts run on their
//! own tasks), so pings are answered and the gateway never sees a slow reader.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::conn::{Conn, RequestError, lock};
use crate::identity::SignedConnect;
use crate::inner::Inner;
use crate::status::Status;
use crate::tokens::StoredToken;
use crate::wire::{self, ConnectFields, Hello, Incoming, WireError};

/// Time the gateway gives a client to answer the challenge, and our connect timeout.
const HANDSHAKE: Duration = Duration::from_secs(15);
/// A connection `ready` this long resets the backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Presence probe cadence (R1.3).
const PROBE_EVERY: Duration = Duration::from_secs(300);

/// How one connection attempt ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Closed or failed; reconnect with backoff (`stable`: it had been ready long enough to
    /// reset the backoff).
    Closed { reason: String, stable: bool },
    /// Reconnect after `delay` without counting a failure (gateway starting or restarting, a
    /// credential switch, a zombie).
    Retry { delay: Duration, reason: String },
    /// Device pairing pending (§6.1).
    Pairing { request_id: String },
    /// The credentials were refused: no automatic retry.
    AuthFailed(String),
    /// A terminal problem other than auth.
    Stopped(String),
}

/// Which credential a connect presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Credential {
    DeviceToken,
    Shared,
    Password,
    Bootstrap,
    None,
}

/// Full-jitter exponential backoff: a random delay in `[initial/2, min(max, initial·2^n)]`.
pub(crate) fn backoff(initial_ms: u64, max_ms: u64, failures: u32) -> Duration {
    let cap = initial_ms
        .saturating_mul(1u64 << failures.saturating_sub(1).min(20))
        .min(max_ms);
    let mut bytes = [0u8; 8];
    let random = match getrandom::fill(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => u64::MAX / 2,
    };
    let floor = (initial_ms / 2).min(cap);
    let span = cap - floor;
    Duration::from_millis(floor + if span == 0 { 0 } else { random % (span + 1) })
}

/// Runs the connection loop until `shutdown`.
pub(crate) async fn run(inner: Arc<Inner>, mut shutdown: watch::Receiver<bool>) {
    let mut failures: u32 = 0;
    loop {
        if *shutdown.borrow() {
            break;
        }
        inner.set_status(Status::Connecting);
        let attempt = inner.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!(attempt, url = %inner.url, "OpenClaw: connecting");
        let outcome = tokio::select! {
            outcome = connect_once(&inner) => outcome,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let delay = match outcome {
            Outcome::Closed { reason, stable } => {
                if stable {
                    failures = 0;
                }
                failures = failures.saturating_add(1);
                tracing::info!(%reason, failures, "OpenClaw connection ended");
                inner.set_status(Status::Offline { reason });
                backoff(
                    inner.config.backoff_initial_ms,
                    inner.config.backoff_max_ms,
                    failures,
                )
            }
            Outcome::Retry { delay, reason } => {
                tracing::info!(%reason, "OpenClaw: reconnecting");
                inner.set_status(Status::Offline { reason });
                delay
            }
            Outcome::Pairing { request_id } => {
                tracing::info!(%request_id, "OpenClaw: device pairing pending");
                inner.set_status(Status::PairingPending { request_id });
                Duration::from_millis(inner.config.pairing_retry_ms)
            }
            Outcome::AuthFailed(reason) => {
                tracing::warn!(%reason, "OpenClaw: authentication failed; not retrying");
                inner.set_status(Status::AuthFailed { reason });
                let _ = shutdown.wait_for(|s| *s).await;
                break;
            }
            Outcome::Stopped(reason) => {
                tracing::warn!(%reason, "OpenClaw: stopped");
                inner.set_status(Status::Stopped { reason });
                let _ = shutdown.wait_for(|s| *s).await;
                break;
            }
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = shutdown.wait_for(|s| *s) => break,
        }
    }
}

/// Reads the next text frame (skipping pings and binary frames); `Err` holds why the socket
/// ended.
async fn next_text<S>(stream: &mut S) -> Result<String, String>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        match stream.next().await {
            None => return Err("the gateway closed the connection".into()),
            Some(Err(e)) => return Err(format!("connection error: {e}")),
            Some(Ok(Message::Text(text))) => return Ok(text.as_str().to_owned()),
            Some(Ok(Message::Close(frame))) => return Err(close_reason(frame.as_ref())),
            Some(Ok(_)) => {}
        }
    }
}

fn close_reason(frame: Option<&CloseFrame>) -> String {
    match frame {
        Some(f) => format!(
            "closed by the gateway ({}{}{})",
            u16::from(f.code),
            if f.reason.is_empty() { "" } else { ": " },
            f.reason
        ),
        None => "closed by the gateway".into(),
    }
}

async fn connect_once(inner: &Arc<Inner>) -> Outcome {
    let closed = |reason: String| Outcome::Closed {
        reason,
        stable: false,
    };
    let ws = match tokio::time::timeout(
        HANDSHAKE,
        tokio_tungstenite::connect_async(inner.url.as_str()),
    )
    .await
    {
        Err(_) => return closed("the gateway did not answer within 15 s".into()),
        Ok(Err(e)) => return closed(format!("cannot connect to {}: {e}", inner.url)),
        Ok(Ok((ws, _))) => ws,
    };
    let (mut sink, mut stream) = ws.split();

    // The challenge.
    let challenge = loop {
        let text = match tokio::time::timeout(HANDSHAKE, next_text(&mut stream)).await {
            Err(_) => return closed("no connect.challenge within 15 s".into()),
            Ok(Err(reason)) => return closed(reason),
            Ok(Ok(text)) => text,
        };
        if let Ok(Incoming::Event { event, payload, .. }) = wire::decode(&text)
            && event == "connect.challenge"
        {
            break payload.unwrap_or(Value::Null);
        }
    };
    let nonce = challenge
        .get("nonce")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    let ts = challenge.get("ts").and_then(Value::as_u64);
    let (Some(nonce), Some(ts)) = (nonce, ts) else {
        return closed("the gateway sent an invalid connect.challenge (no nonce or ts)".into());
    };

    // The credential (§5.2) and the signed connect.
    let stored = match inner.tokens.get(&inner.token_key) {
        Ok(stored) => stored,
        Err(e) => {
            tracing::warn!(error = %e, "reading the stored OpenClaw device token");
            None
        }
    };
    let creds = &inner.credentials;
    let (credential, auth): (Credential, Option<(&str, String)>) = if let Some(t) = &stored {
        (Credential::DeviceToken, Some(("token", t.token.clone())))
    } else if let Some(t) = &creds.token {
        (Credential::Shared, Some(("token", t.clone())))
    } else if let Some(p) = &creds.password {
        (Credential::Password, Some(("password", p.clone())))
    } else if let Some(b) = &creds.bootstrap_token {
        let now = u64::try_from(inner.bridge.now_ms()).unwrap_or(0);
        if let Some(expired) = creds.bootstrap_expires_at_ms.filter(|at| *at < now) {
            return Outcome::AuthFailed(format!(
                "the setup code expired at {} (ms since the epoch); make a new one with \
                 `openclaw qr --json` and restart",
                expired
            ));
        }
        (Credential::Bootstrap, Some(("bootstrapToken", b.clone())))
    } else {
        (Credential::None, None)
    };
    let signed_token = match (credential, &auth) {
        (Credential::Password | Credential::None, _) | (_, None) => String::new(),
        (_, Some((_, t))) => t.clone(),
    };
    let scopes: Vec<String> = Vec::new();
    let device_id = inner.identity.device_id();
    let signature = inner.identity.sign(&SignedConnect {
        client_id: wire::CLIENT_ID,
        client_mode: wire::CLIENT_MODE,
        role: wire::ROLE,
        scopes: &scopes,
        signed_at_ms: ts,
        token: &signed_token,
        nonce: &nonce,
        platform: Some(wire::PLATFORM),
        device_family: Some(wire::PLATFORM),
    });
    let public_key = inner.identity.public_key();
    let commands = inner.surface.commands();
    let params = wire::connect_params(&ConnectFields {
        display_name: inner.config.display_name.trim(),
        version: &inner.version,
        commands: &commands,
        auth: auth.as_ref().map(|(f, c)| (*f, c.as_str())),
        device_id: &device_id,
        public_key: &public_key,
        signature: &signature,
        signed_at_ms: ts,
        nonce: &nonce,
    });
    if let Err(e) = sink
        .send(Message::text(wire::request("connect", "connect", params)))
        .await
    {
        return closed(format!("sending connect: {e}"));
    }
    let answer = loop {
        let text = match tokio::time::timeout(HANDSHAKE, next_text(&mut stream)).await {
            Err(_) => return closed("no answer to connect within 15 s".into()),
            Ok(Err(reason)) => return closed(reason),
            Ok(Ok(text)) => text,
        };
        if let Ok(Incoming::Res {
            id,
            ok,
            payload,
            error,
        }) = wire::decode(&text)
            && id == "connect"
        {
            break if ok {
                Ok(payload.unwrap_or(Value::Null))
            } else {
                Err(error.unwrap_or_default())
            };
        }
    };
    let payload = match answer {
        Ok(payload) => payload,
        Err(error) => {
            let _ = sink.close().await;
            return classify_connect_error(inner, &error, credential);
        }
    };
    let hello = Hello::parse(&payload);
    tracing::info!(
        server = %hello.server_version,
        protocol = hello.protocol,
        auth = %hello.auth_method,
        tick_ms = hello.tick_interval_ms,
        "OpenClaw hello-ok"
    );
    *lock(&inner.last_hello) = Some(hello.clone());
    if let Some(token) = &hello.device_token {
        let record = StoredToken {
            token: token.clone(),
            scopes: hello.scopes.clone(),
            issued_at_ms: hello.issued_at_ms,
            gateway_version: hello.server_version.clone(),
        };
        match inner.tokens.put(&inner.token_key, record) {
            Ok(true) => tracing::info!("stored the OpenClaw device token"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "storing the OpenClaw device token"),
        }
    }

    // The live connection: a writer task, the read loop here.
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            let close = matches!(message, Message::Close(_));
            if sink.send(message).await.is_err() || close {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let conn = Arc::new(Conn {
        tx,
        pending: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
        hello: hello.clone(),
        was_ready: AtomicBool::new(false),
        stable: AtomicBool::new(false),
        kill: Notify::new(),
        killed: AtomicBool::new(false),
        restart_ms: AtomicU64::new(0),
    });
    *lock(&inner.conn) = Some(Arc::clone(&conn));
    inner.set_status(Status::ConnectedUnapproved);
    tokio::spawn(after_hello(Arc::clone(inner), Arc::clone(&conn), "connect"));

    let watchdog = Duration::from_millis(hello.tick_interval_ms.saturating_mul(2));
    let reason = loop {
        tokio::select! {
            frame = tokio::time::timeout(watchdog, stream.next()) => match frame {
                Err(_) => {
                    let _ = conn.tx.send(Message::Close(Some(CloseFrame {
                        code: CloseCode::from(4000),
                        reason: "watchdog".into(),
                    })));
                    break format!(
                        "watchdog: no frame from the gateway for {} s",
                        watchdog.as_secs()
                    );
                }
                Ok(None) => break "the gateway closed the connection".to_owned(),
                Ok(Some(Err(e))) => break format!("connection error: {e}"),
                Ok(Some(Ok(Message::Text(text)))) => on_frame(inner, &conn, text.as_str()),
                Ok(Some(Ok(Message::Close(frame)))) => {
                    let restart = frame.as_ref().is_some_and(|f| u16::from(f.code) == 1012);
                    let starting = frame.as_ref().is_some_and(|f| u16::from(f.code) == 1013);
                    let reason = close_reason(frame.as_ref());
                    if restart || starting {
                        let wait = match conn.restart_ms.load(Ordering::SeqCst) {
                            0 => 2_000,
                            ms => ms.min(60_000),
                        };
                        finish(inner, &conn, &reason);
                        writer.abort();
                        return Outcome::Retry { delay: Duration::from_millis(wait), reason };
                    }
                    break reason;
                }
                Ok(Some(Ok(_))) => {}
            },
            () = conn.kill.notified() => {
                let _ = conn.tx.send(Message::Close(Some(CloseFrame {
                    code: CloseCode::Normal,
                    reason: "reconnecting".into(),
                })));
                break "the gateway no longer treats this connection as the phone's session \
                       (PAIRING_CHANGED); reconnecting"
                    .to_owned();
            }
        }
    };
    finish(inner, &conn, &reason);
    // Let the writer flush a close frame, then stop it.
    let _ = tokio::time::timeout(Duration::from_millis(500), writer).await;
    if conn.killed.load(Ordering::SeqCst) {
        return Outcome::Retry {
            delay: Duration::from_millis(200),
            reason,
        };
    }
    Outcome::Closed {
        reason,
        stable: conn.stable.load(Ordering::SeqCst),
    }
}

/// The connection is gone: forget it, fail what waited on it, end the turns in flight.
fn finish(inner: &Arc<Inner>, conn: &Arc<Conn>, reason: &str) {
    {
        let mut current = lock(&inner.conn);
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            *current = None;
        }
    }
    lock(&conn.pending).clear();
    inner.connection_lost(reason);
}

/// Maps a refused `connect` to what happens next (§5.5, §6.1, §3.4).
fn classify_connect_error(
    inner: &Arc<Inner>,
    error: &WireError,
    credential: Credential,
) -> Outcome {
    let detail = error.detail_code().unwrap_or_default();
    let reason = error
        .detail_str("authReason")
        .map(str::to_owned)
        .unwrap_or_else(|| error.message.clone());
    match detail {
        "PAIRING_REQUIRED" => Outcome::Pairing {
            request_id: error
                .detail_str("requestId")
                .unwrap_or("(no request id)")
                .to_owned(),
        },
        "AUTH_DEVICE_TOKEN_MISMATCH" if credential == Credential::DeviceToken => {
            // Revoked or rotated on the gateway: forget it, fall back to the configured
            // credential if there is one.
            if let Err(e) = inner.tokens.remove(&inner.token_key) {
                tracing::warn!(error = %e, "forgetting the OpenClaw device token");
            }
            let creds = &inner.credentials;
            if creds.token.is_some() || creds.password.is_some() || creds.bootstrap_token.is_some()
            {
                Outcome::Retry {
                    delay: Duration::from_millis(250),
                    reason: "the stored device token was refused; retrying with the configured \
                             credential"
                        .into(),
                }
            } else {
                Outcome::AuthFailed(format!(
                    "{detail}: the gateway revoked this phone's device token; re-pair this phone"
                ))
            }
        }
        "AUTH_RATE_LIMITED" => Outcome::Retry {
            delay: Duration::from_millis(error.retry_after_ms.unwrap_or(60_000).max(60_000)),
            reason: format!("{detail}: {}", error.message),
        },
        "AUTH_SCOPE_MISMATCH" => Outcome::AuthFailed(format!(
            "{detail}: approval of this phone's role is needed on the gateway ({reason})"
        )),
        "DEVICE_AUTH_SIGNATURE_EXPIRED" => Outcome::Closed {
            reason: format!("{detail}: {}", error.message),
            stable: false,
        },
        d if d.starts_with("AUTH_") => Outcome::AuthFailed(format!("{d}: {reason}")),
        d if d.starts_with("DEVICE_AUTH_") || d == "DEVICE_IDENTITY_REQUIRED" => {
            Outcome::Stopped(format!("{d} (a bug in this adapter): {}", error.message))
        }
        "PROTOCOL_MISMATCH" | "CLIENT_VERSION_MISMATCH" => Outcome::Stopped(format!(
            "{detail}: upgrade OpenPhone or the gateway ({})",
            error.message
        )),
        _ if error.code == "UNAVAILABLE" || error.retryable == Some(true) => Outcome::Retry {
            delay: Duration::from_millis(error.retry_after_ms.unwrap_or(500).clamp(100, 2_000)),
            reason: format!("gateway starting: {}", error.message),
        },
        _ => Outcome::Closed {
            reason: format!("connect refused: {}", error.describe()),
            stable: false,
        },
    }
}

/// Decodes one frame and hands it off (never blocks).
fn on_frame(inner: &Arc<Inner>, conn: &Arc<Conn>, text: &str) {
    let frame = match wire::decode(text) {
        Ok(frame) => frame,
        Err(e) => {
            tracing::debug!(error = %e, "undecodable OpenClaw frame ignored");
            return;
        }
    };
    match frame {
        Incoming::Res {
            id,
            ok,
            payload,
            error,
        } => conn.answer(
            &id,
            if ok {
                Ok(payload.unwrap_or(Value::Null))
            } else {
                Err(error.unwrap_or_default())
            },
        ),
        Incoming::Event { event, payload, .. } => {
            let payload = payload.unwrap_or(Value::Null);
            match event.as_str() {
                "node.invoke.request" => {
                    let inner = Arc::clone(inner);
                    let conn = Arc::clone(conn);
                    tokio::spawn(async move { inner.handle_invoke(&conn, payload).await });
                }
                "node.pair.resolved" => {
                    let decision = payload
                        .get("decision")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if decision == "approved" {
                        tokio::spawn(after_hello(Arc::clone(inner), Arc::clone(conn), "manual"));
                    } else {
                        inner.set_status(Status::Stopped {
                            reason: format!(
                                "the gateway rejected this phone's commands ({decision})"
                            ),
                        });
                    }
                }
                "chat" | "agent" => inner.on_stream(&event, &payload),
                "shutdown" => {
                    let ms = payload
                        .get("restartExpectedMs")
                        .and_then(Value::as_u64)
                        .unwrap_or(2_000);
                    conn.restart_ms.store(ms.max(1), Ordering::SeqCst);
                }
                _ => {}
            }
        }
        Incoming::Other => {}
    }
}

/// After `hello-ok` (and after `node.pair.resolved`): publish the tools, resubscribe the
/// sessions in flight, send presence; `ready` when the node events go through (§14).
async fn after_hello(inner: Arc<Inner>, conn: Arc<Conn>, trigger: &'static str) {
    if conn.hello.has_method("node.pluginTools.update") {
        match conn
            .request(
                "node.pluginTools.update",
                inner.surface.plugin_tools_params(),
            )
            .await
        {
            Ok(reply) => inner.tools_accepted(&reply),
            Err(e) => tracing::warn!(error = %e, "node.pluginTools.update failed"),
        }
    }
    for key in inner.subscribed_keys() {
        if let Err(e) = conn
            .node_event("chat.subscribe", &json!({"sessionKey": key}))
            .await
        {
            tracing::debug!(error = %e, %key, "chat.subscribe after connect");
        }
    }
    let presence = json!({
        "trigger": trigger,
        "displayName": inner.config.display_name.trim(),
        "version": inner.version,
        "platform": wire::PLATFORM,
        "deviceFamily": wire::PLATFORM,
    });
    match conn.node_event("node.presence.alive", &presence).await {
        Ok(_) => {
            conn.was_ready.store(true, Ordering::SeqCst);
            inner.set_status(Status::Ready);
            tokio::spawn(keep_probing(Arc::clone(&inner), Arc::clone(&conn)));
            // Outcomes owed to the gateway, oldest first (R3.3), then its queue for us (R3.5).
            inner.flush_outbox(&conn).await;
            drain_pending(&inner, &conn).await;
        }
        Err(e) if e.detail_code() == Some("PAIRING_CHANGED") => {
            if conn.was_ready.load(Ordering::SeqCst) {
                conn.kill();
            } else {
                inner.set_status(Status::ConnectedUnapproved);
            }
        }
        Err(RequestError::Closed) => {}
        Err(e) => {
            tracing::warn!(error = %e, "presence after connect failed; reconnecting");
            conn.kill();
        }
    }
}

/// Marks the connection stable after a minute of `ready`, then probes presence every five
/// minutes (a zombie answers `PAIRING_CHANGED`).
async fn keep_probing(inner: Arc<Inner>, conn: Arc<Conn>) {
    tokio::select! {
        () = tokio::time::sleep(STABLE_AFTER) => {}
        () = inner.stopping() => return,
    }
    if !inner.is_current(&conn) {
        return;
    }
    conn.stable.store(true, Ordering::SeqCst);
    loop {
        tokio::select! {
            () = tokio::time::sleep(PROBE_EVERY) => {}
            () = inner.stopping() => return,
        }
        if !inner.is_current(&conn) {
            return;
        }
        match conn
            .node_event("node.presence.alive", &json!({"trigger": "background"}))
            .await
        {
            Ok(_) => {}
            Err(RequestError::Closed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "presence probe failed; reconnecting");
                conn.kill();
                return;
            }
        }
    }
}

/// Drains the gateway's offline queue for this node (`node.pending.drain`, R3.5) after a
/// connect. Checked against 2026.9.6: the drain itself removes the items it returns (no
/// `node.pending.ack`, which belongs to the `node.pending.pull` queue), and every drain
/// carries a baseline `status.request` (id `baseline-status`). A `status.request` is answered
/// with presence; a `location.request` is not answered (this phone does not share its
/// location with the gateway) and is logged. The counts are kept for `status`.
async fn drain_pending(inner: &Arc<Inner>, conn: &Arc<Conn>) {
    if !conn.hello.has_method("node.pending.drain") {
        return;
    }
    let (mut status, mut location, mut other) = (0u64, 0u64, 0u64);
    // At most 10 pages of 10 per connect; the queue holds a few items at most.
    for _ in 0..10 {
        let reply = match conn
            .request("node.pending.drain", json!({"maxItems": 10}))
            .await
        {
            Ok(reply) => reply,
            Err(e) => {
                tracing::debug!(error = %e, "node.pending.drain");
                break;
            }
        };
        for item in reply
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match item.get("type").and_then(Value::as_str).unwrap_or_default() {
                "status.request" => status += 1,
                "location.request" => {
                    location += 1;
                    let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                    tracing::warn!(
                        item = %id,
                        "the gateway queued a location request for this phone; not answered \
                         (the phone does not share its location with OpenClaw)"
                    );
                }
                kind => {
                    other += 1;
                    tracing::warn!(%kind, "unknown pending work item from the gateway ignored");
                }
            }
        }
        if reply.get("hasMore").and_then(Value::as_bool) != Some(true) {
            break;
        }
    }
    *lock(&inner.drained) = Some(json!({
        "status_requests": status,
        "location_requests": location,
        "other": other,
    }));
    if status > 0
        && let Err(e) = conn
            .node_event("node.presence.alive", &json!({"trigger": "background"}))
            .await
    {
        tracing::debug!(error = %e, "presence for a pending status request");
    }
}
