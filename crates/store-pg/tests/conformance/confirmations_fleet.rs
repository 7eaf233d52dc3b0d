//! Confirmations in a fleet (PostgreSQL only): the inbox is shared — any daemon resolves any
//! confirmation, and one guarded UPDATE picks the single winner across daemons — while each
//! daemon's restart recovery settles only the confirmations it created.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use openphone_store::{
    ConfirmationState, ConfirmationStore, NotPending, PendingInsert, Resolution, StoreError,
};
use openphone_store_pg::PgStore;
use serde_json::json;

use super::fleet_support::{two_daemons, two_host_configs};
use super::support::{T0, identity, new_confirmation};

const TIMEOUT: i64 = 30_000;

fn insert(store: &PgStore, id: &str, at: i64, cap: usize) -> PendingInsert {
    let ident = identity(
        "openphone.url.open",
        &format!("params-{id}"),
        &format!("key-{id}"),
    );
    store
        .insert_pending(&new_confirmation(id, &ident, at, TIMEOUT), cap)
        .unwrap()
}

fn created(store: &PgStore, id: &str, at: i64) {
    let inserted = insert(store, id, at, 1000);
    assert!(
        matches!(inserted, PendingInsert::Created(_)),
        "{inserted:?}"
    );
}

#[test]
fn two_daemons_racing_to_resolve_100_confirmations_each_have_exactly_one_winner() {
    let Some((_schema, stores)) = two_daemons() else {
        return;
    };
    let ids: Vec<String> = (0..100).map(|i| format!("c-{i:03}")).collect();
    for (i, id) in ids.iter().enumerate() {
        created(&stores[i % 2], id, T0);
    }
    // Four resolvers, two per daemon, each walking the ids in its own order.
    let n = 4;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|t| {
            let store = Arc::clone(&stores[t % 2]);
            let barrier = Arc::clone(&barrier);
            let mut order = ids.clone();
            order.rotate_left(t * 25);
            if t % 2 == 1 {
                order.reverse();
            }
            std::thread::spawn(move || {
                barrier.wait();
                let mut won = Vec::new();
                for (k, id) in order.iter().enumerate() {
                    let decision = match (t + k) % 3 {
                        0 => Resolution::Approve,
                        1 => Resolution::Deny,
                        _ => Resolution::Timeout,
                    };
                    match store.resolve(id, decision, &format!("resolver-{t}"), T0 + 1) {
                        Ok(record) => won.push(record),
                        Err(StoreError::ConfirmationNotPending {
                            reason: NotPending::AlreadyResolved { .. },
                            ..
                        }) => {}
                        Err(other) => panic!("resolver {t} on {id}: {other:?}"),
                    }
                }
                won
            })
        })
        .collect();
    let mut winners = BTreeMap::new();
    for handle in handles {
        for record in handle.join().unwrap() {
            let id = record.confirmation_id.clone();
            assert!(
                winners.insert(id.clone(), record).is_none(),
                "{id} won twice"
            );
        }
    }
    assert_eq!(winners.len(), 100, "every confirmation has one winner");
    for (id, won) in &winners {
        // Whichever daemon reads it, the stored row is the winner's.
        for store in &stores {
            assert_eq!(store.get_confirmation(id).unwrap().as_ref(), Some(won));
        }
        assert_ne!(won.state, ConfirmationState::Pending);
    }
}

#[test]
fn a_restart_recovers_only_the_daemons_own_confirmations() {
    let Some((a, b, _schema)) = two_host_configs() else {
        return;
    };
    let host_b = PgStore::open(&b).unwrap();
    {
        let host_a = PgStore::open(&a).unwrap();
        created(&host_a, "a-executing", T0);
        created(&host_a, "a-expired", T0);
        created(&host_a, "a-in-time", T0 + 20_000);
        created(&host_b, "b-executing", T0);
        created(&host_b, "b-expired", T0);
        created(&host_b, "b-in-time", T0 + 20_000);
        host_a
            .resolve("a-executing", Resolution::Approve, "op", T0 + 1)
            .unwrap();
        // The inbox is shared: daemon A approves B's confirmation (B's phone acts).
        host_a
            .resolve("b-executing", Resolution::Approve, "op", T0 + 1)
            .unwrap();
        assert_eq!(
            host_a.confirmation_host("b-executing").unwrap().as_deref(),
            Some("host-b")
        );
        assert_eq!(
            host_b.confirmation_host("a-executing").unwrap().as_deref(),
            Some("host-a")
        );
        assert_eq!(host_a.confirmation_host("nope").unwrap(), None);
        // Daemon A "dies" here (dropped without any shutdown step); B lives on.
    }
    let host_a = PgStore::open(&a).unwrap();
    let now = T0 + TIMEOUT + 5;
    let recovery = host_a.recover_after_restart(now).unwrap();
    let ids = |v: &[openphone_store::ConfirmationRecord]| {
        v.iter()
            .map(|c| c.confirmation_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&recovery.result_unknown), ["a-executing"]);
    assert_eq!(ids(&recovery.timed_out), ["a-expired"]);
    assert_eq!(ids(&recovery.still_pending), ["a-in-time"]);

    // B's approved confirmation is still executing on B: untouched, and B completes it.
    let state = |id: &str| host_b.get_confirmation(id).unwrap().unwrap().state;
    assert_eq!(state("b-executing"), ConfirmationState::Approved);
    assert_eq!(state("b-expired"), ConfirmationState::Pending);
    assert_eq!(state("b-in-time"), ConfirmationState::Pending);
    let done = host_b
        .complete("b-executing", &json!({"status": "ok"}), now)
        .unwrap();
    assert_eq!(done.state, ConfirmationState::Completed);
    // B's own restart recovery then settles B's expired one, and only that.
    let b_recovery = host_b.recover_after_restart(now).unwrap();
    assert!(b_recovery.result_unknown.is_empty());
    assert_eq!(ids(&b_recovery.timed_out), ["b-expired"]);
    assert_eq!(ids(&b_recovery.still_pending), ["b-in-time"]);
}

#[test]
fn the_inbox_is_shared_but_the_per_runtime_cap_counts_per_daemon() {
    let Some((a, b, _schema)) = two_host_configs() else {
        return;
    };
    let (host_a, host_b) = (PgStore::open(&a).unwrap(), PgStore::open(&b).unwrap());
    assert!(matches!(
        insert(&host_a, "a1", T0, 2),
        PendingInsert::Created(_)
    ));
    assert!(matches!(
        insert(&host_a, "a2", T0, 2),
        PendingInsert::Created(_)
    ));
    assert_eq!(
        insert(&host_a, "a3", T0, 2),
        PendingInsert::TooMany { pending: 2 }
    );
    // Daemon A's runtime at its cap does not refuse daemon B's.
    assert!(matches!(
        insert(&host_b, "b1", T0, 2),
        PendingInsert::Created(_)
    ));
    assert_eq!(host_a.count_pending("openclaw", T0).unwrap(), 2);
    assert_eq!(host_b.count_pending("openclaw", T0).unwrap(), 1);
    // The same identity on another daemon while pending is the same confirmation.
    match insert(&host_b, "a1", T0 + 1, 2) {
        PendingInsert::Existing(existing) => assert_eq!(existing.confirmation_id, "a1"),
        other => panic!("{other:?}"),
    }
    // Both daemons list the whole fleet's inbox; either expires any of it.
    for store in [&host_a, &host_b] {
        let listed = store
            .list_confirmations(&openphone_store::ConfirmationFilter::default())
            .unwrap();
        assert_eq!(listed.len(), 3);
    }
    assert_eq!(host_b.next_pending_expiry().unwrap(), Some(T0 + TIMEOUT));
    assert_eq!(host_b.expire_due(T0 + TIMEOUT).unwrap().len(), 3);
    assert_eq!(host_a.next_pending_expiry().unwrap(), None);
}

#[test]
fn two_daemons_asking_for_the_same_100_identities_at_once_make_one_confirmation_each() {
    let Some((_schema, stores)) = two_daemons() else {
        return;
    };
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|t| {
            let store = Arc::clone(&stores[t]);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                (0..100)
                    .map(|i| {
                        let ident = identity("openphone.url.open", &format!("params-{i}"), "key");
                        let id = format!("{t}-{i:03}");
                        store
                            .insert_pending(&new_confirmation(&id, &ident, T0, TIMEOUT), 1000)
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<Vec<PendingInsert>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (i, pair) in answers[0].iter().zip(&answers[1]).enumerate() {
        let ids = match pair {
            (PendingInsert::Created(made), PendingInsert::Existing(found))
            | (PendingInsert::Existing(found), PendingInsert::Created(made)) => {
                (made.confirmation_id.clone(), found.confirmation_id.clone())
            }
            other => panic!("identity {i}: {other:?}"),
        };
        assert_eq!(
            ids.0, ids.1,
            "identity {i}: the second daemon found the first's"
        );
    }
    let pending = stores[0]
        .list_confirmations(&openphone_store::ConfirmationFilter::default())
        .unwrap();
    assert_eq!(pending.len(), 100);
}

#[test]
fn one_daemons_approvals_racing_anothers_expiry_timer_settle_each_confirmation_once() {
    let Some((_schema, stores)) = two_daemons() else {
        return;
    };
    let ids: Vec<String> = (0..60).map(|i| format!("c-{i:02}")).collect();
    // Confirmation i expires at T0 + 10 i + TIMEOUT.
    for (i, id) in (0i64..).zip(&ids) {
        created(&stores[0], id, T0 + 10 * i);
    }
    let barrier = Arc::new(Barrier::new(2));
    // Daemon A approves them all in order (its clock says they are in time) while daemon B's
    // expiry timer (its clock says they are due) times them out in the same order, one a tick.
    let approver = {
        let (store, barrier, ids) = (Arc::clone(&stores[0]), Arc::clone(&barrier), ids.clone());
        std::thread::spawn(move || {
            barrier.wait();
            ids.iter()
                .filter_map(
                    |id| match store.resolve(id, Resolution::Approve, "operator", T0 + 1) {
                        Ok(record) => Some(record.confirmation_id),
                        Err(StoreError::ConfirmationNotPending {
                            reason: NotPending::AlreadyResolved { .. },
                            ..
                        }) => None,
                        Err(other) => panic!("{id}: {other:?}"),
                    },
                )
                .collect::<Vec<_>>()
        })
    };
    let timer = {
        let (store, barrier) = (Arc::clone(&stores[1]), Arc::clone(&barrier));
        std::thread::spawn(move || {
            barrier.wait();
            let mut expired = Vec::new();
            for i in 0..60 {
                expired.extend(
                    store
                        .expire_due(T0 + 10 * i + TIMEOUT)
                        .unwrap()
                        .into_iter()
                        .map(|r| r.confirmation_id),
                );
            }
            expired
        })
    };
    let approved = approver.join().unwrap();
    let mut expired = timer.join().unwrap();
    // Whatever is left pending after the race is timed out now.
    expired.extend(
        stores[1]
            .expire_due(T0 + 10 * 60 + TIMEOUT)
            .unwrap()
            .into_iter()
            .map(|r| r.confirmation_id),
    );
    let mut settled: Vec<String> = approved.iter().chain(&expired).cloned().collect();
    settled.sort();
    assert_eq!(settled, ids, "each settled once: approved {approved:?}");
    for id in &approved {
        let state = stores[1].get_confirmation(id).unwrap().unwrap().state;
        assert_eq!(state, ConfirmationState::Approved, "{id}");
    }
    for id in &expired {
        let state = stores[0].get_confirmation(id).unwrap().unwrap().state;
        assert_eq!(state, ConfirmationState::Timeout, "{id}");
    }
}
