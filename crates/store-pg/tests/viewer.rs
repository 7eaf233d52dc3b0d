#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test
//! `PgStore::open_viewer`, what the offline commands open, against a real server: no host lock
//! (a viewer beside the daemon of its host id, a daemon starting beside a viewer), no
//! `fleet_hosts` row, no migration (a schema of another version refused, naming it), every
//! write refused; and `Fleet::touch` marking a daemon seen.
//!
//! Needs `OPENPHONE_TEST_PG_URL` (`bash tests/postgres/cluster.sh start` prints it); without it
//! each test prints "skipped: OPENPHONE_TEST_PG_URL not set" and returns.

use openphone_store::{Fleet, StoreError};
use openphone_store_pg::testing::{self, ctx, fresh_schema, test_url};
use openphone_store_pg::{PG_SCHEMA_VERSION, PgStore};

#[test]
fn a_viewer_takes_no_host_lock_registers_nothing_and_writes_nothing() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let daemon = PgStore::open(&config).unwrap();
    // Beside the live daemon of the same host id: a second daemon would be refused.
    let viewer = PgStore::open_viewer(&config).unwrap();
    assert!(viewer.is_viewer());
    assert!(!daemon.is_viewer());
    assert_eq!(viewer.host_id(), config.host_id);
    let hosts = viewer.hosts().unwrap();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert!(hosts[0].live, "{hosts:?}");
    // Reads work; writes are refused with words saying where writes go.
    assert_eq!(
        viewer.audit_chains().unwrap(),
        daemon.audit_chains().unwrap()
    );
    let refused = testing::write(&viewer, "test.write", "x", |tx| {
        ctx(tx.batch_execute("SELECT 1"), "test.write", "x")
    })
    .unwrap_err();
    assert!(
        matches!(refused, StoreError::Commit { .. })
            && refused.to_string().contains("openphone serve"),
        "{refused}"
    );
    assert!(viewer.touch().is_err());
    // The daemon stops and starts again while the viewer is open: the lock was never the viewer's.
    drop(daemon);
    let again = PgStore::open(&config).unwrap();
    assert_eq!(viewer.hosts().unwrap().len(), 1);
    drop(again);
    // With no daemon live, the viewer sees its host as not live (it holds no lock itself).
    let hosts = viewer.hosts().unwrap();
    assert!(!hosts[0].live, "{hosts:?}");
}

#[test]
fn a_viewer_refuses_a_database_without_the_schema_or_of_another_version() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let empty = PgStore::open_viewer(&config).unwrap_err().to_string();
    assert!(empty.contains("no daemon has opened it"), "{empty}");
    // Nothing was created by looking: still no store, until a daemon opens it.
    assert!(PgStore::open_viewer(&config).is_err());
    drop(PgStore::open(&config).unwrap());
    drop(PgStore::open_viewer(&config).unwrap());

    testing::admin_sql(
        &config,
        "INSERT INTO schema_migrations (version, applied_at_ms) VALUES (99, 0)",
    )
    .unwrap();
    let newer = PgStore::open_viewer(&config).unwrap_err();
    assert!(
        matches!(newer, StoreError::SchemaTooNew { found: 99, supported } if supported == PG_SCHEMA_VERSION),
        "{newer}"
    );
    testing::admin_sql(&config, "DELETE FROM schema_migrations").unwrap();
    let older = PgStore::open_viewer(&config).unwrap_err().to_string();
    assert!(
        older.contains("schema version 0") && older.contains("does not migrate"),
        "{older}"
    );
}

#[test]
fn touch_marks_the_daemon_seen_now() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let daemon = PgStore::open(&config).unwrap();
    testing::admin_sql(&config, "UPDATE fleet_hosts SET last_seen_at_ms = 1").unwrap();
    assert_eq!(daemon.hosts().unwrap()[0].last_seen_at_ms, 1);
    Fleet::touch(&daemon).unwrap();
    let seen = daemon.hosts().unwrap()[0].last_seen_at_ms;
    assert!(seen > 1_000_000_000_000, "{seen}");
}
