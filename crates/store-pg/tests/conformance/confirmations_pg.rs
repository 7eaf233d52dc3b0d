//! PostgreSQL twins of the SQLite-only confirmation tests (`confirmations_sqlite.rs`): two
//! connections racing the guarded UPDATE, and a completion whose audit record the server
//! refuses (a trigger).

use std::sync::{Arc, Barrier};

use openphone_protocol::{Risk, ToolStatus};
use openphone_store::{
    AuditConfirmation, AuditEntry, AuditKind, AuditStore, Autonomy, Caller, ConfirmationState,
    ConfirmationStore, PendingInsert, PolicyDecision, ReplayStore, Resolution,
};
use openphone_store_pg::{PgStore, testing};
use serde_json::json;

use super::support::{T0, digest, identity, new_confirmation};

const TIMEOUT: i64 = 30_000;

fn created(store: &PgStore, id: &str) {
    let ident = identity("openphone.url.open", "params", &format!("key-{id}"));
    let inserted = store
        .insert_pending(&new_confirmation(id, &ident, T0, TIMEOUT), 32)
        .unwrap();
    assert!(
        matches!(inserted, PendingInsert::Created(_)),
        "{inserted:?}"
    );
}

fn entry(i: i64) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:openclaw:req-{i}"),
        kind: AuditKind::ConfirmationTransition,
        at_ms: T0 + i,
        runtime: "openclaw".to_owned(),
        caller: Caller {
            runtime: "openclaw".to_owned(),
            transport: "ws".to_owned(),
            principal: "device-1".to_owned(),
        },
        phone_session_id: Some("phone-sess-1".to_owned()),
        runtime_session_id: Some("sess-1".to_owned()),
        request_id: format!("req-{i}"),
        idempotency_key: Some(format!("key-{i}")),
        tool: Some("openphone.url.open".to_owned()),
        risk: Some(Risk::Medium),
        mutating: Some(true),
        autonomy: Some(Autonomy::AskBeforeAction),
        decision: Some(PolicyDecision::Confirm),
        proof_digest: Some(digest(&format!("proof-{i}"))),
        policy_proof: None,
        confirmation_id: Some("c1".to_owned()),
        confirmation: Some(AuditConfirmation::Approved),
        status: Some(ToolStatus::Ok),
        error_code: None,
        duration_ms: Some(3),
        params_hash: None,
        result_digest: None,
        device_id: None,
    }
}

#[test]
fn concurrent_resolvers_across_two_connections() {
    // Two independent sessions (as two daemons have): the guarded UPDATE lets exactly one win.
    let Some(url) = testing::test_url() else {
        return;
    };
    let (config, _schema) = testing::fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    created(&store, "c1");
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let config = config.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut conn = testing::connect(&config).unwrap();
                barrier.wait();
                conn.execute(
                    "UPDATE confirmations SET state = $2, resolved_by = $3 \
                     WHERE confirmation_id = $1 AND state = 'pending'",
                    &[
                        &"c1",
                        &if i == 0 { "approved" } else { "denied" },
                        &format!("r{i}"),
                    ],
                )
                .unwrap()
            })
        })
        .collect();
    let won: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(won, 1);
    drop(store);
}

/// The PostgreSQL twin of `regression_a_completion_and_its_audit_record_are_one_write`: when
/// the server refuses the completion's audit record, the confirmation is not completed either
/// (and no final result is recorded); once it accepts, both are stored.
#[test]
fn regression_a_completion_and_its_audit_record_are_one_write() {
    let Some(url) = testing::test_url() else {
        return;
    };
    let (config, _schema) = testing::fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    created(&store, "c1");
    store
        .resolve("c1", Resolution::Approve, "operator:cli", T0 + 10)
        .unwrap();
    let result = json!({"request_id": "req-c1", "status": "ok", "result": {"opened": true}});
    let before = store.export_audit(0, 100).unwrap().len();

    let mut conn = testing::connect(&config).unwrap();
    conn.batch_execute(
        "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'disk full (test)'; END $$; \
         CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_records \
         FOR EACH ROW EXECUTE FUNCTION refuse_audit();",
    )
    .unwrap();
    let err = store
        .complete_audited("c1", &result, T0 + 20, entry(7))
        .unwrap_err();
    assert!(err.to_string().contains("disk full (test)"), "{err}");
    let record = store.get_confirmation("c1").unwrap().unwrap();
    assert_eq!(
        record.state,
        ConfirmationState::Approved,
        "not completed alone"
    );
    assert_eq!(record.final_result, None);
    assert!(store.find_final(&record.identity).unwrap().is_none());

    conn.batch_execute("DROP TRIGGER refuse_audit ON audit_records;")
        .unwrap();
    let done = store
        .complete_audited("c1", &result, T0 + 21, entry(7))
        .unwrap();
    assert_eq!(done.state, ConfirmationState::Completed);
    let records = store.export_audit(0, 100).unwrap();
    assert_eq!(records.len(), before + 1, "the completion's record with it");
    drop(store);
}
