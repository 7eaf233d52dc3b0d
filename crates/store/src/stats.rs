//! [`Store::stats`](crate::StoreInfo::stats): what the database holds and what it costs on disk, for `openphone store
//! stats`. Works on a read-only store next to a running daemon.
//!
//! Sizes per table come from SQLite's `dbstat` virtual table (the bundled SQLite is built with
//! `SQLITE_ENABLE_DBSTAT_VTAB`): the bytes of every page of the table's b-tree and of its
//! indexes, overflow pages included, as the reader's snapshot sees them (committed pages
//! still in the WAL count). Without `dbstat` the per-table bytes are `None` and only the file
//! sizes and row counts are given.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};

/// One table with its indexes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableStats {
    pub name: String,
    /// Rows (`None` for a virtual table).
    pub rows: Option<u64>,
    /// Bytes of the table's own pages (`None` without `dbstat`, or for a virtual table).
    pub table_bytes: Option<u64>,
    /// Bytes of its indexes' pages.
    pub index_bytes: Option<u64>,
}

impl TableStats {
    /// Table and index bytes together.
    pub fn bytes(&self) -> Option<u64> {
        Some(self.table_bytes? + self.index_bytes.unwrap_or(0))
    }
}

/// The audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditStats {
    /// Every record (both storage forms).
    pub records: u64,
    /// Records stored before schema 6 (`audit_log`, form 1).
    pub legacy_records: u64,
    /// Interned shapes and proofs.
    pub shapes: u64,
    pub proofs: u64,
    /// Bytes of every audit table and index (`None` without `dbstat`).
    pub bytes: Option<u64>,
    /// `bytes / records`.
    pub bytes_per_record: Option<f64>,
}

/// Stored results (final results kept for replay) and what retention left of pruned ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultStats {
    pub count: u64,
    /// Bytes of result JSON (what [`Retention::max_bytes`](crate::Retention) counts).
    pub result_bytes: u64,
    /// When the oldest and the newest were recorded (Unix ms; `None` when there are none).
    pub oldest_ms: Option<i64>,
    pub newest_ms: Option<i64>,
    /// Tombstones of pruned results.
    pub tombstones: u64,
    /// Entries of the request-id index.
    pub request_ids: u64,
}

/// What the database holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreStats {
    /// The database file.
    pub db_path: String,
    pub schema_version: i64,
    /// Size of `openphone.db` on disk.
    pub db_file_bytes: u64,
    /// Size of `openphone.db-wal` (0 when absent).
    pub wal_file_bytes: u64,
    pub page_size: u64,
    pub page_count: u64,
    /// Pages on the free list (reused before the file grows).
    pub free_pages: u64,
    /// Whether per-table bytes come from `dbstat`.
    pub dbstat: bool,
    /// Every table, by name.
    pub tables: Vec<TableStats>,
    pub audit: AuditStats,
    pub results: ResultStats,
}

/// The tables that make up the audit log.
const AUDIT_TABLES: [&str; 5] = [
    "audit_log",
    "audit_records",
    "audit_shapes",
    "audit_proofs",
    "audit_head",
];

fn file_size(path: &Path) -> Result<u64> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(meta.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(source) => Err(StoreError::Io {
            op: "reading the size of",
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn count(conn: &Connection, sql: &str) -> Result<u64> {
    conn.query_row(sql, [], |row| row.get::<_, i64>(0))
        .map(|n| u64::try_from(n).unwrap_or(0))
        .ctx("store.stats", sql)
}

fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
        [name],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .ctx("store.stats", name)
}

fn count_table(conn: &Connection, name: &str) -> Result<u64> {
    if has_table(conn, name)? {
        count(conn, &format!("SELECT COUNT(*) FROM \"{name}\""))
    } else {
        Ok(0)
    }
}

/// A table as the schema lists it.
#[derive(Default)]
struct TableSchema {
    is_virtual: bool,
    /// Its b-trees: the table's own and its indexes' (name, is an index).
    btrees: Vec<(String, bool)>,
}

/// Every table by name.
fn schema(conn: &Connection) -> Result<BTreeMap<String, TableSchema>> {
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_schema")
        .ctx("store.stats", "schema")?;
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
            ))
        })
        .ctx("store.stats", "schema")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("store.stats", "schema")?;
    let mut tables: BTreeMap<String, TableSchema> = BTreeMap::new();
    for (kind, name, _, sql) in &rows {
        if kind == "table" {
            let is_virtual = sql
                .trim_start()
                .to_ascii_uppercase()
                .starts_with("CREATE VIRTUAL");
            let entry = tables.entry(name.clone()).or_default();
            entry.is_virtual = is_virtual;
            entry.btrees.push((name.clone(), false));
        }
    }
    for (kind, name, table, _) in rows {
        if kind == "index"
            && let Some(entry) = tables.get_mut(&table)
        {
            entry.btrees.push((name, true));
        }
    }
    tables
        .entry("sqlite_schema".to_owned())
        .or_default()
        .btrees
        .push(("sqlite_schema".to_owned(), false));
    Ok(tables)
}

/// B-tree name → bytes, from `dbstat` (`None` when the vtab is not compiled in).
fn btree_bytes(conn: &Connection) -> Result<Option<BTreeMap<String, u64>>> {
    let available = conn
        .query_row(
            "SELECT sqlite_compileoption_used('ENABLE_DBSTAT_VTAB')",
            [],
            |row| row.get::<_, i64>(0),
        )
        .ctx("store.stats", "dbstat")?
        == 1;
    if !available {
        return Ok(None);
    }
    let mut stmt = conn
        .prepare("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        .ctx("store.stats", "dbstat")?;
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
            ))
        })
        .ctx("store.stats", "dbstat")?
        .collect::<rusqlite::Result<BTreeMap<_, _>>>()
        .ctx("store.stats", "dbstat")?;
    Ok(Some(rows))
}

impl SqliteStore {
    /// Sizes and counts of the database (see the module docs of `stats.rs`). Reads only: a
    /// read-only store gives the same figures next to a running daemon.
    pub fn stats(&self) -> Result<StoreStats> {
        let db_path = self.db_path();
        let mut wal = db_path.clone().into_os_string();
        wal.push("-wal");
        let conn = self.conn();
        let pragma = |name: &str| -> Result<u64> {
            conn.pragma_query_value(None, name, |row| row.get::<_, i64>(0))
                .map(|n| u64::try_from(n).unwrap_or(0))
                .ctx("store.stats", name)
        };
        let (page_size, page_count, free_pages) = (
            pragma("page_size")?,
            pragma("page_count")?,
            pragma("freelist_count")?,
        );
        let bytes = btree_bytes(&conn)?;
        let mut tables = Vec::new();
        for (name, TableSchema { is_virtual, btrees }) in schema(&conn)? {
            let sum = |want_index: bool| {
                bytes.as_ref().map(|b| {
                    btrees
                        .iter()
                        .filter(|(_, is_index)| *is_index == want_index)
                        .map(|(n, _)| b.get(n).copied().unwrap_or(0))
                        .sum::<u64>()
                })
            };
            let rows = if is_virtual {
                None
            } else {
                Some(count(&conn, &format!("SELECT COUNT(*) FROM \"{name}\""))?)
            };
            tables.push(TableStats {
                rows,
                table_bytes: if is_virtual { None } else { sum(false) },
                index_bytes: if is_virtual { None } else { sum(true) },
                name,
            });
        }
        let legacy_records = count_table(&conn, "audit_log")?;
        let records = legacy_records + count_table(&conn, "audit_records")?;
        let audit_bytes = bytes.as_ref().map(|_| {
            tables
                .iter()
                .filter(|t| AUDIT_TABLES.contains(&t.name.as_str()))
                .filter_map(TableStats::bytes)
                .sum::<u64>()
        });
        let audit = AuditStats {
            records,
            legacy_records,
            shapes: count_table(&conn, "audit_shapes")?,
            proofs: count_table(&conn, "audit_proofs")?,
            bytes: audit_bytes,
            bytes_per_record: audit_bytes
                .filter(|_| records > 0)
                .map(|b| b as f64 / records as f64),
        };
        let (count_results, result_bytes, oldest_ms, newest_ms) = conn
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(octet_length(result_json)), 0), \
                 MIN(recorded_at_ms), MAX(recorded_at_ms) FROM final_results",
                [],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, Option<i64>>(2)?,
                        row.get::<_, Option<i64>>(3)?,
                    ))
                },
            )
            .ctx("store.stats", "final_results")?;
        let results = ResultStats {
            count: u64::try_from(count_results).unwrap_or(0),
            result_bytes: u64::try_from(result_bytes).unwrap_or(0),
            oldest_ms,
            newest_ms,
            tombstones: count_table(&conn, "final_tombstones")?,
            request_ids: count_table(&conn, "request_ids")?,
        };
        let schema_version = crate::migrations::current_version(&conn)?;
        drop(conn);
        Ok(StoreStats {
            db_path: db_path.display().to_string(),
            schema_version,
            db_file_bytes: file_size(&db_path)?,
            wal_file_bytes: file_size(Path::new(&wal))?,
            page_size,
            page_count,
            free_pages,
            dbstat: bytes.is_some(),
            tables,
            audit,
            results,
        })
    }
}
