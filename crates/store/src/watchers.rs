//! Durable watcher records. The store keeps what was asked for and whether it is active; the
//! watcher engine that evaluates them is a later layer.

use rusqlite::{Connection, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Store;
use crate::error::{Result, SqlContext, StoreError};
use crate::wire::{col, parse_enum, parse_json, sql_limit, to_json, wire_enum};

wire_enum!(
    /// Watcher state.
    WatcherState {
        Active = "active",
        Stopped = "stopped",
    }
);

/// A stored watcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatcherRecord {
    pub watcher_id: i64,
    /// The runtime that created it.
    pub runtime: String,
    /// Shown to the user.
    pub title: String,
    /// Trigger source (`message`, `call`, `notification`, `web`, `screen`, `time`, …).
    pub source: String,
    /// The creation params as given (without `reason` and `_`-keys).
    pub params: Value,
    pub state: WatcherState,
    pub created_at_ms: i64,
    pub stopped_at_ms: Option<i64>,
}

/// What the caller supplies to create a watcher: the `watchers.create` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewWatcher {
    pub runtime: String,
    pub params: Value,
}

/// Which watchers [`Store::stop_watchers`] ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatcherSelector {
    Id(i64),
    /// Active watchers whose title, source or params contain the text (case-insensitive).
    Query(String),
    All,
}

const COLUMNS: &str =
    "watcher_id, runtime, title, source, params_json, state, created_at_ms, stopped_at_ms";

fn from_row(row: &Row<'_>) -> Result<WatcherRecord> {
    const OP: &str = "watchers.read";
    let id: i64 = col(row, "watcher_id", OP)?;
    let params: String = col(row, "params_json", OP)?;
    let state: String = col(row, "state", OP)?;
    Ok(WatcherRecord {
        watcher_id: id,
        runtime: col(row, "runtime", OP)?,
        title: col(row, "title", OP)?,
        source: col(row, "source", OP)?,
        params: parse_json(&params, OP, &id.to_string())?,
        state: parse_enum(WatcherState::parse, &state, OP, &id.to_string())?,
        created_at_ms: col(row, "created_at_ms", OP)?,
        stopped_at_ms: col(row, "stopped_at_ms", OP)?,
    })
}

fn query(
    conn: &Connection,
    op: &'static str,
    where_sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<WatcherRecord>> {
    let sql = format!("SELECT {COLUMNS} FROM watchers {where_sql}");
    crate::rows::collect(conn, op, &sql, args, from_row)
}

fn text_field<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The source of a watcher: `source`, else mapped from the legacy `type`, else `unknown`.
fn derive_source(params: &Value) -> String {
    if let Some(source) = text_field(params, "source") {
        return source.to_lowercase();
    }
    match text_field(params, "type") {
        Some("message_reply") => "message".to_owned(),
        Some("call_back") => "call".to_owned(),
        Some("web_change") => "web".to_owned(),
        Some(other) => other.to_lowercase(),
        None => "unknown".to_owned(),
    }
}

/// The title: `title`, else the query, else the url, else `<source> watcher`.
fn derive_title(params: &Value, source: &str) -> String {
    ["title", "query", "url", "address", "number"]
        .iter()
        .find_map(|key| text_field(params, key))
        .map_or_else(|| format!("{source} watcher"), str::to_owned)
}

/// Drops `reason` and phone-reserved `_`-keys from stored params.
fn clean_params(params: &Value) -> Value {
    match params {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "reason" && !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

const MATCHES: &str = "(instr(lower(title), lower(?1)) > 0 OR instr(lower(source), lower(?1)) > 0 \
    OR instr(lower(params_json), lower(?1)) > 0)";

impl Store {
    /// Creates an active watcher from the `watchers.create` params (which must be an object);
    /// `title` and `source` are derived from them.
    pub fn create_watcher(&self, new: &NewWatcher, now_ms: i64) -> Result<WatcherRecord> {
        const OP: &str = "watchers.create";
        if !new.params.is_object() {
            return Err(StoreError::Invalid {
                what: "watcher params",
                detail: "must be a JSON object".to_owned(),
            });
        }
        let params = clean_params(&new.params);
        let source = derive_source(&params);
        let title = derive_title(&params, &source);
        let runtime = new.runtime.clone();
        self.write(OP, &title.clone(), move |tx| {
            tx.execute(
                "INSERT INTO watchers (runtime, title, source, params_json, state, created_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, 'active', ?5)",
                params![runtime, title, source, to_json(&params), now_ms],
            )
            .ctx(OP, &title)?;
            let id = tx.last_insert_rowid();
            query(tx, OP, "WHERE watcher_id = ?1", [id])?
                .into_iter()
                .next()
                .ok_or_else(|| StoreError::NotFound {
                    table: "watchers",
                    id: id.to_string(),
                })
        })
    }

    /// One watcher, active or stopped.
    pub fn get_watcher(&self, watcher_id: i64) -> Result<Option<WatcherRecord>> {
        Ok(query(
            &self.conn(),
            "watchers.get",
            "WHERE watcher_id = ?1",
            [watcher_id],
        )?
        .into_iter()
        .next())
    }

    /// Active watchers, newest first, optionally filtered by text (title, source or params,
    /// case-insensitive); at most `limit` (`None` = all).
    pub fn list_watchers(
        &self,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        let text = text.map(str::trim).filter(|t| !t.is_empty());
        query(
            &self.conn(),
            "watchers.list",
            &format!(
                "WHERE state = 'active' AND (?1 IS NULL OR {MATCHES}) \
                 ORDER BY watcher_id DESC LIMIT ?2"
            ),
            params![text, limit.map_or(-1, sql_limit)],
        )
    }

    /// Stops the selected active watchers and returns them (now `stopped`); an empty list when
    /// nothing matched.
    pub fn stop_watchers(
        &self,
        selector: &WatcherSelector,
        now_ms: i64,
    ) -> Result<Vec<WatcherRecord>> {
        const OP: &str = "watchers.stop";
        if let WatcherSelector::Query(text) = selector
            && text.trim().is_empty()
        {
            return Err(StoreError::Invalid {
                what: "watcher query",
                detail: "empty (use WatcherSelector::All to stop every watcher)".to_owned(),
            });
        }
        let selector = selector.clone();
        self.write(OP, "", move |tx| {
            let targets = match &selector {
                WatcherSelector::Id(id) => {
                    query(tx, OP, "WHERE state = 'active' AND watcher_id = ?1", [id])?
                }
                WatcherSelector::Query(text) => query(
                    tx,
                    OP,
                    &format!("WHERE state = 'active' AND {MATCHES} ORDER BY watcher_id"),
                    [text.trim()],
                )?,
                WatcherSelector::All => {
                    query(tx, OP, "WHERE state = 'active' ORDER BY watcher_id", [])?
                }
            };
            let mut out = Vec::with_capacity(targets.len());
            for mut watcher in targets {
                tx.execute(
                    "UPDATE watchers SET state = 'stopped', stopped_at_ms = ?2 \
                     WHERE watcher_id = ?1 AND state = 'active'",
                    params![watcher.watcher_id, now_ms],
                )
                .ctx(OP, &watcher.watcher_id.to_string())?;
                watcher.state = WatcherState::Stopped;
                watcher.stopped_at_ms = Some(now_ms);
                out.push(watcher);
            }
            Ok(out)
        })
    }
}
