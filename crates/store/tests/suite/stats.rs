//! `Store::stats`: counts and sizes, on either backend. What the figures mean for SQLite's
//! files (pages, `dbstat`, the WAL, a read-only opener) is in `stats_sqlite.rs`; on PostgreSQL in
//! the conformance suite's `stats_pg.rs`.

use openphone_protocol::ToolStatus;
use openphone_store::{
    AuditConfirmation, AuditEntry, AuditKind, Caller, NewMemory, Retention, Store, StoreStats,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, identity, open, temp};

/// The audit record of the `i`-th read (one shape, no proof: what it holds does not matter
/// here, only that it is counted).
pub fn read_entry(i: u64) -> AuditEntry {
    let request_id = format!("req-{i:06}");
    AuditEntry {
        audit_id: format!("runtime:hermes:{request_id}"),
        kind: AuditKind::ToolRequest,
        at_ms: T0 + i64::try_from(i).unwrap(),
        runtime: "hermes".to_owned(),
        caller: Caller {
            runtime: "hermes".to_owned(),
            transport: "websocket".to_owned(),
            principal: "token:hermes".to_owned(),
        },
        phone_session_id: None,
        runtime_session_id: Some("global".to_owned()),
        idempotency_key: None,
        request_id,
        tool: Some("openphone.device.status".to_owned()),
        risk: None,
        mutating: Some(false),
        autonomy: None,
        decision: None,
        proof_digest: None,
        policy_proof: None,
        confirmation_id: None,
        confirmation: Some(AuditConfirmation::NotRequired),
        status: Some(ToolStatus::Ok),
        error_code: None,
        duration_ms: Some(1),
        params_hash: None,
        result_digest: None,
        device_id: None,
    }
}

/// 500 audit records (`entry(0..500)`), 200 final results of which retention prunes 72 (the
/// oldest), and 3 memories; the stats of `store` after that.
pub fn fill(store: &Store, entry: fn(u64) -> AuditEntry) -> StoreStats {
    for i in 0..500 {
        store.append_audit(&entry(i)).unwrap();
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
    for text in [
        "Prefers tea",
        "Lives in Lisbon",
        "Works from home on Fridays",
    ] {
        let memory = NewMemory {
            text: text.to_owned(),
            kind: "fact".to_owned(),
            subject: "user".to_owned(),
            confidence: None,
        };
        store.save_memory(&memory, T0).unwrap();
    }
    store.stats().unwrap()
}

#[test]
fn stats_count_records_results_and_bytes() {
    let dir = temp();
    let store = open(&dir);
    let empty = store.stats().unwrap();
    assert_eq!(
        (empty.audit.records, empty.audit.bytes_per_record),
        (0, None)
    );
    assert_eq!((empty.results.count, empty.results.oldest_ms), (0, None));
    assert_eq!(
        (empty.results.tombstones, empty.results.request_ids),
        (0, 0)
    );

    let stats = fill(&store, read_entry);
    // Nothing changed: the same figures again (one consistent read each time). The database's
    // size is left out here: on PostgreSQL it is the whole database's, which other schemas
    // (other tests, other stores) change; `stats_sqlite.rs` compares it too.
    let but_size = |s: StoreStats| StoreStats {
        db_file_bytes: 0,
        ..s
    };
    assert_eq!(but_size(stats.clone()), but_size(store.stats().unwrap()));
    assert_eq!(stats.schema_version, store.schema_version().unwrap());
    assert!(stats.schema_version > 0);
    assert_eq!(stats.audit.records, 500);
    assert_eq!(stats.audit.legacy_records, 0);
    let per_record = stats.audit.bytes_per_record.unwrap();
    assert!(per_record > 0.0, "{per_record}");
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

    // Every table is listed once, by name, with its rows and its bytes.
    let names: Vec<&str> = stats.tables.iter().map(|t| t.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted);
    let memories = stats.tables.iter().find(|t| t.name == "memories").unwrap();
    assert_eq!(memories.rows, Some(3));
    assert!(memories.bytes().unwrap() > 0);
    assert!(stats.page_size > 0 && stats.page_count > 0);
    assert!(stats.db_file_bytes + stats.wal_file_bytes > 0);
}
