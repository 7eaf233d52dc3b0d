//! `events.subscribe` and the forwarder that sends bus events to the connection.
//!
//! The bus carries each event as its manifest name and a JSON payload; the forwarder reads it
//! as the typed [`Event`] of the protocol crate before it goes out, so the connection sends
//! only the shapes the protocol defines.

use std::sync::{Arc, Weak};

use openphone_core::EventBus;
use openphone_policy::Role;
use openphone_protocol::ErrorCode;
use openphone_protocol::endpoint::{
    ErrorObject, Event, EventsSubscribeParams, EventsSubscribeResult,
};
use tokio::sync::broadcast::error::RecvError;

use crate::conn::{Conn, Out};
use crate::lock::lock;

/// `events.subscribe {events}` (both roles): adds manifest events to the connection's set;
/// the first call starts the forwarder.
pub(super) fn subscribe(
    conn: &Arc<Conn>,
    p: EventsSubscribeParams,
) -> Result<EventsSubscribeResult, ErrorObject> {
    if let Some(bad) = p
        .events
        .iter()
        .find(|e| conn.state.registry.event(e).is_none())
    {
        return Err(ErrorObject::new(
            ErrorCode::EventUnsupported,
            format!("{bad:?} is not an event of the events manifest"),
        ));
    }
    let subscribed: Vec<String> = {
        let mut subs = lock(&conn.subscriptions);
        subs.extend(p.events);
        let mut v: Vec<String> = subs.iter().cloned().collect();
        v.sort();
        v
    };
    let mut forwarder = lock(&conn.forwarder);
    if forwarder.is_none() {
        *forwarder = Some(tokio::spawn(forward(
            conn.state.bridge.events(),
            Arc::downgrade(conn),
        )));
    }
    Ok(EventsSubscribeResult { subscribed })
}

/// Sends the bus events the connection subscribed to and may see (a runtime: those addressed
/// to it; an operator: those meant for operators), until the connection or the bus is gone.
fn forward(bus: &EventBus, conn: Weak<Conn>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = bus.subscribe();
    async move {
        loop {
            let event = match rx.recv().await {
                Ok(e) => e,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "event subscriber lagged");
                    continue;
                }
                Err(RecvError::Closed) => break,
            };
            let Some(c) = conn.upgrade() else { break };
            let wanted = lock(&c.subscriptions).contains(&event.name);
            let audience_ok = match c.session.caller.role {
                Role::Operator => event.audience.operators,
                Role::Runtime => {
                    event.audience.runtime.as_deref() == Some(c.session.caller.runtime.as_str())
                }
            };
            if !(wanted && audience_ok) {
                continue;
            }
            let typed = match Event::from_parts(&event.name, event.payload) {
                Ok(typed) => typed,
                Err(e) => {
                    tracing::error!(event = %event.name, error = %e,
                        "a bus event does not match its protocol type; not sent");
                    continue;
                }
            };
            let out = c.out.clone();
            drop(c);
            if out.send(Out::Event(Box::new(typed))).await.is_err() {
                break;
            }
        }
    }
}
