//! What is on screen and what touching it does: browser history, tasks with their page
//! stacks, routes, overlays, popup-menu items and the actions of taps, keys and menu items.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::SettingKey;

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
    /// The notification shade (a downward swipe from the status bar opens it).
    Shade,
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
    /// Open a notification from the shade (what `notifications.open` does).
    OpenNotification {
        /// The notification's key.
        key: String,
    },
}
