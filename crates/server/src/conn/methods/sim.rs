//! `sim.inject` (operator only): something happens in the simulated phone's world. The bridge
//! writes the `operator_action` audit record before the phone applies it.

use openphone_core::WorldError;
use openphone_protocol::endpoint::{ErrorObject, SimInjectParams, SimInjectResult};

use super::forbidden;
use crate::conn::Conn;
use crate::world::phone_event;

/// `sim.inject {kind, …}`: the events it raised and the audit record's `seq`.
pub(super) async fn inject(
    conn: &Conn,
    p: SimInjectParams,
) -> Result<SimInjectResult, ErrorObject> {
    let injected = conn
        .state
        .bridge
        .inject(&conn.session.caller, &p)
        .await
        .map_err(|e| match e {
            WorldError::Forbidden => forbidden(e.to_string()),
            other => ErrorObject::new(other.code(), other.to_string()),
        })?;
    // Injections act on the first phone; among several, its events name it.
    let devices = conn.state.bridge.devices();
    let device = devices.several().then(|| devices.primary().0);
    Ok(SimInjectResult {
        events: injected
            .events
            .iter()
            .map(|e| phone_event(e, device))
            .collect(),
        audit_seq: injected.audit.seq,
    })
}
