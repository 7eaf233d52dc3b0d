//! The payloads of the events about the phone's own world (`phone.*`, project additions) and
//! of `watcher.fired`.
//!
//! The `phone.*` events are meant for operators: they carry what arrived on the phone
//! (message texts, callers' numbers). `watcher.fired` carries ids and digests only.

use serde::{Deserialize, Serialize};

/// `phone.message.received`: a message arrived that no tool call sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhoneMessageReceived {
    /// The SMS thread it landed in.
    pub thread_id: i64,
    /// The sender's address.
    pub address: String,
    /// The sender's contact name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The text.
    pub text: String,
    /// When it arrived (Unix ms).
    pub at_ms: i64,
    /// The phone it happened on (`[[devices]] id`); absent on a daemon with one phone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// `phone.call.received`: a call reached the phone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhoneCallReceived {
    /// The caller's number.
    pub number: String,
    /// The caller's contact name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `incoming` or `outgoing`.
    pub direction: String,
    /// `answered`, `missed` or `rejected`.
    pub outcome: String,
    /// When (Unix ms).
    pub at_ms: i64,
    /// The phone it happened on (`[[devices]] id`); absent on a daemon with one phone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// `phone.notification.posted`: a notification appeared in the shade.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhoneNotificationPosted {
    /// Its key in the shade.
    pub key: String,
    /// The posting app's name.
    pub app: String,
    /// The posting app's package.
    #[serde(default)]
    pub package: String,
    /// The title.
    pub title: String,
    /// The text.
    pub text: String,
    /// When (Unix ms).
    pub at_ms: i64,
    /// The phone it happened on (`[[devices]] id`); absent on a daemon with one phone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// `phone.notification.action`: the user pressed an action button of a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhoneNotificationAction {
    /// The notification's key.
    pub key: String,
    /// The action's id.
    pub action: String,
    /// When (Unix ms).
    pub at_ms: i64,
    /// The phone it happened on (`[[devices]] id`); absent on a daemon with one phone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

crate::wire_enum!(
    /// What a fired watcher did about it.
    WatcherReaction {
        /// It created an `agent_turn` job (`delivery.prompt`).
        AgentJob = "agent_job",
        /// It created a `system_event` job carrying its stored tool call (`delivery.tool`).
        ToolCall = "tool_call",
        /// It asked the runtime routed for the `watcher` surface to attend (no reaction).
        Attention = "attention",
    }
);

/// `watcher.fired`: a watcher's condition was met (or its deadline passed) and its reaction
/// started. Ids and digests only: the event that fired it is in the reaction, not here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WatcherFired {
    pub watcher_id: i64,
    /// The watcher's title.
    pub title: String,
    /// Its source (`message`, `call`, `notification`, `screen`, `web`, `time`).
    pub source: String,
    /// What fired it: `event`, `deadline`, `time` or `poll`.
    pub trigger: String,
    /// The firing's number for this watcher (1 for the first).
    pub firing: i64,
    /// When (Unix ms).
    pub fired_at_ms: i64,
    pub reaction: WatcherReaction,
    /// The job the reaction created, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    /// `sha256:<hex>` of the canonical JSON of the event that fired it.
    pub event_digest: String,
    /// The watcher ended with this firing (not recurring).
    pub ended: bool,
}
