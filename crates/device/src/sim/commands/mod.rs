//! The device-owned commands of the manifest, one function each, over the simulated state.
//!
//! One module per area: `apps` (device status, apps, URLs), `screen`, `notifications`,
//! `contacts`, `calendar`, `messaging` (messages and calls), `ui` (input on the screen) and
//! `clipboard` (clipboard and share sheet), `status` (a plain `device.status` and its
//! cache), `stamp` (a cached read answer stamped with each call's time, as a value or as
//! text); `records` holds the JSON views of records they share. Every handler has the [`Handler`] signature.

mod apps;
mod calendar;
mod clipboard;
mod contacts;
mod messaging;
mod notifications;
pub(crate) mod records;
mod screen;
mod stamp;
mod status;
mod ui;

pub(crate) use apps::{app_open, apps_search, device_status, open_url, url_open};
pub(crate) use calendar::{calendar_add, calendar_delete, calendar_search, calendar_update};
pub(crate) use clipboard::{clipboard_paste, clipboard_set, share_text};
pub(crate) use contacts::contacts_search;
pub(crate) use messaging::{
    calls_place, calls_search, messages_draft, messages_search, messages_send,
};
pub(crate) use notifications::{
    notifications_list, notifications_open, notifications_search, open_target,
};
pub(crate) use screen::{ScreenCache, screen_get, screen_understand};
pub(crate) use stamp::Kept;
pub(crate) use status::StatusCache;
pub(crate) use ui::{
    press_key, ui_long_press, ui_long_press_element, ui_swipe, ui_tap, ui_tap_element, ui_type_text,
};

use serde_json::{Value, json};

use crate::DeviceError;
use crate::params::Params;

use super::screens::{self, current_page, route_name};
use super::state::{Overlay, SimState};

/// A command's result plus a one-line summary for the action log.
pub(crate) struct Outcome {
    pub result: Value,
    pub summary: String,
}

impl Outcome {
    fn read(result: Value) -> Self {
        Self {
            result,
            summary: String::new(),
        }
    }

    fn act(result: Value, summary: impl Into<String>) -> Self {
        Self {
            result,
            summary: summary.into(),
        }
    }
}

/// The state a command runs against.
pub(crate) struct Exec<'a> {
    pub st: &'a mut SimState,
    pub now: i64,
}

/// A command handler.
pub(crate) type Handler = fn(&mut Exec<'_>, Params<'_>) -> Result<Outcome, DeviceError>;

/// Longest text accepted for typing, clipboard and share (characters).
const MAX_TEXT: usize = 100_000;

fn check_len(field: &str, text: &str) -> Result<(), DeviceError> {
    if text.chars().count() > MAX_TEXT {
        return Err(DeviceError::invalid(
            field,
            format!("longer than {MAX_TEXT} characters"),
        ));
    }
    Ok(())
}

fn screen_brief(st: &SimState, now: i64) -> Value {
    // The home screen without an overlay: what `screens::build` names it, without building
    // every element of it (`device.status` asks for this on every call).
    if st.nav.overlay.is_none() && current_page(st).is_none() && st.system_dialogs.showing.is_none()
    {
        let (package, activity, title) = screens::home_identity();
        return json!({ "package": package, "activity": activity, "title": title, "screen": "home" });
    }
    let view = screens::build(st, now);
    let screen =
        current_page(st).map_or_else(|| "home".to_string(), |(_, p, _)| route_name(&p.route));
    let screen = match &st.nav.overlay {
        Some(Overlay::Recents) => "recents".to_string(),
        Some(Overlay::ShareSheet { .. }) => "share_sheet".to_string(),
        Some(Overlay::Menu { .. }) => format!("{screen}+menu"),
        Some(Overlay::Shade) => "notification_shade".to_string(),
        None if st.system_dialogs.showing.is_some() => "system_dialog".to_string(),
        None => screen,
    };
    json!({ "package": view.package, "activity": view.activity, "title": view.title, "screen": screen })
}
