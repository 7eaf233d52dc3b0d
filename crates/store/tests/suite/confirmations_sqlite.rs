//! Confirmations on SQLite's own file: two connections racing the guarded UPDATE, and a
//! completion whose audit record the database refuses (a trigger). The PostgreSQL twins are in
//! `crates/store-pg/tests/conformance/confirmations_pg.rs`.

use std::sync::{Arc, Barrier};

use openphone_store::{ConfirmationState, MAX_PENDING_PER_RUNTIME, PendingInsert, Resolution};
use serde_json::json;

use super::support::{T0, identity, new_confirmation, open, temp};

const TIMEOUT: i64 = 30_000;

fn created(store: &openphone_store::Store, id: &str, tool: &str, key: &str, at: i64) {
    let ident = identity(tool, &format!("params-{tool}"), key);
    let inserted = store
        .insert_pending(
            &new_confirmation(id, &ident, at, TIMEOUT),
            MAX_PENDING_PER_RUNTIME,
        )
        .unwrap();
    assert!(
        matches!(inserted, PendingInsert::Created(_)),
        "{inserted:?}"
    );
}

#[test]
fn concurrent_resolvers_across_two_connections() {
    // Two independent connections to the same file (as two processes would have): the guarded
    // UPDATE lets exactly one win.
    let dir = temp();
    let store = open(&dir);
    created(&store, "c1", "t", "k", T0);
    let db = store.db_path().unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let db = db.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let conn = rusqlite::Connection::open(db).unwrap();
                conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
                barrier.wait();
                conn.execute(
                    "UPDATE confirmations SET state = ?2, resolved_by = ?3 WHERE confirmation_id = ?1 AND state = 'pending'",
                    rusqlite::params!["c1", if i == 0 { "approved" } else { "denied" }, format!("r{i}")],
                )
                .unwrap()
            })
        })
        .collect();
    let won: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(won, 1);
}

/// The bridge completed an approved confirmation and then wrote the completion's audit record
/// in a second write: a daemon killed between the two left an executed request with no
/// record of it (found by the goals' kill -9 test). Now they are one write: when the record
/// cannot be written, the confirmation is not completed either.
#[test]
fn regression_a_completion_and_its_audit_record_are_one_write() {
    let dir = temp();
    let store = open(&dir);
    created(&store, "c1", "openphone.url.open", "key-1", T0);
    store
        .resolve("c1", Resolution::Approve, "operator:cli", T0 + 10)
        .unwrap();
    let result = json!({"request_id": "req-c1", "status": "ok", "result": {"opened": true}});
    let before = store.export_audit(0, 100).unwrap().len();

    let conn =
        rusqlite::Connection::open(super::support::data_dir(&dir).join("openphone.db")).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_records \
         BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END;",
    )
    .unwrap();
    store
        .complete_audited("c1", &result, T0 + 20, super::audit::entry(7))
        .unwrap_err();
    let record = store.get_confirmation("c1").unwrap().unwrap();
    assert_eq!(
        record.state,
        ConfirmationState::Approved,
        "not completed alone"
    );
    assert_eq!(record.final_result, None);
    assert!(store.find_final(&record.identity).unwrap().is_none());

    conn.execute_batch("DROP TRIGGER refuse_audit;").unwrap();
    let done = store
        .complete_audited("c1", &result, T0 + 21, super::audit::entry(7))
        .unwrap();
    assert_eq!(done.state, ConfirmationState::Completed);
    let records = store.export_audit(0, 100).unwrap();
    assert_eq!(records.len(), before + 1, "the completion's record with it");
}
