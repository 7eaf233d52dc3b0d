//! The data-directory lock: one process serves one data directory.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// Who holds (or wants) the data-directory lock; written into `openphone.lock` for diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// When the holder started, Unix ms (diagnostic only).
    pub started_at_ms: i64,
    /// The daemon's `instance_id` for this start, when it has minted one
    /// (`durable-execution.md` §4.1).
    pub instance_id: Option<String>,
}

impl Holder {
    /// The current process, stamped with the system clock. This is the one place the crate
    /// reads a clock, and only to write a human-readable diagnostic into the lock file; callers
    /// with an injected clock use [`Holder::new`].
    pub fn current() -> Holder {
        use openphone_clock::Clock as _;
        Holder::new(openphone_clock::SystemClock.now_ms(), None)
    }

    /// The current process with a start time (and instance id) supplied by the caller.
    pub fn new(started_at_ms: i64, instance_id: Option<String>) -> Holder {
        Holder {
            pid: std::process::id(),
            started_at_ms,
            instance_id,
        }
    }

    /// The line written into the lock file, e.g. `pid 1234 since 1760000000000 ms`.
    pub fn describe(&self) -> String {
        match &self.instance_id {
            Some(id) => format!(
                "pid {} since {} ms, instance {id}",
                self.pid, self.started_at_ms
            ),
            None => format!("pid {} since {} ms", self.pid, self.started_at_ms),
        }
    }
}

/// An acquired lock on a data directory; released when dropped (and by the kernel when the
/// process dies). See [`crate::lock_data_dir`].
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

impl DirLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes the exclusive lock on `<dir>/openphone.lock` without waiting.
///
/// `File::try_lock` is an `flock`-style lock on the open file description, so a second
/// acquisition fails both from another process and from a second `open` in this process.
pub(crate) fn acquire(dir: &Path, holder: &Holder) -> Result<DirLock> {
    let path = dir.join(crate::LOCK_FILE);
    let io = |op: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io { op, path, source }
    };
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&path).map_err(io("open lock file", &path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            // Best effort: the holder may be rewriting the file right now.
            let _ = file.read_to_string(&mut text);
            let text = text.trim();
            let holder = if text.is_empty() {
                "unknown holder".to_owned()
            } else {
                text.to_owned()
            };
            return Err(StoreError::Locked { holder, path });
        }
        Err(TryLockError::Error(source)) => {
            return Err(StoreError::Io {
                op: "lock",
                path,
                source,
            });
        }
    }
    file.set_len(0).map_err(io("truncate lock file", &path))?;
    file.seek(SeekFrom::Start(0))
        .map_err(io("write lock file", &path))?;
    writeln!(file, "{}", holder.describe()).map_err(io("write lock file", &path))?;
    file.sync_all().map_err(io("sync lock file", &path))?;
    Ok(DirLock { _file: file, path })
}

/// Creates the data directory (mode 0700 on unix) if it does not exist.
pub(crate) fn create_data_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|source| StoreError::Io {
        op: "create data directory",
        path: dir.to_path_buf(),
        source,
    })
}
