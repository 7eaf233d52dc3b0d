//! Installed apps: their built-in roles, and the screens a scenario declares for its own apps.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::yes;

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

fn default_version() -> String {
    "1.0".into()
}

/// The standard app set.
pub(crate) fn default_apps() -> Vec<App> {
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
