//! The durable store of the OpenPhone trusted core: one SQLite database in the data directory,
//! and the only crate in the workspace that speaks SQL.
//!
//! # Files and the lock
//!
//! [`Store::open`] creates the data directory (mode 0700 on unix) and takes an exclusive,
//! non-blocking lock on `<data_dir>/openphone.lock` (`std::fs::File::try_lock`, an `flock`
//! on the open file), then writes the holder (`pid 1234 since 1760000000000 ms`) into it. A
//! second opener — another process, or a second `open` in the same process — gets
//! [`StoreError::Locked`] naming that holder. The kernel drops the lock when the holding
//! process dies, so a crash never leaves a stale lock. The database is
//! `<data_dir>/openphone.db`, in WAL mode with `synchronous = FULL` (a committed transaction
//! survives a process kill and a power cut), foreign keys on and a 5 s busy timeout. The
//! bundled SQLite syncs with `fdatasync` (`.cargo/config.toml`: the data and the size that
//! reads it back, not the inode's timestamps).
//! [`Store::open_read_only`] opens the database without the lock and without migrating, for
//! the offline `audit verify` / `audit export` while a daemon runs.
//!
//! Opening fails closed (`open.rs`): an unwritable data directory or database is
//! [`StoreError::NotWritable`] (checked with a real, synced write), and an empty, cut-short or
//! foreign database file is [`StoreError::Damaged`] (`PRAGMA quick_check`) — never replaced by
//! a fresh one. A new database is built under a temporary name and renamed into place.
//!
//! # Time
//!
//! The store never reads the clock: every method that needs the time takes `now_ms` (Unix
//! ms) from the caller's injectable clock. (The one exception is [`Holder::current`], a
//! diagnostic stamp in the lock file.)
//!
//! # Tables
//!
//! | table | what | API |
//! |---|---|---|
//! | `phone_sessions` | §2.2 phone session records | [`Store::create_session`](crate::SessionStore::create_session) … |
//! | `confirmations` | §10.1 durable confirmations, keyed by id, indexed by identity key | [`Store::insert_pending`](crate::ConfirmationStore::insert_pending), [`Store::resolve`](crate::ConfirmationStore::resolve) … |
//! | `final_results` | §10.3 final results for replay, keyed by the identity key; pruned by age and size (`retention.rs`) | [`Store::record_final`](crate::ReplayStore::record_final), [`Store::find_final`](crate::ReplayStore::find_final), [`Store::prune_replay`](crate::ReplayStore::prune_replay) |
//! | `final_tombstones` | what is left of a pruned final result: a retry is answered `execution_result_unknown`, never run again | [`Store::find_final`](crate::ReplayStore::find_final) |
//! | `request_ids` | per-scope request-id index for `idempotency_conflict` | [`Store::remember_request`](crate::ReplayStore::remember_request) |
//! | `executions` | direct executions in flight: written with the attempt's audit record before the side effect | [`Store::begin_execution`](crate::ReplayStore::begin_execution), [`Store::finish_execution`](crate::ReplayStore::finish_execution) |
//! | `store_meta` | key → text (`opened_by`: the start-up write probe) | — |
//! | `audit_records`, `audit_shapes`, `audit_proofs`, `audit_head` | §15 hash-chained audit records, compact (`audit_storage/`: shapes and proofs interned, digests as bytes, hash form 2) | [`Store::append_audit`](crate::AuditStore::append_audit), [`Store::verify_audit`](crate::AuditStore::verify_audit) |
//! | `audit_log` | audit records written before schema 6, unchanged (hash form 1, `audit_legacy.rs`) | [`Store::export_audit`](crate::AuditStore::export_audit), [`Store::verify_audit`](crate::AuditStore::verify_audit) |
//! | `standing_approvals` | user-made rules (policy layer 7) | [`Store::create_approval`](crate::ApprovalStore::create_approval) … |
//! | `runtime_settings` | key → JSON | [`Store::set_setting`](crate::ApprovalStore::set_setting) … |
//! | `memories`, `memories_fts` | memory with FTS5 search | [`Store::save_memory`](crate::MemoryStore::save_memory), [`Store::search_memory`](crate::MemoryStore::search_memory) |
//! | `watchers`, `watcher_firings` | durable watcher records with the engine's cursor, and their firings (each committed with its job and audit record) | [`Store::create_watcher`](crate::WatcherStore::create_watcher), [`Store::fire_watcher`](crate::WatcherStore::fire_watcher) … |
//! | `agent_jobs`, `agent_job_runs` | background jobs (`agent-jobs.md` §2, with a `version` for compare-and-set writes) and their attempt ledger | [`Store::create_job`](crate::JobStore::create_job), [`Store::claim_due_jobs`](crate::JobStore::claim_due_jobs), [`Store::update_job`](crate::JobStore::update_job) … |
//! | `deferred_outcomes` | the outbox of outcomes owed to a remote runtime that got a pending receipt (OpenClaw deferral): posted at most once, oldest first | [`Store::insert_deferred_outcome`](crate::OutcomeStore::insert_deferred_outcome), [`Store::move_deferred_outcome`](crate::OutcomeStore::move_deferred_outcome) … |
//! | `session_transcripts` | the conversation of a phone session (built-in runtime), numbered per session | [`Store::append_transcript`](crate::SessionStore::append_transcript), [`Store::transcript`](crate::SessionStore::transcript) |
//! | all of them | rows and bytes per table, file sizes (`stats.rs`) | [`Store::stats`](crate::StoreInfo::stats) |
//!
//! States are closed enums stored as their wire strings; JSON blobs are `serde_json::Value`.
//!
//! # Confirmations
//!
//! Every transition is a single `UPDATE … WHERE state = '<expected>'` whose affected-row count
//! decides the winner, so two resolvers (threads or processes) can never both win:
//! [`Store::resolve`](crate::ConfirmationStore::resolve) succeeds only from `pending` and, for approve/deny, only while
//! `now < expires_at_ms`; the loser gets [`StoreError::ConfirmationNotPending`], which the
//! bridge answers as `pending_confirmation_not_found`. [`Store::recover_after_restart`](crate::ConfirmationStore::recover_after_restart) turns
//! `approved` (execution outcome unknown) into `result_unknown` and expired `pending` into
//! `timeout`; nothing is ever re-executed by the store. Direct executions (no confirmation)
//! have the same rule through their executing record ([`Store::begin_execution`](crate::ReplayStore::begin_execution)).
//!
//! # The audit chain
//!
//! Records are chained: each one's hash covers the previous record's hash, its `seq` and its
//! content. Records written since schema 6 (`audit_storage/`) are stored compactly (the
//! repeated part interned as a shape, each policy proof once, digests as bytes, `prev_hash`
//! not stored: it is the previous record's hash) and hashed in form 2,
//! `sha256_hex(prev_hash + "\n" + seq + "\n" + sha256_hex(canonical_json(body)))`, the body
//! being the record without `seq`, `prev_hash`, `hash` and `policy_proof`, plus
//! `policy_proof_sha256`; older rows in `audit_log` keep form 1,
//! `sha256_hex(prev_hash + "\n" + canonical_json(row without hash))`. The first record's
//! `prev_hash` is 64 zeros. The append reads the head and writes the row and the new head in
//! one transaction. `audit_head` keeps the last seq and hash, so deleting the newest rows is
//! detected as well as editing or deleting any row, shape or proof in the middle.
//! [`Store::verify_audit`](crate::AuditStore::verify_audit) names the first broken record.
//! Someone who rewrites the file offline (delete a row, re-hash the rest) produces a chain that
//! verifies; an anchor kept outside the database — [`Store::audit_head`](crate::AuditStore::audit_head) at some time,
//! `<seq>:<hash>` — catches that: [`Store::verify_audit_anchored`](crate::AuditStore::verify_audit_anchored) proves the log still holds
//! exactly the records up to that seq.
//! Callers pass **digests only** (`params_hash`, `result_digest`, `proof_digest`) and a
//! policy proof of verdicts and reasons: never raw params, results, tokens or screenshots.
//!
//! # Migrations
//!
//! Versioned migrations live in code (`migrations.rs`). `PRAGMA user_version` is the schema
//! version and `schema_migrations` lists what was applied; each migration runs once in its own
//! transaction that also bumps the version. Opening an older database upgrades it; opening a
//! newer one fails with [`StoreError::SchemaTooNew`].

mod approvals;
mod audit;
mod audit_anchor;
mod audit_legacy;
mod audit_storage;
mod backend;
mod checkpointer;
mod confirmations;
mod error;
mod executions;
mod facade;
mod goals;
mod jobs;
mod lock;
mod memory;
mod migrations;
mod open;
mod outcomes;
mod records;
mod replay;
mod retention;
mod rows;
mod sessions;
mod settings;
mod sqlite_backend;
mod stats;
mod transcripts;
mod watchers;
mod wire;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

pub use approvals::{NewStandingApproval, StandingApproval};
pub use audit::{
    AuditConfirmation, AuditEntry, AuditIter, AuditKind, AuditProblem, AuditRecord, BrokenRecord,
    Caller, GENESIS_HASH, PolicyDecision, VerifyReport,
};
pub use audit_anchor::{AnchorCheck, AnchorOutcome, AnchoredReport, AuditAnchor};
pub use audit_storage::AuditProof;
pub use backend::{
    ApprovalStore, AuditStore, BoxFuture, ConfirmationStore, FiringAudit, Fleet, FleetHost,
    GoalStore, JobStore, MemoryStore, OutcomeStore, RepairFn, ReplayStore, SessionStore,
    StoreBackend, StoreInfo, WatcherStore,
};
pub use confirmations::{
    ConfirmationFilter, ConfirmationRecord, ConfirmationState, MAX_PENDING_PER_RUNTIME,
    NewConfirmation, PendingInsert, RESOLVED_BY_EXPIRY, Recovery, Resolution,
};
pub use error::{NotPending, Result, StoreError};
pub use executions::Execution;
pub use facade::Store;
pub use goals::{
    GoalReport, GoalText, GoalTransition, NewGoalReport, NewGoalTransition, ReportDelivery,
    StoredGoal,
};
pub use jobs::{
    AgentJob, AttemptFinish, ClaimRequest, ClaimedJob, DeliveryState, JobFilter, JobPhase,
    JobQuota, JobRun, JobStatus, JobType, NewAgentJob, OPERATOR_CREATOR, RUNS_KEPT_PER_JOB, Repair,
    RowHost, RunOutcome, StaleSelection, StoredJob, is_user_creator,
};
pub use lock::{DirLock, Holder};
pub use memory::{MemoryHit, MemoryRecord, NewMemory};
pub use migrations::SCHEMA_VERSION;
pub use outcomes::{DeferredOutcome, NewDeferredOutcome, OutcomeState};
pub use replay::{
    FinalResult, IdentityKey, PRUNE_BATCH, PruneReport, RequestCheck, RequestEntry, Retention,
    Scope,
};
#[doc(hidden)]
pub use replay::{RememberRequest, check_digest};
#[doc(hidden)]
pub use retention::identity_digest;
pub use sessions::{
    MIN_SESSIONS_RETAINED, NewPhoneSession, PhoneSession, SessionFilter, SessionStatus,
};
pub use settings::Setting;
pub use stats::{AuditStats, ResultStats, StoreStats, TableStats};
#[doc(hidden)]
pub use transcripts::TranscriptAppend;
pub use transcripts::{MAX_TRANSCRIPT_ROLE_CHARS, TranscriptEntry};
pub use watchers::{
    FIRINGS_KEPT_PER_WATCHER, FireOutcome, FiringIds, NewFiring, NewWatcher, RecordedFiring,
    WatcherFiring, WatcherRecord, WatcherSelector, WatcherState,
};
#[doc(hidden)]
pub use watchers::{WatcherDraft, check_active_watchers};
pub use wire::{Autonomy, risk_serde};
pub use writer::WriterStats;

/// The database file inside the data directory.
pub const DB_FILE: &str = "openphone.db";
/// The lock file inside the data directory.
pub const LOCK_FILE: &str = "openphone.lock";

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Creates the data directory (0700 on unix) if needed and takes its exclusive lock, stamped
/// with `holder`, as [`SqliteStore::open_as`] does: for a daemon whose store lives elsewhere
/// (PostgreSQL) but whose data directory (tokens, `endpoint.json`) must still have one owner.
/// Hand the lock to [`Store::with_lock`].
pub fn lock_data_dir(data_dir: &Path, holder: &Holder) -> Result<DirLock> {
    lock::create_data_dir(data_dir).map_err(open::reclassify)?;
    open::check_dir_writable(data_dir)?;
    lock::acquire(data_dir, holder).map_err(open::reclassify)
}

/// The SQLite store (the default backend). `Send + Sync`.
///
/// Writes go to one writer thread that commits the writes of concurrent callers together, one
/// transaction and one fsync per batch (`writer.rs`, group commit); a write method returns
/// once its batch is durable. Most write methods block the calling thread that long; the
/// `*_async` ones (the per-call writes of the tool bridge) await it instead, so many calls
/// share one fsync. Reads use their own connection (WAL: they see every committed write and
/// never wait for the writer's fsync).
#[derive(Debug)]
pub struct SqliteStore {
    /// The read connection (`query_only`).
    conn: Mutex<Connection>,
    /// `None` for a read-only store.
    writer: Option<writer::Writer>,
    /// Bumped after every committed change to the standing approvals, so a reader may cache
    /// them ([`Store::approvals_generation`](crate::StoreInfo::approvals_generation)).
    approvals_generation: std::sync::atomic::AtomicU64,
    lock: Option<lock::DirLock>,
    data_dir: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the data directory as its exclusive owner, stamping the lock
    /// file with [`Holder::current`]. Migrates the database to [`SCHEMA_VERSION`].
    pub fn open(data_dir: impl AsRef<Path>) -> Result<SqliteStore> {
        SqliteStore::open_as(data_dir, &Holder::current())
    }

    /// [`Store::open`] with an explicit holder description (start time from the injected clock,
    /// the daemon's `instance_id`).
    ///
    /// Fails closed (`open.rs`): an unwritable data directory or database is
    /// [`StoreError::NotWritable`]; an empty, cut-short or foreign database file is
    /// [`StoreError::Damaged`] and is never replaced by a fresh one.
    pub fn open_as(data_dir: impl AsRef<Path>, holder: &Holder) -> Result<SqliteStore> {
        let data_dir = data_dir.as_ref().to_path_buf();
        lock::create_data_dir(&data_dir).map_err(open::reclassify)?;
        open::check_dir_writable(&data_dir)?;
        let dir_lock = lock::acquire(&data_dir, holder).map_err(open::reclassify)?;
        let db = data_dir.join(DB_FILE);
        if let open::Found::Missing = open::inspect(&db)? {
            open::create_fresh(&db, SCHEMA_VERSION)?;
        }
        let mut conn = open::open_existing(&db)?;
        configure(&conn, false).map_err(|e| match e {
            StoreError::Sql { op, source, .. } => open::sql_error(op, &db, source),
            other => other,
        })?;
        open::check_integrity(&conn, &db)?;
        migrations::migrate(&mut conn, SCHEMA_VERSION)?;
        open::probe_write(&conn, &db, &holder.describe())?;
        let reader = open::open_existing(&db)?;
        configure(&reader, true)?;
        reader
            .pragma_update(None, "query_only", true)
            .ctx("store.configure", "query_only")?;
        reader.set_prepared_statement_cache_capacity(64);
        let writer = writer::Writer::start(conn).map_err(|source| StoreError::Io {
            op: "starting the store's writer thread",
            path: db.clone(),
            source,
        })?;
        Ok(SqliteStore {
            conn: Mutex::new(reader),
            writer: Some(writer),
            approvals_generation: Default::default(),
            lock: Some(dir_lock),
            data_dir,
        })
    }

    /// Opens an existing database read-only, without the lock and without migrating (offline
    /// `audit verify` / `export` next to a running daemon). Writes fail with an SQLite
    /// read-only error.
    pub fn open_read_only(data_dir: impl AsRef<Path>) -> Result<SqliteStore> {
        let data_dir = data_dir.as_ref().to_path_buf();
        let db = data_dir.join(DB_FILE);
        if let open::Found::Missing = open::inspect(&db)? {
            return Err(StoreError::NotFound {
                table: "database",
                id: db.display().to_string(),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&db, flags).ctx_open(&db)?;
        configure(&conn, true)?;
        let found = migrations::current_version(&conn)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            writer: None,
            approvals_generation: Default::default(),
            lock: None,
            data_dir,
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The database file.
    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join(DB_FILE)
    }

    /// The lock file, when this store holds the lock (`None` for read-only stores).
    pub fn lock_path(&self) -> Option<&Path> {
        self.lock.as_ref().map(lock::DirLock::path)
    }

    /// True for a store opened with [`Store::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.lock.is_none()
    }

    /// The database's schema version (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<i64> {
        migrations::current_version(&self.conn())
    }

    /// Whether the linked SQLite was built with FTS5 (the bundled build is).
    pub fn fts5_available(&self) -> Result<bool> {
        self.conn()
            .query_row(
                "SELECT sqlite_compileoption_used('ENABLE_FTS5')",
                [],
                |row| row.get::<_, i64>(0),
            )
            .map(|v| v == 1)
            .ctx("store.fts5_available", "")
    }

    /// The connection. A poisoned mutex is recovered: a panic inside a method can only have
    /// dropped an open transaction, which SQLite rolls back.
    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the writer connection, inside a savepoint of the next batch's `IMMEDIATE`
    /// transaction (so read-then-write sequences inside cannot interleave with another
    /// write), and returns once that batch committed: the write is durable. `f` fails → only
    /// its own changes are rolled back. Blocks the calling thread.
    pub(crate) fn write<T: Send + 'static>(
        &self,
        op: &'static str,
        id: &str,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.writer(op, id)?.run(op, id, f)
    }

    /// [`Store::write`] for async callers: awaits the batch's commit instead of blocking.
    pub(crate) async fn write_async<T: Send + 'static>(
        &self,
        op: &'static str,
        id: &str,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.writer(op, id)?.run_async(op, id, f).await
    }

    /// [`Store::write_async`] with the relaxed promise (`writer.rs`): returns once the batch
    /// is committed into the write-ahead log, fsynced right after. Only for the audit records
    /// of safe reads.
    pub(crate) async fn write_async_relaxed<T: Send + 'static>(
        &self,
        op: &'static str,
        id: &str,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.writer(op, id)?.run_async_relaxed(op, id, f).await
    }

    /// A number that changes whenever this store commits a change to the standing approvals:
    /// a cache of them (the bridge reads them for every call) is current while it is equal.
    /// Only this process writes the database (the directory lock), so nothing else changes
    /// them behind its back.
    pub fn approvals_generation(&self) -> u64 {
        self.approvals_generation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn approvals_changed(&self) {
        self.approvals_generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// How the writer has grouped writes so far (zero for a read-only store).
    pub fn writer_stats(&self) -> WriterStats {
        self.writer
            .as_ref()
            .map(writer::Writer::stats)
            .unwrap_or_default()
    }

    fn writer(&self, op: &'static str, id: &str) -> Result<&writer::Writer> {
        self.writer.as_ref().ok_or_else(|| StoreError::Commit {
            op,
            id: id.to_owned(),
            detail: "the store was opened read-only".into(),
        })
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // The writer first (it finishes its queue and closes its connection), then the
        // lock (a field, dropped after this).
        self.writer.take();
    }
}

fn configure(conn: &Connection, read_only: bool) -> Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .ctx("store.configure", "busy_timeout")?;
    if !read_only {
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .ctx("store.configure", "journal_mode")?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::corrupt(
                "store.configure",
                "journal_mode",
                format!("SQLite refused WAL mode (got {mode})"),
            ));
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .ctx("store.configure", "synchronous")?;
        // The writer runs every job in a savepoint; SQLite keeps the pages a savepoint may
        // have to restore in a statement journal, which past 64 KiB spills to a temporary
        // file, and a spilled journal is no longer cut back when a savepoint is released. A
        // batch of mutations spilled every time: a new file per transaction and more writes to
        // it than to the WAL (issue 34). In memory it is cut back at every job's release, so
        // it holds the pages of one job at most.
        conn.pragma_update(None, "temp_store", "MEMORY")
            .ctx("store.configure", "temp_store")?;
    }
    conn.pragma_update(None, "foreign_keys", "ON")
        .ctx("store.configure", "foreign_keys")?;
    // Query-planner stability: a cached statement keeps its plan when its parameters are
    // rebound. Without it SQLite re-prepares a statement on every new value of a parameter
    // compared with a partial index's condition or used as a LIMIT (e.g. `now_ms` in
    // `find_pending`), which was a fifth of a mutation's cost in profiles.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .ctx("store.configure", "enable_qpsg")?;
    Ok(())
}

trait OpenContext<T> {
    fn ctx_open(self, db: &Path) -> Result<T>;
}

impl<T> OpenContext<T> for std::result::Result<T, rusqlite::Error> {
    fn ctx_open(self, db: &Path) -> Result<T> {
        self.map_err(|source| StoreError::Sql {
            op: "store.open",
            id: db.display().to_string(),
            source,
        })
    }
}

use error::SqlContext;

/// Test hooks: build databases at older schema versions; hold the writer. Not part of the
/// stable API.
#[doc(hidden)]
pub mod testing {
    use std::path::Path;
    use std::sync::mpsc;

    use rusqlite::Connection;

    use crate::Store;
    use crate::error::{Result, SqlContext, StoreError};

    fn sqlite(store: &Store) -> Result<&crate::SqliteStore> {
        store.as_sqlite().ok_or_else(|| StoreError::Commit {
            op: "testing.hold",
            id: String::new(),
            detail: "only the SQLite store has a writer thread to hold".into(),
        })
    }

    /// While this lives, the store's writer is stuck inside a write of its own: writes queue
    /// behind it. Dropping it lets the writer go on (the queued writes form the next batch).
    #[derive(Debug)]
    pub struct WriterHold {
        _release: mpsc::Sender<()>,
    }

    /// Stops the writer (see [`WriterHold`]); returns once the writer is inside the hold.
    pub fn hold_writer(store: &Store) -> Result<WriterHold> {
        let (release, held) = mpsc::channel::<()>();
        let (entered, inside) = mpsc::sync_channel::<()>(1);
        sqlite(store)?
            .writer("testing.hold", "")?
            .enqueue("testing.hold", move |_conn| {
                let _ = entered.send(());
                // Returns when the hold's sender is dropped.
                let _ = held.recv();
                Ok(())
            })?;
        inside.recv().map_err(|_| StoreError::Commit {
            op: "testing.hold",
            id: String::new(),
            detail: "the writer did not take the hold".into(),
        })?;
        Ok(WriterHold { _release: release })
    }

    /// Creates `<data_dir>/openphone.db` migrated only up to `version`.
    pub fn create_db_at_version(data_dir: &Path, version: i64) -> Result<()> {
        crate::lock::create_data_dir(data_dir)?;
        let mut conn = Connection::open(data_dir.join(crate::DB_FILE)).ctx("testing.open", "")?;
        crate::configure(&conn, false)?;
        crate::migrations::migrate(&mut conn, version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the writer's statement journals in memory: on a file, a batch of mutations
    /// spilled its savepoints' pages to a new temporary file per transaction (issue 34).
    #[test]
    fn the_writer_keeps_its_savepoint_journal_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let mode: i64 = store
            .write("test.temp_store", "", |conn| {
                conn.query_row("PRAGMA temp_store", [], |row| row.get(0))
                    .ctx("test.temp_store", "")
            })
            .unwrap();
        // 2 = MEMORY (0 = the build's default, 1 = FILE).
        assert_eq!(mode, 2);
    }

    /// The store's three threads keep names Linux shows whole (15 bytes), so `/proc`, `top -H`,
    /// `perf` and `bench/writes.sh` tell the writer, the syncer and the checkpointer apart:
    /// their `openphone-store-*` names all read `openphone-store` there.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_store_threads_names_stay_apart_in_proc() {
        let running = || -> Vec<String> {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
                .map(|name| name.trim_end().to_owned())
                .collect()
        };
        let wanted = ["op-store-writer", "op-store-syncer", "op-store-ckpt"];
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        // A new thread names itself once it runs (until then it shows its parent's name):
        // wait for that, up to 10 s.
        let mut names = running();
        for _ in 0..1000 {
            if wanted.iter().all(|w| names.iter().any(|n| n == w)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            names = running();
        }
        for name in wanted {
            assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
        }
        drop(store);
    }

    /// Pins the build flag that makes the bundled SQLite sync with `fdatasync`: without it the
    /// amalgamation calls `fsync`, which on a journalling file system commits the journal for
    /// the log's changed timestamps on most syncs (3,298–3,332 journal commits against
    /// 2,249–2,270 with `fdatasync`, per run of 48,000 calls on ext4: docs/building.md). libsqlite3-sys reads the same variable
    /// when it compiles SQLite, and cargo rebuilds both when it changes.
    #[test]
    fn the_bundled_sqlite_is_built_to_sync_with_fdatasync() {
        let flags = option_env!("LIBSQLITE3_FLAGS").unwrap_or_default();
        assert!(
            flags.split_whitespace().any(|f| f == "-DHAVE_FDATASYNC=1"),
            "LIBSQLITE3_FLAGS is {flags:?}: .cargo/config.toml should set -DHAVE_FDATASYNC=1"
        );
    }
}
