//! The phone sessions waiting for their reply ([`Turns`]), by the key they were sent with, and
//! which `chat` events belong to which (`openclaw-node.md` §11): a tracked key matches
//! exactly or as `agent:<any>:<key>`; de-duplication on (`runId`, event, `seq`, state), reset
//! at a turn's `lifecycle` `start`. What an event means is `stream.rs`.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

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

/// Whether an event's canonical key is the tracked `key`.
pub fn key_matches(event_key: &str, key: &str) -> bool {
    event_key == key
        || (event_key.starts_with("agent:")
            && event_key
                .splitn(3, ':')
                .nth(2)
                .is_some_and(|rest| rest == key))
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
