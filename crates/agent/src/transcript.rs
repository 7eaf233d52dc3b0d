//! The durable conversation of a phone session: what is stored per entry, and how a run
//! reads it back.
//!
//! Each entry's body is `{"message": <the chat message as sent on the wire>, …}` with, for a
//! tool result, the command, request id, status and the result's digest (the same
//! `sha256:` digest the audit records), so a transcript can be matched to the audit log.
//! Entries with role `status` record how a run ended; they are not sent to the model.

use openphone_model::Message;
use openphone_store::TranscriptEntry;
use serde_json::{Value, json};

/// The role of the entries that record how a run ended.
pub const STATUS_ROLE: &str = "status";

/// At most this many earlier messages are sent back to the model (the oldest are left out,
/// cutting only before a user message so no tool result loses its call).
pub const MAX_HISTORY_MESSAGES: usize = 200;

/// The store role of a message.
pub fn role_of(message: &Message) -> &'static str {
    match message {
        Message::System { .. } => "system",
        Message::User { .. } => "user",
        Message::Assistant { .. } => "assistant",
        Message::Tool { .. } => "tool",
    }
}

/// The body stored for `message`, with `meta` fields beside it.
pub fn body(message: &Message, meta: Value) -> Value {
    let mut body = match meta {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    body.insert(
        "message".into(),
        serde_json::to_value(message).unwrap_or(Value::Null),
    );
    Value::Object(body)
}

/// The body of a run's outcome.
pub fn outcome(outcome: &str, reason: Option<&str>, turns: u32, tool_calls: u32) -> Value {
    json!({"outcome": outcome, "reason": reason, "turns": turns, "tool_calls": tool_calls})
}

/// A stored entry that cannot be read back as a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transcript entry {seq} of {phone_session_id} cannot be read: {detail}")]
pub struct UnreadableEntry {
    /// The session.
    pub phone_session_id: String,
    /// The entry.
    pub seq: i64,
    /// What is wrong.
    pub detail: String,
}

/// The messages of a stored transcript, oldest first, at most [`MAX_HISTORY_MESSAGES`].
pub fn messages(entries: &[TranscriptEntry]) -> Result<Vec<Message>, UnreadableEntry> {
    let mut out = Vec::new();
    for entry in entries {
        if entry.role == STATUS_ROLE {
            continue;
        }
        let unreadable = |detail: String| UnreadableEntry {
            phone_session_id: entry.phone_session_id.clone(),
            seq: entry.seq,
            detail,
        };
        let message = entry
            .body
            .get("message")
            .ok_or_else(|| unreadable("no message".to_owned()))?;
        let message: Message =
            serde_json::from_value(message.clone()).map_err(|e| unreadable(e.to_string()))?;
        out.push(message);
    }
    if out.len() > MAX_HISTORY_MESSAGES {
        let from = out.len() - MAX_HISTORY_MESSAGES;
        let start = out[from..]
            .iter()
            .position(|m| matches!(m, Message::User { .. }))
            .map_or(out.len(), |at| from + at);
        out.drain(..start);
    }
    Ok(out)
}

/// How many tool results the messages hold (the next tool call's number is this plus one).
pub fn tool_results(messages: &[Message]) -> usize {
    messages
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .count()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(seq: i64, role: &str, body: Value) -> TranscriptEntry {
        TranscriptEntry {
            phone_session_id: "p".into(),
            seq,
            role: role.into(),
            body,
            created_at_ms: seq,
        }
    }

    #[test]
    fn messages_round_trip_and_outcomes_are_skipped() {
        let user = Message::user("hi");
        let tool = Message::tool("call_1", "ok");
        let entries = vec![
            entry(1, "user", body(&user, json!({"attention_id": "a"}))),
            entry(2, "tool", body(&tool, json!({"request_id": "r"}))),
            entry(3, STATUS_ROLE, outcome("completed", None, 1, 1)),
        ];
        assert_eq!(messages(&entries).unwrap(), [user, tool]);
        let bad = vec![entry(4, "user", json!({"message": {"role": "robot"}}))];
        let error = messages(&bad).unwrap_err();
        assert_eq!(error.seq, 4);
    }

    #[test]
    fn long_histories_start_at_a_user_message() {
        let mut entries = Vec::new();
        for i in 0..150 {
            entries.push(entry(
                i * 2,
                "user",
                body(&Message::user(format!("q{i}")), json!({})),
            ));
            entries.push(entry(
                i * 2 + 1,
                "assistant",
                body(&Message::assistant(format!("a{i}")), json!({})),
            ));
        }
        let kept = messages(&entries).unwrap();
        assert_eq!(kept.len(), MAX_HISTORY_MESSAGES);
        assert_eq!(kept[0], Message::user("q50"));
    }
}
