//! One WebSocket connection: authentication, `hello`, dispatch, events, limits.
//!
//! A reader loop parses frames and spawns one task per request (capped per connection); a
//! single writer task owns the socket's sink and numbers event notifications (`seq`). A
//! connection that has not completed `hello` by its deadline (`[limits] hello_timeout_ms` from
//! the accept) is closed with 1008; before `hello` nothing a peer sends is audited. On
//! shutdown the reader stops, in-flight requests are answered (a request still waiting for a
//! confirmation is answered with its `needs_confirmation` result: the confirmation stays
//! durable), then the connection closes with 1001.
//!
//! - `handshake`: the first message — authentication, `hello`, version negotiation.
//! - `methods`: one module per method family, behind one `dispatch`.

mod handshake;
mod methods;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::{SinkExt, StreamExt};
use openphone_core::Presence;
use openphone_policy::Caller;
use openphone_protocol::ErrorCode;
use openphone_protocol::endpoint::{
    ErrorObject, Event, EventNotification, RequestId, Response, parse_request,
};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::MissedTickBehavior;
use tokio_tungstenite::tungstenite;

use crate::front::{Ticket, Unauthenticated};
use crate::lock::lock;
use crate::principal::Principal;
use crate::state::AppState;
use handshake::{Handshake, handshake};

/// Close codes.
const CLOSE_NORMAL: u16 = 1000;
const CLOSE_GOING_AWAY: u16 = 1001;
const CLOSE_POLICY: u16 = 1008;
const CLOSE_TOO_BIG: u16 = 1009;
const CLOSE_TRY_AGAIN: u16 = 1013;

/// What the writer task sends.
enum Out {
    /// A response or an error, already serialised.
    Frame(String),
    /// An event; the writer numbers it (`seq`).
    Event(Box<Event>),
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

/// A connection after `hello`, shared by its request tasks.
struct Conn {
    state: Arc<AppState>,
    session: Session,
    out: mpsc::Sender<Out>,
    subscriptions: Mutex<HashSet<String>>,
    forwarder: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(h) = lock(&self.forwarder).take() {
            h.abort();
        }
    }
}

/// Sends the success answering `id` (`result`: a typed result, or one already written as JSON
/// text by [`methods::dispatch`]).
async fn send_result<R: serde::Serialize>(out: &mpsc::Sender<Out>, id: RequestId, result: R) {
    match serde_json::to_string(&Response::new(id.clone(), result)) {
        Ok(text) => {
            let _ = out.send(Out::Frame(text)).await;
        }
        Err(e) => send_error(out, Some(id), internal(e)).await,
    }
}

/// Sends the success answering `id` whose result [`methods::dispatch`] wrote: the frame is
/// written around it, the text copied in as it is (the members and their order are
/// `Response`'s: a unit test compares the two).
async fn send_written(out: &mpsc::Sender<Out>, id: RequestId, result: methods::Written) {
    match written_frame(&id, &result.0) {
        Ok(text) => {
            let _ = out.send(Out::Frame(text)).await;
        }
        Err(e) => send_error(out, Some(id), internal(e)).await,
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
fn written_frame(id: &RequestId, result: &str) -> serde_json::Result<String> {
    let id = serde_json::to_string(id)?;
    let mut frame = String::with_capacity(result.len() + id.len() + 32);
    frame.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    frame.push_str(&id);
    frame.push_str(",\"result\":");
    frame.push_str(result);
    frame.push('}');
    Ok(frame)
}

/// Sends the failure answering `id` (`None`: the request's id is unknown, sent as `null`).
async fn send_error(out: &mpsc::Sender<Out>, id: Option<RequestId>, error: ErrorObject) {
    match serde_json::to_string(&error.into_response(id)) {
        Ok(text) => {
            let _ = out.send(Out::Frame(text)).await;
        }
        Err(e) => tracing::error!(error = %e, "an error answer could not be written"),
    }
}

/// An unexpected failure inside the daemon (logged), answered as `tool_error`.
fn internal(e: impl std::fmt::Display) -> ErrorObject {
    tracing::error!(error = %e, "request failed");
    ErrorObject::new(ErrorCode::ToolError, format!("internal error: {e}"))
}

/// `rate_limited` with the time to wait.
fn rate_limited(message: impl Into<String>, retry_after_ms: u64) -> ErrorObject {
    ErrorObject::new(ErrorCode::RateLimited, message).with_retry_after_ms(retry_after_ms)
}

/// Whether the read error is the frame/message size limit (tungstenite's capacity error).
fn is_too_big(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(ws) = e.downcast_ref::<tungstenite::Error>() {
            return matches!(
                ws,
                tungstenite::Error::Capacity(
                    tungstenite::error::CapacityError::MessageTooLong { .. }
                )
            );
        }
        source = e.source();
    }
    false
}

/// Serves one upgraded socket. `pre_auth` is the credential of the upgrade's bearer token (or
/// of `endpoint.sock`'s file mode); `ticket` the connection's place in the front door's caps,
/// held until the socket closes.
pub(crate) async fn serve_socket(
    state: Arc<AppState>,
    socket: WebSocket,
    pre_auth: Option<Principal>,
    ticket: Option<Arc<Ticket>>,
) {
    serve_socket_until(state, socket, pre_auth, ticket, None).await;
}

/// [`serve_socket`] for a socket whose credential can end before the socket does (a dashboard
/// session: logout): once `revoked` turns `true` or its sender is gone, in-flight requests are
/// answered and the socket closes with 1008.
pub(crate) async fn serve_socket_until(
    state: Arc<AppState>,
    socket: WebSocket,
    pre_auth: Option<Principal>,
    ticket: Option<Arc<Ticket>>,
    revoked: Option<watch::Receiver<bool>>,
) {
    state.connections.fetch_add(1, Ordering::SeqCst);
    run(state.clone(), socket, pre_auth, ticket, revoked).await;
    state.connections.fetch_sub(1, Ordering::SeqCst);
    state.connection_closed.notify_waiters();
}

/// The front door's class of a credential.
pub(crate) fn class_of(principal: &Principal) -> crate::front::Class {
    match principal {
        Principal::Operator => crate::front::Class::Operator,
        Principal::Runtime(_) => crate::front::Class::Runtime,
    }
}

/// Resolves when the front door evicted this (unauthenticated) connection; never without a
/// ticket.
async fn evicted(ticket: &Option<Arc<Ticket>>) {
    match ticket {
        Some(t) => t.evicted().await,
        None => std::future::pending().await,
    }
}

/// Resolves when `revoked` turns `true` or its sender is dropped; never without a receiver.
async fn revocation(revoked: &mut Option<watch::Receiver<bool>>) {
    match revoked {
        Some(r) => {
            let _ = r.wait_for(|v| *v).await;
        }
        None => std::future::pending().await,
    }
}

async fn run(
    state: Arc<AppState>,
    socket: WebSocket,
    pre_auth: Option<Principal>,
    ticket: Option<Arc<Ticket>>,
    mut revoked: Option<watch::Receiver<bool>>,
) {
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Out>(256);
    let writer = tokio::spawn(async move {
        let mut seq: u64 = 0;
        while let Some(out) = out_rx.recv().await {
            let msg = match out {
                Out::Frame(text) => Message::Text(Utf8Bytes::from(text)),
                Out::Event(event) => {
                    let name = event.name();
                    match serde_json::to_string(&EventNotification::new(*event, seq + 1)) {
                        Ok(text) => {
                            seq += 1;
                            Message::Text(Utf8Bytes::from(text))
                        }
                        Err(e) => {
                            tracing::error!(event = name, error = %e, "an event could not be written");
                            continue;
                        }
                    }
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
    let mut ping = tokio::time::interval(ping_every);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick is one interval from now, not at once.
    ping.reset();
    // Keepalive ticks since the peer last sent anything (pongs included).
    let mut silent_ticks: u32 = 0;
    let mut going_away = *shutdown.borrow();
    let hello_deadline = match &ticket {
        Some(t) => tokio::time::sleep_until(t.hello_deadline()),
        None => tokio::time::sleep(state.front.hello_timeout()),
    };
    let mut hello_deadline = std::pin::pin!(hello_deadline);

    while !going_away {
        tokio::select! {
            msg = stream.next() => {
                let msg = match msg {
                    None => break,
                    Some(Err(e)) => {
                        if is_too_big(&e) {
                            let caller = match (&conn, &pre_auth) {
                                (Some(c), _) => Some(c.session.caller.clone()),
                                (None, Some(p)) => Some(p.caller("")),
                                (None, None) => None,
                            };
                            match caller {
                                Some(caller) => {
                                    tracing::warn!(limit = limits.max_frame_bytes, "frame over the size limit; closing with 1009");
                                    state.audit_oversize(&caller);
                                }
                                None => state.front.note(state.bridge.now_ms(), Unauthenticated::OversizeFrame),
                            }
                            let _ = out_tx.send(Out::Close(CLOSE_TOO_BIG, "frame too large")).await;
                        } else {
                            tracing::debug!(error = %e, "websocket read failed");
                        }
                        break;
                    }
                    Some(Ok(m)) => m,
                };
                silent_ticks = 0;
                let text = match msg {
                    Message::Text(t) => t,
                    Message::Binary(_) => {
                        send_error(&out_tx, None, ErrorObject::invalid_request("binary frames are not accepted; send JSON text")).await;
                        continue;
                    }
                    Message::Ping(_) | Message::Pong(_) => continue,
                    Message::Close(_) => break,
                };
                let req = match parse_request(text.as_str()) {
                    Ok(r) => r,
                    Err(rejected) => {
                        send_error(&out_tx, rejected.id, rejected.error).await;
                        continue;
                    }
                };
                match &conn {
                    None => {
                        match handshake(&state, &req, pre_auth.as_ref(), &out_tx).await {
                            Handshake::Ok(session) => {
                                // Counted in its credential's class; a class without room
                                // left is refused (the front door's reserves, issue 28).
                                if let Some(t) = &ticket
                                    && !t.authenticated_as(
                                        class_of(&session.principal),
                                        &session.principal.bucket_key(),
                                    )
                                {
                                    let _ = out_tx.send(Out::Close(CLOSE_TRY_AGAIN, "too many connections")).await;
                                    break;
                                }
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
                            send_error(&out_tx, Some(req.id), rate_limited("too many requests; slow down", retry)).await;
                            continue;
                        }
                        let Ok(permit) = inflight.clone().try_acquire_owned() else {
                            let message = format!("more than {} requests in flight on this connection", limits.max_in_flight);
                            send_error(&out_tx, Some(req.id), rate_limited(message, 100)).await;
                            continue;
                        };
                        let c = c.clone();
                        tasks.spawn(async move {
                            // Boxed: `dispatch` covers every method, so its future is as large
                            // as the largest; in the task it would be copied at the spawn and at
                            // each poll hand-off (issue 34).
                            let answer = Box::pin(methods::dispatch(&c, &req)).await;
                            // Out of flight once answered: a client that waits for each answer
                            // before its next request must find the slot free again.
                            drop(permit);
                            match answer {
                                Ok(result) => send_written(&c.out, req.id, result).await,
                                Err(e) => send_error(&c.out, Some(req.id), e).await,
                            }
                        });
                    }
                }
            }
            () = evicted(&ticket), if conn.is_none() => {
                let _ = out_tx.send(Out::Close(CLOSE_POLICY, "no hello; pushed out by a newer connection")).await;
                break;
            }
            () = hello_deadline.as_mut(), if conn.is_none() => {
                if pre_auth.is_none() {
                    state.front.note(state.bridge.now_ms(), Unauthenticated::HelloTimeout);
                }
                let _ = out_tx.send(Out::Close(CLOSE_POLICY, "no hello in time")).await;
                break;
            }
            _ = ping.tick() => {
                silent_ticks += 1;
                if silent_ticks > 3 {
                    tracing::debug!("peer silent for three keepalive intervals; closing");
                    let _ = out_tx.send(Out::Close(CLOSE_GOING_AWAY, "keepalive timeout")).await;
                    break;
                }
                let _ = out_tx.send(Out::Ping).await;
            }
            () = revocation(&mut revoked) => {
                let _ = out_tx.send(Out::Close(CLOSE_POLICY, "session ended")).await;
                break;
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
    drop(ticket);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_capacity_error_is_too_big() {
        let too_long = tungstenite::error::CapacityError::MessageTooLong {
            size: 10,
            max_size: 5,
        };
        let big = axum::Error::new(tungstenite::Error::Capacity(too_long));
        assert!(is_too_big(&big));
        let closed = axum::Error::new(tungstenite::Error::ConnectionClosed);
        assert!(!is_too_big(&closed));
        // The type decides, not the text.
        let lookalike = axum::Error::new(std::io::Error::other("Space limit exceeded: too long"));
        assert!(!is_too_big(&lookalike));
    }

    #[test]
    fn a_written_frame_is_the_response_serialised() {
        let results = [
            serde_json::json!({"a": [1, "x\"y"], "b": null}),
            serde_json::json!("text"),
            serde_json::json!(null),
        ];
        for id in [
            RequestId::Integer(7),
            RequestId::Integer(-1),
            RequestId::String("r-\"1\"\u{1}é".into()),
        ] {
            for result in &results {
                let text = serde_json::to_string(result).unwrap();
                assert_eq!(
                    written_frame(&id, &text).unwrap(),
                    serde_json::to_string(&Response::new(id.clone(), result)).unwrap()
                );
            }
        }
    }
}
