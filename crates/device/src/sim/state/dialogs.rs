//! OS-level dialogs of the simulated phone: what a scenario declares raises them (an app that
//! asks a permission when it first comes up, a URL several apps can open, an app button that
//! raises a payment sheet) and the dialog on the screen now. The behaviour is in
//! `sim/dialogs.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// System dialogs: what raises them, and the one on screen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SystemDialogs {
    /// Runtime permissions apps ask for when they first come to the foreground, one prompt at a
    /// time, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<PermissionDecl>,
    /// URLs several installed apps can open: `url.open` of such a URL asks "Open with".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub url_handlers: Vec<UrlHandlers>,
    /// App buttons whose tap raises a payment sheet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payments: Vec<PaymentDecl>,
    /// Payments the user confirmed on a payment sheet, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paid: Vec<PaymentRecord>,
    /// The dialog on the screen now, above everything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub showing: Option<SystemDialog>,
}

impl SystemDialogs {
    /// Whether nothing is declared or showing (then the scenario file leaves the member out).
    pub fn is_empty(&self) -> bool {
        self.permissions.is_empty()
            && self.url_handlers.is_empty()
            && self.payments.is_empty()
            && self.paid.is_empty()
            && self.showing.is_none()
    }
}

/// A runtime permission an app asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionDecl {
    /// The app's package (an installed app).
    pub package: String,
    /// The permission: `camera`, `microphone`, `location`, `contacts`, `calendar`, `sms`,
    /// `phone`, `notifications`, `photos`, or any name with a `message`.
    pub permission: String,
    /// What the prompt asks to do, after "Allow `<app>` to" (default: Android's wording for the
    /// known permissions, e.g. "take pictures and record video" for `camera`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether it was answered: `ask` (not yet: the app asks), `granted` or `denied`.
    #[serde(default)]
    pub state: PermissionState,
}

/// Where a permission stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionState {
    /// Not answered yet: the app asks when it comes up.
    #[default]
    Ask,
    /// The user allowed it.
    Granted,
    /// The user refused it (the app does not ask again).
    Denied,
}

/// A URL prefix several apps can open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UrlHandlers {
    /// URLs starting with this text (e.g. `https://shop.example/`).
    pub url_prefix: String,
    /// The installed apps that open them, at least two; the first is the one the "Open with"
    /// dialog preselects.
    pub packages: Vec<String>,
}

/// An app button that raises a payment sheet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentDecl {
    /// The app's package.
    pub package: String,
    /// The element id of the button (on any of the app's screens).
    pub element: String,
    /// Who is paid.
    pub merchant: String,
    /// The amount as shown (`€12.00`).
    pub amount: String,
}

/// A payment the user confirmed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentRecord {
    /// The app that asked.
    pub package: String,
    /// Who was paid.
    pub merchant: String,
    /// The amount.
    pub amount: String,
    /// When, Unix ms.
    pub at_ms: i64,
}

/// The dialog on the screen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SystemDialog {
    /// What it asks.
    pub dialog: DialogKind,
    /// The preselected choice of a chooser (an index into its choices).
    #[serde(default)]
    pub selected: usize,
    /// The command that raised it.
    pub raised_by: String,
    /// That command's result, handed back once the dialog is answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// What a dialog asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum DialogKind {
    /// A permission prompt (`com.android.permissioncontroller`).
    Permission {
        /// The app asking.
        package: String,
        /// The permission (as declared).
        permission: String,
    },
    /// "Open with" (the `android` resolver).
    OpenWith {
        /// The URL.
        url: String,
        /// The apps that can open it.
        packages: Vec<String>,
    },
    /// The share chooser (`android`), for a share record.
    Share {
        /// The share id.
        share_id: i64,
    },
    /// A payment sheet (`com.google.android.gms`).
    Payment {
        /// The app asking.
        package: String,
        /// Who is paid.
        merchant: String,
        /// The amount.
        amount: String,
    },
}
