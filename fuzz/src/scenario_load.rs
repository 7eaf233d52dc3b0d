//! Target: the simulated phone's scenario loader (parse, then validate) and the phone
//! running on what it accepted.
//!
//! The input is scenario text. Properties:
//!
//! - [`SimState::from_json`] never panics; its errors render;
//! - an accepted state written back out ([`SimState::to_json`]) is accepted again and writes
//!   out the same;
//! - a phone starts on an accepted state, and its read-only commands (status, screen,
//!   notifications, the searches) answer — with a result or an error — without panicking.

use std::sync::Arc;

use openphone_clock::ManualClock;
use openphone_device::sim::{SimPhone, SimState};
use serde_json::{Map, Value};

/// The read-only commands run on every accepted scenario.
const READS: &[&str] = &[
    "openphone.device.status",
    "openphone.screen.get",
    "openphone.notifications.list",
    "openphone.apps.search",
    "openphone.contacts.search",
    "openphone.calendar.search",
    "openphone.messages.search",
    "openphone.calls.search",
];

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let state = match SimState::from_json(text) {
        Ok(state) => state,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let written = state.to_json();
    match SimState::from_json(&written) {
        Ok(again) => assert_eq!(
            again.to_json(),
            written,
            "a state changes when written and read again"
        ),
        Err(e) => panic!("an accepted state writes out as a refused scenario: {e}"),
    }
    let clock = ManualClock::new(state.clock.start_ms);
    let phone = match SimPhone::new(state, Arc::new(clock)) {
        Ok(phone) => phone,
        Err(e) => panic!("a phone refuses an accepted scenario: {e}"),
    };
    let params = Value::Object(Map::new());
    for tool in READS {
        let _ = phone.execute_sync(tool, &params);
    }
}
