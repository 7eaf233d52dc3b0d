//! `devices.list` (both roles): the phones the daemon drives, by id — what each one is and
//! whether it answers now. A runtime limited to some phones (`[[runtimes]] devices`) sees
//! only those. Requests name a phone with `device_id` (`tools.invoke`); on a daemon with one
//! phone they need not.

use serde::{Deserialize, Serialize};

/// `devices.list` params: none (any object is accepted; its fields are ignored).
pub type DevicesListParams = super::NoParams;

/// `devices.list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DevicesListResult {
    /// The phones, in configuration order (the first is the one whose world — messages,
    /// calls, notifications nobody's call caused — the daemon watches).
    pub devices: Vec<DeviceInfo>,
}

/// One phone of the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceInfo {
    /// Its id: what `device_id` names in requests, audit records and `[[runtimes]] devices`.
    pub id: String,
    /// `sim` (the simulated phone) or `adb` (an Android phone through the adb server).
    pub kind: String,
    /// How it was configured: `sim`, `sim:<scenario>`, `adb` or `adb:<serial>`.
    pub spec: String,
    /// adb: the serial it drives (the configured one, else the one chosen at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// Whether it answers now, in adb's words: `device` (usable), `unauthorized` (accept the
    /// USB debugging prompt on the phone), `offline`, `not_found` (unplugged, or no such
    /// serial), `adb_server_unavailable`. A simulated phone is always `device`.
    pub state: String,
    /// What is wrong when it is not usable, with the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The runtimes limited to some phones that may act on this one; absent: every runtime
    /// may (no `[[runtimes]] devices` names a list). Only an operator is told; a runtime's
    /// answer never has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtimes: Option<Vec<String>>,
}
