//! The simulated phone's whole state. A scenario file is this structure in JSON; a
//! [`SimState`] snapshot round-trips through the same format.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod apps;
mod device;
mod dialogs;
mod nav;
mod records;
mod shared;
mod timeline;

pub use apps::*;
pub use device::*;
pub use dialogs::*;
pub use nav::*;
pub use records::*;
pub use shared::Shared;
pub use timeline::*;

use records::default_calendars;

/// The current scenario/state format version.
pub(crate) const SCENARIO_VERSION: u32 = 1;

/// The full state of a simulated phone: what a scenario seeds and what a snapshot captures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "OpenPhone simulated-phone scenario")]
pub struct SimState {
    /// Optional link to this schema, ignored by the loader.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Format version; must be 1.
    pub version: u32,
    /// The device itself.
    #[serde(default)]
    pub device: Shared<DeviceInfo>,
    /// The clock the scenario was written for.
    #[serde(default)]
    pub clock: ClockInfo,
    /// Quick settings toggled in the Settings app.
    #[serde(default)]
    pub settings: Settings,
    /// Installed apps. Absent → the standard set (Settings, Messages, Phone, Contacts,
    /// Calendar, Browser, Clock, Notes, Camera).
    #[serde(default = "shared_default_apps")]
    pub apps: Shared<Vec<App>>,
    /// The address book.
    #[serde(default)]
    pub contacts: Shared<Vec<Contact>>,
    /// Calendars events belong to. Absent → one calendar, id 1, "Personal".
    #[serde(default = "shared_default_calendars")]
    pub calendars: Shared<Vec<Calendar>>,
    /// Calendar events.
    #[serde(default)]
    pub events: Shared<Vec<Event>>,
    /// SMS conversations.
    #[serde(default)]
    pub threads: Shared<Vec<Thread>>,
    /// Notifications in the shade.
    #[serde(default)]
    pub notifications: Shared<Vec<Notification>>,
    /// The call log, any order.
    #[serde(default)]
    pub calls: Shared<Vec<Call>>,
    /// Alarms in the Clock app.
    #[serde(default)]
    pub alarms: Shared<Vec<Alarm>>,
    /// Notes in the Notes app.
    #[serde(default)]
    pub notes: Shared<Vec<Note>>,
    /// Web pages the Browser can show; other http(s) URLs show a generic page.
    #[serde(default)]
    pub web_pages: Shared<Vec<WebPage>>,
    /// Clipboard text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clipboard: Option<String>,
    /// Texts handed to the share sheet.
    #[serde(default)]
    pub shares: Shared<Vec<Share>>,
    /// Message drafts prepared for the user.
    #[serde(default)]
    pub drafts: Shared<Vec<Draft>>,
    /// Photos taken with the Camera app.
    #[serde(default)]
    pub photos: Shared<Vec<Photo>>,
    /// Browser history.
    #[serde(default)]
    pub browser: Shared<BrowserState>,
    /// The call in progress (a call-log id), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_call: Option<i64>,
    /// Which camera the Camera app uses.
    #[serde(default)]
    pub camera_facing: CameraFacing,
    /// What is on screen: tasks, their page stacks, overlays.
    #[serde(default)]
    pub nav: Shared<NavState>,
    /// OS-level dialogs: what raises them (a permission an app asks for, a URL several apps
    /// open, an app button that raises a payment sheet) and the one on screen.
    #[serde(default, skip_serializing_if = "shared_dialogs_empty")]
    pub system_dialogs: Shared<SystemDialogs>,
    /// Things that happen by themselves at simulated times, fired once each in due order
    /// (`SimPhone::fire_due`).
    #[serde(default, skip_serializing_if = "shared_vec_empty")]
    pub timeline: Shared<Vec<TimelineEntry>>,
    /// Every executed mutating command, oldest first.
    #[serde(default)]
    pub action_log: Shared<VecDeque<ActionRecord>>,
    /// The next id handed out for new records; 0 → one above the largest id in the state.
    #[serde(default)]
    pub next_id: i64,
}

/// One executed mutating command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionRecord {
    /// 1-based sequence number.
    pub seq: u64,
    /// When, Unix ms.
    pub at_ms: i64,
    /// Canonical command name.
    pub tool: String,
    /// The params as executed, without `_`-prefixed keys.
    pub params: Value,
    /// What happened, in a sentence.
    pub summary: String,
}

fn shared_default_apps() -> Shared<Vec<App>> {
    Shared::new(default_apps())
}

fn shared_default_calendars() -> Shared<Vec<Calendar>> {
    Shared::new(default_calendars())
}

fn shared_vec_empty<T>(v: &Shared<Vec<T>>) -> bool {
    v.is_empty()
}

fn shared_dialogs_empty(d: &Shared<SystemDialogs>) -> bool {
    d.is_empty()
}

fn yes() -> bool {
    true
}

fn one() -> i64 {
    1
}
