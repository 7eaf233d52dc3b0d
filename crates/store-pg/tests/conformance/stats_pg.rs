//! `Store::stats` and the store's other facts on PostgreSQL (what they mean there: the module
//! docs of `crates/store-pg/src/info.rs`); the SQLite twin is the store suite's
//! `stats_sqlite.rs`.

use openphone_store::{NewStandingApproval, WriterStats};
use openphone_store_pg::PG_SCHEMA_VERSION;
use pretty_assertions::assert_eq;

use super::stats::{fill, read_entry};
use super::support::{T0, open, temp};

#[test]
fn stats_of_a_postgres_schema_add_up_to_its_tables() {
    let dir = temp();
    let store = open(&dir);
    let empty = store.stats().unwrap();
    let stats = fill(&store, read_entry);
    assert_eq!(stats.schema_version, PG_SCHEMA_VERSION);
    assert_eq!(store.schema_version().unwrap(), PG_SCHEMA_VERSION);
    assert!(
        stats.db_path.starts_with("postgres://") && stats.db_path.contains(", schema \""),
        "{}",
        stats.db_path
    );
    // Sizes per table are always known; the server's WAL and free space are not the store's.
    assert!(stats.dbstat);
    assert_eq!((stats.wal_file_bytes, stats.free_pages), (0, 0));
    // Every table of the schema, with exact rows: the plumbing's and each domain's.
    for name in ["schema_migrations", "fleet_hosts", "memories"] {
        let table = stats.tables.iter().find(|t| t.name == name).unwrap();
        assert!(table.rows.is_some() && table.bytes().unwrap() > 0, "{name}");
    }
    let find = |name: &str| stats.tables.iter().find(|t| t.name == name).unwrap();
    assert_eq!(find("schema_migrations").rows, Some(1));
    assert_eq!(find("fleet_hosts").rows, Some(1));
    // The tables' pages are the page count; the database holds at least them, and grew.
    let in_tables: u64 = stats.tables.iter().filter_map(|t| t.bytes()).sum();
    assert_eq!(stats.page_count, in_tables.div_ceil(stats.page_size));
    assert!(stats.db_file_bytes >= in_tables);
    assert!(stats.page_count > empty.page_count);
    // The audit's bytes are those of its tables.
    let audit_tables: u64 = stats
        .tables
        .iter()
        .filter(|t| t.name.starts_with("audit_"))
        .filter_map(|t| t.bytes())
        .sum();
    assert_eq!(stats.audit.bytes, Some(audit_tables));
}

#[test]
fn full_text_search_is_there_and_the_writer_keeps_no_batch_counts() {
    let dir = temp();
    let store = open(&dir);
    assert!(store.fts5_available().unwrap());
    assert!(!store.is_read_only());
    assert_eq!(store.writer_stats(), WriterStats::default());
    assert_eq!(store.data_dir(), dir.path().join("data"));
}

#[test]
fn the_approvals_generation_is_the_fleets_and_moves_with_every_approval_write() {
    let dir = temp();
    let store = open(&dir);
    let before = store.approvals_generation();
    assert_eq!(
        store.approvals_generation(),
        before,
        "a read changes nothing"
    );
    let rule = NewStandingApproval {
        runtime: "hermes".to_owned(),
        tool: "openphone.url.open".to_owned(),
        ..NewStandingApproval::default()
    };
    store.create_approval(&rule, T0).unwrap();
    let after = store.approvals_generation();
    assert_ne!(after, before);
    // It lives in the database: a restarted daemon reads the same.
    drop(store);
    assert_eq!(open(&dir).approvals_generation(), after);
}
