//! `devices.list` (both roles): the daemon's phones by id, what each is and whether it
//! answers now (an Android phone is looked up in the adb server's list on every call). A
//! runtime limited to some phones (`[[runtimes]] devices`) sees only those, and no runtime
//! sees which other runtimes a phone is limited to.

use openphone_policy::Role;
use openphone_protocol::endpoint::{DeviceInfo, DevicesListResult};

use crate::config::DeviceKind;
use crate::conn::Conn;

/// `devices.list {}`.
pub(super) async fn list(conn: &Conn) -> DevicesListResult {
    let state = &conn.state;
    let caller = &conn.session.caller;
    let grants = state.bridge.device_grants();
    let limited: Vec<(String, Vec<String>)> = grants
        .limited()
        .map(|(id, list)| (id.to_owned(), list.to_vec()))
        .collect();
    let mut devices = Vec::with_capacity(state.phones.len());
    for spec in &state.phones {
        if caller.role == Role::Runtime && !grants.allows(&caller.runtime, &spec.id) {
            continue;
        }
        // Which runtimes are limited to a phone is the operator's business: a runtime sees
        // the phones it may use, never the grants of the others.
        let runtimes = (caller.role != Role::Runtime && !limited.is_empty()).then(|| {
            limited
                .iter()
                .filter(|(_, list)| list.contains(&spec.id))
                .map(|(id, _)| id.clone())
                .collect()
        });
        let (kind, serial, state, problem) = match &spec.kind {
            DeviceKind::Sim { .. } => ("sim", None, "device".to_owned(), None),
            DeviceKind::Adb { serial, adb_path } => {
                let probe = crate::phones::adb_state(serial.as_deref(), adb_path.as_deref()).await;
                ("adb", probe.serial, probe.state, probe.problem)
            }
        };
        devices.push(DeviceInfo {
            id: spec.id.clone(),
            kind: kind.to_owned(),
            spec: spec.label(),
            serial,
            state,
            problem,
            runtimes,
        });
    }
    DevicesListResult { devices }
}
