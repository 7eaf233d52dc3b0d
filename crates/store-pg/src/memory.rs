//! [`MemoryStore`] on PostgreSQL: long-term memory with full-text search (`schema/memory.sql`),
//! a port of `openphone-store`'s `memory.rs` (SQLite FTS5).
//!
//! # Words, on both sides
//!
//! The store splits text into words itself, by the rule the SQLite store applies to queries
//! (runs of letters and digits, any script), lower-cased, and hands PostgreSQL the result as a
//! `tsvector` literal (`'tea':1,5 'green':4`) on save and a `tsquery` literal (`'tea' | 'green'`)
//! on search. So:
//! - any language works and no server setting (locale, `default_text_search_config`) changes
//!   what a word is: this is the `simple` configuration's behaviour (no stemming, no stop
//!   words) without its parser, which would keep `e-mail`, `3.5` or `a@b.org` whole where
//!   FTS5's `unicode61` tokenizer, and a query, split them;
//! - user text never reaches a query parser (`websearch_to_tsquery` would read `or`, `-` and
//!   quotes as operators; FTS5 syntax is harmless for the same reason on SQLite), and the words
//!   are OR-ed as on SQLite;
//! - the index is a GIN index on the `search` column.
//!
//! # Ranking: BM25, as SQLite's
//!
//! FTS5's `bm25()` is computed here in SQL, with its constants and its rules, so both backends
//! rank alike and give the same scores: for each query word `q` (repeats count again),
//! `idf(q) · f·(k1+1) / (f + k1·(1 − b + b·|D|/avgdl))` summed, `k1 = 1.2`, `b = 0.75`, where
//! `f` is how often `q` occurs in the memory (its positions in `search`), `|D|` the memory's
//! words (`words`), `avgdl` the average over all memories, and `idf(q) = ln((N − n + 0.5) /
//! (n + 0.5))` (10⁻⁶ when not positive) with `N` memories of which `n` hold `q`. Higher is
//! better (SQLite's `bm25()` negated, as the SQLite store reports it); ties go to the newest id.
//! `ts_rank` would not do: it knows neither a word's rarity nor a memory's length, so rare
//! words and short memories would not come first as they do on SQLite.
//!
//! Cost: `N` and `avgdl` are one scan of `memories` per search (FTS5 keeps them in its index),
//! `n` one GIN lookup per word, the rest touches only the matching rows. Memories are few
//! (what an agent chose to remember); a store with very many would keep the totals in a row.
//!
//! Differences that stay: FTS5's `unicode61` also folds diacritics (`café` finds `cafe`); here
//! they are kept (`café` finds only `café`). A word repeated more than 256 times in one memory
//! counts 256 times (PostgreSQL keeps 256 positions per word).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use openphone_store::{MemoryHit, MemoryRecord, MemoryStore, NewMemory, Result, StoreError};
use postgres::types::FromSql;
use postgres::{GenericClient, Row};

use crate::PgStore;
use crate::error::PgContext;

const COLUMNS: &str = "m.memory_id, m.text, m.kind, m.subject, m.confidence, m.created_at_ms";

/// PostgreSQL's limits on a `tsvector`: a lexeme's bytes (`MAXSTRLEN` is 2047), the positions
/// kept per lexeme (`MAXNUMPOS`) and the largest position (`MAXENTRYPOS - 1`). Longer words are
/// left out of the index, as `to_tsvector` leaves them out; later positions are dropped or
/// clamped, as the server would do itself.
const MAX_WORD_BYTES: usize = 2047;
const MAX_POSITIONS: usize = 256;
const MAX_POSITION: usize = 16_383;

fn col<'a, T: FromSql<'a>>(row: &'a Row, name: &str, op: &'static str) -> Result<T> {
    row.try_get(name).ctx(op, "")
}

fn from_row(row: &Row) -> Result<MemoryRecord> {
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

fn get_in(conn: &mut impl GenericClient, id: i64) -> Result<Option<MemoryRecord>> {
    const OP: &str = "memories.get";
    let sql = format!("SELECT {COLUMNS} FROM memories m WHERE m.memory_id = $1");
    conn.query_opt(&sql, &[&id])
        .ctx(OP, &id.to_string())?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// The words of `text`: runs of letters and digits, lower-cased (a query's words on SQLite).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A lexeme quoted for `tsvector`/`tsquery` input. Words hold only letters and digits, so this
/// never has anything to escape; it escapes anyway rather than trust that.
fn quoted(word: &str) -> String {
    let mut out = String::with_capacity(word.len() + 2);
    out.push('\'');
    for c in word.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// The index entry of a memory: the words of its text, kind and subject with their positions,
/// as a `tsvector` literal, and how many words there were.
fn search_vector(new: &NewMemory) -> (String, i32) {
    let mut positions: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let all = words(&new.text)
        .chain(words(&new.kind))
        .chain(words(&new.subject));
    let mut count = 0usize;
    for (i, word) in all.enumerate() {
        count = i + 1;
        if word.len() > MAX_WORD_BYTES {
            continue;
        }
        let at = (i + 1).min(MAX_POSITION);
        let list = positions.entry(word).or_default();
        if list.len() < MAX_POSITIONS && list.last() != Some(&at) {
            list.push(at);
        }
    }
    let mut out = String::new();
    for (word, at) in positions {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quoted(&word));
        for (n, p) in at.iter().enumerate() {
            let sep = if n == 0 { ':' } else { ',' };
            let _ = write!(out, "{sep}{p}");
        }
    }
    (out, i32::try_from(count).unwrap_or(i32::MAX))
}

/// A search for free text: its words (repeats kept: BM25 counts them again), each as a
/// `tsquery` literal, and all of them OR-ed.
#[derive(Debug, PartialEq)]
struct Search {
    words: Vec<String>,
    lexemes: Vec<String>,
    any: String,
}

/// The search for `query`; `None` when it has no words. Words too long to be indexed can match
/// nothing and are left out (a search of no words when every word was such a word).
fn search_of(query: &str) -> Option<Search> {
    let all: Vec<String> = words(query).collect();
    if all.is_empty() {
        return None;
    }
    let words: Vec<String> = all
        .into_iter()
        .filter(|w| w.len() <= MAX_WORD_BYTES)
        .collect();
    let lexemes: Vec<String> = words.iter().map(|w| quoted(w)).collect();
    let any = lexemes.join(" | ");
    Some(Search {
        words,
        lexemes,
        any,
    })
}

/// BM25 over the memories holding any of the words (`$1` words, `$2` each as a `tsquery`, `$3`
/// all OR-ed, `$4` the limit); see the module docs. Every operation is FTS5's, in FTS5's order
/// (its `fts5Bm25Function`: the same operands, the words summed in query order), in `float8`,
/// so the scores are SQLite's to the last bit and ties fall alike.
const BM25_SEARCH: &str = "\
WITH terms AS (
    SELECT t.word, t.ord, CAST(t.lexeme AS tsquery) AS q
    FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(word, lexeme, ord)
), totals AS (
    SELECT count(*)::float8 AS n,
        COALESCE(sum(words), 0)::float8 / NULLIF(count(*), 0)::float8 AS avgdl
    FROM memories
), idf AS (
    SELECT terms.word, terms.ord,
        ln((totals.n - k.hits + 0.5::float8) / (k.hits + 0.5::float8)) AS raw
    FROM terms CROSS JOIN totals
    CROSS JOIN LATERAL (
        SELECT count(*)::float8 AS hits FROM memories h WHERE h.search @@ terms.q
    ) k
), scored AS (
    SELECT m.memory_id,
        SUM(
            (CASE WHEN idf.raw > 0::float8 THEN idf.raw ELSE 1e-6::float8 END)
            * ((f.f * (1.2::float8 + 1.0::float8))
               / (f.f + 1.2::float8 * (1::float8 - 0.75::float8
                  + 0.75::float8 * m.words::float8 / totals.avgdl)))
            ORDER BY idf.ord
        ) AS score
    FROM memories m
    CROSS JOIN totals
    CROSS JOIN LATERAL unnest(m.search) AS u(lexeme, positions, weights)
    CROSS JOIN LATERAL (SELECT cardinality(u.positions)::float8 AS f) f
    JOIN idf ON idf.word = u.lexeme
    WHERE m.search @@ CAST($3::text AS tsquery)
    GROUP BY m.memory_id
)
SELECT m.memory_id, m.text, m.kind, m.subject, m.confidence, m.created_at_ms,
    COALESCE(s.score, 0)::float8 AS rank
FROM scored s JOIN memories m ON m.memory_id = s.memory_id
ORDER BY rank DESC, m.memory_id DESC
LIMIT $4";

impl MemoryStore for PgStore {
    fn save_memory(&self, new: &NewMemory, now_ms: i64) -> Result<MemoryRecord> {
        const OP: &str = "memories.save";
        if new.text.trim().is_empty() {
            return Err(StoreError::Invalid {
                what: "memory text",
                detail: "empty".to_owned(),
            });
        }
        let new = new.clone();
        let (vector, count) = search_vector(&new);
        self.write(OP, "", move |tx| {
            let sql = format!(
                "INSERT INTO memories AS m \
                 (text, kind, subject, confidence, created_at_ms, search, words) \
                 VALUES ($1, $2, $3, $4, $5, CAST($6::text AS tsvector), $7) RETURNING {COLUMNS}"
            );
            let row = tx
                .query_one(
                    &sql,
                    &[
                        &new.text,
                        &new.kind,
                        &new.subject,
                        &new.confidence,
                        &now_ms,
                        &vector,
                        &count,
                    ],
                )
                .ctx(OP, "")?;
            from_row(&row)
        })
    }

    fn get_memory(&self, memory_id: i64) -> Result<Option<MemoryRecord>> {
        self.read("memories.get", &memory_id.to_string(), move |conn| {
            get_in(conn, memory_id)
        })
    }

    fn delete_memory(&self, memory_id: i64) -> Result<bool> {
        const OP: &str = "memories.delete";
        self.write(OP, &memory_id.to_string(), move |tx| {
            tx.execute("DELETE FROM memories WHERE memory_id = $1", &[&memory_id])
                .map(|n| n > 0)
                .ctx(OP, &memory_id.to_string())
        })
    }

    fn search_memory(&self, query: Option<&str>, limit: usize) -> Result<Vec<MemoryHit>> {
        const OP: &str = "memories.search";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let search = query.and_then(search_of);
        self.read(OP, "", move |conn| {
            let mut out = Vec::new();
            match search {
                Some(search) if search.words.is_empty() => {}
                Some(Search {
                    words,
                    lexemes,
                    any,
                }) => {
                    let rows = conn
                        .query(BM25_SEARCH, &[&words, &lexemes, &any, &limit])
                        .ctx(OP, &any)?;
                    for row in rows {
                        out.push(MemoryHit {
                            score: col(&row, "rank", OP)?,
                            memory: from_row(&row)?,
                        });
                    }
                }
                None => {
                    let sql = format!(
                        "SELECT {COLUMNS} FROM memories m \
                         ORDER BY m.created_at_ms DESC, m.memory_id DESC LIMIT $1"
                    );
                    for row in conn.query(&sql, &[&limit]).ctx(OP, "")? {
                        out.push(MemoryHit {
                            memory: from_row(&row)?,
                            score: 0.0,
                        });
                    }
                }
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(text: &str, kind: &str, subject: &str) -> NewMemory {
        NewMemory {
            text: text.to_owned(),
            kind: kind.to_owned(),
            subject: subject.to_owned(),
            confidence: None,
        }
    }

    #[test]
    fn vector_holds_every_word_of_every_column_with_positions() {
        assert_eq!(
            search_vector(&memory("Tea, tea: GREEN tea", "preference", "user")),
            (
                "'green':3 'preference':5 'tea':1,2,4 'user':6".to_owned(),
                6
            )
        );
        assert_eq!(
            search_vector(&memory("café e-mail 3.5 Ωmega", "fact", "")),
            (
                "'3':4 '5':5 'café':1 'e':2 'fact':7 'mail':3 'ωmega':6".to_owned(),
                7
            )
        );
    }

    #[test]
    fn vector_keeps_within_postgres_limits() {
        let long = "x".repeat(MAX_WORD_BYTES + 1);
        let many = "w ".repeat(20_000);
        let (v, count) = search_vector(&memory(&format!("{long} {many}"), "fact", "u"));
        assert_eq!(count, 20_003, "every word counts for BM25, indexed or not");
        assert!(!v.contains(&long));
        let w = v.split(' ').find(|l| l.starts_with("'w'")).unwrap();
        assert_eq!(w.split(',').count(), MAX_POSITIONS);
        let f = v.split(' ').find(|l| l.starts_with("'fact'")).unwrap();
        assert_eq!(f, "'fact':16383");
    }

    #[test]
    fn query_is_words_or_ed_and_never_syntax() {
        let any = |q: &str| search_of(q).map(|s| s.any);
        assert_eq!(
            any("lisbon OR \"coffee\" AND (NEAR* lisbon").as_deref(),
            Some("'lisbon' | 'or' | 'coffee' | 'and' | 'near' | 'lisbon'")
        );
        assert_eq!(search_of("  ?! "), None);
        assert_eq!(
            search_of("it's"),
            Some(Search {
                words: vec!["it".to_owned(), "s".to_owned()],
                lexemes: vec!["'it'".to_owned(), "'s'".to_owned()],
                any: "'it' | 's'".to_owned(),
            })
        );
        assert_eq!(any(&"y".repeat(MAX_WORD_BYTES + 1)).as_deref(), Some(""));
        assert_eq!(quoted("a'b\\"), "'a''b\\\\'");
    }
}
