//! `sim.inject` (operator only): make something happen in the simulated phone's world — a
//! message arrives, a call comes in, an app posts a notification, the user presses a
//! notification's button. The daemon writes an `operator_action` audit record (`tool`
//! `sim.inject.<kind>`, `params_hash` of the injection) before the phone applies it.

use serde::{Deserialize, Serialize};

use super::events::Event;

/// `sim.inject` params: one injection, by `kind`. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SimInjectParams {
    /// An incoming message from `address` (a number, a contact's name, or a sender name such
    /// as a short code).
    Message {
        /// The sender.
        address: String,
        /// The text.
        text: String,
    },
    /// An incoming call from `number` (or a contact's name).
    Call {
        /// The caller.
        number: String,
        /// `missed` (the default), `answered` or `rejected`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
    },
    /// A notification from an installed app (its package or its name).
    Notification {
        /// The posting app.
        app: String,
        /// The title.
        title: String,
        /// The text.
        #[serde(default)]
        text: String,
    },
    /// The user presses action `action` of the notification `key`.
    NotificationAction {
        /// The notification's key.
        key: String,
        /// The action id (e.g. `approve`).
        action: String,
    },
}

impl SimInjectParams {
    /// The kind, as on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            SimInjectParams::Message { .. } => "message",
            SimInjectParams::Call { .. } => "call",
            SimInjectParams::Notification { .. } => "notification",
            SimInjectParams::NotificationAction { .. } => "notification_action",
        }
    }
}

/// `sim.inject` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SimInjectResult {
    /// The events the injection raised, in order (a message: `phone.message.received`, then
    /// the Messages app's `phone.notification.posted`).
    pub events: Vec<Event>,
    /// The `seq` of the `operator_action` audit record written before it was applied.
    pub audit_seq: i64,
}
