//! Retention on SQLite's own file: a backlog written straight into the database (faster than
//! through the store) is pruned in bounded batches. The PostgreSQL twin is
//! `crates/store-pg/tests/conformance/retention_pg.rs`.

use openphone_store::Retention;

use super::retention::{key, result_of};
use super::support::{T0, open, temp};

const DAY: i64 = 24 * 60 * 60 * 1000;

#[test]
fn a_large_backlog_is_pruned_in_bounded_batches() {
    let dir = temp();
    let store = open(&dir);
    {
        let conn = rusqlite::Connection::open(super::support::data_dir(&dir).join("openphone.db"))
            .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for i in 0..2500usize {
            let k = key(i);
            tx.execute(
                "INSERT INTO final_results VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                rusqlite::params![
                    k.runtime,
                    k.runtime_session_id,
                    k.tool,
                    k.params_digest,
                    k.idempotency_key,
                    format!("r-{i}"),
                    result_of(100, "ok").to_string(),
                    T0 + i64::try_from(i).unwrap()
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let now = T0 + 10 * DAY;
    let first = store.prune_replay(now, Retention::default()).unwrap();
    assert_eq!(
        (first.final_results, first.more),
        (openphone_store::PRUNE_BATCH, true)
    );
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
