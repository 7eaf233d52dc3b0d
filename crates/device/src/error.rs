//! The device error type and its stable wire codes.

use std::fmt;

use openphone_protocol::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What kind of record a [`DeviceError::NotFound`] or [`DeviceError::Ambiguous`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// An installed app.
    App,
    /// A contact.
    Contact,
    /// A calendar.
    Calendar,
    /// A calendar event.
    Event,
    /// A message thread.
    Thread,
    /// A notification.
    Notification,
    /// A call-log entry.
    Call,
}

impl EntityKind {
    /// The stable name used in messages and error details.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::App => "app",
            EntityKind::Contact => "contact",
            EntityKind::Calendar => "calendar",
            EntityKind::Event => "event",
            EntityKind::Thread => "thread",
            EntityKind::Notification => "notification",
            EntityKind::Call => "call",
        }
    }
}

impl fmt::Display for EntityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a device refused or failed a command.
///
/// Every variant carries the context a caller needs to act (the field, the element, the id);
/// [`DeviceError::code`] gives the stable wire code and [`DeviceError::details`] the context
/// as JSON for the tool result's `error.details`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The device does not implement this command. It is never replaced by another action.
    #[error("this device does not support `{tool}`")]
    UnsupportedTool {
        /// The command name as given.
        tool: String,
    },
    /// The params are well-typed but semantically wrong (empty, out of range, missing one of
    /// several identifiers, an unknown enum value, …).
    #[error("invalid `{field}`: {message}")]
    InvalidInput {
        /// The offending params field.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// No element with this id on the current screen (it may belong to an earlier screen).
    #[error("no element `{element_id}` on the current screen")]
    ElementNotFound {
        /// The requested element id.
        element_id: String,
    },
    /// An element reference matches several elements (backends that resolve elements by
    /// text or description; the simulated phone's ids are unique per screen).
    #[error("`{query}` matches several elements: {}", candidates.join(", "))]
    AmbiguousElement {
        /// The reference that was given.
        query: String,
        /// The ids it matched.
        candidates: Vec<String>,
    },
    /// The element exists but is disabled.
    #[error("element `{element_id}` is disabled")]
    ElementDisabled {
        /// The element id.
        element_id: String,
    },
    /// The element exists but has no usable on-screen bounds.
    #[error("element `{element_id}` has no on-screen bounds")]
    ElementBoundsUnavailable {
        /// The element id.
        element_id: String,
    },
    /// No installed app matches.
    #[error("no installed app matches `{query}`")]
    AppNotFound {
        /// The package or label that was asked for.
        query: String,
    },
    /// No contact, event, thread, notification, … matches.
    #[error("no {kind} matches `{id}`")]
    NotFound {
        /// What was looked up.
        kind: EntityKind,
        /// The id or query that found nothing.
        id: String,
    },
    /// A query names several records where exactly one is needed (e.g. a contact to call).
    #[error("`{query}` matches several {kind} records: {}", candidates.join(", "))]
    Ambiguous {
        /// What was looked up.
        kind: EntityKind,
        /// The query.
        query: String,
        /// Names of the matches, for the caller to choose from.
        candidates: Vec<String>,
    },
    /// Typing or pasting needs a focused editable field and none has focus.
    #[error("no editable field has focus; tap a text field first")]
    NoFocusedField,
    /// Paste with nothing on the clipboard.
    #[error("the clipboard is empty")]
    ClipboardEmpty,
    /// A runtime-owned service (background jobs, watchers) refused the call with one of its
    /// own stable codes (`job_not_found`, `job_limit_reached`, `job_state_conflict`, …).
    #[error("{code}: {message}")]
    Refused {
        /// The service's stable code.
        code: &'static str,
        /// What happened, for people.
        message: String,
    },
    /// The device cannot be reached.
    #[error("the device is offline: {reason}")]
    DeviceOffline {
        /// Why.
        reason: String,
    },
    /// The device cannot do this command: its platform does not let the backend do it (the
    /// Android shell user may not read SMS, say). Never replaced by another action; tool
    /// lists hide or mark such commands ([`crate::PhoneDevice::unsupported_reason`]).
    #[error("`{tool}` is not available on this device: {reason}; workaround: {workaround}")]
    UnsupportedOnDevice {
        /// The command name.
        tool: String,
        /// Why the device cannot do it.
        reason: String,
        /// What the user can do instead.
        workaround: String,
    },
    /// No such device is attached (unplugged, or no device has this serial).
    #[error(
        "no device {serial} is attached: plug the phone in (or `adb connect HOST:PORT` for a \
         phone on Wi-Fi), check that `adb devices` lists it, and retry"
    )]
    DeviceNotFound {
        /// The serial asked for (quoted), or a description of the selection.
        serial: String,
    },
    /// The device has not authorised this computer.
    #[error(
        "device `{serial}` has not authorised this computer: unlock the phone, accept the USB \
         debugging prompt on the phone (RSA key) and retry"
    )]
    DeviceUnauthorized {
        /// The device's serial.
        serial: String,
    },
    /// The device is attached but offline (the ADB state `offline`).
    #[error(
        "device `{serial}` is offline: reconnect the cable (or run `adb reconnect`), unlock the \
         phone and retry"
    )]
    Offline {
        /// The device's serial.
        serial: String,
    },
    /// A state-changing command was handed to the device, then the connection broke or the
    /// device stopped answering: it may have run. Never retried on its own.
    #[error(
        "`{command}` was sent to device `{serial}`, then {reason}: the command may have run; \
         read the screen (openphone.screen.get) before retrying"
    )]
    ExecutionResultUnknown {
        /// The device's serial.
        serial: String,
        /// The command that may have run.
        command: String,
        /// What happened after it was sent.
        reason: String,
    },
    /// The device did not answer a command in time.
    #[error(
        "device `{serial}` did not answer `{command}` within {timeout_ms} ms: unlock the phone, \
         check that `adb -s {serial} shell echo ok` answers, and retry"
    )]
    DeviceTimeout {
        /// The device's serial.
        serial: String,
        /// The device command that got no answer.
        command: String,
        /// How long the backend waited.
        timeout_ms: u64,
    },
    /// The adb server is not running and could not be started.
    #[error(
        "the adb server at {address} is not reachable ({reason}): install the Android platform \
         tools, run `adb start-server` (or set `adb_path` / ANDROID_ADB_SERVER_PORT) and retry"
    )]
    AdbServerUnavailable {
        /// Where the server was looked for (`127.0.0.1:5037`).
        address: String,
        /// What failed.
        reason: String,
    },
    /// The element changed since the screen the caller read (it moved, its text or class
    /// changed, or it is gone); nothing was tapped.
    #[error(
        "element `{element_id}` changed since the screen you read ({reason}): nothing was done; \
         read the screen again (openphone.screen.get) and retry with a fresh id"
    )]
    StaleElement {
        /// The element id.
        element_id: String,
        /// What changed.
        reason: String,
    },
    /// The action raised an OS-level dialog (a permission prompt, an "open with" chooser, a
    /// payment sheet) that only the user may answer. The backend never taps it.
    #[error(
        "the phone shows a system dialog ({kind}: {summary}); only the user may answer it: \
         confirm or dismiss it on the phone, then read the screen again"
    )]
    FrameworkConfirmationRequired {
        /// What kind of dialog: `permission`, `chooser`, `payment`, `system`.
        kind: String,
        /// The package showing it (`com.android.permissioncontroller`, …).
        package: String,
        /// What the dialog says, for the person asked.
        summary: String,
    },
    /// A bug or broken invariant inside the device backend.
    #[error("internal device error: {message}")]
    Internal {
        /// What went wrong.
        message: String,
    },
}

impl DeviceError {
    /// Shorthand for [`DeviceError::InvalidInput`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        DeviceError::InvalidInput {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`DeviceError::NotFound`].
    pub fn not_found(kind: EntityKind, id: impl fmt::Display) -> Self {
        DeviceError::NotFound {
            kind,
            id: id.to_string(),
        }
    }

    /// The stable wire code.
    pub fn code(&self) -> &'static str {
        match self {
            DeviceError::UnsupportedTool { .. } => "unsupported_tool",
            DeviceError::InvalidInput { .. } => "invalid_input",
            DeviceError::ElementNotFound { .. } => "element_not_found",
            DeviceError::AmbiguousElement { .. } => "ambiguous_element",
            DeviceError::ElementDisabled { .. } => "element_disabled",
            DeviceError::ElementBoundsUnavailable { .. } => "element_bounds_unavailable",
            DeviceError::AppNotFound { .. } => "app_not_found",
            DeviceError::NotFound { .. } => "not_found",
            DeviceError::Ambiguous { .. } => "ambiguous_match",
            DeviceError::NoFocusedField => "no_focused_field",
            DeviceError::ClipboardEmpty => "clipboard_empty",
            DeviceError::DeviceOffline { .. } => "device_offline",
            DeviceError::UnsupportedOnDevice { .. } => "unsupported_on_device",
            DeviceError::DeviceNotFound { .. } => "device_not_found",
            DeviceError::DeviceUnauthorized { .. } => "device_unauthorized",
            DeviceError::Offline { .. } => "device_offline",
            DeviceError::DeviceTimeout { .. } => "device_timeout",
            DeviceError::ExecutionResultUnknown { .. } => "execution_result_unknown",
            DeviceError::AdbServerUnavailable { .. } => "adb_server_unavailable",
            DeviceError::StaleElement { .. } => "stale_element",
            DeviceError::FrameworkConfirmationRequired { .. } => "framework_confirmation_required",
            DeviceError::Refused { code, .. } => code,
            DeviceError::Internal { .. } => "internal_error",
        }
    }

    /// The catalogue code a tool result reports this failure with (`error.code`; the device's
    /// own [`code`](DeviceError::code) goes to `error.details.device_error`).
    pub fn catalogue_code(&self) -> ErrorCode {
        match self {
            DeviceError::DeviceOffline { .. } => ErrorCode::FrameworkUnavailable,
            DeviceError::UnsupportedTool { .. } => ErrorCode::ToolNotSupportedByPhonePlatform,
            DeviceError::UnsupportedOnDevice { .. } => ErrorCode::UnsupportedOnDevice,
            DeviceError::DeviceNotFound { .. } => ErrorCode::DeviceNotFound,
            DeviceError::DeviceUnauthorized { .. } => ErrorCode::DeviceUnauthorized,
            DeviceError::Offline { .. } => ErrorCode::DeviceOffline,
            DeviceError::DeviceTimeout { .. } => ErrorCode::DeviceTimeout,
            DeviceError::ExecutionResultUnknown { .. } => ErrorCode::ExecutionResultUnknown,
            DeviceError::AdbServerUnavailable { .. } => ErrorCode::AdbServerUnavailable,
            DeviceError::StaleElement { .. } => ErrorCode::StaleElement,
            DeviceError::FrameworkConfirmationRequired { .. } => {
                ErrorCode::FrameworkConfirmationRequired
            }
            DeviceError::InvalidInput { .. }
            | DeviceError::ElementNotFound { .. }
            | DeviceError::AmbiguousElement { .. }
            | DeviceError::ElementDisabled { .. }
            | DeviceError::ElementBoundsUnavailable { .. }
            | DeviceError::AppNotFound { .. }
            | DeviceError::NotFound { .. }
            | DeviceError::Ambiguous { .. }
            | DeviceError::NoFocusedField
            | DeviceError::ClipboardEmpty
            | DeviceError::Refused { .. }
            | DeviceError::Internal { .. } => ErrorCode::ToolError,
        }
    }

    /// The context of the error as a JSON object (always includes `code`).
    pub fn details(&self) -> Value {
        let mut details = match self {
            DeviceError::UnsupportedTool { tool } => json!({ "tool": tool }),
            DeviceError::InvalidInput { field, message } => {
                json!({ "field": field, "message": message })
            }
            DeviceError::ElementNotFound { element_id }
            | DeviceError::ElementDisabled { element_id }
            | DeviceError::ElementBoundsUnavailable { element_id } => {
                json!({ "element_id": element_id })
            }
            DeviceError::AmbiguousElement { query, candidates } => {
                json!({ "query": query, "candidates": candidates })
            }
            DeviceError::AppNotFound { query } => json!({ "query": query }),
            DeviceError::NotFound { kind, id } => json!({ "kind": kind, "id": id }),
            DeviceError::Ambiguous {
                kind,
                query,
                candidates,
            } => json!({ "kind": kind, "query": query, "candidates": candidates }),
            DeviceError::NoFocusedField | DeviceError::ClipboardEmpty => json!({}),
            DeviceError::DeviceOffline { reason } => json!({ "reason": reason }),
            DeviceError::UnsupportedOnDevice {
                tool,
                reason,
                workaround,
            } => json!({ "tool": tool, "reason": reason, "workaround": workaround }),
            DeviceError::DeviceNotFound { serial }
            | DeviceError::DeviceUnauthorized { serial }
            | DeviceError::Offline { serial } => json!({ "serial": serial }),
            DeviceError::DeviceTimeout {
                serial,
                command,
                timeout_ms,
            } => json!({ "serial": serial, "command": command, "timeout_ms": timeout_ms }),
            DeviceError::ExecutionResultUnknown {
                serial,
                command,
                reason,
            } => json!({ "serial": serial, "command": command, "reason": reason }),
            DeviceError::AdbServerUnavailable { address, reason } => {
                json!({ "address": address, "reason": reason })
            }
            DeviceError::StaleElement { element_id, reason } => {
                json!({ "element_id": element_id, "reason": reason })
            }
            DeviceError::FrameworkConfirmationRequired {
                kind,
                package,
                summary,
            } => json!({ "kind": kind, "package": package, "summary": summary }),
            DeviceError::Refused { message, .. } | DeviceError::Internal { message } => {
                json!({ "message": message })
            }
        };
        if let Some(map) = details.as_object_mut() {
            map.insert("code".into(), Value::from(self.code()));
        }
        details
    }
}
