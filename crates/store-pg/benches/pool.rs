#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is a failed run
//! The PostgreSQL store's plumbing, measured: commits per second of one-row writes through the
//! daemon's single writer (SERIALIZABLE, fsync on), reads per second through the readers, and
//! the same writes from two daemons contending for one row (conflicts retried).
//!
//! `OPENPHONE_TEST_PG_URL=$(bash tests/postgres/cluster.sh start) cargo bench -p openphone-store-pg --bench pool`
//! Prints figures; asserts nothing about time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use openphone_clock::Stopwatch;
use openphone_store::StoreError;
use openphone_store_pg::testing::{self, ctx, fresh_schema, test_url};
use openphone_store_pg::{PgConfig, PgStore};

const WRITES: u64 = 500;
const READS: u64 = 2000;

fn with_host(config: &PgConfig, host: &str) -> PgConfig {
    let mut config = config.clone();
    config.host_id = host.to_owned();
    config
}

/// One read-modify-write of the hot row; `lock_first`: `LOCK TABLE` before the first query, so
/// the transaction's snapshot is taken after the other daemon's commit (no 40001).
fn increment(store: &PgStore, runs: &Arc<AtomicU64>, lock_first: bool) -> Result<i64, StoreError> {
    let runs = Arc::clone(runs);
    testing::write(store, "bench.increment", "1", move |tx| {
        runs.fetch_add(1, Ordering::Relaxed);
        if lock_first {
            ctx(
                tx.batch_execute("LOCK TABLE counter IN SHARE ROW EXCLUSIVE MODE"),
                "bench.increment",
                "1",
            )?;
        }
        let n: i64 = ctx(
            tx.query_one("SELECT n FROM counter WHERE id = 1", &[]),
            "bench.increment",
            "1",
        )?
        .get(0);
        ctx(
            tx.execute("UPDATE counter SET n = $1 WHERE id = 1", &[&(n + 1)]),
            "bench.increment",
            "1",
        )?;
        Ok(n + 1)
    })
}

fn main() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let opened = Stopwatch::start();
    let a = PgStore::open(&with_host(&config, "bench-a")).unwrap();
    println!(
        "open (connect x3, migrate, host lock): {:?}",
        opened.elapsed()
    );
    testing::write(&a, "bench.create", "", |tx| {
        ctx(
            tx.batch_execute(
                "CREATE TABLE counter (id INT PRIMARY KEY, n BIGINT NOT NULL);
                 INSERT INTO counter VALUES (1, 0);",
            ),
            "bench.create",
            "",
        )
    })
    .unwrap();

    let runs = Arc::new(AtomicU64::new(0));
    let clock = Stopwatch::start();
    for _ in 0..WRITES {
        increment(&a, &runs, false).unwrap();
    }
    let took = clock.elapsed();
    println!(
        "one daemon: {WRITES} read-modify-write commits in {took:?}: {:.0} commits/s, {:.2} ms each",
        WRITES as f64 / took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / WRITES as f64
    );

    let clock = Stopwatch::start();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..READS / 2 {
                    testing::read(&a, "bench.read", "1", |c| {
                        ctx(
                            c.query_one("SELECT n FROM counter WHERE id = 1", &[]),
                            "bench.read",
                            "1",
                        )
                        .map(|r| r.get::<_, i64>(0))
                    })
                    .unwrap();
                }
            });
        }
    });
    let took = clock.elapsed();
    println!(
        "reads (2 callers, 2 readers): {READS} in {took:?}: {:.0} reads/s",
        READS as f64 / took.as_secs_f64()
    );

    let b = PgStore::open(&with_host(&config, "bench-b")).unwrap();
    for lock_first in [false, true] {
        let runs = Arc::new(AtomicU64::new(0));
        let conflicts = AtomicU64::new(0);
        let clock = Stopwatch::start();
        std::thread::scope(|s| {
            for store in [&a, &b] {
                let (runs, conflicts) = (&runs, &conflicts);
                s.spawn(move || {
                    for _ in 0..WRITES / 2 {
                        match increment(store, runs, lock_first) {
                            Ok(_) => {}
                            Err(StoreError::Conflict { .. }) => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                });
            }
        });
        let took = clock.elapsed();
        let ran = runs.load(Ordering::Relaxed);
        let conflicts = conflicts.load(Ordering::Relaxed);
        println!(
            "two daemons, back-to-back read-modify-writes of one row{}: {WRITES} writes in {took:?} \
             ({:.0}/s): {} committed, {conflicts} answered Conflict after 10 runs, {ran} runs in all",
            if lock_first { ", LOCK TABLE first" } else { "" },
            WRITES as f64 / took.as_secs_f64(),
            WRITES - conflicts,
        );
    }
}
