//! The reply stream (`openclaw-node.md` §11): `chat` events of the sessions this phone asked
//! in become `runtime.message.delta` / `final` for the phone session.
//!
//! Events carry the canonical key (`openphone-x` → `agent:main:openphone-x`), so a tracked key
//! matches exactly or as `agent:<any>:<key>`. De-duplication is on (`runId`, event, `seq`,
//! state), never on `seq` alone, and is reset when a turn's `lifecycle` `start` arrives (turns
//! in one session reuse the run id and restart their numbering). The turn ends with `chat`
//! `final` or `error`.

use std::sync::Arc;

use openphone_protocol::endpoint::RuntimeMessageParams;
use serde_json::Value;

use crate::config::OPENCLAW;
use crate::conn::lock;
use crate::inner::Inner;
pub use crate::turns::key_matches;

/// What a `chat` event means for the phone session.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapped {
    /// Text to append.
    Delta(String),
    /// The authoritative final text.
    Final(String),
    /// The turn failed.
    Error(String),
}

/// The text of a `chat` message object (`content[].text` joined).
pub fn message_text(message: Option<&Value>) -> String {
    let Some(message) = message else {
        return String::new();
    };
    if let Some(text) = message.get("text").and_then(Value::as_str) {
        return text.to_owned();
    }
    message
        .get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

/// Maps one `chat` payload (after de-duplication): `delta` → the increment (the whole text on
/// `replace`), `final` → the final text, `error` → the error message; other states → nothing.
pub fn map_chat(payload: &Value) -> Option<Mapped> {
    let state = payload.get("state").and_then(Value::as_str)?;
    match state {
        "delta" => {
            let replace = payload.get("replace").and_then(Value::as_bool) == Some(true);
            let text = if replace {
                message_text(payload.get("message"))
            } else {
                payload
                    .get("deltaText")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_default()
            };
            (!text.is_empty()).then_some(Mapped::Delta(text))
        }
        "final" => Some(Mapped::Final(message_text(payload.get("message")))),
        "error" => Some(Mapped::Error(
            payload
                .get("errorMessage")
                .and_then(Value::as_str)
                .unwrap_or("the OpenClaw run failed")
                .to_owned(),
        )),
        _ => None,
    }
}

impl Inner {
    pub(crate) fn subscribed_keys(&self) -> Vec<String> {
        lock(&self.turns).keys()
    }

    /// A `chat` or `agent` event from the gateway.
    pub(crate) fn on_stream(self: &Arc<Self>, event: &str, payload: &Value) {
        let Some(turn) = lock(&self.turns).admit(event, payload) else {
            return;
        };
        let Some(mapped) = map_chat(payload) else {
            return;
        };
        let (text, is_final, error) = match mapped {
            Mapped::Delta(text) => (text, false, None),
            Mapped::Final(text) => (text, true, None),
            Mapped::Error(message) => (message.clone(), true, Some(message)),
        };
        if is_final {
            lock(&self.turns).untrack(&turn.session_key);
        }
        let Some(manager) = self.manager.upgrade() else {
            return;
        };
        let runtime_session_id = payload
            .get("sessionKey")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let message = RuntimeMessageParams {
            phone_session_id: turn.phone_session_id.clone(),
            runtime_session_id,
            text,
            is_final,
            output: None,
            error,
            attention_id: Some(turn.attention_id.clone()),
        };
        if let Err(e) = manager.runtime_message(OPENCLAW, message) {
            tracing::debug!(error = %e, "an OpenClaw reply for a session that has ended");
        }
    }
}
