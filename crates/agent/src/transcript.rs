//! The durable conversation of a phone session: what is stored per entry, and how a run
//! reads it back.
//!
//! Each entry's body is `{"message": <the chat message as sent on the wire>, …}` with, for a
//! tool result, the command, request id, status and the result's digest (the same
//! `sha256:` digest the audit records), so a transcript can be matched to the audit log.
//! Entries with role `status` record how a run ended; they are not sent to the model.

use openphone_model::{Content, ContentPart, Message};
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

/// The text that stands in for an image in the stored transcript and in later turns.
pub const IMAGE_PLACEHOLDER: &str = "[an image was shown here; it is not kept]";

/// The longest first line kept when a tool result's body is left out (characters).
const SHORT_LINE_CHARS: usize = 200;

/// One message of the history, with the one-line form that stands in for it when the history
/// is over its budget (tool results only).
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// The message as sent to the model.
    pub message: Message,
    /// For a tool result: its first line and the tool, status and digest of the result,
    /// without the body. `None` for other messages.
    pub short: Option<String>,
}

impl Kept {
    /// A message with its transcript metadata (`tool`, `status`, `result_digest`).
    pub fn new(message: Message, meta: &Value) -> Kept {
        let short = match &message {
            Message::Tool { content, .. } => {
                let first = content.lines().next().unwrap_or_default();
                let text = meta.get("tool").and_then(Value::as_str);
                let tool = text.unwrap_or("an unknown tool");
                let status = meta
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                let digest = match meta.get("result_digest").and_then(Value::as_str) {
                    Some(digest) => format!(", result {digest}"),
                    None => String::new(),
                };
                let short = format!(
                    "{} [The body of this earlier result is left out to save space: tool {tool}, \
                     status {status}{digest}.]",
                    openphone_core::summary::cut(first, SHORT_LINE_CHARS)
                );
                (short.chars().count() < content.chars().count()).then_some(short)
            }
            _ => None,
        };
        Kept { message, short }
    }
}

/// The history of a stored transcript, oldest first, at most [`MAX_HISTORY_MESSAGES`]
/// messages. Outcomes and the user messages of follow-ups that never ran are left out.
pub fn history(entries: &[TranscriptEntry]) -> Result<Vec<Kept>, UnreadableEntry> {
    let mut out = Vec::new();
    for entry in entries {
        if entry.role == STATUS_ROLE || entry.body.get("not_run") == Some(&Value::Bool(true)) {
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
        out.push(Kept::new(message, &entry.body));
    }
    if out.len() > MAX_HISTORY_MESSAGES {
        let from = out.len() - MAX_HISTORY_MESSAGES;
        let start = out[from..]
            .iter()
            .position(|m| matches!(m.message, Message::User { .. }))
            .map_or(out.len(), |at| from + at);
        out.drain(..start);
    }
    Ok(out)
}

/// The messages of a stored transcript, oldest first, at most [`MAX_HISTORY_MESSAGES`]
/// (see [`history`]).
pub fn messages(entries: &[TranscriptEntry]) -> Result<Vec<Message>, UnreadableEntry> {
    Ok(history(entries)?.into_iter().map(|k| k.message).collect())
}

/// The number of the next tool request of a session (`builtin-<session>-<n>`), from the whole
/// stored transcript, never a trimmed view: one more than the highest number stored, and more
/// than the number of tool results ever stored, so a request id is never used twice.
pub fn next_request(entries: &[TranscriptEntry], phone_session_id: &str) -> u64 {
    let prefix = format!("builtin-{phone_session_id}-");
    let mut highest = 0u64;
    let mut results = 0u64;
    for entry in entries.iter().filter(|e| e.role == "tool") {
        results += 1;
        let number = entry
            .body
            .get("request_id")
            .and_then(Value::as_str)
            .and_then(|id| id.strip_prefix(&prefix))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(number) = number {
            highest = highest.max(number);
        }
    }
    highest.max(results).saturating_add(1)
}

/// `message` with every image part replaced by [`IMAGE_PLACEHOLDER`].
pub fn without_images(message: &Message) -> Message {
    match message {
        Message::User {
            content: Content::Parts(parts),
        } => Message::user_parts(
            parts
                .iter()
                .map(|part| match part {
                    ContentPart::ImageUrl { .. } => ContentPart::text(IMAGE_PLACEHOLDER),
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether `message` carries an image.
pub fn has_images(message: &Message) -> bool {
    matches!(message, Message::User { content } if content.has_images())
}

/// The size of a message against the history budget: the characters of its text, tool
/// calls and ids. An image counts as its placeholder (its bytes are not text the budget is
/// about).
pub fn chars(message: &Message) -> usize {
    let text = |s: &str| s.chars().count();
    match message {
        Message::System { content } => text(content),
        Message::User {
            content: Content::Text(content),
        } => text(content),
        Message::User {
            content: Content::Parts(parts),
        } => parts
            .iter()
            .map(|part| match part {
                ContentPart::Text { text: t } => text(t),
                ContentPart::ImageUrl { .. } => text(IMAGE_PLACEHOLDER),
            })
            .sum(),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            content.as_deref().map_or(0, text)
                + tool_calls
                    .iter()
                    .map(|c| text(&c.id) + text(&c.name) + text(&c.arguments))
                    .sum::<usize>()
        }
        Message::Tool {
            tool_call_id,
            content,
        } => text(tool_call_id) + text(content),
    }
}

/// The messages to send for `history` within `budget` characters (see [`chars`]).
///
/// When the history is over the budget, the bodies of the oldest tool results the model has
/// already answered are replaced by their one-line form first, oldest first; if that is not
/// enough, the oldest whole exchanges are left out, cutting only before a user's own message
/// (so every tool result keeps the call it answers and the history never starts with a tool
/// result). Nothing from `keep_from` on is left out (the current run's opening message and
/// what follows it); when even that is over the budget it is sent as it is.
pub fn fit(history: &[Kept], budget: usize, keep_from: usize) -> Vec<Message> {
    let mut out: Vec<Message> = history.iter().map(|k| k.message.clone()).collect();
    let mut sizes: Vec<usize> = out.iter().map(chars).collect();
    let mut total: usize = sizes.iter().sum();
    if total <= budget {
        return out;
    }
    // Results after the last model turn have not been read yet: never shortened.
    let answered = out
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
        .unwrap_or(0);
    for (at, kept) in history.iter().enumerate().take(answered) {
        if total <= budget {
            break;
        }
        if let (Message::Tool { tool_call_id, .. }, Some(short)) = (&kept.message, &kept.short) {
            let message = Message::tool(tool_call_id.clone(), short.clone());
            let size = chars(&message);
            total = total - sizes[at] + size;
            sizes[at] = size;
            out[at] = message;
        }
    }
    if total <= budget {
        return out;
    }
    let keep_from = keep_from.min(out.len());
    let mut cut = 0;
    let mut dropped = 0;
    for at in 1..=keep_from {
        dropped += sizes[at - 1];
        let opens_exchange = at == keep_from
            || matches!(
                &out[at],
                Message::User {
                    content: Content::Text(_)
                }
            );
        if opens_exchange {
            cut = at;
            if total - dropped <= budget {
                break;
            }
        }
    }
    out.drain(..cut);
    out
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

    fn call(id: &str) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: vec![openphone_model::ToolCall {
                id: id.into(),
                name: "contacts_search".into(),
                arguments: "{}".into(),
            }],
        }
    }

    fn result(id: &str, size: usize) -> Kept {
        Kept::new(
            Message::tool(
                id,
                format!("contacts_search ran. Its result:\n{}", "x".repeat(size)),
            ),
            &json!({"tool": "openphone.contacts.search", "status": "ok", "result_digest": "sha256:ab"}),
        )
    }

    fn plain(message: Message) -> Kept {
        Kept::new(message, &json!({}))
    }

    /// Two exchanges with a 1 000-character result each, then the current run's question.
    fn conversation() -> Vec<Kept> {
        vec![
            plain(Message::user("one")),
            plain(call("c1")),
            result("c1", 1000),
            plain(Message::assistant("first")),
            plain(Message::user("two")),
            plain(call("c2")),
            result("c2", 1000),
            plain(Message::assistant("second")),
            plain(Message::user("three")),
        ]
    }

    fn total(messages: &[Message]) -> usize {
        messages.iter().map(chars).sum()
    }

    #[test]
    fn a_history_within_its_budget_is_sent_as_it_is() {
        let history = conversation();
        let all: Vec<Message> = history.iter().map(|k| k.message.clone()).collect();
        assert_eq!(fit(&history, 10_000, 8), all);
    }

    #[test]
    fn the_oldest_results_are_shortened_first() {
        let history = conversation();
        let full = total(&fit(&history, usize::MAX, 8));
        // Room for one full result, not two.
        let sent = fit(&history, full - 500, 8);
        assert_eq!(sent.len(), history.len(), "nothing is dropped");
        let Message::Tool { content, .. } = &sent[2] else {
            panic!("{:?}", sent[2]);
        };
        assert!(
            content.starts_with("contacts_search ran. Its result: [The body"),
            "{content}"
        );
        assert!(content.contains("status ok, result sha256:ab"), "{content}");
        assert_eq!(sent[6], history[6].message, "the newer result is whole");
        assert!(total(&sent) <= full - 500);
    }

    #[test]
    fn then_the_oldest_exchanges_are_dropped_at_a_user_message() {
        let history = conversation();
        let sent = fit(&history, 200, 8);
        // Both results shortened were still too much: the first exchange goes.
        assert_eq!(sent[0], Message::user("two"));
        assert_eq!(sent.last(), Some(&Message::user("three")));
        assert!(total(&sent) <= 200, "{}", total(&sent));
        // Never past the current run's start, even over the budget.
        let sent = fit(&history, 1, 8);
        assert_eq!(sent, [Message::user("three")]);
    }

    #[test]
    fn results_not_yet_read_are_never_shortened() {
        let mut history = conversation();
        history.push(plain(call("c3")));
        history.push(result("c3", 1000));
        let sent = fit(&history, 1, 8);
        assert_eq!(sent[0], Message::user("three"));
        assert_eq!(
            sent[2], history[10].message,
            "the model has not seen it yet"
        );
    }

    #[test]
    fn request_numbers_come_from_the_whole_transcript() {
        let tool = |seq, id: &str| {
            entry(
                seq,
                "tool",
                body(&Message::tool("c", "ok"), json!({"request_id": id})),
            )
        };
        assert_eq!(next_request(&[], "p"), 1);
        let entries = vec![tool(1, "builtin-p-1"), tool(2, "builtin-p-7"), tool(3, "x")];
        assert_eq!(next_request(&entries, "p"), 8);
        // Results without a request id (an unknown tool) still count.
        let entries = vec![tool(1, "builtin-p-1"), tool(2, "-"), tool(3, "-")];
        assert_eq!(next_request(&entries, "p"), 4);
    }

    #[test]
    fn follow_ups_that_never_ran_are_not_history() {
        let entries = vec![
            entry(1, "user", body(&Message::user("hi"), json!({}))),
            entry(
                2,
                "user",
                body(&Message::user("late"), json!({"not_run": true})),
            ),
        ];
        assert_eq!(messages(&entries).unwrap(), [Message::user("hi")]);
    }
}
