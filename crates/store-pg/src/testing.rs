//! Test support (not part of the API): a fresh schema per test on the cluster named by
//! `OPENPHONE_TEST_PG_URL`, and handles on the store's writer and readers for the plumbing tests.
//!
//! ```no_run
//! let Some(url) = openphone_store_pg::testing::test_url() else { return };
//! let (config, _schema) = openphone_store_pg::testing::fresh_schema(&url);
//! let store = openphone_store_pg::PgStore::open(&config).unwrap();
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use openphone_clock::{Clock, SystemClock};
use openphone_store::Result;

use crate::{PgConfig, PgContext, PgStore, pool};

/// The variable naming the test cluster (`bash tests/postgres/cluster.sh url`).
pub const TEST_URL_VAR: &str = "OPENPHONE_TEST_PG_URL";

/// The test cluster's URL, or `None` after printing that the test is skipped.
pub fn test_url() -> Option<String> {
    match std::env::var(TEST_URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            println!("skipped: {TEST_URL_VAR} not set");
            None
        }
    }
}

/// A connection configured as the store's are (TLS, session settings, `search_path`). Blocking:
/// not for use on a thread that drives a tokio runtime (see [`admin_sql`]).
pub fn connect(config: &PgConfig) -> Result<postgres::Client> {
    let resolved = config.resolve()?;
    pool::Connector::new(resolved, config).connect()
}

/// Runs `sql` on a new connection made with `config`, from any thread (async tests included).
pub fn admin_sql(config: &PgConfig, sql: &str) -> Result<()> {
    crate::off_runtime("testing.admin_sql", "", || {
        let mut client = connect(config)?;
        client.batch_execute(sql).ctx("testing.admin_sql", "")
    })
}

/// A schema of its own on the cluster at `url`, dropped (with everything in it) when the guard
/// drops, and a configuration using it: host id `t-<schema>`, a fresh temporary data directory.
/// Drop the stores before the guard.
pub fn fresh_schema(url: &str) -> (PgConfig, SchemaGuard) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Unique across processes (pid), runs (time) and calls (counter).
    let ms = SystemClock.now_ms().rem_euclid(1_000_000_000);
    let name = format!(
        "t{}_{}_{}",
        std::process::id(),
        ms,
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let data_dir = std::env::temp_dir().join(format!("openphone-pg-{name}"));
    if let Err(e) = std::fs::create_dir_all(&data_dir) {
        panic!("fresh_schema: cannot create {}: {e}", data_dir.display());
    }
    let admin = PgConfig::new(url, "schema-admin", &data_dir);
    if let Err(e) = admin_sql(&admin, &format!("CREATE SCHEMA {name}")) {
        panic!("fresh_schema: CREATE SCHEMA {name} on {url}: {e}");
    }
    let mut config = PgConfig::new(url, format!("t-{name}"), &data_dir);
    config.schema = Some(name.clone());
    let guard = SchemaGuard {
        admin,
        name,
        data_dir,
    };
    (config, guard)
}

/// Drops its schema (CASCADE) and the data directory when dropped.
#[derive(Debug)]
pub struct SchemaGuard {
    admin: PgConfig,
    name: String,
    data_dir: PathBuf,
}

impl SchemaGuard {
    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        if let Err(e) = admin_sql(&self.admin, &sql) {
            eprintln!("SchemaGuard: {sql}: {e}");
        }
        drop(std::fs::remove_dir_all(&self.data_dir));
    }
}

/// The store's crate-private `PgStore::write` (one SERIALIZABLE transaction on the daemon's
/// writer, run again on a serialization failure), for the plumbing tests.
pub fn write<T, F>(store: &PgStore, op: &'static str, id: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: Fn(&mut postgres::Transaction<'_>) -> Result<T> + Send + 'static,
{
    store.write(op, id, f)
}

/// The store's crate-private `PgStore::write_async` (the write, awaited), for the plumbing tests.
pub async fn write_async<T, F>(store: &PgStore, op: &'static str, id: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: Fn(&mut postgres::Transaction<'_>) -> Result<T> + Send + 'static,
{
    store.write_async(op, id, f).await
}

/// The store's crate-private `PgStore::read` (autocommit, on a reader connection), for the
/// plumbing tests.
pub fn read<T, F>(store: &PgStore, op: &'static str, id: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&mut postgres::Client) -> Result<T> + Send + 'static,
{
    store.read(op, id, f)
}

/// The store's crate-private `PgStore::read_async` (the read, awaited), for the plumbing tests.
pub async fn read_async<T, F>(store: &PgStore, op: &'static str, id: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&mut postgres::Client) -> Result<T> + Send + 'static,
{
    store.read_async(op, id, f).await
}

/// `postgres::Error` -> `StoreError` as the store converts it, for tests' closures.
pub fn ctx<T>(r: std::result::Result<T, postgres::Error>, op: &'static str, id: &str) -> Result<T> {
    r.ctx(op, id)
}
