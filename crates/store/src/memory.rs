//! Long-term memory with SQLite FTS5 full-text search.
//!
//! `memories` holds the rows; `memories_fts` is an external-content FTS5 index kept in step by
//! triggers. A search query is split into words (letters and digits); each word is quoted and
//! the words are OR-ed, so user text can never inject FTS5 syntax; results are ranked by
//! `bm25` (best first).

use rusqlite::{Connection, Row, params};
use serde::{Deserialize, Serialize};

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::wire::{col, sql_limit};

/// A stored memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    pub memory_id: i64,
    pub text: String,
    /// `preference`, `fact` or `standing_instruction` (the tool's `type`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Who or what it concerns; normally the user.
    pub subject: String,
    /// 0..=1 when given.
    pub confidence: Option<f64>,
    pub created_at_ms: i64,
}

/// What the caller supplies to save a memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMemory {
    pub text: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub subject: String,
    pub confidence: Option<f64>,
}

/// A search hit: higher `score` is a better match (0 for the no-query listing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryHit {
    #[serde(flatten)]
    pub memory: MemoryRecord,
    pub score: f64,
}

const COLUMNS: &str = "m.memory_id, m.text, m.kind, m.subject, m.confidence, m.created_at_ms";

fn from_row(row: &Row<'_>) -> Result<MemoryRecord> {
    const OP: &str = "memories.read";
    Ok(MemoryRecord {
        memory_id: col(row, "memory_id", OP)?,
        text: col(row, "text", OP)?,
        kind: col(row, "kind", OP)?,
        subject: col(row, "subject", OP)?,
        confidence: col(row, "confidence", OP)?,
        created_at_ms: col(row, "created_at_ms", OP)?,
    })
}

fn get_in(conn: &Connection, id: i64) -> Result<Option<MemoryRecord>> {
    const OP: &str = "memories.get";
    let sql = format!("SELECT {COLUMNS} FROM memories m WHERE m.memory_id = ?1");
    let mut stmt = conn.prepare(&sql).ctx(OP, &id.to_string())?;
    let mut rows = stmt.query([id]).ctx(OP, &id.to_string())?;
    match rows.next().ctx(OP, &id.to_string())? {
        Some(row) => Ok(Some(from_row(row)?)),
        None => Ok(None),
    }
}

/// The FTS5 match expression for free text: quoted words joined by OR; `None` when the text
/// has no words.
fn match_expression(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\""))
        .collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

impl SqliteStore {
    /// Saves a memory and returns it with its id.
    pub fn save_memory(&self, new: &NewMemory, now_ms: i64) -> Result<MemoryRecord> {
        const OP: &str = "memories.save";
        if new.text.trim().is_empty() {
            return Err(StoreError::Invalid {
                what: "memory text",
                detail: "empty".to_owned(),
            });
        }
        let new = new.clone();
        self.write(OP, "", move |tx| {
            tx.execute(
                "INSERT INTO memories (text, kind, subject, confidence, created_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![new.text, new.kind, new.subject, new.confidence, now_ms],
            )
            .ctx(OP, "")?;
            let id = tx.last_insert_rowid();
            get_in(tx, id)?.ok_or_else(|| StoreError::NotFound {
                table: "memories",
                id: id.to_string(),
            })
        })
    }

    /// One memory.
    pub fn get_memory(&self, memory_id: i64) -> Result<Option<MemoryRecord>> {
        get_in(&self.conn(), memory_id)
    }

    /// Deletes a memory; false when it did not exist.
    pub fn delete_memory(&self, memory_id: i64) -> Result<bool> {
        const OP: &str = "memories.delete";
        self.write(OP, &memory_id.to_string(), move |tx| {
            tx.execute("DELETE FROM memories WHERE memory_id = ?1", [memory_id])
                .map(|n| n > 0)
                .ctx(OP, &memory_id.to_string())
        })
    }

    /// Full-text search, best match first, at most `limit` hits. A query without words
    /// (`None`, empty, punctuation only) lists the most recent memories instead.
    pub fn search_memory(&self, query: Option<&str>, limit: usize) -> Result<Vec<MemoryHit>> {
        const OP: &str = "memories.search";
        let conn = self.conn();
        let limit = sql_limit(limit);
        let mut out = Vec::new();
        match query.and_then(match_expression) {
            Some(expr) => {
                let sql = format!(
                    "SELECT {COLUMNS}, bm25(memories_fts) AS rank FROM memories_fts \
                     JOIN memories m ON m.memory_id = memories_fts.rowid \
                     WHERE memories_fts MATCH ?1 ORDER BY rank, m.memory_id DESC LIMIT ?2"
                );
                let mut stmt = conn.prepare(&sql).ctx(OP, &expr)?;
                let mut rows = stmt.query(params![expr, limit]).ctx(OP, &expr)?;
                while let Some(row) = rows.next().ctx(OP, &expr)? {
                    let rank: f64 = col(row, "rank", OP)?;
                    out.push(MemoryHit {
                        memory: from_row(row)?,
                        score: -rank,
                    });
                }
            }
            None => {
                let sql = format!(
                    "SELECT {COLUMNS} FROM memories m \
                     ORDER BY m.created_at_ms DESC, m.memory_id DESC LIMIT ?1"
                );
                let mut stmt = conn.prepare(&sql).ctx(OP, "")?;
                let mut rows = stmt.query([limit]).ctx(OP, "")?;
                while let Some(row) = rows.next().ctx(OP, "")? {
                    out.push(MemoryHit {
                        memory: from_row(row)?,
                        score: 0.0,
                    });
                }
            }
        }
        Ok(out)
    }
}
