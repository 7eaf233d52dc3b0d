//! [`Store`]: the one handle the rest of the runtime holds, whichever backend is behind it.

use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::audit::AuditIter;
use crate::backend::StoreBackend;
use crate::error::Result;
use crate::jobs::{Repair, StaleSelection, StoredJob};
use crate::lock::{DirLock, Holder};
use crate::watchers::{FireOutcome, FiringIds, NewFiring};
use crate::{AuditEntry, SqliteStore};

/// The durable store. `Send + Sync`: share it behind an `Arc`.
///
/// It holds one backend — the SQLite database in the data directory ([`Store::open`], the
/// default) or any other [`StoreBackend`] ([`Store::from_backend`], e.g. PostgreSQL for a
/// fleet) — and dereferences to it: every method of the domain traits (`JobStore`,
/// `AuditStore`, …) is called on the store directly.
pub struct Store {
    backend: Backend,
}

// One per process: keeping SQLite inline saves a pointer hop on every call.
#[allow(clippy::large_enum_variant)]
enum Backend {
    Sqlite(SqliteStore),
    /// Another backend, and the data directory's lock when the store holds it.
    Other(Box<dyn StoreBackend>, Option<DirLock>),
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.backend {
            Backend::Sqlite(s) => s.fmt(f),
            Backend::Other(b, _) => b.fmt(f),
        }
    }
}

impl Deref for Store {
    type Target = dyn StoreBackend;

    fn deref(&self) -> &Self::Target {
        match &self.backend {
            Backend::Sqlite(s) => s,
            Backend::Other(b, _) => b.as_ref(),
        }
    }
}

impl From<SqliteStore> for Store {
    fn from(store: SqliteStore) -> Store {
        Store {
            backend: Backend::Sqlite(store),
        }
    }
}

impl Store {
    /// Opens (creating if needed) the SQLite store in `data_dir` as its exclusive owner
    /// ([`SqliteStore::open`]).
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Store> {
        SqliteStore::open(data_dir).map(Store::from)
    }

    /// [`Store::open`] with an explicit holder description ([`SqliteStore::open_as`]).
    pub fn open_as(data_dir: impl AsRef<Path>, holder: &Holder) -> Result<Store> {
        SqliteStore::open_as(data_dir, holder).map(Store::from)
    }

    /// Opens an existing SQLite database read-only ([`SqliteStore::open_read_only`]).
    pub fn open_read_only(data_dir: impl AsRef<Path>) -> Result<Store> {
        SqliteStore::open_read_only(data_dir).map(Store::from)
    }

    /// A store over any backend (e.g. `openphone_store_pg::PgStore`).
    pub fn from_backend(backend: Box<dyn StoreBackend>) -> Store {
        Store {
            backend: Backend::Other(backend, None),
        }
    }

    /// [`Store::from_backend`] holding the data directory's lock ([`crate::lock_data_dir`])
    /// for as long as the store lives.
    pub fn with_lock(backend: Box<dyn StoreBackend>, lock: DirLock) -> Store {
        Store {
            backend: Backend::Other(backend, Some(lock)),
        }
    }

    /// The SQLite store, when that is the backend.
    pub fn as_sqlite(&self) -> Option<&SqliteStore> {
        match &self.backend {
            Backend::Sqlite(s) => Some(s),
            Backend::Other(..) => None,
        }
    }

    /// The backend: every domain method, for callers that want the trait object itself.
    pub fn backend(&self) -> &dyn StoreBackend {
        &**self
    }

    /// The SQLite database file (`None` for another backend).
    pub fn db_path(&self) -> Option<PathBuf> {
        self.as_sqlite().map(SqliteStore::db_path)
    }

    /// The lock file of the data directory, when this store holds it (`None` for read-only
    /// stores and for backends that keep no lock here).
    pub fn lock_path(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Sqlite(s) => s.lock_path(),
            Backend::Other(_, lock) => lock.as_ref().map(DirLock::path),
        }
    }

    /// Every audit record after `after_seq`, read `batch` at a time (oldest first).
    pub fn audit_iter(&self, after_seq: i64, batch: usize) -> AuditIter<'_> {
        AuditIter::new(self, after_seq, batch)
    }

    /// [`JobStore::repair_stale_jobs`](crate::JobStore::repair_stale_jobs) with any closure.
    pub fn repair_stale_jobs<F>(
        &self,
        selection: &StaleSelection,
        repair: F,
    ) -> Result<Vec<StoredJob>>
    where
        F: Fn(&StoredJob) -> Option<Repair> + Send + 'static,
    {
        self.backend()
            .repair_stale_jobs(selection, Box::new(repair))
    }

    /// [`WatcherStore::fire_watcher`](crate::WatcherStore::fire_watcher) with any closure.
    pub fn fire_watcher(
        &self,
        new: NewFiring,
        audit: impl FnOnce(&FiringIds) -> AuditEntry + Send + 'static,
    ) -> Result<FireOutcome> {
        self.backend().fire_watcher(new, Box::new(audit))
    }
}
