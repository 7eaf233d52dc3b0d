//! `Store::stats` on SQLite's files: pages and `dbstat`, the WAL, the FTS5 table, a read-only
//! opener next to the writer, the audit's storage form.

use openphone_store::Store;

use super::audit_size::keyless_read;
use super::stats::fill;
use super::support::{data_dir, open, temp};

#[test]
fn stats_of_the_sqlite_file_add_up_to_its_pages() {
    let dir = temp();
    let store = open(&dir);
    assert!(
        store.stats().unwrap().dbstat,
        "the bundled SQLite has dbstat"
    );
    let stats = fill(&store, keyless_read);

    // A read-only opener (the CLI next to a daemon) sees the same.
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    assert_eq!(reader.stats().unwrap(), stats);
    assert_eq!(stats.schema_version, openphone_store::SCHEMA_VERSION);
    assert!(stats.db_path.ends_with("openphone.db"), "{}", stats.db_path);
    // One shape and one proof, interned; a keyless read costs 100 to 300 bytes of pages.
    assert_eq!((stats.audit.shapes, stats.audit.proofs), (1, 1));
    let per_record = stats.audit.bytes_per_record.unwrap();
    assert!(per_record > 100.0 && per_record <= 300.0, "{per_record}");
    let records = stats
        .tables
        .iter()
        .find(|t| t.name == "audit_records")
        .unwrap();
    assert_eq!(records.rows, Some(500));
    assert!(records.table_bytes.unwrap() > 0 && records.index_bytes.unwrap() > 0);
    let fts = stats
        .tables
        .iter()
        .find(|t| t.name == "memories_fts")
        .unwrap();
    assert_eq!((fts.rows, fts.bytes()), (None, None));
    // Every b-tree page is some table's: the tables add up to the pages in use.
    let in_tables: u64 = stats.tables.iter().filter_map(|t| t.bytes()).sum();
    assert_eq!(
        in_tables,
        (stats.page_count - stats.free_pages) * stats.page_size
    );
    assert!(stats.db_file_bytes + stats.wal_file_bytes > 0);
}
