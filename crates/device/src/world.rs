//! The phone's own world: events nobody's tool call caused (a message arrives, a call comes
//! in, a notification appears, the user taps a notification's button), and the runtime's own
//! notifications (a job's result, a review request).
//!
//! A backend that can observe such things offers a [`DeviceEvent`] stream through
//! [`crate::PhoneDevice::subscribe`]; the simulated phone raises them when the world is moved
//! ([`crate::PhoneDevice::inject`], its scenario timeline). These are facts about the phone,
//! not actions of an agent: injecting is an operator's act (audited by the daemon), and
//! posting the runtime's own notification is the phone's system UI, not a tool call.

use serde::{Deserialize, Serialize};

/// The package of the runtime's own notifications in the shade ([`SystemNotification`]).
pub const OPENPHONE_PACKAGE: &str = "org.openphone.runtime";
/// The app name the runtime's own notifications show.
pub const OPENPHONE_APP: &str = "OpenPhone";

/// Something that happened on the phone by itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeviceEvent {
    /// A message arrived (`phone.message.received`).
    MessageReceived {
        /// The SMS thread it landed in.
        thread_id: i64,
        /// The sender's address (a phone number, or a name the scenario uses).
        address: String,
        /// The sender's contact name, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The message text.
        text: String,
        /// When it arrived (Unix ms, the device's clock).
        at_ms: i64,
    },
    /// A call reached the phone (`phone.call.received`).
    CallReceived {
        /// The caller's number.
        number: String,
        /// The caller's contact name, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// `incoming` or `outgoing`.
        direction: String,
        /// `answered`, `missed` or `rejected`.
        outcome: String,
        /// When (Unix ms).
        at_ms: i64,
    },
    /// A notification appeared in the shade (`phone.notification.posted`).
    NotificationPosted {
        /// The notification's key in the shade.
        key: String,
        /// The app that posted it (its display name).
        app: String,
        /// The posting app's package ([`OPENPHONE_PACKAGE`] for the runtime's own).
        #[serde(default)]
        package: String,
        /// Its title.
        title: String,
        /// Its text.
        text: String,
        /// When (Unix ms).
        at_ms: i64,
    },
    /// The user tapped one of a notification's action buttons (`phone.notification.action`).
    NotificationAction {
        /// The notification's key.
        key: String,
        /// The action's id (e.g. `approve`, `deny`).
        action: String,
        /// When (Unix ms).
        at_ms: i64,
    },
}

impl DeviceEvent {
    /// The manifest event this maps to.
    pub fn event_name(&self) -> &'static str {
        match self {
            DeviceEvent::MessageReceived { .. } => "phone.message.received",
            DeviceEvent::CallReceived { .. } => "phone.call.received",
            DeviceEvent::NotificationPosted { .. } => "phone.notification.posted",
            DeviceEvent::NotificationAction { .. } => "phone.notification.action",
        }
    }

    /// When it happened (Unix ms).
    pub fn at_ms(&self) -> i64 {
        match self {
            DeviceEvent::MessageReceived { at_ms, .. }
            | DeviceEvent::CallReceived { at_ms, .. }
            | DeviceEvent::NotificationPosted { at_ms, .. }
            | DeviceEvent::NotificationAction { at_ms, .. } => *at_ms,
        }
    }
}

/// What an operator (or a test) makes happen in the world: the protocol's one type, also
/// `sim.inject`'s params.
pub use openphone_protocol::Injection;

/// A web page as the phone's browser loads it ([`crate::PhoneDevice::fetch_page`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageContent {
    /// The URL asked for.
    pub url: String,
    /// The page's title.
    pub title: String,
    /// Its text: paragraphs, then links (`text <url>`), one per line.
    pub text: String,
}

/// One of the runtime's own notifications (a job's result, a failure alert, a review request).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemNotification {
    /// A stable key chosen by the poster (e.g. `job-7-result`): posting the same key again
    /// updates that notification in place.
    pub key: String,
    /// The title line.
    pub title: String,
    /// The body, shown exactly as given.
    pub body: String,
    /// Action buttons (id, label), e.g. `("approve", "Approve")`; tapping one raises
    /// [`DeviceEvent::NotificationAction`].
    #[serde(default)]
    pub actions: Vec<(String, String)>,
}
