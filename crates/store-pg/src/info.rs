//! [`StoreInfo`] on PostgreSQL: what the store is and holds.
//!
//! # `stats` on PostgreSQL
//!
//! [`StoreStats`] has the SQLite store's shape (`openphone store stats` renders either); on
//! PostgreSQL its fields mean:
//! - `db_path`: the server and schema, `postgres://user@host:port/dbname, schema "s"` (no
//!   password);
//! - `db_file_bytes`: `pg_database_size` of the whole database (every schema in it);
//!   `wal_file_bytes`: 0 — the server's write-ahead log is shared by every database of the
//!   cluster and is not this store's;
//! - `page_size`: the server's `block_size`; `page_count`: the pages of this schema's tables
//!   and indexes (their bytes over the block size); `free_pages`: 0 — PostgreSQL keeps free
//!   space per table (its free space map), inside those pages;
//! - `dbstat`: true — per-table bytes are always known here;
//! - per table (every table of the schema, by name): exact `rows` (`COUNT(*)`), `table_bytes`
//!   = `pg_table_size` (heap, TOAST, free space and visibility maps), `index_bytes` =
//!   `pg_indexes_size`;
//! - `audit`: the tables named `audit_*`, counted as on SQLite (`legacy_records` is 0: the
//!   PostgreSQL schema never had SQLite's form-1 `audit_log`, so it counts only if it exists);
//!   `results`: `final_results`, `final_tombstones` and `request_ids`, as on SQLite.
//!
//! Every figure comes from one `REPEATABLE READ READ ONLY` transaction on a reader connection:
//! one snapshot, as the SQLite reader sees one. In a fleet they are the shared store's, every
//! daemon's rows counted, whichever daemon asks.
//!
//! # The rest
//!
//! `schema_version` is the PostgreSQL schema's version (`schema_migrations`,
//! [`crate::PG_SCHEMA_VERSION`] when current), not SQLite's `user_version`. `fts5_available` is
//! true: full-text search (`tsvector`, GIN) is part of every PostgreSQL (see `memory.rs`).
//! `is_read_only` is false: a PostgreSQL store is always opened for writing.
//! `approvals_generation` is the fleet-wide generation of the standing approvals, read from the
//! server on every call (`approvals.rs` says why and what a revoke promises).
//! `writer_stats` is all zeros: the writer thread (`pool.rs`) runs one transaction per write,
//! unbatched, and keeps no counts.

use std::path::Path;

use openphone_store::{
    AuditStats, Result, ResultStats, StoreInfo, StoreStats, TableStats, WriterStats,
};
use postgres::{IsolationLevel, Transaction};

use crate::PgStore;
use crate::error::PgContext;

const OP: &str = "store.stats";

fn non_negative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A name as a quoted SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn count(tx: &mut Transaction<'_>, table: &str) -> Result<u64> {
    let n: i64 = tx
        .query_one(&format!("SELECT COUNT(*) FROM {}", ident(table)), &[])
        .ctx(OP, table)?
        .get(0);
    Ok(non_negative(n))
}

/// The tables of the current schema, by name: (name, table bytes, index bytes).
fn tables(tx: &mut Transaction<'_>) -> Result<Vec<(String, u64, u64)>> {
    let rows = tx
        .query(
            "SELECT c.relname::text, pg_table_size(c.oid), pg_indexes_size(c.oid) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
             ORDER BY c.relname COLLATE \"C\"",
            &[],
        )
        .ctx(OP, "tables")?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get::<_, String>(0).ctx(OP, "tables")?,
                non_negative(row.try_get(1).ctx(OP, "tables")?),
                non_negative(row.try_get(2).ctx(OP, "tables")?),
            ))
        })
        .collect()
}

fn stats_in(tx: &mut Transaction<'_>, target: &str) -> Result<StoreStats> {
    let head = tx
        .query_one(
            "SELECT current_schema()::text, pg_database_size(current_database()), \
             current_setting('block_size')::bigint",
            &[],
        )
        .ctx(OP, "database")?;
    let schema: String = head.try_get(0).ctx(OP, "database")?;
    let db_bytes = non_negative(head.try_get(1).ctx(OP, "database")?);
    let page_size = non_negative(head.try_get(2).ctx(OP, "database")?).max(1);

    let mut list = Vec::new();
    for (name, table_bytes, index_bytes) in tables(tx)? {
        list.push(TableStats {
            rows: Some(count(tx, &name)?),
            table_bytes: Some(table_bytes),
            index_bytes: Some(index_bytes),
            name,
        });
    }
    let rows_of = |name: &str| {
        list.iter()
            .find(|t| t.name == name)
            .and_then(|t| t.rows)
            .unwrap_or(0)
    };
    let legacy_records = rows_of("audit_log");
    let records = legacy_records + rows_of("audit_records");
    let audit_bytes: u64 = list
        .iter()
        .filter(|t| t.name.starts_with("audit_"))
        .filter_map(TableStats::bytes)
        .sum();
    let audit = AuditStats {
        records,
        legacy_records,
        shapes: rows_of("audit_shapes"),
        proofs: rows_of("audit_proofs"),
        bytes: Some(audit_bytes),
        bytes_per_record: (records > 0).then(|| audit_bytes as f64 / records as f64),
    };
    let mut results = ResultStats {
        count: 0,
        result_bytes: 0,
        oldest_ms: None,
        newest_ms: None,
        tombstones: rows_of("final_tombstones"),
        request_ids: rows_of("request_ids"),
    };
    if list.iter().any(|t| t.name == "final_results") {
        let row = tx
            .query_one(
                "SELECT COUNT(*), COALESCE(SUM(octet_length(result_json::text)), 0)::bigint, \
                 MIN(recorded_at_ms), MAX(recorded_at_ms) FROM final_results",
                &[],
            )
            .ctx(OP, "final_results")?;
        results.count = non_negative(row.try_get(0).ctx(OP, "final_results")?);
        results.result_bytes = non_negative(row.try_get(1).ctx(OP, "final_results")?);
        results.oldest_ms = row.try_get(2).ctx(OP, "final_results")?;
        results.newest_ms = row.try_get(3).ctx(OP, "final_results")?;
    }
    let in_tables: u64 = list.iter().filter_map(TableStats::bytes).sum();
    let schema_version = version_in(tx)?;
    Ok(StoreStats {
        db_path: format!("postgres://{target}, schema {}", ident(&schema)),
        schema_version,
        db_file_bytes: db_bytes,
        wal_file_bytes: 0,
        page_size,
        page_count: in_tables.div_ceil(page_size),
        free_pages: 0,
        dbstat: true,
        tables: list,
        audit,
        results,
    })
}

fn version_in(client: &mut impl postgres::GenericClient) -> Result<i64> {
    client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )
        .ctx("store.schema_version", "")?
        .try_get(0)
        .ctx("store.schema_version", "")
}

impl StoreInfo for PgStore {
    fn fleet(&self) -> Option<&dyn openphone_store::Fleet> {
        Some(self)
    }

    fn stats(&self) -> Result<StoreStats> {
        let target = self.target().to_owned();
        self.read(OP, "", move |conn| {
            let mut tx = conn
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .ctx(OP, "begin")?;
            let stats = stats_in(&mut tx, &target)?;
            tx.commit().ctx(OP, "commit")?;
            Ok(stats)
        })
    }

    fn data_dir(&self) -> &Path {
        PgStore::data_dir(self)
    }

    fn is_read_only(&self) -> bool {
        self.is_viewer()
    }

    fn schema_version(&self) -> Result<i64> {
        self.read("store.schema_version", "", version_in)
    }

    fn fts5_available(&self) -> Result<bool> {
        Ok(true)
    }

    fn approvals_generation(&self) -> u64 {
        crate::approvals::approvals_generation(self)
    }

    fn writer_stats(&self) -> WriterStats {
        WriterStats::default()
    }
}

impl PgStore {
    /// This store as the runtime's [`Store`](openphone_store::Store) (what the daemon holds).
    pub fn into_store(self) -> openphone_store::Store {
        openphone_store::Store::from_backend(Box::new(self))
    }
}
