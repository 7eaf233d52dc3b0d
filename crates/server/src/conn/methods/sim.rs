//! `sim.inject` (operator only): something happens in the simulated phone's world. The bridge
//! writes the `operator_action` audit record before the phone applies it.

use openphone_core::WorldError;
use openphone_device::Injection;
use openphone_protocol::endpoint::{ErrorObject, SimInjectParams, SimInjectResult};

use super::forbidden;
use crate::conn::Conn;
use crate::world::phone_event;

fn injection(p: SimInjectParams) -> Injection {
    match p {
        SimInjectParams::Message { address, text } => Injection::Message { address, text },
        SimInjectParams::Call { number, outcome } => Injection::Call { number, outcome },
        SimInjectParams::Notification { app, title, text } => {
            Injection::Notification { app, title, text }
        }
        SimInjectParams::NotificationAction { key, action } => {
            Injection::NotificationAction { key, action }
        }
    }
}

/// `sim.inject {kind, …}`: the events it raised and the audit record's `seq`.
pub(super) async fn inject(
    conn: &Conn,
    p: SimInjectParams,
) -> Result<SimInjectResult, ErrorObject> {
    let injected = conn
        .state
        .bridge
        .inject(&conn.session.caller, &injection(p))
        .await
        .map_err(|e| match e {
            WorldError::Forbidden => forbidden(e.to_string()),
            other => ErrorObject::new(other.code(), other.to_string()),
        })?;
    Ok(SimInjectResult {
        events: injected.events.iter().map(phone_event).collect(),
        audit_seq: injected.audit.seq,
    })
}
