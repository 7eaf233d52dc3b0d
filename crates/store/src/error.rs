//! The store's error type.

use std::path::PathBuf;

use crate::records::{ConfirmationRecord, ConfirmationState};

/// Everything that can go wrong in the store. Each variant names the operation and the record it
/// concerned, so a caller can log it as is and branch on the variant.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another opener holds the data directory lock.
    #[error(
        "data directory is locked by another OpenPhone process ({holder}); lock file {}",
        path.display()
    )]
    Locked {
        /// Who holds it, as written in the lock file (e.g. `pid 1234 since 1760000000000 ms`).
        holder: String,
        /// The lock file.
        path: PathBuf,
    },
    /// The data directory or the database cannot be written (file modes, ownership, a
    /// read-only mount, a full disk). Opening refuses rather than serve without an audit log.
    #[error(
        "{} is not writable ({detail}): OpenPhone does not run without a writable database and \
         audit log. Fix: give this user write access to it (file modes, ownership, a read-only \
         mount, free disk space), or use another data directory",
        path.display()
    )]
    NotWritable {
        /// The directory or file that cannot be written.
        path: PathBuf,
        /// What failed (the operating system's or SQLite's words).
        detail: String,
    },
    /// The database file is empty (truncated to zero bytes), cut short or not a database.
    /// Opening refuses rather than replace it with a fresh one.
    #[error(
        "{} is damaged ({detail}): OpenPhone will not replace it with a fresh database, which \
         would lose its history and audit log. Fix: restore it from a backup, or move it (and \
         any openphone.db-wal and openphone.db-shm beside it) out of the data directory to \
         start with an empty one",
        path.display()
    )]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A file-system operation on the data directory failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An SQLite call failed.
    #[error("store {op}{}: {source}", describe_id(id))]
    Sql {
        /// `table.operation`, e.g. `confirmations.resolve`.
        op: &'static str,
        /// The record concerned, when there is one (empty otherwise).
        id: String,
        #[source]
        source: rusqlite::Error,
    },
    /// A call to a database server (a backend other than SQLite, e.g. PostgreSQL) failed.
    #[error("store {op}{}: {detail}", describe_id(id))]
    Backend {
        /// `table.operation`, e.g. `agent_jobs.claim`.
        op: &'static str,
        /// The record concerned, when there is one (empty otherwise).
        id: String,
        /// The server's or the driver's words (never a password).
        detail: String,
    },
    /// A stored JSON blob or enum string could not be decoded (the database was edited by
    /// hand or written by a newer version).
    #[error("store {op}{}: corrupt value: {detail}", describe_id(id))]
    Corrupt {
        op: &'static str,
        id: String,
        detail: String,
    },
    /// A write was not committed: its batch could not begin or commit, it panicked, the
    /// store's writer has stopped, or the store was opened read-only. Nothing of it is kept.
    #[error("store {op}{}: not written: {detail}", describe_id(id))]
    Commit {
        op: &'static str,
        id: String,
        detail: String,
    },
    /// The database was written by a newer version of OpenPhone.
    #[error("database schema version {found} is newer than this build understands ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
    /// A record that must exist does not.
    #[error("{table} {id} not found")]
    NotFound { table: &'static str, id: String },
    /// An insert would duplicate an existing primary key.
    #[error("{table} {id} already exists")]
    AlreadyExists { table: &'static str, id: String },
    /// A compare-and-set write found the record changed since the caller read it (another
    /// writer won): nothing was written. Read the record again and decide anew.
    #[error("{table} {id} changed since it was read ({detail}); nothing was written")]
    Conflict {
        table: &'static str,
        id: String,
        detail: String,
    },
    /// A bounded table is full and nothing could be made room for (e.g. `job_limit_reached`).
    #[error("{what}: limit of {limit} reached ({detail})")]
    LimitReached {
        what: &'static str,
        limit: usize,
        detail: String,
    },
    /// An argument is malformed (e.g. a params digest that is not 64 lowercase hex digits).
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    /// A confirmation transition was asked of a record in the wrong state (e.g. `complete` on a
    /// confirmation that is not `approved`).
    #[error("confirmation {confirmation_id} is {state}, expected {expected}")]
    WrongState {
        confirmation_id: String,
        state: ConfirmationState,
        expected: &'static str,
    },
    /// `resolve` lost: the confirmation is unknown, already resolved, or expired. The bridge
    /// answers `pending_confirmation_not_found`.
    #[error("confirmation {confirmation_id} is not pending: {reason}")]
    ConfirmationNotPending {
        confirmation_id: String,
        reason: NotPending,
    },
}

/// Why a confirmation could not be resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum NotPending {
    /// No confirmation has this id.
    Unknown,
    /// Someone resolved it first (or it timed out earlier); the state it is in now.
    AlreadyResolved { state: ConfirmationState },
    /// It was still pending but its time had passed: this call moved it to `timeout`. The caller
    /// owns the follow-up (final `timeout` result, `runtime.confirmation.resolved` event).
    Expired { timed_out: Box<ConfirmationRecord> },
}

impl std::fmt::Display for NotPending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotPending::Unknown => f.write_str("unknown confirmation id"),
            NotPending::AlreadyResolved { state } => write!(f, "already {state}"),
            NotPending::Expired { timed_out } => {
                write!(
                    f,
                    "expired at {} ms, now timed out",
                    timed_out.expires_at_ms
                )
            }
        }
    }
}

fn describe_id(id: &str) -> String {
    if id.is_empty() {
        String::new()
    } else {
        format!(" ({id})")
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches an operation and record id to an SQLite error.
pub(crate) trait SqlContext<T> {
    fn ctx(self, op: &'static str, id: &str) -> Result<T>;
    /// [`SqlContext::ctx`] with the record id made only on failure (no `format!` per call).
    fn ctx_with(self, op: &'static str, id: impl FnOnce() -> String) -> Result<T>;
}

impl<T> SqlContext<T> for std::result::Result<T, rusqlite::Error> {
    fn ctx(self, op: &'static str, id: &str) -> Result<T> {
        self.map_err(|source| StoreError::Sql {
            op,
            id: id.to_owned(),
            source,
        })
    }

    fn ctx_with(self, op: &'static str, id: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| StoreError::Sql {
            op,
            id: id(),
            source,
        })
    }
}

impl StoreError {
    pub(crate) fn corrupt(op: &'static str, id: &str, detail: impl std::fmt::Display) -> Self {
        StoreError::Corrupt {
            op,
            id: id.to_owned(),
            detail: detail.to_string(),
        }
    }

    /// True when the error is a `resolve` that lost (unknown / already resolved / expired):
    /// the wire answer is `pending_confirmation_not_found`.
    pub fn is_pending_confirmation_not_found(&self) -> bool {
        matches!(self, StoreError::ConfirmationNotPending { .. })
    }
}
