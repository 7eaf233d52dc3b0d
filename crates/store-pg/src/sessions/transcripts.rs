//! Session transcripts on PostgreSQL: one row per entry, numbered from 1 within its session
//! (`seq`), the body kept as the JSON text the runtime gave (the store does not read it). The
//! rows go with their session (`ON DELETE CASCADE`).
//!
//! Appends to one session from two daemons at once take the session's advisory lock first
//! (`xact_lock.rs`), so the second reads `MAX(seq)` after the first committed: numbers never
//! repeat or skip, and no one is aborted and retried (under SERIALIZABLE both read the same
//! `MAX(seq)` and one was aborted, which on a loaded machine could happen ten times in a row).

use openphone_store::{Result, StoreError, TranscriptAppend, TranscriptEntry};
use postgres::{Row, Transaction};
use serde_json::Value;

use crate::{PgContext, PgStore};

const OP_APPEND: &str = "session_transcripts.append";
const OP_READ: &str = "session_transcripts.read";

fn parse_body(text: &str, op: &'static str, id: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        op,
        id: id.to_owned(),
        detail: e.to_string(),
    })
}

fn from_row(row: &Row) -> Result<TranscriptEntry> {
    let id: String = row.try_get("phone_session_id").ctx(OP_READ, "")?;
    let body: String = row.try_get("body_json").ctx(OP_READ, &id)?;
    Ok(TranscriptEntry {
        seq: row.try_get("seq").ctx(OP_READ, &id)?,
        role: row.try_get("role").ctx(OP_READ, &id)?,
        body: parse_body(&body, OP_READ, &id)?,
        created_at_ms: row.try_get("created_at_ms").ctx(OP_READ, &id)?,
        phone_session_id: id,
    })
}

/// Inserts one entry after the session's last and returns it; the session must exist.
fn append_in(
    tx: &mut Transaction<'_>,
    new: &TranscriptAppend,
    now_ms: i64,
) -> Result<TranscriptEntry> {
    let TranscriptAppend {
        phone_session_id,
        role,
        body,
    } = new;
    let phone_session_id = phone_session_id.as_str();
    crate::xact_lock::lock_in_line(
        tx,
        OP_APPEND,
        phone_session_id,
        "transcript",
        &[phone_session_id],
    )?;
    let exists = tx
        .query_opt(
            "SELECT 1 FROM phone_sessions WHERE phone_session_id = $1",
            &[&phone_session_id],
        )
        .ctx(OP_APPEND, phone_session_id)?;
    if exists.is_none() {
        return Err(new.no_session());
    }
    let seq: i64 = tx
        .query_one(
            "INSERT INTO session_transcripts \
             (phone_session_id, seq, role, body_json, created_at_ms) \
             SELECT $1::TEXT, COALESCE(MAX(seq), 0) + 1, $2::TEXT, $3::TEXT, $4::BIGINT FROM session_transcripts \
             WHERE phone_session_id = $1 RETURNING seq",
            &[&phone_session_id, &role, &body, &now_ms],
        )
        .ctx(OP_APPEND, phone_session_id)?
        .try_get(0)
        .ctx(OP_APPEND, phone_session_id)?;
    new.entry(seq, now_ms)
}

/// `SessionStore::append_transcript`: durable on return.
pub(super) fn append(
    store: &PgStore,
    phone_session_id: &str,
    role: &str,
    body: &Value,
    now_ms: i64,
) -> Result<TranscriptEntry> {
    let new = TranscriptAppend::new(phone_session_id, role, body)?;
    store.write(OP_APPEND, phone_session_id, move |tx| {
        append_in(tx, &new, now_ms)
    })
}

/// `SessionStore::append_transcript_async`: awaits the commit instead of blocking.
pub(super) async fn append_async(
    store: &PgStore,
    phone_session_id: &str,
    role: &str,
    body: &Value,
    now_ms: i64,
) -> Result<TranscriptEntry> {
    let new = TranscriptAppend::new(phone_session_id, role, body)?;
    store
        .write_async(OP_APPEND, phone_session_id, move |tx| {
            append_in(tx, &new, now_ms)
        })
        .await
}

/// A session's transcript, oldest first (empty for an unknown session).
pub(super) fn read(store: &PgStore, phone_session_id: &str) -> Result<Vec<TranscriptEntry>> {
    let id = phone_session_id.to_owned();
    store.read(OP_READ, phone_session_id, move |client| {
        client
            .query(
                "SELECT phone_session_id, seq, role, body_json, created_at_ms \
                 FROM session_transcripts WHERE phone_session_id = $1 ORDER BY seq",
                &[&id],
            )
            .ctx(OP_READ, &id)?
            .iter()
            .map(from_row)
            .collect()
    })
}
