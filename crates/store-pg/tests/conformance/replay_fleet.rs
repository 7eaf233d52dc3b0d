//! Replay in a fleet (PostgreSQL only): the identity key is shared by every daemon, so a retry
//! that reaches another daemon gets the same final result (or `execution_result_unknown`),
//! never a second execution; each daemon's restart recovery settles only its own executions.

use std::sync::{Arc, Barrier};

use openphone_store::{AuditStore, Execution, IdentityKey, ReplayStore, StoreError};
use openphone_store_pg::PgStore;
use serde_json::json;

use super::executions::attempt;
use super::fleet_support::{race, two_daemons, two_host_configs};
use super::support::{T0, identity};

fn execution(key: &IdentityKey, request_id: &str) -> Execution {
    Execution {
        identity: key.clone(),
        request_id: request_id.to_owned(),
        attempt: attempt(request_id),
        started_at_ms: T0,
    }
}

#[test]
fn one_identity_begun_on_two_daemons_at_once_begins_exactly_once() {
    let Some((_schema, stores)) = two_daemons() else {
        return;
    };
    const N: usize = 40;
    for round in 0..N {
        let key = identity("openphone.memory.save", &format!("p-{round}"), "k");
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(n, store)| {
                let (store, barrier, key) = (Arc::clone(store), Arc::clone(&barrier), key.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    store.begin_execution(&execution(&key, &format!("r-{round}-{n}")))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let begun = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(begun, 1, "round {round}: {results:?}");
        for result in &results {
            if let Err(err) = result {
                assert!(
                    matches!(
                        err,
                        StoreError::AlreadyExists {
                            table: "executions",
                            ..
                        }
                    ),
                    "round {round}: {err:?}"
                );
            }
        }
        // Exactly one attempt was audited, on the chain of the daemon that began it.
        let audited: usize = (0..2)
            .map(|n| {
                stores[0]
                    .find_audit(&format!("runtime:openclaw:r-{round}-{n}"))
                    .unwrap()
                    .len()
            })
            .sum();
        assert_eq!(audited, 1, "round {round}");
    }
    let (in_a, in_b) = (
        stores[0].list_executions().unwrap().len(),
        stores[1].list_executions().unwrap().len(),
    );
    assert_eq!(in_a + in_b, N);
    assert_eq!(stores[0].list_fleet_executions().unwrap().len(), N);
}

#[test]
fn a_retry_on_another_daemon_gets_the_same_final_result_and_never_runs_again() {
    let Some((a, b, _schema)) = two_host_configs() else {
        return;
    };
    let (a, b) = (PgStore::open(&a).unwrap(), PgStore::open(&b).unwrap());
    let key = identity("openphone.memory.save", "p1", "k1");
    a.begin_execution(&execution(&key, "r1")).unwrap();
    // In flight on host-a: host-b sees it and cannot begin it.
    assert_eq!(b.find_execution(&key).unwrap(), Some(execution(&key, "r1")));
    let err = b.begin_execution(&execution(&key, "r2")).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AlreadyExists {
                table: "executions",
                ..
            }
        ),
        "{err:?}"
    );
    let result = json!({"status": "ok", "request_id": "r1"});
    let outcome = execution(&key, "r1").attempt;
    let stored = a
        .finish_execution(&key, "r1", &result, &outcome, T0 + 5)
        .unwrap();
    // Finished on host-a: host-b replays the same result and refuses a new execution.
    assert_eq!(b.find_final(&key).unwrap(), Some(stored));
    assert_eq!(b.find_execution(&key).unwrap(), None);
    let err = b.begin_execution(&execution(&key, "r3")).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AlreadyExists {
                table: "final_results",
                ..
            }
        ),
        "{err:?}"
    );
    // A request id seen by one daemon is a repeat (or a conflict) on the other.
    let scope = key.scope();
    assert_eq!(
        a.remember_request(&scope, "r1", &key.tool, &key.params_digest, T0)
            .unwrap(),
        openphone_store::RequestCheck::New
    );
    assert!(matches!(
        b.remember_request(&scope, "r1", &key.tool, &key.params_digest, T0 + 1)
            .unwrap(),
        openphone_store::RequestCheck::Repeat(_)
    ));
}

#[test]
fn restart_recovery_lists_only_this_daemons_executions() {
    let Some((a_config, b_config, _schema)) = two_host_configs() else {
        return;
    };
    let (x, y) = (
        identity("openphone.memory.save", "px", "kx"),
        identity("openphone.memory.save", "py", "ky"),
    );
    let b = PgStore::open(&b_config).unwrap();
    {
        let a = PgStore::open(&a_config).unwrap();
        a.begin_execution(&execution(&x, "rx")).unwrap();
        b.begin_execution(&execution(&y, "ry")).unwrap();
    }
    // host-a restarts: it settles its own interrupted execution, not host-b's running one.
    let a = PgStore::open(&a_config).unwrap();
    assert_eq!(a.list_executions().unwrap(), [execution(&x, "rx")]);
    assert_eq!(b.list_executions().unwrap(), [execution(&y, "ry")]);
    let mut fleet = a.list_fleet_executions().unwrap();
    fleet.sort_by(|l, r| l.0.cmp(&r.0));
    assert_eq!(
        fleet,
        [
            ("host-a".to_owned(), execution(&x, "rx")),
            ("host-b".to_owned(), execution(&y, "ry")),
        ]
    );
    // A retry of host-b's request that reaches host-a finds it (fleet-wide) and is answered
    // from it rather than run.
    assert_eq!(a.find_execution(&y).unwrap(), Some(execution(&y, "ry")));
    drop((a, b));
}

#[test]
fn one_request_id_remembered_on_two_daemons_at_once_is_new_exactly_once() {
    let Some((_schema, stores)) = two_daemons() else {
        return;
    };
    for round in 0..30 {
        let key = identity("openphone.memory.save", &format!("p-{round}"), "k");
        let request_id = format!("req-{round}");
        let checks = race(&stores, 2, move |store, _| {
            store
                .remember_request(&key.scope(), &request_id, &key.tool, &key.params_digest, T0)
                .unwrap()
        });
        let new = checks
            .iter()
            .filter(|c| **c == openphone_store::RequestCheck::New)
            .count();
        assert_eq!(new, 1, "round {round}: {checks:?}");
        assert!(
            checks.iter().all(|c| matches!(
                c,
                openphone_store::RequestCheck::New | openphone_store::RequestCheck::Repeat(_)
            )),
            "round {round}: {checks:?}"
        );
    }
}

#[test]
fn one_final_result_recorded_on_two_daemons_at_once_is_the_first_everywhere() {
    let Some((_schema, stores)) = two_daemons() else {
        return;
    };
    for round in 0..30 {
        let key = identity("openphone.memory.save", &format!("p-{round}"), "k");
        let probe = key.clone();
        let stored = race(&stores, 2, move |store, t| {
            store
                .record_final(&key, &format!("r-{t}"), &json!({"by": t}), T0)
                .unwrap()
        });
        // Every caller got the one stored result, and every daemon reads it.
        assert!(
            stored.iter().all(|s| *s == stored[0]),
            "round {round}: {stored:?}"
        );
        for store in &stores {
            assert_eq!(store.find_final(&probe).unwrap().as_ref(), Some(&stored[0]));
        }
    }
}

#[test]
fn two_daemons_executing_different_requests_at_once_all_succeed() {
    // Eight callers on two daemons, each request remembered, begun and finished: no write
    // may fail for contention with the other daemon's writes of other identities.
    let Some((_schema, stores)) = two_daemons() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Tables of a few index pages, as the bench had when it failed.
        for i in 0..300 {
            request(&stores[0], &format!("warm-{i}")).await;
        }
        let callers: Vec<_> = (0..8)
            .map(|c| {
                let store = Arc::clone(&stores[c % 2]);
                tokio::spawn(async move {
                    for i in 0..60 {
                        request(&store, &format!("c{c}-{i}")).await;
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap();
        }
    });
    assert_eq!(stores[0].count_final_results().unwrap(), 300 + 8 * 60);
    assert!(stores[0].list_fleet_executions().unwrap().is_empty());
    assert!(stores[0].verify_audit().unwrap().is_intact());
}

/// One mutating request as the bridge stores it: remembered, begun, finished.
async fn request(store: &PgStore, name: &str) {
    let key = identity("openphone.memory.save", name, name);
    store
        .remember_request_async(&key.scope(), name, &key.tool, &key.params_digest, T0)
        .await
        .unwrap();
    let begun = execution(&key, name);
    let outcome = begun.attempt.clone();
    store.begin_execution_async(begun).await.unwrap();
    store
        .finish_execution_async(
            key,
            name.to_owned(),
            json!({"status": "ok", "request_id": name}),
            outcome,
            T0 + 1,
        )
        .await
        .unwrap();
}
