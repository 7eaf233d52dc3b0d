//! Session transcripts: the conversation of a phone session, kept durably so a follow-up in
//! the same session continues it and a restart loses nothing.
//!
//! One row per entry, numbered from 1 within its session (`seq`). The store does not read
//! the body: it is whatever JSON the runtime keeps per entry (the built-in runtime stores the
//! chat message it sent or received, and for tool calls the result's digest). The rows of a
//! session go when the session is pruned (a trigger of migration 8).

use rusqlite::{Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::rows::collect;
use crate::wire::{col, parse_json, to_json};

/// The longest role name accepted (`user`, `assistant`, `tool`, …).
pub const MAX_TRANSCRIPT_ROLE_CHARS: usize = 32;

/// One stored transcript entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// The phone session the entry belongs to.
    pub phone_session_id: String,
    /// Its position in the session, from 1, without gaps.
    pub seq: i64,
    /// Who spoke: `user`, `assistant`, `tool`, or a runtime's own label.
    pub role: String,
    /// The entry as the runtime stored it.
    pub body: Value,
    /// When it was appended (Unix ms, the caller's clock).
    pub created_at_ms: i64,
}

const OP_APPEND: &str = "session_transcripts.append";
const OP_READ: &str = "session_transcripts.read";

fn from_row(row: &Row<'_>) -> Result<TranscriptEntry> {
    let id: String = col(row, "phone_session_id", OP_READ)?;
    let body: String = col(row, "body_json", OP_READ)?;
    Ok(TranscriptEntry {
        seq: col(row, "seq", OP_READ)?,
        role: col(row, "role", OP_READ)?,
        body: parse_json(&body, OP_READ, &id)?,
        created_at_ms: col(row, "created_at_ms", OP_READ)?,
        phone_session_id: id,
    })
}

/// One transcript entry to append, its role checked (1 to [`MAX_TRANSCRIPT_ROLE_CHARS`]
/// characters of `a-z`, `0-9` and `_`) and its body encoded: backend-neutral, shared with the
/// PostgreSQL store.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct TranscriptAppend {
    pub phone_session_id: String,
    pub role: String,
    /// The body as stored (JSON text).
    pub body: String,
}

impl TranscriptAppend {
    /// The append, or [`StoreError::Invalid`] for a bad role.
    pub fn new(phone_session_id: &str, role: &str, body: &Value) -> Result<Self> {
        let valid = !role.is_empty()
            && role.chars().count() <= MAX_TRANSCRIPT_ROLE_CHARS
            && role
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(StoreError::Invalid {
                what: "transcript role",
                detail: format!(
                    "{role:?}: expected 1 to {MAX_TRANSCRIPT_ROLE_CHARS} characters of a-z, 0-9 \
                     and _"
                ),
            });
        }
        Ok(Self {
            phone_session_id: phone_session_id.to_owned(),
            role: role.to_owned(),
            body: to_json(body),
        })
    }

    /// The refusal when the session does not exist.
    #[must_use]
    pub fn no_session(&self) -> StoreError {
        StoreError::NotFound {
            table: "phone_sessions",
            id: self.phone_session_id.clone(),
        }
    }

    /// The entry as appended, numbered `seq`.
    pub fn entry(&self, seq: i64, now_ms: i64) -> Result<TranscriptEntry> {
        Ok(TranscriptEntry {
            phone_session_id: self.phone_session_id.clone(),
            seq,
            role: self.role.clone(),
            body: parse_json(&self.body, OP_APPEND, &self.phone_session_id)?,
            created_at_ms: now_ms,
        })
    }
}

/// Inserts one entry after the session's last and returns it; the session must exist.
fn append_in(
    tx: &rusqlite::Connection,
    new: &TranscriptAppend,
    now_ms: i64,
) -> Result<TranscriptEntry> {
    let TranscriptAppend {
        phone_session_id,
        role,
        body,
    } = new;
    let phone_session_id = phone_session_id.as_str();
    let exists: bool = tx
        .row_cached(
            "SELECT EXISTS (SELECT 1 FROM phone_sessions WHERE phone_session_id = ?1)",
            [phone_session_id],
            |row| row.get(0),
        )
        .ctx(OP_APPEND, phone_session_id)?;
    if !exists {
        return Err(new.no_session());
    }
    let seq: i64 = tx
        .row_cached(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM session_transcripts \
             WHERE phone_session_id = ?1",
            [phone_session_id],
            |row| row.get(0),
        )
        .ctx(OP_APPEND, phone_session_id)?;
    tx.exec_cached(
        "INSERT INTO session_transcripts (phone_session_id, seq, role, body_json, created_at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![phone_session_id, seq, role, body, now_ms],
    )
    .ctx(OP_APPEND, phone_session_id)?;
    new.entry(seq, now_ms)
}

impl SqliteStore {
    /// Appends one entry to a session's transcript and returns it with its `seq`. The session
    /// must exist ([`StoreError::NotFound`] otherwise); `role` is 1 to
    /// [`MAX_TRANSCRIPT_ROLE_CHARS`] characters of `a-z`, `0-9` and `_`. Durable on return.
    pub fn append_transcript(
        &self,
        phone_session_id: &str,
        role: &str,
        body: &Value,
        now_ms: i64,
    ) -> Result<TranscriptEntry> {
        let new = TranscriptAppend::new(phone_session_id, role, body)?;
        self.write(OP_APPEND, phone_session_id, move |tx| {
            append_in(tx, &new, now_ms)
        })
    }

    /// [`Store::append_transcript`](crate::SessionStore::append_transcript) for async callers: awaits the commit instead of blocking
    /// the thread.
    pub async fn append_transcript_async(
        &self,
        phone_session_id: &str,
        role: &str,
        body: &Value,
        now_ms: i64,
    ) -> Result<TranscriptEntry> {
        let new = TranscriptAppend::new(phone_session_id, role, body)?;
        self.write_async(OP_APPEND, phone_session_id, move |tx| {
            append_in(tx, &new, now_ms)
        })
        .await
    }

    /// A session's transcript, oldest first (empty for an unknown session).
    pub fn transcript(&self, phone_session_id: &str) -> Result<Vec<TranscriptEntry>> {
        collect(
            &self.conn(),
            OP_READ,
            "SELECT phone_session_id, seq, role, body_json, created_at_ms \
             FROM session_transcripts WHERE phone_session_id = ?1 ORDER BY seq",
            [phone_session_id],
            from_row,
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{Autonomy, NewPhoneSession, Store};
    use serde_json::json;

    fn session(store: &Store, id: &str) {
        store
            .create_session(
                &NewPhoneSession {
                    phone_session_id: id.into(),
                    runtime_kind: "builtin".into(),
                    runtime_session_id: id.into(),
                    attention_id: format!("attn-{id}"),
                    source: "chat".into(),
                    autonomy: Autonomy::AskBeforeAction,
                    summary: "hi".into(),
                },
                1,
            )
            .unwrap();
    }

    #[test]
    fn entries_are_numbered_per_session_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            session(&store, "a");
            session(&store, "b");
            let first = store
                .append_transcript("a", "user", &json!({"content": "hello"}), 10)
                .unwrap();
            assert_eq!(first.seq, 1);
            store
                .append_transcript("b", "user", &json!({"content": "other"}), 11)
                .unwrap();
            let second = store
                .append_transcript("a", "assistant", &json!({"content": "hi"}), 12)
                .unwrap();
            assert_eq!(second.seq, 2);
        }
        let store = Store::open(dir.path()).unwrap();
        let a = store.transcript("a").unwrap();
        assert_eq!(
            a.iter()
                .map(|e| (e.seq, e.role.as_str(), e.created_at_ms))
                .collect::<Vec<_>>(),
            [(1, "user", 10), (2, "assistant", 12)]
        );
        assert_eq!(a[1].body, json!({"content": "hi"}));
        assert_eq!(store.transcript("b").unwrap().len(), 1);
        assert!(store.transcript("nobody").unwrap().is_empty());
    }

    #[tokio::test]
    async fn unknown_sessions_and_bad_roles_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let err = store
            .append_transcript_async("ghost", "user", &json!({}), 1)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
        session(&store, "s");
        for role in ["", "User", "tool call", &"x".repeat(33)] {
            let err = store
                .append_transcript("s", role, &json!({}), 1)
                .unwrap_err();
            assert!(matches!(err, StoreError::Invalid { .. }), "{role:?}: {err}");
        }
        let entry = store
            .append_transcript_async("s", "tool", &json!({"ok": true}), 2)
            .await
            .unwrap();
        assert_eq!(entry.seq, 1);
    }

    #[test]
    fn pruning_a_session_drops_its_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..(crate::MIN_SESSIONS_RETAINED + 1) {
            session(&store, &format!("s{i:04}"));
        }
        store
            .append_transcript("s0000", "user", &json!({}), 1)
            .unwrap();
        assert_eq!(store.prune_sessions(0).unwrap(), 1);
        assert!(store.get_session("s0000").unwrap().is_none());
        assert!(store.transcript("s0000").unwrap().is_empty());
    }
}
