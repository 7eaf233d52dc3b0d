//! Fail closed (issue 11, items 1 and 3): nothing runs, and no result is given out, without its
//! audit record; a direct execution whose outcome was not recorded is never run again.
//!
//! The store is made to refuse writes from outside, as a broken disk would: another
//! connection holding SQLite's write lock (every write of the bridge then times out), or a
//! trigger that aborts one kind of insert.

use std::sync::Arc;

use openphone_core::ConfirmDecision;
use openphone_device::SimPhone;
use openphone_protocol::{ToolRequest, ToolStatus};
use openphone_store::ConfirmationState;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;

fn raw(h: &Harness) -> rusqlite::Connection {
    rusqlite::Connection::open(h.dir.path().join("openphone.db")).unwrap()
}

fn save(id: &str, key: &str, text: &str, autonomy: &str) -> ToolRequest {
    with(
        request(
            id,
            "openphone.memory.save",
            json!({"text": text, "reason": "remember it"}),
        ),
        |r| {
            r.idempotency_key = Some(key.into());
            r.autonomy = Some(autonomy.into());
        },
    )
}

fn memories(h: &Harness, text: &str) -> usize {
    h.bridge
        .store()
        .search_memory(None, 10_000)
        .unwrap()
        .iter()
        .filter(|m| m.memory.text == text)
        .count()
}

#[tokio::test]
async fn a_read_is_withheld_when_its_audit_record_cannot_be_written() {
    let h = Harness::new();
    let search = || {
        request(
            "read-1",
            "openphone.contacts.search",
            json!({"query": "a", "reason": "find a contact"}),
        )
    };
    let blocker = raw(&h);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let refused = h.call(&hermes(), search()).await;
    assert_eq!(
        (refused.status, code(&refused)),
        (ToolStatus::Error, Some("audit_unavailable"))
    );
    assert!(
        refused.result.is_empty(),
        "no data without its audit record"
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    // Writable again: the read answers, with its record.
    let answered = h.call(&hermes(), search()).await;
    assert_eq!(answered.status, ToolStatus::Ok, "{answered:?}");
    let trail = h.bridge.store().find_audit(&answered.audit_id).unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].entry.status, Some(ToolStatus::Ok));
}

#[tokio::test]
async fn a_direct_mutation_runs_nothing_when_the_store_cannot_be_written() {
    let h = Harness::new();
    let blocker = raw(&h);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let refused = h
        .call(
            &trusted_hermes(),
            save("m-1", "k-1", "blocked", "trusted_actions"),
        )
        .await;
    assert_eq!(code(&refused), Some("audit_unavailable"), "{refused:?}");
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(memories(&h, "blocked"), 0);
    assert!(h.bridge.store().list_executions().unwrap().is_empty());
}

/// The final result (and the outcome's audit record) of a direct execution cannot be written:
/// the action ran, the caller hears `audit_unavailable`, and the executing record stays.
async fn run_unrecorded(h: &Harness) {
    let conn = raw(h);
    conn.execute_batch(
        "CREATE TRIGGER refuse_final BEFORE INSERT ON final_results \
         BEGIN SELECT RAISE(ABORT, 'no space left (test)'); END;",
    )
    .unwrap();
    let first = h
        .call(
            &trusted_hermes(),
            save("m-1", "k-1", "once", "trusted_actions"),
        )
        .await;
    assert_eq!(code(&first), Some("audit_unavailable"), "{first:?}");
    assert_eq!(memories(h, "once"), 1, "it ran");
    conn.execute_batch("DROP TRIGGER refuse_final").unwrap();
    // The attempt was audited before it ran.
    let trail = h.bridge.store().find_audit("runtime:hermes:m-1").unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].entry.status, None);
    assert_eq!(trail[0].entry.mutating, Some(true));
}

#[tokio::test]
async fn a_direct_mutation_whose_result_was_not_recorded_is_never_run_again() {
    let h = Harness::new();
    run_unrecorded(&h).await;
    // The keyed retry gets `execution_result_unknown`, not a second run.
    let retry = h
        .call(
            &trusted_hermes(),
            save("m-2", "k-1", "once", "trusted_actions"),
        )
        .await;
    assert_eq!(
        (retry.status, code(&retry), retry.replayed),
        (ToolStatus::Error, Some("execution_result_unknown"), true)
    );
    assert_eq!(memories(&h, "once"), 1);
    let again = h
        .call(
            &trusted_hermes(),
            save("m-3", "k-1", "once", "trusted_actions"),
        )
        .await;
    assert_eq!(code(&again), Some("execution_result_unknown"));
    assert_eq!(memories(&h, "once"), 1);
    assert!(h.bridge.store().verify_audit().unwrap().is_intact());
}

#[tokio::test]
async fn a_direct_execution_left_behind_is_settled_at_recovery() {
    let h = Harness::new();
    run_unrecorded(&h).await;
    let Harness {
        dir, clock, bridge, ..
    } = h;
    drop(bridge); // the daemon goes away
    let phone = Arc::new(SimPhone::demo().unwrap().0);
    let bridge = bridge_on(dir.path(), &phone, &clock);
    let report = bridge.recover().await.unwrap();
    assert_eq!(report.executions_unknown, ["runtime:hermes:m-1"]);
    assert!(bridge.store().list_executions().unwrap().is_empty());
    let trail = bridge.store().find_audit("runtime:hermes:m-1").unwrap();
    let codes: Vec<_> = trail.iter().map(|r| r.entry.error_code.clone()).collect();
    assert_eq!(codes, [None, Some("execution_result_unknown".to_owned())]);
    let retry = bridge
        .invoke(
            &trusted_hermes(),
            save("m-2", "k-1", "once", "trusted_actions"),
            openphone_policy::Context::Interactive,
        )
        .await;
    assert_eq!(
        (code(&retry), retry.replayed),
        (Some("execution_result_unknown"), true)
    );
    let saved = bridge.store().search_memory(None, 100).unwrap();
    assert_eq!(saved.iter().filter(|m| m.memory.text == "once").count(), 1);
}

#[tokio::test]
async fn an_approval_runs_nothing_when_its_audit_record_cannot_be_written() {
    let h = Harness::new();
    let parked = h
        .call(
            &hermes(),
            save("c-1", "k-c", "approved?", "ask_before_action"),
        )
        .await;
    assert_eq!(parked.status, ToolStatus::NeedsConfirmation);
    let id = confirmation_id(&parked);
    raw(&h)
        .execute_batch(
            "CREATE TRIGGER refuse_approved BEFORE INSERT ON audit_records \
             WHEN (SELECT json_extract(shape, '$.confirmation') FROM audit_shapes \
                   WHERE id = NEW.shape) = 'approved' \
             BEGIN SELECT RAISE(ABORT, 'no space left (test)'); END;",
        )
        .unwrap();
    let outcome = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    assert_eq!(code(&outcome), Some("audit_unavailable"), "{outcome:?}");
    assert_eq!(memories(&h, "approved?"), 0);
    let record = h.bridge.store().get_confirmation(&id).unwrap().unwrap();
    assert_eq!(record.state, ConfirmationState::Completed);
}

/// An approved request's outcome was handed to the operator, the waiting caller and the event
/// bus even when its audit record could not be written (found in review): now every recipient
/// gets `audit_unavailable` instead.
#[tokio::test]
async fn an_approved_outcome_is_withheld_when_its_audit_record_cannot_be_written() {
    let h = Harness::new();
    let parked = h
        .call(
            &hermes(),
            save("c-2", "k-c2", "ran, unaudited", "ask_before_action"),
        )
        .await;
    assert_eq!(parked.status, ToolStatus::NeedsConfirmation);
    let id = confirmation_id(&parked);
    raw(&h)
        .execute_batch(
            "CREATE TRIGGER refuse_completed BEFORE INSERT ON audit_records \
             WHEN (SELECT json_extract(shape, '$.confirmation') FROM audit_shapes \
                   WHERE id = NEW.shape) = 'completed' \
             BEGIN SELECT RAISE(ABORT, 'no space left (test)'); END;",
        )
        .unwrap();
    let op = operator();
    let (waited, outcome) = tokio::join!(
        h.bridge.wait_for_final(&parked, std::future::pending()),
        h.bridge.resolve(&op, &id, ConfirmDecision::Approve),
    );
    let outcome = outcome.unwrap();
    assert_eq!(code(&outcome), Some("audit_unavailable"), "{outcome:?}");
    let waited = waited.into_result();
    assert_eq!(code(&waited), Some("audit_unavailable"), "{waited:?}");
    assert_eq!(waited.request_id, parked.request_id);
    // It did run (the approval was recorded before it ran): withheld, not undone.
    assert_eq!(memories(&h, "ran, unaudited"), 1);
}

/// Review finding 16: revoking an elevation reported success although the store kept the grant
/// (a restart would have brought it back). The delete comes first; when it fails the revoke
/// fails and the elevation stays in force.
#[test]
fn revoking_an_elevation_reported_success_when_the_store_kept_it() {
    use openphone_policy::{Autonomy, Caller, ExposureGrants, RuntimeAuthorisation, Transport};
    let h = Harness::new();
    h.bridge.set_config(openphone_core::BridgeConfig {
        tool_policy: Default::default(),
        runtimes: Some(std::collections::BTreeMap::from([(
            "hermes".to_owned(),
            RuntimeAuthorisation {
                enabled: true,
                grants: ExposureGrants::ALL,
                max_autonomy: Autonomy::AskBeforeAction,
            },
        )])),
    });
    let operator = Caller::operator("cli", Transport::Cli, "user");
    h.bridge
        .elevate(&operator, "hermes", "trusted_actions", 600)
        .expect("elevated");
    raw(&h)
        .execute_batch(
            "CREATE TRIGGER keep_settings BEFORE DELETE ON runtime_settings \
             BEGIN SELECT RAISE(ABORT, 'disk refuses'); END;",
        )
        .unwrap();
    let refused = h.bridge.revoke_elevation(&operator, "hermes");
    assert!(refused.is_err(), "{refused:?}");
    assert!(
        h.bridge.elevations().iter().any(|e| e.runtime == "hermes"),
        "still in force, as the store says"
    );
    raw(&h)
        .execute_batch("DROP TRIGGER keep_settings;")
        .unwrap();
    let revoked = h
        .bridge
        .revoke_elevation(&operator, "hermes")
        .expect("revoked");
    assert!(revoked.is_some());
    assert!(h.bridge.elevations().is_empty());
}
