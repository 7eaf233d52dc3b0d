//! The store interface: what the trusted core asks of its durable store, split by domain.
//!
//! [`StoreBackend`] is every domain trait together; [`crate::Store`] holds one (the SQLite
//! implementation, [`crate::SqliteStore`], or any other given to [`crate::Store::from_backend`],
//! such as the PostgreSQL one in `openphone-store-pg`) and dereferences to it, so callers write
//! `store.create_job(…)` whichever backend runs. The documented behaviour of each method is the
//! contract every implementation keeps; the store's test suite checks it on each.
//!
//! Here: the shared types, [`Fleet`], [`StoreBackend`] and [`StoreInfo`]; the domains the tool
//! calls use (sessions, confirmations, replay, audit, approvals) are in `calls.rs`, background
//! work and what agents keep (jobs, goals, watchers, outcomes, memory) in `work.rs`.

mod calls;
mod work;

pub use calls::*;
pub use work::*;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use crate::*;

/// A boxed future of the store (the async writes of the tool bridge).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How [`JobStore::repair_stale_jobs`] decides each stale run's repair.
pub type RepairFn = Box<dyn Fn(&StoredJob) -> Option<Repair> + Send + 'static>;

/// The audit record [`WatcherStore::fire_watcher`] writes with a firing, given its ids.
pub type FiringAudit = Box<dyn FnOnce(&FiringIds) -> AuditEntry + Send + 'static>;

/// A daemon of a fleet sharing one store, and where the fleet's phones are.
pub trait Fleet: Send + Sync {
    /// This daemon's id in the fleet (`[store] host_id`).
    fn host_id(&self) -> &str;

    /// Records that this daemon serves the phones `device_ids` (and no others): due jobs
    /// naming one of them are claimed here, and a request for one reaching another daemon is
    /// refused naming this host.
    fn register_devices(&self, device_ids: &[String]) -> Result<()>;

    /// The host serving the phone `device_id`, as last registered (`None`: no daemon serves
    /// it).
    fn host_of_device(&self, device_id: &str) -> Result<Option<String>>;

    /// The daemons of the fleet, each with its phones.
    fn hosts(&self) -> Result<Vec<FleetHost>>;

    /// The daemon whose phone the confirmation `confirmation_id` would act on (the one whose
    /// runtime asked): only that daemon may resolve it (`None`: unknown confirmation).
    fn confirmation_host(&self, confirmation_id: &str) -> Result<Option<String>>;

    /// The daemon whose phone the calls of job `job_id` act on: the one that runs it (or ran
    /// it last), else the one that made it (`None`: unknown job).
    fn job_host(&self, job_id: i64) -> Result<Option<String>>;

    /// Whether the goal `goal_id` is this daemon's to work on (it was made here, so its
    /// actions run on this host's phones); an unknown goal is not.
    fn goal_is_here(&self, goal_id: &str) -> Result<bool>;

    /// The active watchers this daemon runs (those made here: they watch its phones), by id.
    fn watchers_here(&self) -> Result<Vec<i64>>;

    /// Marks this daemon seen now (its `last_seen_at_ms`); the daemon calls it on a
    /// housekeeping tick. Default: nothing to mark.
    fn touch(&self) -> Result<()> {
        Ok(())
    }
}

/// One daemon of a fleet, as the shared store knows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FleetHost {
    /// Its `host_id`.
    pub host_id: String,
    /// Its label (`[store] label`, default the host id).
    pub label: String,
    /// When it last started (Unix ms).
    pub started_at_ms: i64,
    /// When it was last seen (Unix ms).
    pub last_seen_at_ms: i64,
    /// Whether it runs now (it holds its host lock on the server).
    pub live: bool,
    /// The phones it serves.
    pub device_ids: Vec<String>,
}

/// Every domain of the store: what [`crate::Store`] holds.
pub trait StoreBackend:
    SessionStore
    + ConfirmationStore
    + ReplayStore
    + AuditStore
    + ApprovalStore
    + JobStore
    + GoalStore
    + WatcherStore
    + OutcomeStore
    + MemoryStore
    + StoreInfo
    + std::fmt::Debug
    + Send
    + Sync
{
}

impl<T> StoreBackend for T where
    T: SessionStore
        + ConfirmationStore
        + ReplayStore
        + AuditStore
        + ApprovalStore
        + JobStore
        + GoalStore
        + WatcherStore
        + OutcomeStore
        + MemoryStore
        + StoreInfo
        + std::fmt::Debug
        + Send
        + Sync
{
}

/// What the store is and holds: its directory, schema, counts and writer figures.
pub trait StoreInfo {
    /// The fleet this store is shared by, when it is shared (PostgreSQL): who this daemon is
    /// and which host serves which phone. `None` for a store one daemon owns (SQLite).
    fn fleet(&self) -> Option<&dyn Fleet> {
        None
    }

    /// Sizes and counts of the database (see the module docs of `stats.rs`; on PostgreSQL,
    /// what each field means there is in `openphone-store-pg`'s `info.rs`). Reads only: a
    /// read-only store gives the same figures next to a running daemon.
    fn stats(&self) -> Result<StoreStats>;

    /// The data directory.
    fn data_dir(&self) -> &Path;

    /// True for a store opened with [`Store::open_read_only`].
    fn is_read_only(&self) -> bool;

    /// The database's schema version: SQLite's `PRAGMA user_version`; on PostgreSQL, the
    /// latest migration in `schema_migrations` (its own numbering).
    fn schema_version(&self) -> Result<i64>;

    /// Whether full-text search (what [`MemoryStore::search_memory`] ranks with) is available:
    /// on SQLite, whether the linked SQLite was built with FTS5 (the bundled build is); on
    /// PostgreSQL always true (`tsvector` and GIN are part of every server).
    fn fts5_available(&self) -> Result<bool>;

    /// A number that changes whenever this store commits a change to the standing approvals:
    /// a cache of them (the bridge reads them for every call) is current while it is equal.
    /// Only this process writes the database (the directory lock), so nothing else changes
    /// them behind its back.
    fn approvals_generation(&self) -> u64;

    /// How the writer has grouped writes so far (zero for a read-only store).
    fn writer_stats(&self) -> WriterStats;
}
