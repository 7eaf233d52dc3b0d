//! The device layer of the OpenPhone runtime: the [`PhoneDevice`] trait every backend
//! implements, and [`SimPhone`], the simulated phone that is the zero-setup default device.
//!
//! # The trait
//!
//! A device executes **device-owned** commands of the command manifest, named by their
//! canonical names (`openphone.ui.tap`, …). Runtime-owned commands (memory, watchers, jobs)
//! are served by the core, never by a device, and [`PhoneDevice::supports`] says no to them.
//! A device never replaces a command it lacks by another action: it answers
//! [`DeviceError::UnsupportedTool`]. The tool bridge has already checked the params against
//! the manifest schema; a device still rejects what is *semantically* wrong (an empty query,
//! coordinates off the screen, an unknown element, a missing "one of" identifier) with a
//! typed [`DeviceError`] whose [`code`](DeviceError::code) is a stable wire string.
//! Nothing here panics on bad input.
//!
//! # The simulated phone
//!
//! [`SimPhone`] is a small but real phone model, not an echo:
//!
//! - **State.** One serialisable [`SimState`] holds everything: installed apps (Settings,
//!   Messages, Phone, Contacts, Calendar, Browser, Clock, Notes, Camera, plus apps declared
//!   by a scenario with their own screens), contacts, calendars and events, SMS threads,
//!   notifications, the call log, alarms, notes, web pages, the clipboard, shares, drafts,
//!   photos, the navigation state (tasks with back stacks, overlays) and the action log.
//!   A **scenario file** is this state in JSON (see `SCENARIO.md` and
//!   `schemas/sim-scenario.schema.json`); [`SimPhone::snapshot`] returns it and
//!   [`SimPhone::from_state`] restores it, so a daemon can persist the phone across
//!   restarts.
//! - **Screens are derived, never stored.** The screen is rebuilt from the state for every
//!   observation and every input: status bar, the foreground app's top page (or the home
//!   screen), an overlay (recent apps, a long-press menu, the share sheet) and the
//!   navigation bar. Element ids are stable names (`send`, `thread_12`, `message_input`),
//!   so an id read from `screen.get` means the same element until the screen changes. A tap
//!   is a hit test on that tree followed by the element's action; typing goes to the
//!   focused editable field; swipes scroll the list under the finger; a long press opens
//!   the element's menu. The same tree is painted into the PNG screenshot.
//! - **Time** comes from an injected [`openphone_clock::Clock`]; tests use a manual clock.
//! - **Transactions.** A state-changing command runs on a copy that replaces the state only
//!   on success, and is then appended to the action log; a failed command changes nothing.

#![deny(missing_docs)]

pub mod dialog;
mod error;
mod params;
pub mod screen_form;
pub mod sim;
pub mod world;

use std::fmt::Debug;

use async_trait::async_trait;
use openphone_protocol::{Command, ObjectText};
use serde_json::Value;

pub use dialog::PendingDialog;
pub use error::{DeviceError, EntityKind};
/// What a device is and what it can do: the profile `hello` answers with, one type.
pub use openphone_protocol::endpoint::PhoneProfile;
pub use screen_form::{ScreenForm, compact_screen, shape_screen};
pub use sim::{ScenarioError, SimPhone, SimState};
pub use world::{
    DeviceEvent, Injection, OPENPHONE_APP, OPENPHONE_PACKAGE, PageContent, SystemNotification,
};

/// Who asked for a device call: the runtime, its request and its phone session. The bridge
/// fills it from the request it validated; a device may keep it with what it records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOrigin {
    /// The runtime id of the caller.
    pub runtime: String,
    /// The caller's request id.
    pub request_id: String,
    /// The phone session the request ran in, if any.
    pub phone_session_id: Option<String>,
}

/// One call of a device-owned command, as the bridge hands it to the device: the command
/// already resolved from the manifest (the device never resolves it again), the params
/// already checked against its schema, and who asked.
#[derive(Debug, Clone, Copy)]
pub struct DeviceCall<'a> {
    /// The resolved manifest command (its canonical name, its `mutating` flag, …).
    pub command: &'a Command,
    /// The params (a JSON object).
    pub params: &'a Value,
    /// Who asked.
    pub origin: &'a CallOrigin,
}

/// What [`PhoneDevice::execute_for_text`] answers.
#[derive(Debug)]
pub enum DeviceAnswer {
    /// The result as a value (an object, or a value the bridge wraps as `{"value": …}`).
    Value(Value),
    /// The result object as JSON text (see [`ObjectText`]).
    Text(ObjectText),
}

/// A phone that executes device-owned commands.
#[async_trait]
pub trait PhoneDevice: Send + Sync + Debug {
    /// The device's profile.
    fn profile(&self) -> PhoneProfile;

    /// Whether the device executes `tool` (a canonical command name).
    fn supports(&self, tool: &str) -> bool;

    /// Why the device cannot do `tool` although it knows it (the platform forbids it to the
    /// backend), for tool lists to hide or mark it; `None` when it can (or when it does not
    /// know the command at all: see [`PhoneDevice::supports`]).
    fn unsupported_reason(&self, tool: &str) -> Option<String> {
        let _ = tool;
        None
    }

    /// Executes one call of a device-owned command and returns the result object.
    async fn execute(&self, call: DeviceCall<'_>) -> Result<Value, DeviceError>;

    /// [`PhoneDevice::execute`] for a caller that reads the answer as JSON text only (the
    /// endpoint's `tools.invoke`): a device that keeps the answer of a read already written
    /// (a cached `screen.get`) may answer with that text ([`DeviceAnswer::Text`]) instead of
    /// building the object. The answer is the same either way. By default, `execute`'s.
    async fn execute_for_text(&self, call: DeviceCall<'_>) -> Result<DeviceAnswer, DeviceError> {
        self.execute(call).await.map(DeviceAnswer::Value)
    }

    /// The phone's own events ([`DeviceEvent`]): messages, calls and notifications nobody's
    /// tool call caused. `None` when the backend cannot observe them.
    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<DeviceEvent>> {
        None
    }

    /// Makes something happen in the world (an operator's `sim inject`); answers with the
    /// event it raised. Only a simulated phone can.
    async fn inject(&self, injection: &Injection) -> Result<DeviceEvent, DeviceError> {
        let _ = injection;
        Err(DeviceError::UnsupportedTool {
            tool: "sim.inject".to_owned(),
        })
    }

    /// [`PhoneDevice::inject`], answering with every event the injection raised, in order
    /// (a message that arrives also posts its app's notification).
    async fn inject_all(&self, injection: &Injection) -> Result<Vec<DeviceEvent>, DeviceError> {
        Ok(vec![self.inject(injection).await?])
    }

    /// Posts (or updates in place, by key) one of the runtime's own notifications in the
    /// shade; answers with its key once the phone shows it.
    async fn post_notification(
        &self,
        notification: &SystemNotification,
    ) -> Result<String, DeviceError> {
        let _ = notification;
        Err(DeviceError::UnsupportedTool {
            tool: "notifications.post".to_owned(),
        })
    }

    /// Removes one of the runtime's own notifications (a review that was decided); `Ok(false)`
    /// when it was not there.
    async fn withdraw_notification(&self, key: &str) -> Result<bool, DeviceError> {
        let _ = key;
        Ok(false)
    }

    /// Answers the OS dialog on the screen once the user decided (`dialog`): `accept` presses
    /// its positive button (Allow, Just once, Pay, the preselected share target), otherwise its
    /// negative one (Don't allow, Cancel, Back). The dialog is named by the
    /// [`PendingDialog::dialog_id`] of the [`DeviceError::FrameworkConfirmationRequired`] it was
    /// reported with; a device presses nothing when the dialog on screen now is another one
    /// ([`PendingDialog::gone`]). Answers what happened; a dialog the answer raises in turn is
    /// reported as `FrameworkConfirmationRequired`. Only the bridge calls this, on the user's
    /// answer to a confirmation — never on its own.
    async fn resolve_dialog(&self, dialog_id: &str, accept: bool) -> Result<Value, DeviceError> {
        let _ = (dialog_id, accept);
        Err(DeviceError::UnsupportedTool {
            tool: "system.dialog".to_owned(),
        })
    }

    /// Reads a web page as the phone's browser would load it, without showing it (a read:
    /// nothing on the screen changes). What `web` watchers poll. The command manifest has no
    /// command for this yet, so it is a device read outside the tool surface.
    async fn fetch_page(&self, url: &str) -> Result<PageContent, DeviceError> {
        let _ = url;
        Err(DeviceError::UnsupportedTool {
            tool: "browser.fetch_page".to_owned(),
        })
    }
}
