//! The phone's records: contacts, calendars and events, SMS threads, notifications, the call
//! log, alarms, notes, web pages, shares, drafts and photos.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{one, yes};

/// A contact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Contact {
    /// Unique id.
    pub id: i64,
    /// Display name.
    pub name: String,
    /// Phone numbers, primary first.
    #[serde(default)]
    pub phones: Vec<Phone>,
    /// Email addresses.
    #[serde(default)]
    pub emails: Vec<Email>,
    /// Company or organisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// Free-text note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Favourite.
    #[serde(default)]
    pub starred: bool,
}

/// A phone number of a contact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Phone {
    /// The number, any common format.
    pub number: String,
    /// Label such as mobile, work, home.
    #[serde(default = "default_phone_label")]
    pub label: String,
}

/// An email address of a contact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Email {
    /// The address.
    pub address: String,
    /// Label such as home, work.
    #[serde(default = "default_email_label")]
    pub label: String,
}

/// A calendar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Calendar {
    /// Unique id.
    pub id: i64,
    /// Display name.
    pub name: String,
}

/// A calendar event (a recurring event is one record: its whole series).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Unique id.
    pub id: i64,
    /// Calendar id.
    #[serde(default = "one")]
    pub calendar_id: i64,
    /// Title.
    pub title: String,
    /// Details.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Location.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub location: String,
    /// Start, Unix ms.
    pub start_ms: i64,
    /// End, Unix ms; after the start.
    pub end_ms: i64,
    /// All-day event.
    #[serde(default)]
    pub all_day: bool,
    /// Attendee names or addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attendees: Vec<String>,
}

/// An SMS conversation with one address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Thread {
    /// Unique id.
    pub id: i64,
    /// The other party's number or short code.
    pub address: String,
    /// Name shown when the address is not a contact (e.g. a business).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Messages, oldest first.
    #[serde(default)]
    pub messages: Vec<Message>,
}

/// One SMS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Unique id.
    pub id: i64,
    /// Incoming or outgoing.
    pub direction: Direction,
    /// Text.
    pub body: String,
    /// Time, Unix ms.
    pub at_ms: i64,
    /// Whether the user has seen it (outgoing messages are always read).
    #[serde(default = "yes")]
    pub read: bool,
}

/// Message direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Received.
    Incoming,
    /// Sent.
    Outgoing,
}

/// A notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Notification {
    /// Unique key.
    pub key: String,
    /// Posting app's package.
    pub package: String,
    /// Title.
    pub title: String,
    /// Body text.
    #[serde(default)]
    pub text: String,
    /// Posted at, Unix ms.
    pub posted_ms: i64,
    /// Whether it was opened.
    #[serde(default)]
    pub read: bool,
    /// Where opening it leads.
    #[serde(default)]
    pub target: NotificationTarget,
    /// Action buttons under the text. The simulated shade shows them as labels: only an
    /// operator's `sim inject action` presses one (never a tap of an agent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<NotificationButton>,
}

/// An action button of a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationButton {
    /// The action's id (e.g. `approve`), unique within the notification.
    pub id: String,
    /// The label shown.
    pub label: String,
}

/// Where opening a notification leads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum NotificationTarget {
    /// The posting app's start screen.
    #[default]
    App,
    /// A Messages thread.
    Thread {
        /// Thread id.
        thread_id: i64,
    },
    /// A calendar event's details.
    Event {
        /// Event id.
        event_id: i64,
    },
    /// The Phone app's call log.
    CallLog,
    /// A page in the Browser.
    Url {
        /// http(s) URL.
        url: String,
    },
    /// A declarative screen of the posting app.
    Screen {
        /// Screen id.
        screen_id: String,
    },
}

/// A call-log entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// Unique id.
    pub id: i64,
    /// The other party's number.
    pub number: String,
    /// Call type.
    #[serde(rename = "type")]
    pub call_type: CallType,
    /// Start, Unix ms.
    pub at_ms: i64,
    /// Duration in seconds (0 for missed, rejected, blocked, or still in progress).
    #[serde(default)]
    pub duration_s: i64,
}

/// Call types, as in the call log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallType {
    /// Missed incoming call.
    Missed,
    /// Answered incoming call.
    Incoming,
    /// Outgoing call.
    Outgoing,
    /// Voicemail.
    Voicemail,
    /// Rejected incoming call.
    Rejected,
    /// Blocked incoming call.
    Blocked,
}

impl CallType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallType::Missed => "missed",
            CallType::Incoming => "incoming",
            CallType::Outgoing => "outgoing",
            CallType::Voicemail => "voicemail",
            CallType::Rejected => "rejected",
            CallType::Blocked => "blocked",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        [
            CallType::Missed,
            CallType::Incoming,
            CallType::Outgoing,
            CallType::Voicemail,
            CallType::Rejected,
            CallType::Blocked,
        ]
        .into_iter()
        .find(|t| t.as_str().eq_ignore_ascii_case(text))
    }
}

/// An alarm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Alarm {
    /// Unique id.
    pub id: i64,
    /// Hour 0-23.
    pub hour: u8,
    /// Minute 0-59.
    pub minute: u8,
    /// Label.
    #[serde(default)]
    pub label: String,
    /// Switched on.
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// A note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// Unique id.
    pub id: i64,
    /// Title.
    #[serde(default)]
    pub title: String,
    /// Body.
    #[serde(default)]
    pub body: String,
    /// Last edit, Unix ms.
    #[serde(default)]
    pub updated_ms: i64,
}

/// A web page the Browser can show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebPage {
    /// http(s) URL, unique.
    pub url: String,
    /// Page title.
    pub title: String,
    /// Paragraphs of text.
    #[serde(default)]
    pub paragraphs: Vec<String>,
    /// Links shown below the text.
    #[serde(default)]
    pub links: Vec<Link>,
}

/// A link on a web page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Link text.
    pub text: String,
    /// Target URL.
    pub url: String,
}

/// A text handed to the share sheet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Share {
    /// Unique id.
    pub id: i64,
    /// Shared text.
    pub text: String,
    /// Chooser title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chooser_title: Option<String>,
    /// When, Unix ms.
    pub at_ms: i64,
    /// The target the user picked in the sheet, if any (`messages`, `notes`, `copy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// A message prepared for the user to review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Draft {
    /// Unique id.
    pub id: i64,
    /// Recipient number, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Body.
    pub body: String,
    /// When, Unix ms.
    pub at_ms: i64,
}

/// A photo taken with the Camera app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Photo {
    /// Unique id.
    pub id: i64,
    /// When, Unix ms.
    pub taken_ms: i64,
    /// Which camera.
    pub facing: CameraFacing,
}

/// Camera side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CameraFacing {
    /// Rear camera.
    #[default]
    Back,
    /// Selfie camera.
    Front,
}

fn default_phone_label() -> String {
    "mobile".into()
}

fn default_email_label() -> String {
    "home".into()
}

pub(super) fn default_calendars() -> Vec<Calendar> {
    vec![Calendar {
        id: 1,
        name: "Personal".into(),
    }]
}
