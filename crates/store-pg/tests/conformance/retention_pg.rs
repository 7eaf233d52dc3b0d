//! Retention on PostgreSQL: the twin of the SQLite suite's `retention_sqlite.rs` (a backlog
//! larger than one batch is pruned in bounded batches, oldest first), and prunes from several
//! daemons of a fleet at once.

use std::sync::{Arc, Barrier};

use openphone_store::{PRUNE_BATCH, ReplayStore, Retention};
use openphone_store_pg::{PgStore, testing};

use super::retention::{key, result_of};
use super::support::{T0, open, temp};

const DAY: i64 = 24 * 60 * 60 * 1000;

#[test]
fn a_large_backlog_is_pruned_in_bounded_batches() {
    let dir = temp();
    let store = open(&dir);
    for i in 0..2500usize {
        store
            .record_final(
                &key(i),
                &format!("r-{i}"),
                &result_of(100, "ok"),
                T0 + i64::try_from(i).unwrap(),
            )
            .unwrap();
    }
    let now = T0 + 10 * DAY;
    let first = store.prune_replay(now, Retention::default()).unwrap();
    assert_eq!((first.final_results, first.more), (PRUNE_BATCH, true));
    let second = store.prune_replay(now, Retention::default()).unwrap();
    assert_eq!(
        (second.final_results, second.more),
        (2500 - 128 - 2000, false)
    );
    assert_eq!(store.count_final_results().unwrap(), 128);
    // Oldest first: the survivors are the newest.
    assert!(store.find_final(&key(2372)).unwrap().unwrap().result["status"] == "ok");
    assert!(store.find_final(&key(2371)).unwrap().unwrap().result["status"] == "error");
}

#[test]
fn three_daemons_pruning_at_once_prune_each_result_once_without_errors() {
    let Some(url) = testing::test_url() else {
        return;
    };
    let (config, _schema) = testing::fresh_schema(&url);
    let stores: Vec<Arc<PgStore>> = ["host-a", "host-b", "host-c"]
        .iter()
        .map(|host| {
            let mut c = config.clone();
            c.host_id = (*host).to_owned();
            Arc::new(PgStore::open(&c).unwrap())
        })
        .collect();
    // 2300 old results (2172 due: more than one batch) and request ids, from all three.
    let scope = openphone_store::Scope::new("openclaw", "sess-1");
    for i in 0..2300usize {
        let store = &stores[i % 3];
        let at = T0 + i64::try_from(i).unwrap();
        store
            .record_final(&key(i), &format!("r-{i}"), &result_of(100, "ok"), at)
            .unwrap();
        store
            .remember_request(&scope, &format!("r-{i}"), "t", &key(i).params_digest, at)
            .unwrap();
    }
    let now = T0 + 10 * DAY;
    let barrier = Arc::new(Barrier::new(stores.len()));
    let handles: Vec<_> = stores
        .iter()
        .map(|store| {
            let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let (mut results, mut bytes, mut ids) = (0, 0, 0);
                // Each daemon prunes until it sees nothing more due, as the housekeeping
                // tick does.
                for _ in 0..400 {
                    let report = store.prune_replay(now, Retention::default()).unwrap();
                    if report == openphone_store::PruneReport::default() {
                        // Another daemon is pruning (or nothing is due): look again shortly.
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    results += report.final_results;
                    bytes += report.result_bytes;
                    ids += report.request_ids;
                    if !report.more && store.count_final_results().unwrap() == 128 {
                        break;
                    }
                }
                (results, bytes, ids)
            })
        })
        .collect();
    let totals = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0, 0), |(r, b, i), (r2, b2, i2)| {
            (r + r2, b + b2, i + i2)
        });
    // Every due result and request id pruned exactly once across the fleet.
    assert_eq!(totals, (2300 - 128, (2300 - 128) * 100, 2300 - 128));
    for store in &stores {
        assert_eq!(store.count_final_results().unwrap(), 128);
    }
    // Every pruned result answers through its tombstone on every daemon.
    for store in &stores {
        let answer = store.find_final(&key(0)).unwrap().unwrap();
        assert_eq!(answer.result["error"]["code"], "execution_result_unknown");
        assert_eq!(
            store.find_final(&key(2299)).unwrap().unwrap().result["status"],
            "ok"
        );
    }
    drop(stores);
}
