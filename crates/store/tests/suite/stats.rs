//! `Store::stats`: counts and sizes, on a read-only store next to the writer.

use openphone_store::{Retention, Store};
use serde_json::json;

use super::audit_size::keyless_read;
use super::support::{T0, data_dir, identity, open, temp};

#[test]
fn stats_count_records_results_and_bytes() {
    let dir = temp();
    let store = open(&dir);
    let empty = store.stats().unwrap();
    assert!(empty.dbstat, "the bundled SQLite has dbstat");
    assert_eq!(
        (empty.audit.records, empty.audit.bytes_per_record),
        (0, None)
    );
    assert_eq!((empty.results.count, empty.results.oldest_ms), (0, None));

    for i in 0..500 {
        store.append_audit(&keyless_read(i)).unwrap();
    }
    for i in 0..200i64 {
        let key = identity(
            "openphone.clipboard.set",
            &format!("p-{i}"),
            &format!("k-{i}"),
        );
        let result = json!({"status": "ok", "request_id": format!("r-{i}")});
        store
            .record_final(&key, &format!("r-{i}"), &result, T0 + i)
            .unwrap();
    }
    store
        .prune_replay(T0 + 30 * 24 * 60 * 60 * 1000, Retention::default())
        .unwrap();

    // A read-only opener (the CLI next to a daemon) sees the same.
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    let stats = reader.stats().unwrap();
    assert_eq!(stats, store.stats().unwrap());
    assert_eq!(stats.schema_version, openphone_store::SCHEMA_VERSION);
    assert_eq!(stats.audit.records, 500);
    assert_eq!(stats.audit.legacy_records, 0);
    assert_eq!((stats.audit.shapes, stats.audit.proofs), (1, 1));
    let per_record = stats.audit.bytes_per_record.unwrap();
    assert!(per_record > 100.0 && per_record <= 300.0, "{per_record}");
    assert_eq!(stats.results.count, 128);
    assert_eq!(stats.results.tombstones, 72);
    assert_eq!(
        (stats.results.oldest_ms, stats.results.newest_ms),
        (Some(T0 + 72), Some(T0 + 199))
    );
    let kept: usize = (72..200)
        .map(|i| {
            json!({"status": "ok", "request_id": format!("r-{i}")})
                .to_string()
                .len()
        })
        .sum();
    assert_eq!(stats.results.result_bytes, kept as u64);

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
