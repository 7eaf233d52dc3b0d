//! Confirmation lifecycle: insert, duplicates, cap, first-resolution-wins, expiry, recovery.

use std::sync::{Arc, Barrier};

use openphone_protocol::Risk;
use openphone_store::{
    ConfirmationFilter, ConfirmationRecord, ConfirmationState, MAX_PENDING_PER_RUNTIME, NotPending,
    PendingInsert, RESOLVED_BY_EXPIRY, Resolution, Store, StoreError,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, identity, new_confirmation, open, temp};

const TIMEOUT: i64 = 30_000;

fn created(store: &Store, id: &str, tool: &str, key: &str, at: i64) -> ConfirmationRecord {
    let ident = identity(tool, &format!("params-{tool}"), key);
    match store
        .insert_pending(
            &new_confirmation(id, &ident, at, TIMEOUT),
            MAX_PENDING_PER_RUNTIME,
        )
        .unwrap()
    {
        PendingInsert::Created(record) => record,
        other => panic!("expected Created, got {other:?}"),
    }
}

fn not_pending(err: StoreError) -> NotPending {
    match err {
        StoreError::ConfirmationNotPending { reason, .. } => reason,
        other => panic!("expected ConfirmationNotPending, got {other:?}"),
    }
}

#[test]
fn insert_stores_the_whole_record_and_survives_restart() {
    let dir = temp();
    let store = open(&dir);
    let ident = identity("openphone.url.open", "p", "key-1");
    let new = new_confirmation("runtime-confirm-1", &ident, T0, TIMEOUT);
    let PendingInsert::Created(record) = store.insert_pending(&new, 32).unwrap() else {
        panic!()
    };
    assert_eq!(
        record,
        ConfirmationRecord {
            confirmation_id: "runtime-confirm-1".to_owned(),
            identity: ident.clone(),
            request_id: "req-runtime-confirm-1".to_owned(),
            request: new.request.clone(),
            phone_session_id: Some("phone-sess-1".to_owned()),
            summary: "openphone.url.open: test".to_owned(),
            risk: Risk::Medium,
            created_at_ms: T0,
            expires_at_ms: T0 + TIMEOUT,
            state: ConfirmationState::Pending,
            resolved_at_ms: None,
            resolved_by: None,
            final_result: None,
            // A shared store names the daemon that asked; SQLite none.
            host: store
                .fleet()
                .map(|f| openphone_store::RowHost::of(f.host_id())),
        }
    );
    // Serde round trip of the record (wire strings).
    let value = serde_json::to_value(&record).unwrap();
    assert_eq!(value["state"], "pending");
    assert_eq!(value["risk"], "medium");
    assert_eq!(
        serde_json::from_value::<ConfirmationRecord>(value).unwrap(),
        record
    );

    drop(store);
    let store = open(&dir);
    assert_eq!(
        store.get_confirmation("runtime-confirm-1").unwrap(),
        Some(record.clone())
    );
    assert_eq!(store.find_pending(&ident, T0 + 1).unwrap(), Some(record));
    assert_eq!(store.get_confirmation("nope").unwrap(), None);
}

#[test]
fn same_identity_while_pending_points_at_the_same_confirmation() {
    let dir = temp();
    let store = open(&dir);
    let first = created(&store, "c1", "openphone.url.open", "key-1", T0);
    let again = new_confirmation("c2", &first.identity, T0 + 1000, TIMEOUT);
    match store.insert_pending(&again, 32).unwrap() {
        PendingInsert::Existing(existing) => {
            assert_eq!(existing.confirmation_id, "c1");
            assert_eq!(existing.expires_at_ms, T0 + TIMEOUT, "expiry not extended");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get_confirmation("c2").unwrap(), None);
    // Different params (same idempotency key) → a new confirmation.
    let mut other = first.identity.clone();
    other.params_digest = super::support::digest("different");
    assert!(matches!(
        store
            .insert_pending(&new_confirmation("c3", &other, T0, TIMEOUT), 32)
            .unwrap(),
        PendingInsert::Created(_)
    ));
    // Duplicate id.
    let dup = new_confirmation("c3", &identity("x", "y", "z"), T0, TIMEOUT);
    assert!(matches!(
        store.insert_pending(&dup, 32).unwrap_err(),
        StoreError::AlreadyExists { .. }
    ));
    // Once expired, the identity no longer finds it.
    assert_eq!(
        store.find_pending(&first.identity, T0 + TIMEOUT).unwrap(),
        None
    );
}

#[test]
fn cap_per_runtime() {
    let dir = temp();
    let store = open(&dir);
    for i in 0..3 {
        let ident = identity("t", &format!("p{i}"), &format!("k{i}"));
        assert!(matches!(
            store
                .insert_pending(&new_confirmation(&format!("c{i}"), &ident, T0, TIMEOUT), 3)
                .unwrap(),
            PendingInsert::Created(_)
        ));
    }
    let ident = identity("t", "p9", "k9");
    assert_eq!(
        store
            .insert_pending(&new_confirmation("c9", &ident, T0, TIMEOUT), 3)
            .unwrap(),
        PendingInsert::TooMany { pending: 3 }
    );
    assert_eq!(store.get_confirmation("c9").unwrap(), None);
    assert_eq!(store.count_pending("openclaw", T0).unwrap(), 3);
    assert_eq!(store.count_pending("hermes", T0).unwrap(), 0);
    // Expired ones do not count.
    assert_eq!(store.count_pending("openclaw", T0 + TIMEOUT).unwrap(), 0);
    assert!(matches!(
        store
            .insert_pending(&new_confirmation("c9", &ident, T0 + TIMEOUT, TIMEOUT), 3)
            .unwrap(),
        PendingInsert::Created(_)
    ));
}

#[test]
fn approve_then_complete_records_the_final_result_for_replay() {
    let dir = temp();
    let store = open(&dir);
    let c = created(&store, "c1", "openphone.url.open", "key-1", T0);
    let approved = store
        .resolve("c1", Resolution::Approve, "operator:cli", T0 + 10)
        .unwrap();
    assert_eq!(approved.state, ConfirmationState::Approved);
    assert_eq!(approved.resolved_at_ms, Some(T0 + 10));
    assert_eq!(approved.resolved_by.as_deref(), Some("operator:cli"));

    // A second resolution loses.
    let lost = store
        .resolve("c1", Resolution::Deny, "operator:ui", T0 + 11)
        .unwrap_err();
    assert!(lost.is_pending_confirmation_not_found());
    assert_eq!(
        not_pending(lost),
        NotPending::AlreadyResolved {
            state: ConfirmationState::Approved
        }
    );

    let result = json!({"request_id": "req-c1", "status": "ok", "result": {"opened": true}});
    let done = store.complete("c1", &result, T0 + 20).unwrap();
    assert_eq!(done.state, ConfirmationState::Completed);
    assert_eq!(done.final_result, Some(result.clone()));
    let final_result = store.find_final(&c.identity).unwrap().unwrap();
    assert_eq!(
        (final_result.request_id.as_str(), &final_result.result),
        ("req-c1", &result)
    );

    // complete is only from approved.
    let err = store.complete("c1", &result, T0 + 21).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::WrongState {
                state: ConfirmationState::Completed,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        store.complete("nope", &result, T0).unwrap_err(),
        StoreError::NotFound { .. }
    ));

    drop(store);
    let store = open(&dir);
    assert_eq!(store.get_confirmation("c1").unwrap(), Some(done));
}

#[test]
fn deny_and_attach_final_result() {
    let dir = temp();
    let store = open(&dir);
    let c = created(&store, "c1", "t", "k", T0);
    // Attaching to a pending confirmation is refused.
    assert!(matches!(
        store.attach_final_result("c1", &json!({}), T0).unwrap_err(),
        StoreError::WrongState { .. }
    ));
    let denied = store
        .resolve("c1", Resolution::Deny, "operator", T0 + 1)
        .unwrap();
    assert_eq!(denied.state, ConfirmationState::Denied);
    let result = json!({"status": "denied", "error": {"code": "user_denied_confirmation"}});
    let with_result = store.attach_final_result("c1", &result, T0 + 2).unwrap();
    assert_eq!(with_result.final_result, Some(result.clone()));
    // The first attached result wins.
    let second = store
        .attach_final_result("c1", &json!({"status": "other"}), T0 + 3)
        .unwrap();
    assert_eq!(second.final_result, Some(result.clone()));
    assert_eq!(
        store.find_final(&c.identity).unwrap().unwrap().result,
        result
    );
    assert_eq!(
        not_pending(
            store
                .resolve("c1", Resolution::Approve, "op", T0 + 4)
                .unwrap_err()
        ),
        NotPending::AlreadyResolved {
            state: ConfirmationState::Denied
        }
    );
    assert_eq!(
        not_pending(
            store
                .resolve("unknown", Resolution::Approve, "op", T0)
                .unwrap_err()
        ),
        NotPending::Unknown
    );
}

#[test]
fn late_approval_times_out_instead() {
    let dir = temp();
    let store = open(&dir);
    created(&store, "c1", "t", "k", T0);
    let err = store
        .resolve("c1", Resolution::Approve, "operator", T0 + TIMEOUT)
        .unwrap_err();
    let message = err.to_string();
    match not_pending(err) {
        NotPending::Expired { timed_out } => {
            assert_eq!(timed_out.state, ConfirmationState::Timeout);
            assert_eq!(timed_out.resolved_by.as_deref(), Some(RESOLVED_BY_EXPIRY));
            assert_eq!(timed_out.resolved_at_ms, Some(T0 + TIMEOUT));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        message.contains("c1") && message.contains("not pending"),
        "{message}"
    );
    // Persisted as timeout.
    assert_eq!(
        store.get_confirmation("c1").unwrap().unwrap().state,
        ConfirmationState::Timeout
    );
    assert_eq!(
        not_pending(
            store
                .resolve("c1", Resolution::Deny, "op", T0 + TIMEOUT + 1)
                .unwrap_err()
        ),
        NotPending::AlreadyResolved {
            state: ConfirmationState::Timeout
        }
    );
}

#[test]
fn explicit_timeout_resolution_works_before_expiry() {
    let dir = temp();
    let store = open(&dir);
    created(&store, "c1", "t", "k", T0);
    let r = store
        .resolve("c1", Resolution::Timeout, "bridge:timer", T0 + 5)
        .unwrap();
    assert_eq!(r.state, ConfirmationState::Timeout);
}

#[test]
fn concurrent_resolvers_exactly_one_wins() {
    let dir = temp();
    let store = Arc::new(open(&dir));
    for round in 0..10 {
        let id = format!("c-{round}");
        created(&store, &id, "t", &format!("k-{round}"), T0);
        let n = 8;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let store = Arc::clone(&store);
                let barrier = Arc::clone(&barrier);
                let id = id.clone();
                std::thread::spawn(move || {
                    let decision = match i % 3 {
                        0 => Resolution::Approve,
                        1 => Resolution::Deny,
                        _ => Resolution::Timeout,
                    };
                    barrier.wait();
                    store.resolve(&id, decision, &format!("resolver-{i}"), T0 + 1)
                })
            })
            .collect();
        let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<&ConfirmationRecord> =
            outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        for loser in outcomes.iter().filter_map(|o| o.as_ref().err()) {
            assert!(loser.is_pending_confirmation_not_found(), "{loser:?}");
        }
        let stored = store.get_confirmation(&id).unwrap().unwrap();
        assert_eq!(&stored, winners[0]);
    }
}

#[test]
fn expire_due_moves_only_expired_pending() {
    let dir = temp();
    let store = open(&dir);
    created(&store, "early", "t1", "k1", T0);
    created(&store, "late", "t2", "k2", T0 + 10_000);
    created(&store, "approved", "t3", "k3", T0);
    store
        .resolve("approved", Resolution::Approve, "op", T0 + 1)
        .unwrap();
    assert!(store.expire_due(T0 + TIMEOUT - 1).unwrap().is_empty());
    let expired = store.expire_due(T0 + TIMEOUT).unwrap();
    assert_eq!(
        expired
            .iter()
            .map(|c| c.confirmation_id.as_str())
            .collect::<Vec<_>>(),
        ["early"]
    );
    assert_eq!(expired[0].state, ConfirmationState::Timeout);
    assert_eq!(expired[0].resolved_by.as_deref(), Some(RESOLVED_BY_EXPIRY));
    assert!(
        store.expire_due(T0 + TIMEOUT).unwrap().is_empty(),
        "idempotent"
    );
    assert_eq!(
        store.get_confirmation("approved").unwrap().unwrap().state,
        ConfirmationState::Approved
    );
    assert_eq!(
        store.get_confirmation("late").unwrap().unwrap().state,
        ConfirmationState::Pending
    );
}

#[test]
fn recover_after_restart() {
    let dir = temp();
    {
        let store = open(&dir);
        created(&store, "in-time", "t1", "k1", T0 + 20_000);
        created(&store, "expired", "t2", "k2", T0);
        created(&store, "executing", "t3", "k3", T0);
        created(&store, "done", "t4", "k4", T0);
        created(&store, "denied", "t5", "k5", T0);
        store
            .resolve("executing", Resolution::Approve, "op", T0 + 1)
            .unwrap();
        store
            .resolve("done", Resolution::Approve, "op", T0 + 1)
            .unwrap();
        store
            .complete("done", &json!({"status": "ok"}), T0 + 2)
            .unwrap();
        store
            .resolve("denied", Resolution::Deny, "op", T0 + 1)
            .unwrap();
        // The process "dies" here (drop without any shutdown step).
    }
    let store = open(&dir);
    let now = T0 + TIMEOUT + 5;
    let recovery = store.recover_after_restart(now).unwrap();
    let ids = |v: &[ConfirmationRecord]| {
        v.iter()
            .map(|c| c.confirmation_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&recovery.result_unknown), ["executing"]);
    assert_eq!(ids(&recovery.timed_out), ["expired"]);
    assert_eq!(ids(&recovery.still_pending), ["in-time"]);
    assert_eq!(
        recovery.result_unknown[0].state,
        ConfirmationState::ResultUnknown
    );
    assert_eq!(
        store.get_confirmation("done").unwrap().unwrap().state,
        ConfirmationState::Completed
    );
    assert_eq!(
        store.get_confirmation("denied").unwrap().unwrap().state,
        ConfirmationState::Denied
    );
    // The unknown one can never be approved or completed again; its error result is attached.
    assert!(store.complete("executing", &json!({}), now).is_err());
    let unknown = store
        .attach_final_result(
            "executing",
            &json!({"status": "error", "error": {"code": "execution_result_unknown"}}),
            now,
        )
        .unwrap();
    assert_eq!(
        store.find_final(&unknown.identity).unwrap().unwrap().result["error"]["code"],
        "execution_result_unknown"
    );
    // The in-time one can still be approved.
    assert_eq!(
        store
            .resolve("in-time", Resolution::Approve, "op", now)
            .unwrap()
            .state,
        ConfirmationState::Approved
    );
    // Second recovery is a no-op apart from the newly approved one.
    let again = store.recover_after_restart(now).unwrap();
    assert_eq!(ids(&again.result_unknown), ["in-time"]);
    assert!(again.timed_out.is_empty() && again.still_pending.is_empty());
}

#[test]
fn list_pending_first_then_newest() {
    let dir = temp();
    let store = open(&dir);
    created(&store, "a", "t1", "k1", T0);
    created(&store, "b", "t2", "k2", T0 + 1);
    created(&store, "c", "t3", "k3", T0 + 2);
    store.resolve("c", Resolution::Deny, "op", T0 + 3).unwrap();
    let ids =
        |v: Vec<ConfirmationRecord>| v.into_iter().map(|c| c.confirmation_id).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .list_confirmations(&ConfirmationFilter::default())
            .unwrap()),
        ["b", "a", "c"]
    );
    let f = ConfirmationFilter {
        state: Some(ConfirmationState::Pending),
        ..Default::default()
    };
    assert_eq!(ids(store.list_confirmations(&f).unwrap()), ["b", "a"]);
    let f = ConfirmationFilter {
        state: Some(ConfirmationState::Denied),
        ..Default::default()
    };
    assert_eq!(ids(store.list_confirmations(&f).unwrap()), ["c"]);
    let f = ConfirmationFilter {
        limit: Some(1),
        ..Default::default()
    };
    assert_eq!(ids(store.list_confirmations(&f).unwrap()), ["b"]);
    let f = ConfirmationFilter {
        runtime: Some("hermes".to_owned()),
        ..Default::default()
    };
    assert!(store.list_confirmations(&f).unwrap().is_empty());
}

#[test]
fn invalid_input_is_rejected() {
    let dir = temp();
    let store = open(&dir);
    let mut ident = identity("t", "p", "k");
    ident.params_digest = "xyz".to_owned();
    let err = store
        .insert_pending(&new_confirmation("c", &ident, T0, TIMEOUT), 32)
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::Invalid {
            what: "params_digest",
            ..
        }
    ));
    let err = store
        .insert_pending(&new_confirmation("c", &identity("t", "p", "k"), T0, -1), 32)
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::Invalid {
            what: "expires_at_ms",
            ..
        }
    ));
}

#[test]
fn find_approved_names_only_the_executing_confirmation_of_that_identity() {
    let dir = temp();
    let store = open(&dir);
    let pending = created(&store, "pending", "t1", "k1", T0);
    let executing = created(&store, "executing", "t2", "k2", T0);
    let done = created(&store, "done", "t3", "k3", T0);
    store
        .resolve("executing", Resolution::Approve, "op", T0 + 1)
        .unwrap();
    store
        .resolve("done", Resolution::Approve, "op", T0 + 1)
        .unwrap();
    store
        .complete("done", &json!({"status": "ok"}), T0 + 2)
        .unwrap();
    let found = store.find_approved(&executing.identity).unwrap().unwrap();
    assert_eq!(found.confirmation_id, "executing");
    assert_eq!(found.state, ConfirmationState::Approved);
    // Waiting, finished, or another identity: none is executing.
    assert_eq!(store.find_approved(&pending.identity).unwrap(), None);
    assert_eq!(store.find_approved(&done.identity).unwrap(), None);
    let mut other = executing.identity.clone();
    other.idempotency_key = "k-other".to_owned();
    assert_eq!(store.find_approved(&other).unwrap(), None);
}
