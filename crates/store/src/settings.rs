//! Runtime settings: key → JSON value.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::error::{Result, SqlContext};
use crate::rows::Cached;
use crate::wire::parse_json;

/// One stored setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    pub key: String,
    pub value: Value,
    pub updated_at_ms: i64,
}

impl SqliteStore {
    /// The value of a setting, if set.
    pub fn get_setting(&self, key: &str) -> Result<Option<Value>> {
        const OP: &str = "runtime_settings.get";
        let text: Option<String> = self
            .conn()
            .row_cached(
                "SELECT value_json FROM runtime_settings WHERE key = ?1",
                [key],
                |row| row.get(0),
            )
            .optional()
            .ctx(OP, key)?;
        text.map(|t| parse_json(&t, OP, key)).transpose()
    }

    /// Sets (inserts or replaces) a setting.
    pub fn set_setting(&self, key: &str, value: &Value, now_ms: i64) -> Result<()> {
        const OP: &str = "runtime_settings.set";
        let owned = (key.to_owned(), value.to_string());
        self.write(OP, key, move |tx| {
            let (key, value) = (owned.0.as_str(), owned.1.as_str());
            tx.exec_cached(
                "INSERT INTO runtime_settings (key, value_json, updated_at_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (key) DO UPDATE SET value_json = excluded.value_json, \
                 updated_at_ms = excluded.updated_at_ms",
                params![key, value, now_ms],
            )
            .ctx(OP, key)?;
            Ok(())
        })
    }

    /// Removes a setting; false when it was not set.
    pub fn delete_setting(&self, key: &str) -> Result<bool> {
        const OP: &str = "runtime_settings.delete";
        let owned = key.to_owned();
        self.write(OP, key, move |tx| {
            let key = owned.as_str();
            tx.exec_cached("DELETE FROM runtime_settings WHERE key = ?1", [key])
                .map(|n| n > 0)
                .ctx(OP, key)
        })
    }

    /// Every setting, by key.
    pub fn list_settings(&self) -> Result<Vec<Setting>> {
        const OP: &str = "runtime_settings.list";
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT key, value_json, updated_at_ms FROM runtime_settings ORDER BY key")
            .ctx(OP, "")?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })
            .ctx(OP, "")?;
        let mut out = Vec::new();
        for row in rows {
            let (key, text, updated_at_ms) = row.ctx(OP, "")?;
            out.push(Setting {
                value: parse_json(&text, OP, &key)?,
                key,
                updated_at_ms,
            });
        }
        Ok(out)
    }
}
