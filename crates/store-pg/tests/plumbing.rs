#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test
//! The PostgreSQL store's plumbing against a real server: migrations under concurrent opens,
//! serialization-failure retries, the host lock, passwords, lost connections and server restarts.
//!
//! Needs `OPENPHONE_TEST_PG_URL` (`bash tests/postgres/cluster.sh start` prints it); without it
//! each test prints "skipped: OPENPHONE_TEST_PG_URL not set" and returns.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier};

use openphone_store::StoreError;
use openphone_store_pg::testing::{self, ctx, fresh_schema, test_url};
use openphone_store_pg::{PasswordSource, PgConfig, PgStore, TlsMode};

fn admin(url: &str) -> postgres::Client {
    testing::connect(&PgConfig::new(url, "test-admin", std::env::temp_dir())).unwrap()
}

fn with_host(config: &PgConfig, host_id: &str) -> PgConfig {
    let mut config = config.clone();
    config.host_id = host_id.to_owned();
    config
}

fn create_counter(store: &PgStore) {
    testing::write(store, "test.create", "", |tx| {
        ctx(
            tx.batch_execute(
                "CREATE TABLE counter (id INT PRIMARY KEY, n BIGINT NOT NULL);
                 INSERT INTO counter VALUES (1, 0);",
            ),
            "test.create",
            "",
        )
    })
    .unwrap();
}

fn counter(store: &PgStore) -> i64 {
    testing::read(store, "test.count", "", |client| {
        ctx(
            client.query_one("SELECT n FROM counter WHERE id = 1", &[]),
            "test.count",
            "",
        )
        .map(|row| row.get(0))
    })
    .unwrap()
}

#[test]
fn migrations_run_once_under_three_concurrent_opens() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let barrier = Arc::new(Barrier::new(3));
    let opens: Vec<_> = (0..3)
        .map(|i| {
            let config = with_host(&config, &format!("{}-{i}", config.host_id));
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                PgStore::open(&config).unwrap()
            })
        })
        .collect();
    let stores: Vec<PgStore> = opens.into_iter().map(|t| t.join().unwrap()).collect();
    let applied: Vec<i64> = stores
        .iter()
        .flat_map(|s| s.migrations_applied().to_vec())
        .collect();
    assert_eq!(applied, vec![1], "exactly one opener applies migration 1");
    let rows = testing::read(&stores[0], "test.migrations", "", |client| {
        ctx(
            client.query("SELECT version FROM schema_migrations", &[]),
            "test.migrations",
            "",
        )
    })
    .unwrap();
    assert_eq!(rows.len(), 1);
    let hosts: i64 = testing::read(&stores[0], "test.hosts", "", |client| {
        ctx(
            client.query_one("SELECT count(*) FROM fleet_hosts", &[]),
            "test.hosts",
            "",
        )
        .map(|row| row.get(0))
    })
    .unwrap();
    assert_eq!(hosts, 3, "each daemon is recorded in fleet_hosts");
}

#[test]
fn reopening_a_migrated_schema_applies_nothing_and_a_newer_schema_is_refused() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let first = PgStore::open(&config).unwrap();
    assert_eq!(first.migrations_applied(), &[1]);
    drop(first);
    let again = PgStore::open(&config).unwrap();
    assert!(again.migrations_applied().is_empty());
    testing::write(&again, "test.future", "", |tx| {
        ctx(
            tx.execute("INSERT INTO schema_migrations VALUES (99, 0)", &[]),
            "test.future",
            "",
        )
    })
    .unwrap();
    drop(again);
    match PgStore::open(&config) {
        Err(StoreError::SchemaTooNew {
            found: 99,
            supported,
        }) => assert_eq!(supported, 1),
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

/// Two daemons read the same row, then both update it: PostgreSQL aborts the second with 40001;
/// the writer runs it again and both increments land.
#[test]
fn a_serialization_failure_is_retried() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let a = PgStore::open(&with_host(&config, "daemon-a")).unwrap();
    let b = PgStore::open(&with_host(&config, "daemon-b")).unwrap();
    create_counter(&a);
    let both_read = Arc::new(Barrier::new(2));
    let calls = Arc::new(AtomicU32::new(0));
    let increment = |store: &PgStore| {
        let both_read = Arc::clone(&both_read);
        let calls = Arc::clone(&calls);
        let first = AtomicBool::new(true);
        testing::write(store, "test.increment", "1", move |tx| {
            calls.fetch_add(1, Ordering::SeqCst);
            let n: i64 = ctx(
                tx.query_one("SELECT n FROM counter WHERE id = 1", &[]),
                "test.increment",
                "1",
            )?
            .get(0);
            if first.swap(false, Ordering::SeqCst) {
                both_read.wait();
            }
            ctx(
                tx.execute("UPDATE counter SET n = $1 WHERE id = 1", &[&(n + 1)]),
                "test.increment",
                "1",
            )?;
            Ok(n + 1)
        })
    };
    let (ra, rb) = std::thread::scope(|s| {
        let ta = s.spawn(|| increment(&a));
        let tb = s.spawn(|| increment(&b));
        (ta.join().unwrap(), tb.join().unwrap())
    });
    let mut results = vec![ra.unwrap(), rb.unwrap()];
    results.sort();
    assert_eq!(results, vec![1, 2]);
    assert_eq!(counter(&a), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the loser ran twice");
}

#[test]
fn ten_serialization_failures_in_a_row_are_a_conflict() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let result = testing::write(&store, "test.always_conflicts", "x", move |tx| {
        counted.fetch_add(1, Ordering::SeqCst);
        ctx(
            tx.batch_execute(
                "DO $$ BEGIN RAISE EXCEPTION 'made up' USING ERRCODE = '40001'; END $$",
            ),
            "test.always_conflicts",
            "x",
        )
    });
    match result {
        Err(StoreError::Conflict { table, id, detail }) => {
            assert_eq!((table, id.as_str()), ("test.always_conflicts", "x"));
            assert!(detail.contains("serialization"), "{detail}");
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 10);
    // The writer is still serving.
    create_counter(&store);
    assert_eq!(counter(&store), 0);
}

#[test]
fn a_second_daemon_with_the_same_host_id_is_refused_naming_the_host() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let config = with_host(&config, "shelf-3");
    let first = PgStore::open(&config).unwrap();
    let err = PgStore::open(&config).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
    assert!(text.contains("\"shelf-3\""), "{text}");
    assert!(text.contains("live daemon"), "{text}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())),
        "{text}"
    );
    let host_locks = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                 WHERE l.locktype = 'advisory' AND a.application_name = 'openphone:shelf-3'",
                &[],
            )
            .unwrap()
            .get(0)
    };
    let mut admin = admin(&url);
    assert_eq!(host_locks(&mut admin), 1, "the writer holds the host lock");
    // Dropping the store joins its threads; the writer releases the lock before it ends, so a
    // restarted daemon opens at once.
    drop(first);
    assert_eq!(host_locks(&mut admin), 0);
    let second = PgStore::open(&config).unwrap();
    assert_eq!(second.host_id(), "shelf-3");
}

fn url_with_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let rest = rest.split_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}@{rest}")
}

#[test]
fn a_password_from_a_file_opens_and_a_wrong_one_is_refused_without_echoing_it() {
    let Some(url) = test_url() else { return };
    let mut admin = admin(&url);
    let group: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_roles WHERE rolname = 'openphone_password_users'",
            &[],
        )
        .unwrap()
        .get(0);
    if group == 0 {
        println!(
            "skipped: the cluster has no role openphone_password_users (start it with tests/postgres/cluster.sh)"
        );
        return;
    }
    let (config, schema) = fresh_schema(&url);
    let role = format!("pw_{}", schema.name());
    let password = format!("S3cret-{}", std::process::id());
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{password}' IN ROLE openphone_password_users;
             GRANT USAGE, CREATE ON SCHEMA {} TO {role};",
            schema.name()
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("password");
    std::fs::write(&good, format!("{password}\n")).unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "Wr0ng-Passw0rd").unwrap();

    let mut config = with_host(&config, "pw-host");
    config.url = url_with_user(&url, &role);
    let opened = config
        .clone()
        .with_password(&PasswordSource::File(good.clone()))
        .unwrap();
    assert!(
        !format!("{opened:?}").contains(&password),
        "Debug shows no password"
    );
    let store = PgStore::open(&opened).unwrap();
    let user: String = testing::read(&store, "test.user", "", |c| {
        ctx(
            c.query_one("SELECT current_user::text", &[]),
            "test.user",
            "",
        )
        .map(|r| r.get(0))
    })
    .unwrap();
    assert_eq!(user, role);
    drop(store);

    let refused = config.with_password(&PasswordSource::File(wrong)).unwrap();
    let text = PgStore::open(&refused).unwrap_err().to_string();
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(text.contains(&role), "{text}");
    assert!(!text.contains("Wr0ng-Passw0rd"), "{text}");

    admin
        .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role};"))
        .unwrap();
}

#[test]
fn a_write_whose_connection_is_lost_before_commit_runs_again_on_a_new_one() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    create_counter(&store);
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let n = testing::write(&store, "test.lost", "1", move |tx| {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            // This session ends here, before COMMIT.
            ctx(
                tx.batch_execute("SELECT pg_terminate_backend(pg_backend_pid())"),
                "test.lost",
                "1",
            )?;
        }
        ctx(
            tx.query_one("UPDATE counter SET n = n + 1 WHERE id = 1 RETURNING n", &[]),
            "test.lost",
            "1",
        )
        .map(|row| row.get::<_, i64>(0))
    })
    .unwrap();
    assert_eq!(n, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(counter(&store), 1);
}

/// The session dies while COMMIT runs (a deferred trigger ends it): whether the transaction
/// committed is unknown to the client, so the write is not run again.
#[test]
fn a_write_whose_connection_is_lost_during_commit_is_outcome_unknown_and_not_rerun() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    testing::write(&store, "test.create", "", |tx| {
        ctx(
            tx.batch_execute(
                "CREATE TABLE doomed (id INT PRIMARY KEY);
                 CREATE FUNCTION end_my_session() RETURNS trigger LANGUAGE plpgsql AS
                   $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$;
                 CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON doomed
                   DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION end_my_session();",
            ),
            "test.create",
            "",
        )
    })
    .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let result = testing::write(&store, "test.doomed", "7", move |tx| {
        counted.fetch_add(1, Ordering::SeqCst);
        ctx(
            tx.execute("INSERT INTO doomed VALUES (7)", &[]),
            "test.doomed",
            "7",
        )
    });
    match result {
        Err(StoreError::Commit { op, id, detail }) => {
            assert_eq!((op, id.as_str()), ("test.doomed", "7"));
            assert!(detail.contains("outcome unknown"), "{detail}");
        }
        other => panic!("expected Commit outcome unknown, got {other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "not run again");
    // The next write gets a fresh connection.
    create_counter(&store);
    assert_eq!(counter(&store), 0);
}

#[test]
fn a_panicking_write_is_answered_and_the_writer_carries_on() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    create_counter(&store);
    let result: Result<(), StoreError> = testing::write(&store, "test.panics", "1", |tx| {
        ctx(
            tx.execute("UPDATE counter SET n = 100 WHERE id = 1", &[]),
            "test.panics",
            "1",
        )?;
        panic!("a bug in a write");
    });
    match result {
        Err(StoreError::Commit { detail, .. }) => {
            assert!(
                detail.contains("panicked") && detail.contains("a bug in a write"),
                "{detail}"
            );
        }
        other => panic!("expected Commit, got {other:?}"),
    }
    assert_eq!(counter(&store), 0, "the panicking write was rolled back");
    let read: Result<(), StoreError> = testing::read(&store, "test.read_panics", "", |_| {
        panic!("a bug in a read")
    });
    assert!(read.unwrap_err().to_string().contains("a bug in a read"));
    assert_eq!(counter(&store), 0, "the readers carry on");
}

#[tokio::test(flavor = "current_thread")]
async fn async_writes_and_reads_do_not_block_the_runtime() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    create_counter(&store);
    // Several in flight at once on one runtime thread: each awaits its oneshot.
    let writes = (0..8).map(|_| {
        testing::write_async(&store, "test.async", "1", |tx| {
            ctx(
                tx.execute("UPDATE counter SET n = n + 1 WHERE id = 1", &[]),
                "test.async",
                "1",
            )
        })
    });
    for result in futures_util::future::join_all(writes).await {
        assert_eq!(result.unwrap(), 1);
    }
    let n: i64 = testing::read_async(&store, "test.async_read", "", |c| {
        ctx(
            c.query_one("SELECT n FROM counter", &[]),
            "test.async_read",
            "",
        )
        .map(|r| r.get(0))
    })
    .await
    .unwrap();
    assert_eq!(n, 8);
}

/// Tests that start a private cluster take turns: two starting at once would both pick the
/// same free port (cluster.sh checks, then the server binds) and one would fail to bind.
fn private_cluster_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cluster_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/postgres/cluster.sh")
}

fn cluster(dir: &std::path::Path, action: &str) -> String {
    cluster_with(dir, action, false)
}

fn cluster_with(dir: &std::path::Path, action: &str, tls: bool) -> String {
    let mut command = Command::new("bash");
    command
        .arg(cluster_script())
        .arg(action)
        .env("OPENPHONE_PG_DIR", dir)
        .env_remove("OPENPHONE_PG_PORT")
        .env_remove("OPENPHONE_PG_TLS");
    if tls {
        command.env("OPENPHONE_PG_TLS", "1");
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "cluster.sh {action}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Stops its private cluster when dropped (also when the test fails).
struct PrivateCluster(PathBuf);

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        cluster(&self.0, "stop");
        drop(std::fs::remove_dir_all(&self.0));
    }
}

/// A cluster of its own (restarting the shared one would break other tests), restarted with
/// `pg_ctl restart` under an open store: the next write and read reconnect.
#[test]
fn a_write_after_the_server_restarts_reconnects() {
    if test_url().is_none() {
        return;
    }
    let _one_at_a_time = private_cluster_turn();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pg-restart-{}", std::process::id()));
    drop(std::fs::remove_dir_all(&dir));
    let private = PrivateCluster(dir);
    let url = cluster(&private.0, "start");
    let (config, _schema) = fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    create_counter(&store);
    assert_eq!(counter(&store), 0);

    cluster(&private.0, "restart");

    let n = testing::write(&store, "test.after_restart", "1", |tx| {
        ctx(
            tx.query_one("UPDATE counter SET n = n + 1 WHERE id = 1 RETURNING n", &[]),
            "test.after_restart",
            "1",
        )
        .map(|row| row.get::<_, i64>(0))
    })
    .unwrap();
    assert_eq!(n, 1);
    assert_eq!(counter(&store), 1);
    // The host lock was taken again on the new writer connection.
    let err = PgStore::open(&config).unwrap_err().to_string();
    assert!(err.contains("live daemon"), "{err}");
    drop(store);
}

/// A cluster of its own that takes TLS only (OPENPHONE_PG_TLS=1: a test CA and a certificate for
/// 127.0.0.1): `require` with the CA file connects over TLS; without the CA the certificate is
/// refused; loopback under `auto` goes without TLS and the server refuses it.
#[test]
fn tls_require_verifies_the_server_certificate_against_the_ca_file() {
    if test_url().is_none() {
        return;
    }
    let _one_at_a_time = private_cluster_turn();
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("pg-tls-{}", std::process::id()));
    drop(std::fs::remove_dir_all(&dir));
    let private = PrivateCluster(dir);
    let url = cluster_with(&private.0, "start", true);
    let mut config = PgConfig::new(&url, "tls-host", &private.0);
    config.tls = TlsMode::Require;
    config.tls_ca_file = Some(private.0.join("ca.crt"));
    let store = PgStore::open(&config).unwrap();
    let ssl: bool = testing::read(&store, "test.ssl", "", |c| {
        ctx(
            c.query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            ),
            "test.ssl",
            "",
        )
        .map(|r| r.get(0))
    })
    .unwrap();
    assert!(ssl, "the session is encrypted");
    drop(store);

    let mut unknown_ca = config.clone();
    unknown_ca.tls_ca_file = None;
    let err = PgStore::open(&unknown_ca).unwrap_err().to_string();
    assert!(err.contains("certificate"), "{err}");

    let mut plain = config.clone();
    plain.tls = TlsMode::Auto;
    let err = PgStore::open(&plain).unwrap_err().to_string();
    assert!(err.contains("no encryption"), "{err}");
}
