//! What an operator (or a test, or a scenario's timeline) makes happen in the simulated phone's
//! world: the one type of an injection. `sim.inject` takes it as its params
//! ([`crate::endpoint::SimInjectParams`]) and the device applies it (`openphone-device`
//! re-exports it). Its JSON Schema (derived, doc comments included) is part of
//! `schemas/sim-scenario.schema.json`, so the doc comments below are that schema's text.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What an operator (or a test) makes happen in the world (`openphone sim inject …`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Injection {
    /// An incoming message from `address` (a number, a contact's name, or a sender name such
    /// as a short code).
    Message {
        /// The sender.
        address: String,
        /// The text.
        text: String,
    },
    /// A call from `number`; `outcome` is `missed` (default), `answered` or `rejected`.
    Call {
        /// The caller.
        number: String,
        /// What became of it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
    },
    /// A notification from `app`.
    Notification {
        /// The posting app (its package or display name).
        app: String,
        /// The title.
        title: String,
        /// The text.
        #[serde(default)]
        text: String,
    },
    /// The user taps action `action` of the notification `key`.
    NotificationAction {
        /// The notification's key.
        key: String,
        /// The action id.
        action: String,
    },
}

impl Injection {
    /// The kind, as on the wire (`message`, `call`, `notification`, `notification_action`).
    pub fn kind(&self) -> &'static str {
        match self {
            Injection::Message { .. } => "message",
            Injection::Call { .. } => "call",
            Injection::Notification { .. } => "notification",
            Injection::NotificationAction { .. } => "notification_action",
        }
    }
}
