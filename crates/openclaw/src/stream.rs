//! The reply stream (`openclaw-node.md` §11): `chat` events of the sessions this phone asked
//! in become `runtime.message.delta` / `final` for the phone session.
//!
//! Events carry the canonical key (`openphone-x` → `agent:main:openphone-x`), so a tracked key
//! matches exactly or as `agent:<any>:<key>`. De-duplication is on (`runId`, event, `seq`,
//! state), never on `seq` alone, and is reset when a turn's `lifecycle` `start` arrives (turns
//! in one session reuse the run id and restart their numbering). The turn ends with `chat`
//! `final` or `error`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use openphone_protocol::endpoint::RuntimeMessageParams;
use serde_json::Value;

use crate::adapter::Inner;
use crate::config::OPENCLAW;
use crate::node::lock;

/// One phone session waiting for its reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Turn {
    pub(crate) session_key: String,
    pub(crate) phone_session_id: String,
    pub(crate) attention_id: String,
    seen: HashSet<(String, String, u64, String)>,
}

/// The sessions in flight, by the key they were sent with.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    by_key: HashMap<String, Turn>,
}

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

/// Whether an event's canonical key is the tracked `key`.
pub fn key_matches(event_key: &str, key: &str) -> bool {
    event_key == key
        || (event_key.starts_with("agent:")
            && event_key
                .splitn(3, ':')
                .nth(2)
                .is_some_and(|rest| rest == key))
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

impl Turns {
    pub(crate) fn track(&mut self, key: &str, phone_session_id: &str, attention_id: &str) {
        self.by_key.insert(
            key.to_owned(),
            Turn {
                session_key: key.to_owned(),
                phone_session_id: phone_session_id.to_owned(),
                attention_id: attention_id.to_owned(),
                seen: HashSet::new(),
            },
        );
    }

    pub(crate) fn untrack(&mut self, key: &str) -> Option<Turn> {
        self.by_key.remove(key)
    }

    /// Forgets the turn of a phone session; returns whether there was one.
    pub(crate) fn untrack_session(&mut self, phone_session_id: &str) -> bool {
        let before = self.by_key.len();
        self.by_key
            .retain(|_, t| t.phone_session_id != phone_session_id);
        self.by_key.len() != before
    }

    pub(crate) fn keys(&self) -> Vec<String> {
        self.by_key.keys().cloned().collect()
    }

    pub(crate) fn drain_all(&mut self) -> Vec<Turn> {
        self.by_key.drain().map(|(_, t)| t).collect()
    }

    fn find(&mut self, event_key: &str) -> Option<&mut Turn> {
        self.by_key
            .values_mut()
            .find(|t| key_matches(event_key, &t.session_key))
    }

    /// Whether this event is new for its turn (and records it). `lifecycle` `start` resets
    /// the turn's record. Returns the turn's identity when the event should be handled.
    pub(crate) fn admit(&mut self, event: &str, payload: &Value) -> Option<Turn> {
        let key = payload.get("sessionKey").and_then(Value::as_str)?;
        let turn = self.find(key)?;
        if event == "agent" {
            let start = payload.get("stream").and_then(Value::as_str) == Some("lifecycle")
                && payload.pointer("/data/phase").and_then(Value::as_str) == Some("start");
            if start {
                turn.seen.clear();
            }
            return None;
        }
        let run = payload
            .get("runId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let seq = payload.get("seq").and_then(Value::as_u64).unwrap_or(0);
        let state = payload
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        turn.seen
            .insert((run, event.to_owned(), seq, state))
            .then(|| turn.clone())
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
