//! OpenPhone's durable store on PostgreSQL: the store a fleet of daemons shares (issue 35).
//!
//! `openphone-store` defines the store's interface (its domain traits) and the SQLite
//! implementation, the default. This crate is the second implementation: point several daemons
//! at one PostgreSQL database and they share jobs, goals, approvals, the inbox and the audit,
//! each daemon named by its `host_id`.
//!
//! # Why the synchronous `postgres` driver, on threads
//!
//! The store's interface is synchronous (the SQLite store blocks its caller too), so this crate
//! uses `postgres`, the blocking wrapper over `tokio-postgres` (same protocol code, same types,
//! maintained together). Each `postgres::Client` drives its connection on a small runtime of its
//! own and must never be called from inside a tokio worker (its `block_on` would panic there), so
//! every connection lives on an OS thread of its own (the private `pool` module): callers hand
//! it jobs over a channel and wait on a std channel, or on a tokio oneshot from async code
//! (`write_async`/`read_async`), which never blocks a runtime worker.
//!
//! # Why one writer per daemon
//!
//! All writes of one daemon go through one connection, one transaction at a time, as SQLite's
//! single writer does: writes of one daemon are ordered (its audit chain appends need that),
//! they never contend with each other, and the daemon's host lock lives on that connection.
//! Writes of different daemons are isolated by PostgreSQL: every write transaction is
//! SERIALIZABLE and is run again when the server aborts it for a conflict (40001, 40P01).
//! Claims of shared work use `FOR UPDATE SKIP LOCKED` and lease fencing (the domain modules).
//! Reads go to N reader connections (default 2), autocommit, READ COMMITTED.
//!
//! # Opening
//!
//! [`PgStore::open`] checks the [`PgConfig`] (no password in the URL; TLS required for hosts that
//! are not loopback or a Unix socket), connects with `application_name = openphone:<host_id>`
//! and the session's `lock_timeout`/`statement_timeout`, runs the migrations under an advisory
//! lock (so daemons starting together migrate once; [`migrate`]), takes the host lock (a second
//! live daemon with the same `host_id` is refused, naming the host) and records the daemon in
//! `fleet_hosts`.
//!
//! Start a throwaway server for the tests with `bash tests/postgres/cluster.sh start` and run
//! them with `OPENPHONE_TEST_PG_URL=$(bash tests/postgres/cluster.sh url)`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use openphone_clock::{Clock, SystemClock};
use openphone_store::Result;

mod approvals;
mod audit;
mod config;
mod confirmations;
mod error;
mod fleet;
mod goals;
mod host;
mod info;
mod jobs;
mod memory;
pub mod migrate;
mod outcomes;
mod pool;
mod replay;
mod sessions;
#[doc(hidden)]
pub mod testing;
mod tls;
mod viewer;
mod watchers;
mod xact_lock;

pub use audit::{AuditChain, ChainVerify};
pub use config::{
    MAX_HOST_ID_CHARS, PasswordSource, PgConfig, TlsMode, check_host_id, default_host_id,
};
pub use error::is_unique_violation;
#[allow(unused_imports)]
pub(crate) use error::{PgContext, backend};
pub use migrate::PG_SCHEMA_VERSION;
pub use viewer::display_url;

/// Runs `f` on a thread of its own and waits for it: the driver's blocking calls (connecting,
/// closing a connection) panic when made on a thread that drives a tokio runtime.
pub(crate) fn off_runtime<T: Send>(
    op: &'static str,
    id: &str,
    f: impl FnOnce() -> Result<T> + Send,
) -> Result<T> {
    std::thread::scope(|scope| {
        let joined = std::thread::Builder::new()
            .name("openphone-pg-open".into())
            .spawn_scoped(scope, f)
            .map_err(|e| backend(op, id, format!("cannot start a thread: {e}")))?
            .join();
        joined.unwrap_or_else(|panic| {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(backend(op, id, format!("panicked: {text}")))
        })
    })
}

/// The PostgreSQL store of one daemon: its writer and reader connections.
#[derive(Debug)]
pub struct PgStore {
    host_id: String,
    label: String,
    data_dir: PathBuf,
    schema: Option<String>,
    target: String,
    /// The versions this open applied (empty when the schema was already current).
    migrated: Vec<i64>,
    pool: pool::Pool,
    /// Opened by [`PgStore::open_viewer`]: writes are refused.
    viewer: bool,
}

impl PgStore {
    /// Connects, migrates (once across concurrent openers), takes the host lock and records
    /// this daemon in `fleet_hosts`, then starts the writer and reader threads.
    ///
    /// May be called from anywhere, async code included: the connections are made on a thread
    /// of their own (the driver's blocking calls panic inside a tokio runtime).
    pub fn open(config: &PgConfig) -> Result<PgStore> {
        off_runtime("open", &config.host_id, || PgStore::open_here(config))
    }

    fn open_here(config: &PgConfig) -> Result<PgStore> {
        let resolved = config.resolve()?;
        let connector = Arc::new(pool::Connector::new(resolved, config));
        let now_ms = SystemClock.now_ms();
        let mut writer = connector.connect()?;
        let migrated = migrate::migrate(&mut writer, now_ms, config.lock_timeout.as_millis())?;
        host::claim(&mut writer, &config.host_id, &config.label, now_ms)?;
        let readers = (0..config.readers)
            .map(|_| connector.connect())
            .collect::<Result<Vec<_>>>()?;
        let target = connector.target().to_owned();
        let pool = pool::Pool::start(connector, writer, readers)?;
        Ok(PgStore {
            host_id: config.host_id.clone(),
            label: config.label.clone(),
            data_dir: config.data_dir.clone(),
            schema: config.schema.clone(),
            target,
            migrated,
            pool,
            viewer: false,
        })
    }

    /// This daemon's id: its audit chain's id, the owner of the leases it takes.
    pub fn host_id(&self) -> &str {
        &self.host_id
    }

    /// This daemon's label in fleet views.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The daemon's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The schema, when the configuration named one.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// `user@host:port/dbname` of the server (no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The migrations this open applied (empty when another opener or an earlier run had).
    pub fn migrations_applied(&self) -> &[i64] {
        &self.migrated
    }

    /// Marks this daemon seen now in `fleet_hosts` (the daemon calls it on its housekeeping tick).
    pub fn touch_host(&self) -> Result<()> {
        let host_id = self.host_id.clone();
        let now_ms = SystemClock.now_ms();
        self.write("fleet_hosts.touch", &self.host_id, move |tx| {
            host::touch_tx(tx, &host_id, now_ms)
        })
    }

    /// One write transaction on the daemon's single writer connection (writes of one daemon are
    /// serialised in-process, as SQLite's writer does). SERIALIZABLE; on 40001/40P01 rolled back
    /// and `f` run again (up to 10 times, then `StoreError::Conflict`). Returns after COMMIT
    /// (durable). `f` must not call the store (it runs on the writer thread).
    pub(crate) fn write<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut postgres::Transaction<'_>) -> Result<T> + Send + 'static,
    {
        if self.viewer {
            return Err(viewer::refused(op, id));
        }
        self.pool.write(op, id, f)
    }

    /// [`PgStore::write`] for async callers: awaits the answer instead of blocking.
    #[allow(dead_code)]
    pub(crate) async fn write_async<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut postgres::Transaction<'_>) -> Result<T> + Send + 'static,
    {
        if self.viewer {
            return Err(viewer::refused(op, id));
        }
        self.pool.write_async(op, id, f).await
    }

    /// A read on one of the reader connections (autocommit, READ COMMITTED).
    #[allow(dead_code)]
    pub(crate) fn read<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut postgres::Client) -> Result<T> + Send + 'static,
    {
        self.pool.read(op, id, f)
    }

    /// [`PgStore::read`] for async callers.
    #[allow(dead_code)]
    pub(crate) async fn read_async<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut postgres::Client) -> Result<T> + Send + 'static,
    {
        self.pool.read_async(op, id, f).await
    }
}
