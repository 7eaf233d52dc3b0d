//! The simulated phone's whole state. A scenario file is this structure in JSON; a
//! [`SimState`] snapshot round-trips through the same format.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The current scenario/state format version.
pub const SCENARIO_VERSION: u32 = 1;

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
    pub device: DeviceInfo,
    /// The clock the scenario was written for.
    #[serde(default)]
    pub clock: ClockInfo,
    /// Quick settings toggled in the Settings app.
    #[serde(default)]
    pub settings: Settings,
    /// Installed apps. Absent → the standard set (Settings, Messages, Phone, Contacts,
    /// Calendar, Browser, Clock, Notes, Camera).
    #[serde(default = "default_apps")]
    pub apps: Vec<App>,
    /// The address book.
    #[serde(default)]
    pub contacts: Vec<Contact>,
    /// Calendars events belong to. Absent → one calendar, id 1, "Personal".
    #[serde(default = "default_calendars")]
    pub calendars: Vec<Calendar>,
    /// Calendar events.
    #[serde(default)]
    pub events: Vec<Event>,
    /// SMS conversations.
    #[serde(default)]
    pub threads: Vec<Thread>,
    /// Notifications in the shade.
    #[serde(default)]
    pub notifications: Vec<Notification>,
    /// The call log, any order.
    #[serde(default)]
    pub calls: Vec<Call>,
    /// Alarms in the Clock app.
    #[serde(default)]
    pub alarms: Vec<Alarm>,
    /// Notes in the Notes app.
    #[serde(default)]
    pub notes: Vec<Note>,
    /// Web pages the Browser can show; other http(s) URLs show a generic page.
    #[serde(default)]
    pub web_pages: Vec<WebPage>,
    /// Clipboard text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clipboard: Option<String>,
    /// Texts handed to the share sheet.
    #[serde(default)]
    pub shares: Vec<Share>,
    /// Message drafts prepared for the user.
    #[serde(default)]
    pub drafts: Vec<Draft>,
    /// Photos taken with the Camera app.
    #[serde(default)]
    pub photos: Vec<Photo>,
    /// Browser history.
    #[serde(default)]
    pub browser: BrowserState,
    /// The call in progress (a call-log id), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_call: Option<i64>,
    /// Which camera the Camera app uses.
    #[serde(default)]
    pub camera_facing: CameraFacing,
    /// What is on screen: tasks, their page stacks, overlays.
    #[serde(default)]
    pub nav: NavState,
    /// Every executed mutating command, oldest first.
    #[serde(default)]
    pub action_log: Vec<ActionRecord>,
    /// The next id handed out for new records; 0 → one above the largest id in the state.
    #[serde(default)]
    pub next_id: i64,
}

/// Device identity and hardware.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceInfo {
    /// Model name.
    pub model: String,
    /// OS version string.
    pub os_version: String,
    /// Screen size in pixels.
    pub screen: ScreenSize,
    /// Battery level, 0-100.
    pub battery_percent: u8,
    /// Whether the phone is charging.
    pub charging: bool,
    /// The phone owner's name, shown in Settings.
    pub owner_name: String,
    /// The phone's own number.
    pub own_number: String,
}

impl Default for DeviceInfo {
    fn default() -> Self {
        Self {
            model: "OpenPhone Sim".into(),
            os_version: "Android 15 (simulated)".into(),
            screen: ScreenSize::default(),
            battery_percent: 80,
            charging: false,
            owner_name: "Phone owner".into(),
            own_number: "+15550100".into(),
        }
    }
}

/// Screen size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenSize {
    /// Width, 320-4096.
    pub width: u32,
    /// Height, 480-4096.
    pub height: u32,
}

impl Default for ScreenSize {
    fn default() -> Self {
        Self {
            width: 1080,
            height: 2400,
        }
    }
}

/// The time a scenario was written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClockInfo {
    /// "Now" when the scenario starts, Unix ms. A manual clock for this scenario starts here.
    pub start_ms: i64,
    /// The phone's fixed offset from UTC in minutes (-720..=840), used for displayed times
    /// and day boundaries.
    pub utc_offset_minutes: i32,
}

impl Default for ClockInfo {
    fn default() -> Self {
        // 2026-03-12 08:30 UTC.
        Self {
            start_ms: 1_773_304_200_000,
            utc_offset_minutes: 0,
        }
    }
}

/// Quick settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[allow(clippy::struct_excessive_bools)]
pub struct Settings {
    /// Wi-Fi on.
    pub wifi: bool,
    /// Bluetooth on.
    pub bluetooth: bool,
    /// Airplane mode on.
    pub airplane_mode: bool,
    /// Do not disturb on.
    pub do_not_disturb: bool,
    /// Dark theme on.
    pub dark_theme: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            wifi: true,
            bluetooth: false,
            airplane_mode: false,
            do_not_disturb: false,
            dark_theme: false,
        }
    }
}

/// A quick setting, as named in actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SettingKey {
    /// Wi-Fi.
    Wifi,
    /// Bluetooth.
    Bluetooth,
    /// Airplane mode.
    AirplaneMode,
    /// Do not disturb.
    DoNotDisturb,
    /// Dark theme.
    DarkTheme,
}

impl SettingKey {
    /// All settings in display order.
    pub const ALL: [SettingKey; 5] = [
        SettingKey::Wifi,
        SettingKey::Bluetooth,
        SettingKey::AirplaneMode,
        SettingKey::DoNotDisturb,
        SettingKey::DarkTheme,
    ];

    /// Display label.
    pub fn label(self) -> &'static str {
        match self {
            SettingKey::Wifi => "Wi-Fi",
            SettingKey::Bluetooth => "Bluetooth",
            SettingKey::AirplaneMode => "Airplane mode",
            SettingKey::DoNotDisturb => "Do not disturb",
            SettingKey::DarkTheme => "Dark theme",
        }
    }

    /// Stable id fragment.
    pub fn id(self) -> &'static str {
        match self {
            SettingKey::Wifi => "wifi",
            SettingKey::Bluetooth => "bluetooth",
            SettingKey::AirplaneMode => "airplane_mode",
            SettingKey::DoNotDisturb => "do_not_disturb",
            SettingKey::DarkTheme => "dark_theme",
        }
    }
}

impl Settings {
    /// The value of one setting.
    pub fn get(&self, key: SettingKey) -> bool {
        match key {
            SettingKey::Wifi => self.wifi,
            SettingKey::Bluetooth => self.bluetooth,
            SettingKey::AirplaneMode => self.airplane_mode,
            SettingKey::DoNotDisturb => self.do_not_disturb,
            SettingKey::DarkTheme => self.dark_theme,
        }
    }

    /// Flips one setting and returns its new value.
    pub fn toggle(&mut self, key: SettingKey) -> bool {
        let slot = match key {
            SettingKey::Wifi => &mut self.wifi,
            SettingKey::Bluetooth => &mut self.bluetooth,
            SettingKey::AirplaneMode => &mut self.airplane_mode,
            SettingKey::DoNotDisturb => &mut self.do_not_disturb,
            SettingKey::DarkTheme => &mut self.dark_theme,
        };
        *slot = !*slot;
        *slot
    }
}

/// The built-in behaviour an app has. Apps without a role show their `screens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AppRole {
    /// System settings.
    Settings,
    /// SMS.
    Messages,
    /// Dialer and call log.
    Phone,
    /// Address book.
    Contacts,
    /// Calendar.
    Calendar,
    /// Web browser.
    Browser,
    /// Clock and alarms.
    Clock,
    /// Notes.
    Notes,
    /// Camera.
    Camera,
}

/// An installed app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct App {
    /// Package name, unique.
    pub package: String,
    /// Launcher label.
    pub label: String,
    /// Built-in behaviour; at most one app per role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<AppRole>,
    /// Whether this is a system app.
    #[serde(default)]
    pub system: bool,
    /// Whether it has a launcher entry (can be opened).
    #[serde(default = "yes")]
    pub launchable: bool,
    /// Version name.
    #[serde(default = "default_version")]
    pub version: String,
    /// Declarative screens for apps without a role; the first is the start screen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screens: Vec<CustomScreen>,
}

/// A declarative screen of a scenario-defined app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomScreen {
    /// Screen id, unique within the app.
    pub id: String,
    /// App-bar title.
    pub title: String,
    /// Activity class name (default `.MainActivity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<String>,
    /// Elements, laid out top to bottom.
    #[serde(default)]
    pub elements: Vec<CustomElement>,
}

/// One element of a declarative screen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomElement {
    /// Element id, unique within the screen.
    pub id: String,
    /// Kind of element.
    #[serde(default)]
    pub kind: CustomKind,
    /// Text shown (for fields: the initial value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Content description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it is enabled.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Tapping opens this screen of the same app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub navigate: Option<String>,
}

/// Kinds of declarative elements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CustomKind {
    /// Static text.
    #[default]
    Text,
    /// A button.
    Button,
    /// A tappable list row.
    Row,
    /// An editable text field.
    Field,
}

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

/// Browser history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserState {
    /// Visited URLs.
    #[serde(default)]
    pub history: Vec<String>,
    /// Index of the shown URL in `history`.
    #[serde(default)]
    pub position: usize,
}

impl BrowserState {
    /// The URL on show.
    pub fn current(&self) -> Option<&str> {
        self.history.get(self.position).map(String::as_str)
    }
}

/// What is on screen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavState {
    /// App tasks, least recently used first.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// The package in the foreground; none → the home screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreground: Option<String>,
    /// A system overlay above everything (recents, a popup menu, the share sheet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<Overlay>,
    /// Scroll offset of the home screen.
    #[serde(default)]
    pub home_scroll: i32,
}

/// An app's back stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Package.
    pub package: String,
    /// Pages, root first.
    pub stack: Vec<Page>,
}

/// One page of an app with its transient UI state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Page {
    /// Which screen.
    pub route: Route,
    /// Editable field contents by element id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// The focused field's element id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    /// Scroll offset of the page's list, pixels.
    #[serde(default)]
    pub scroll: i32,
    /// A transient message on the page (e.g. a validation hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

impl Page {
    /// A fresh page.
    pub fn new(route: Route) -> Self {
        Self {
            route,
            fields: BTreeMap::new(),
            focus: None,
            scroll: 0,
            notice: None,
        }
    }
}

/// The screens of the built-in apps, plus declarative screens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "screen", rename_all = "snake_case", deny_unknown_fields)]
pub enum Route {
    /// Settings main list.
    Settings,
    /// Settings → About phone.
    SettingsAbout,
    /// Settings → an app's info page.
    AppInfo {
        /// Package.
        package: String,
    },
    /// Messages: conversation list.
    Conversations,
    /// Messages: one conversation.
    Thread {
        /// Thread id.
        thread_id: i64,
    },
    /// Messages: new message.
    Compose,
    /// Phone: call log.
    CallLog,
    /// Phone: keypad.
    Dialpad,
    /// Phone: in-call screen.
    InCall {
        /// Call-log id.
        call_id: i64,
    },
    /// Contacts list.
    Contacts,
    /// One contact.
    ContactDetail {
        /// Contact id.
        contact_id: i64,
    },
    /// Calendar: one day's agenda (none → today).
    Agenda {
        /// Local day number.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        day: Option<i64>,
    },
    /// Calendar: event details.
    EventDetail {
        /// Event id.
        event_id: i64,
    },
    /// Calendar: new or edit event form.
    EventForm {
        /// The event being edited; none → a new event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<i64>,
    },
    /// Browser page.
    Browser,
    /// Clock and alarms.
    Clock,
    /// Notes list.
    Notes,
    /// Note editor.
    NoteEditor {
        /// The note being edited; none → a new note.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note_id: Option<i64>,
    },
    /// Camera viewfinder.
    Camera,
    /// A declarative screen.
    Custom {
        /// Screen id.
        screen_id: String,
    },
    /// An app with neither role nor screens.
    Blank,
}

/// A system overlay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "overlay", rename_all = "snake_case", deny_unknown_fields)]
pub enum Overlay {
    /// The recent-apps switcher.
    Recents,
    /// A popup menu opened by a long press.
    Menu {
        /// Menu title (the pressed element's label).
        title: String,
        /// Items.
        items: Vec<MenuItem>,
    },
    /// The system share sheet for a share record.
    ShareSheet {
        /// Share id.
        share_id: i64,
    },
}

/// A popup-menu item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MenuItem {
    /// Element id fragment.
    pub id: String,
    /// Label.
    pub label: String,
    /// What choosing it does.
    pub action: Action,
}

/// Something a tap, key or menu item does. Built from the state when a screen is shown;
/// stored only inside popup menus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Nothing.
    None,
    /// Back key.
    Back,
    /// Home key.
    Home,
    /// Recents key.
    Recents,
    /// Open an app.
    Launch {
        /// Package.
        package: String,
    },
    /// Push a page in the foreground app.
    Push {
        /// The page.
        route: Route,
    },
    /// Focus an editable field.
    Focus {
        /// Element id.
        field: String,
    },
    /// Set a field of the current page.
    SetField {
        /// Element id.
        field: String,
        /// New content.
        value: String,
    },
    /// Flip a boolean field (`"true"`/`"false"`) of the current page.
    ToggleField {
        /// Element id.
        field: String,
    },
    /// Flip a quick setting.
    Toggle {
        /// The setting.
        setting: SettingKey,
    },
    /// Flip an alarm.
    ToggleAlarm {
        /// Alarm id.
        alarm_id: i64,
    },
    /// Send the thread page's input.
    SendInThread {
        /// Thread id.
        thread_id: i64,
    },
    /// Send the compose page.
    SendCompose,
    /// Open Messages' compose page for an address.
    ComposeTo {
        /// Recipient.
        address: String,
        /// Pre-filled body.
        #[serde(default)]
        body: String,
    },
    /// Append a digit on the dial pad.
    Dial {
        /// Digit or `*`/`#`.
        digit: String,
    },
    /// Delete the last dial-pad digit.
    DialDelete,
    /// Open the dial pad with a number.
    DialNumber {
        /// Number.
        number: String,
    },
    /// Call the dial pad's number.
    CallFromDialpad,
    /// Call a number now.
    Call {
        /// Number.
        number: String,
    },
    /// Hang up.
    EndCall {
        /// Call-log id.
        call_id: i64,
    },
    /// Save the event form.
    SaveEvent {
        /// Edited event, none → new.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<i64>,
    },
    /// Delete an event.
    DeleteEvent {
        /// Event id.
        event_id: i64,
    },
    /// Move the agenda by days.
    ShiftDay {
        /// Days, may be negative.
        days: i64,
    },
    /// Open a URL in the Browser.
    OpenUrl {
        /// URL.
        url: String,
    },
    /// Browser: load the URL bar's text.
    SubmitUrl,
    /// Camera shutter.
    TakePhoto,
    /// Camera switch.
    SwitchCamera,
    /// Save and close the note editor.
    SaveNote,
    /// Delete a note.
    DeleteNote {
        /// Note id.
        note_id: i64,
    },
    /// Copy text to the clipboard.
    Copy {
        /// Text.
        text: String,
    },
    /// Paste the clipboard into a field of the current page.
    PasteInto {
        /// Element id.
        field: String,
    },
    /// Delete one message.
    DeleteMessage {
        /// Thread id.
        thread_id: i64,
        /// Message id.
        message_id: i64,
    },
    /// Mark a thread read.
    MarkThreadRead {
        /// Thread id.
        thread_id: i64,
    },
    /// Delete a thread.
    DeleteThread {
        /// Thread id.
        thread_id: i64,
    },
    /// Open a popup menu.
    Menu {
        /// Title.
        title: String,
        /// Items.
        items: Vec<MenuItem>,
    },
    /// Share sheet: pick a target.
    ShareTo {
        /// Share id.
        share_id: i64,
        /// `messages`, `notes` or `copy`.
        target: String,
    },
    /// Recents: bring a task to the front.
    SwitchTask {
        /// Package.
        package: String,
    },
    /// Recents: close every task.
    ClearTasks,
    /// Close the overlay.
    CloseOverlay,
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

fn yes() -> bool {
    true
}

fn one() -> i64 {
    1
}

fn default_version() -> String {
    "1.0".into()
}

fn default_phone_label() -> String {
    "mobile".into()
}

fn default_email_label() -> String {
    "home".into()
}

fn default_calendars() -> Vec<Calendar> {
    vec![Calendar {
        id: 1,
        name: "Personal".into(),
    }]
}

/// The standard app set.
pub fn default_apps() -> Vec<App> {
    let app = |package: &str, label: &str, role: AppRole| App {
        package: package.into(),
        label: label.into(),
        role: Some(role),
        system: true,
        launchable: true,
        version: "15".into(),
        screens: Vec::new(),
    };
    vec![
        app("com.android.settings", "Settings", AppRole::Settings),
        app("com.android.messaging", "Messages", AppRole::Messages),
        app("com.android.dialer", "Phone", AppRole::Phone),
        app("com.android.contacts", "Contacts", AppRole::Contacts),
        app("com.android.calendar", "Calendar", AppRole::Calendar),
        app("com.android.browser", "Browser", AppRole::Browser),
        app("com.android.deskclock", "Clock", AppRole::Clock),
        app("com.android.notes", "Notes", AppRole::Notes),
        app("com.android.camera", "Camera", AppRole::Camera),
    ]
}
