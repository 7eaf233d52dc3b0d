//! The start-up checks of [`Store::open`](crate::Store::open): fail closed, never start over.
//!
//! - The data directory must be writable: a probe file is created, synced and removed
//!   ([`StoreError::NotWritable`] otherwise; SQLite needs the directory for its `-wal` and
//!   `-shm` files).
//! - A missing database is created under a temporary name, migrated, synced and renamed into
//!   place, so `openphone.db` is never an empty file of ours. An existing database that is
//!   empty, cut short or not a database is refused ([`StoreError::Damaged`]) — never replaced,
//!   which would silently drop its history and audit log.
//! - SQLite opens a write-protected file read-only without complaint; a database it could
//!   only open read-only, or that refuses a real write (`store_meta.opened_by`, committed and
//!   synced), is refused as [`StoreError::NotWritable`].

use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

use crate::error::{Result, StoreError};

/// The name a new database is built under before it is renamed to `openphone.db`.
const NEW_DB_SUFFIX: &str = "new";

/// An I/O failure on `path` as the store reports it: permissions, a read-only file system
/// and a full disk are [`StoreError::NotWritable`]; anything else keeps its operation.
pub(crate) fn io_error(op: &'static str, path: &Path, source: std::io::Error) -> StoreError {
    use std::io::ErrorKind;
    match source.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem | ErrorKind::StorageFull => {
            StoreError::NotWritable {
                path: path.to_path_buf(),
                detail: format!("{op}: {source}"),
            }
        }
        _ => StoreError::Io {
            op,
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Re-reads a file-system [`StoreError::Io`] through [`io_error`] (so a permission or
/// read-only failure of the lock file or the data directory names the fix); other errors pass.
pub(crate) fn reclassify(error: StoreError) -> StoreError {
    match error {
        StoreError::Io { op, path, source } => io_error(op, &path, source),
        other => other,
    }
}

/// An SQLite failure while opening `db`: a damaged file, an unwritable one, or (otherwise)
/// the plain SQL error of `op`.
pub(crate) fn sql_error(op: &'static str, db: &Path, source: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    match source.sqlite_error_code() {
        Some(C::NotADatabase | C::DatabaseCorrupt) => StoreError::Damaged {
            path: db.to_path_buf(),
            detail: source.to_string(),
        },
        Some(
            C::ReadOnly | C::CannotOpen | C::PermissionDenied | C::DiskFull | C::SystemIoFailure,
        ) => StoreError::NotWritable {
            path: db.to_path_buf(),
            detail: source.to_string(),
        },
        _ => StoreError::Sql {
            op,
            id: db.display().to_string(),
            source,
        },
    }
}

/// Creates, syncs and removes a probe file in `dir`.
pub(crate) fn check_dir_writable(dir: &Path) -> Result<()> {
    let probe = dir.join(format!(".openphone-write-probe-{}", std::process::id()));
    let _ = std::fs::remove_file(&probe);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut file| {
            file.write_all(b"probe")?;
            file.sync_all()
        });
    let _ = std::fs::remove_file(&probe);
    written.map_err(|source| StoreError::NotWritable {
        path: dir.to_path_buf(),
        detail: format!("cannot create a file in it: {source}"),
    })
}

/// What is at the database path before opening it.
pub(crate) enum Found {
    /// No file: a new database is made.
    Missing,
    /// A non-empty file: opened and checked.
    Existing,
}

/// Looks at `db` without opening it: missing, or existing and non-empty (an empty file is
/// [`StoreError::Damaged`]).
pub(crate) fn inspect(db: &Path) -> Result<Found> {
    match std::fs::metadata(db) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Found::Missing),
        Err(source) => Err(io_error("inspect database", db, source)),
        Ok(meta) if !meta.is_file() => Err(StoreError::Damaged {
            path: db.to_path_buf(),
            detail: "not a regular file".to_owned(),
        }),
        Ok(meta) if meta.len() == 0 => Err(StoreError::Damaged {
            path: db.to_path_buf(),
            detail: "the file is empty (0 bytes): it was truncated".to_owned(),
        }),
        Ok(_) => Ok(Found::Existing),
    }
}

/// Builds a new database at `<db>.new` (migrated to `version`), syncs it and renames it to
/// `db`, then syncs the directory: a crash leaves either no `openphone.db` or a complete one.
pub(crate) fn create_fresh(db: &Path, version: i64) -> Result<()> {
    let staging = staging_path(db);
    for stale in [
        staging.clone(),
        PathBuf::from(format!("{}-journal", staging.display())),
    ] {
        let _ = std::fs::remove_file(stale);
    }
    {
        let mut conn = Connection::open(&staging).map_err(|e| sql_error("store.create", db, e))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| sql_error("store.create", db, e))?;
        crate::migrations::migrate(&mut conn, version)?;
        conn.close()
            .map_err(|(_, e)| sql_error("store.create", db, e))?;
    }
    std::fs::File::open(&staging)
        .and_then(|file| file.sync_all())
        .map_err(|e| io_error("sync new database", &staging, e))?;
    std::fs::rename(&staging, db).map_err(|e| io_error("install new database", db, e))?;
    if let Some(dir) = db.parent() {
        // Makes the rename durable; not every platform can open a directory for this.
        if let Ok(handle) = std::fs::File::open(dir) {
            let _ = handle.sync_all();
        }
    }
    Ok(())
}

fn staging_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".");
    name.push(NEW_DB_SUFFIX);
    PathBuf::from(name)
}

/// Opens an existing database for reading and writing (never creating it).
pub(crate) fn open_existing(db: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(db, flags).map_err(|e| sql_error("store.open", db, e))?;
    let read_only = conn
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(|e| sql_error("store.open", db, e))?;
    if read_only {
        return Err(StoreError::NotWritable {
            path: db.to_path_buf(),
            detail: "SQLite could open it only read-only".to_owned(),
        });
    }
    Ok(conn)
}

/// `PRAGMA quick_check`: the structure of every page, without the slower index checks.
pub(crate) fn check_integrity(conn: &Connection, db: &Path) -> Result<()> {
    let mut stmt = conn
        .prepare("PRAGMA quick_check")
        .map_err(|e| sql_error("store.quick_check", db, e))?;
    let problems = stmt
        .query_map([], |row| row.get::<_, String>(0))
        .and_then(|rows| rows.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| sql_error("store.quick_check", db, e))?;
    if problems.len() == 1 && problems[0] == "ok" {
        return Ok(());
    }
    let mut detail = problems.into_iter().take(3).collect::<Vec<_>>().join("; ");
    if detail.is_empty() {
        detail = "the integrity check returned nothing".to_owned();
    }
    Err(StoreError::Damaged {
        path: db.to_path_buf(),
        detail: format!("integrity check failed: {detail}"),
    })
}

/// A real write, committed and synced: who opened the database last.
pub(crate) fn probe_write(conn: &Connection, db: &Path, holder: &str) -> Result<()> {
    conn.execute(
        "INSERT INTO store_meta (key, value) VALUES ('opened_by', ?1) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![holder],
    )
    .map(|_| ())
    .map_err(|e| match sql_error("store.probe_write", db, e) {
        StoreError::Sql { source, .. } => StoreError::NotWritable {
            path: db.to_path_buf(),
            detail: source.to_string(),
        },
        other => other,
    })
}
