//! The data directory belongs to the user's account alone: checked and tightened at start.
//!
//! The directory holds the database and its WAL (message bodies, results, memories), the
//! tokens, the `requestState` key, the sockets and logs. [`secure`] runs before the store
//! opens it and again after (the store creates the database and SQLite its `-wal` / `-shm`):
//!
//! - the directory and every file in it must be owned by the daemon's effective user: a
//!   directory or file of another account is refused with its path and owner — that account
//!   could read or replace everything, and the daemon could not tighten it;
//! - the directory loses every group and other permission bit (→ `0700`), and so does every
//!   regular file and socket directly in it (→ `0600` for the usual `0644`). Symbolic links
//!   are left alone (never followed); what sits below subdirectories is unreachable once the
//!   directory is `0700`.
//!
//! A directory that does not exist yet is left to the store, which creates it with `0700`.

use std::path::{Path, PathBuf};

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// The directory, or a file in it, belongs to another account.
    #[error(
        "refusing to use the data directory: {path} is owned by {owner}, not by this user \
         ({me}). Its owner can read and replace what the daemon keeps there. Run the daemon as \
         that user, give it back (`chown -R` to this user), or choose another directory with \
         `--data-dir`"
    )]
    ForeignOwner {
        path: PathBuf,
        owner: String,
        me: String,
    },
    #[error("the data directory {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("cannot inspect {path} in the data directory: {source}")]
    Inspect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot restrict {path} to its owner (mode {mode:o}): {source}")]
    Tighten {
        path: PathBuf,
        mode: u32,
        source: std::io::Error,
    },
}

/// One entry whose mode was tightened: its path and its modes before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightened {
    pub path: PathBuf,
    pub from: u32,
    pub to: u32,
}

/// Checks the owner of `dir` and of every entry in it, and removes group and other
/// permissions from it and its files and sockets. Returns what was tightened (logged by the
/// caller). A missing `dir` is not an error: nothing is checked.
#[cfg(unix)]
pub fn secure(dir: &Path) -> Result<Vec<Tightened>, DataDirError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    let me = rustix::process::geteuid().as_raw();
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(DataDirError::Inspect {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    if !meta.is_dir() {
        return Err(DataDirError::NotADirectory(dir.to_path_buf()));
    }
    own(dir, meta.uid(), me)?;
    let mut tightened = Vec::new();
    tighten(dir, meta.mode(), &mut tightened)?;
    let inspect = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DataDirError::Inspect { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(inspect(dir))? {
        let entry = entry.map_err(inspect(dir))?;
        let path = entry.path();
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            // Removed meanwhile (a probe file of the store, a stale socket).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(DataDirError::Inspect { path, source }),
        };
        // Owners first, links included: another account's link at `openphone.db` would have
        // the store (which follows it) write into that account's file. Links are not followed
        // or re-moded (a link's mode means nothing).
        own(&path, meta.uid(), me)?;
        let kind = meta.file_type();
        if kind.is_file() || kind.is_socket() {
            tighten(&path, meta.mode(), &mut tightened)?;
        }
    }
    Ok(tightened)
}

/// Elsewhere file modes and owners are not checked.
#[cfg(not(unix))]
pub fn secure(_dir: &Path) -> Result<Vec<Tightened>, DataDirError> {
    Ok(Vec::new())
}

#[cfg(unix)]
fn own(path: &Path, owner: u32, me: u32) -> Result<(), DataDirError> {
    if owner == me {
        return Ok(());
    }
    Err(DataDirError::ForeignOwner {
        path: path.to_path_buf(),
        owner: account(owner),
        me: account(me),
    })
}

/// Removes the group and other bits of `path`'s `mode`, if any.
#[cfg(unix)]
fn tighten(path: &Path, mode: u32, tightened: &mut Vec<Tightened>) -> Result<(), DataDirError> {
    use std::os::unix::fs::PermissionsExt;

    let from = mode & 0o7777;
    let to = from & 0o700;
    if from == to {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(to)).map_err(|source| {
        DataDirError::Tighten {
            path: path.to_path_buf(),
            mode: to,
            source,
        }
    })?;
    tightened.push(Tightened {
        path: path.to_path_buf(),
        from,
        to,
    });
    Ok(())
}

/// `uid 1000 (alice)`, or `uid 1000` when `/etc/passwd` does not name it.
#[cfg(unix)]
fn account(uid: u32) -> String {
    let name = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let mut fields = line.split(':');
                let name = fields.next()?;
                let id = fields.nth(1)?.parse::<u32>().ok()?;
                (id == uid && !name.is_empty()).then(|| name.to_owned())
            })
        });
    match name {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn loose_modes_lose_group_and_other_bits() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        assert_eq!(secure(&dir).unwrap(), Vec::new(), "missing: nothing to do");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o755)).unwrap();
        for (name, m) in [
            ("openphone.db", 0o644),
            ("tool.sh", 0o755),
            ("tight", 0o600),
        ] {
            std::fs::write(dir.join(name), "x").unwrap();
            std::fs::set_permissions(dir.join(name), PermissionsExt::from_mode(m)).unwrap();
        }
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "x").unwrap();
        std::fs::set_permissions(&outside, PermissionsExt::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();

        let done = secure(&dir).unwrap();
        assert_eq!(done.len(), 3, "{done:?}");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("openphone.db")), 0o600);
        assert_eq!(mode(&dir.join("tool.sh")), 0o700);
        assert_eq!(mode(&dir.join("tight")), 0o600);
        assert_eq!(mode(&outside), 0o644, "a link is not followed");
        assert_eq!(secure(&dir).unwrap(), Vec::new(), "idempotent");
    }

    /// A symlink owned by another account was skipped before its owner was checked, so
    /// another user could plant `openphone.db -> /their/file` (found in review).
    #[test]
    fn a_symlink_owned_by_another_account_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        let link = dir.join("openphone.db");
        std::os::unix::fs::symlink(tmp.path().join("theirs"), &link).unwrap();
        // Making a link another account's needs root (as CI and this machine run); elsewhere
        // the link stays ours and must be accepted.
        let foreign = std::os::unix::fs::lchown(&link, Some(65_534), None).is_ok();
        match secure(&dir) {
            Err(DataDirError::ForeignOwner { path, .. }) => {
                assert!(foreign, "our own link was refused");
                assert_eq!(path, link);
            }
            Ok(_) => assert!(!foreign, "a foreign link was accepted"),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn a_file_instead_of_a_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            secure(&file),
            Err(DataDirError::NotADirectory(p)) if p == file
        ));
    }

    #[test]
    fn accounts_are_named_by_uid_and_name() {
        assert!(account(0).starts_with("uid 0"));
        assert_eq!(account(4_000_000_000), "uid 4000000000");
    }
}
