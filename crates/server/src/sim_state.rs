//! The simulated phone remembers: its whole state (`SimState`: messages, contacts, calendar,
//! notes, clipboard, notifications, the screen and its back stacks, the timeline's progress,
//! the action log) is kept in `<data-dir>/sim-state.json` and survives a restart.
//!
//! **Why a file, not a table of the store.** The state is one JSON document that is always
//! written whole; a file is exactly that document, a valid scenario
//! (`serve --device sim:<data-dir>/sim-state.json` on another data directory starts a copy),
//! readable with `jq`, and it keeps the phone's world out of the runtime's database, whose
//! tables hold what the *runtime* did (the audit log, confirmations, results).
//!
//! **What is promised.** A state-changing command, an injection (`sim inject`) and a runtime
//! notification answer only once the state holding their change is on disk (temporary file,
//! fsync, rename, fsync of the directory): what a caller saw acknowledged survives a crash or
//! `kill -9`. Changes the phone makes by itself (its scenario timeline) are saved as soon as
//! they happen, and once more at shutdown. Saves are coalesced: one at a time, each writes
//! the latest state, so concurrent commands share one write. A save that fails (a full disk)
//! is logged as an error and retried every second; the command it followed still answers.
//!
//! On start: the saved state if the file exists, else the scenario (`--device sim:FILE`, or
//! the built-in demo). A file that cannot be read or parsed stops the daemon with an error
//! naming it and the fix; it is never silently replaced. `openphone sim reset` starts over
//! (the old file is kept as `sim-state.json.bak`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openphone_clock::Clock;
use openphone_device::sim::StateSink;
use openphone_device::{SimPhone, SimState};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// `<data-dir>/sim-state.json`: the simulated phone's saved state.
pub const SIM_STATE_FILE: &str = "sim-state.json";

/// How long the saver waits before retrying a failed save.
const RETRY: Duration = Duration::from_secs(1);

/// Why the simulated phone could not be opened or reset.
#[derive(Debug, thiserror::Error)]
pub enum SimStateError {
    /// The saved state exists but cannot be used.
    #[error(
        "the saved simulated phone {path} cannot be used: {problem}. Fix: repair the file, or \
         start over from the scenario with `openphone sim reset --data-dir {dir}` (it keeps \
         the file as {path}.bak)"
    )]
    Corrupt {
        path: String,
        dir: String,
        problem: String,
    },
    /// The scenario (no saved state yet) cannot be used.
    #[error("{0}")]
    Scenario(String),
    /// A daemon holds the data directory.
    #[error(
        "a daemon is using {dir} ({holder}): stop it first (it would write its phone back at \
         shutdown), then run `openphone sim reset` again"
    )]
    InUse { dir: String, holder: String },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
}

/// Where the phone came from at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimOrigin {
    /// The state saved by an earlier run.
    Saved(PathBuf),
    /// The scenario file (nothing saved yet).
    Scenario(PathBuf),
    /// The built-in demo scenario (nothing saved yet).
    Demo,
}

/// The saved state's file of a phone: `sim-state.json` for the daemon's (only or default)
/// simulated phone, `sim-state-<id>.json` for another one of several.
pub fn state_path(data_dir: &Path, device_id: Option<&str>) -> PathBuf {
    match device_id {
        None => data_dir.join(SIM_STATE_FILE),
        Some(id) => data_dir.join(format!("sim-state-{id}.json")),
    }
}

/// Opens the simulated phone whose state lives in `state_file`: the saved state when the file
/// exists, else `scenario` (a scenario file) or the built-in demo moved to today. The phone
/// saves itself there from now on (attach [`spawn_saver`] for the changes nobody flushes).
pub fn open_sim(
    state_file: &Path,
    scenario: Option<&Path>,
    clock: Arc<dyn Clock>,
) -> Result<(Arc<SimPhone>, SimOrigin), SimStateError> {
    let corrupt = |problem: String| SimStateError::Corrupt {
        path: state_file.display().to_string(),
        dir: state_file
            .parent()
            .map_or_else(String::new, |d| d.display().to_string()),
        problem,
    };
    let (phone, origin) = match std::fs::read_to_string(state_file) {
        Ok(text) => {
            let state = SimState::from_json(&text).map_err(|e| corrupt(e.to_string()))?;
            let phone = SimPhone::from_state(state, clock).map_err(|e| corrupt(e.to_string()))?;
            (phone, SimOrigin::Saved(state_file.to_path_buf()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match scenario {
            Some(path) => {
                let phone = SimState::from_file(path)
                    .and_then(|state| SimPhone::new(state, clock))
                    .map_err(|e| SimStateError::Scenario(e.to_string()))?;
                (phone, SimOrigin::Scenario(path.to_path_buf()))
            }
            None => {
                let phone = SimPhone::with_default_scenario(clock)
                    .map_err(|e| SimStateError::Scenario(e.to_string()))?;
                (phone, SimOrigin::Demo)
            }
        },
        Err(e) => return Err(corrupt(format!("it cannot be read ({e})"))),
    };
    match (&origin, scenario) {
        (SimOrigin::Saved(path), Some(asked)) => tracing::warn!(
            saved = %path.display(),
            scenario = %asked.display(),
            "the simulated phone continues from its saved state, not from the scenario; \
             `openphone sim reset` starts over from the scenario"
        ),
        (SimOrigin::Saved(path), None) => tracing::info!(
            saved = %path.display(),
            "the simulated phone continues from its saved state (`openphone sim reset` starts over)"
        ),
        (SimOrigin::Scenario(path), _) => {
            tracing::info!(scenario = %path.display(), "the simulated phone starts from the scenario")
        }
        (SimOrigin::Demo, _) => {
            tracing::info!("the simulated phone starts from the built-in demo scenario")
        }
    }
    let phone = Arc::new(phone);
    phone.persist_to(Arc::new(FileSink {
        path: state_file.to_path_buf(),
    }));
    Ok((phone, origin))
}

/// Saves what nobody flushed (the timeline's changes) and, when `shutdown` turns true, the
/// last state. The daemon awaits it at shutdown with its other background tasks.
pub fn spawn_saver(phone: Arc<SimPhone>, mut shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        phone
            .run_saver(RETRY, async move {
                crate::shutdown::stopped(&mut shutdown).await;
            })
            .await;
    })
}

/// The saved state's file, written atomically.
#[derive(Debug)]
struct FileSink {
    path: PathBuf,
}

#[async_trait]
impl StateSink for FileSink {
    async fn save(&self, state: SimState) -> Result<(), String> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec(&state).map_err(|e| e.to_string())?;
            write_atomically(&path, &bytes).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| format!("the save task failed: {e}"))?
    }
}

/// Writes `bytes` to `path` (mode 0600) so that a crash leaves the old or the new contents:
/// a temporary file beside it, fsync, rename over, fsync of the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), SimStateError> {
    let io = |op: &'static str, path: &Path| {
        let path = path.display().to_string();
        move |source| SimStateError::Io { op, path, source }
    };
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(&tmp).map_err(io("creating", &tmp))?;
    file.write_all(bytes).map_err(io("writing", &tmp))?;
    file.sync_all().map_err(io("syncing", &tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io("renaming into", path))?;
    sync_dir(path)
}

fn sync_dir(path: &Path) -> Result<(), SimStateError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| SimStateError::Io {
            op: "syncing the directory",
            path: dir.display().to_string(),
            source,
        })?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// What `openphone sim reset` did: the saved states moved aside (`<file>.bak`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ResetReport {
    pub data_dir: PathBuf,
    /// The saved states moved aside.
    pub moved: Vec<Moved>,
}

/// One saved state moved aside by [`reset`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Moved {
    /// The saved state (`sim-state.json`).
    pub from: PathBuf,
    /// Where it is now (`sim-state.json.bak`).
    pub to: PathBuf,
}

/// Starts the simulated phones of `data_dir` over: every saved state (`sim-state.json`,
/// `sim-state-<id>.json`) is renamed to `<file>.bak`, so the next start seeds the phone from
/// its scenario again. Refused while a daemon holds the directory.
pub fn reset(data_dir: &Path) -> Result<ResetReport, SimStateError> {
    let lock_path = data_dir.join(openphone_store::LOCK_FILE);
    // Held for the whole reset, so no daemon starts half-way through.
    let _lock = match OpenOptions::new().read(true).write(true).open(&lock_path) {
        Ok(file) => match file.try_lock() {
            Ok(()) => Some(file),
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&lock_path)
                    .ok()
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "unknown holder".into());
                return Err(SimStateError::InUse {
                    dir: data_dir.display().to_string(),
                    holder,
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(SimStateError::Io {
                    op: "locking",
                    path: lock_path.display().to_string(),
                    source,
                });
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(SimStateError::Io {
                op: "opening",
                path: lock_path.display().to_string(),
                source,
            });
        }
    };
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(ResetReport {
                data_dir: data_dir.to_path_buf(),
                moved: Vec::new(),
            });
        }
        Err(source) => {
            return Err(SimStateError::Io {
                op: "listing",
                path: data_dir.display().to_string(),
                source,
            });
        }
    };
    let mut saved: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n == SIM_STATE_FILE || (n.starts_with("sim-state-") && n.ends_with(".json"))
            })
        })
        .collect();
    saved.sort();
    let mut moved = Vec::new();
    for path in saved {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".bak");
        let bak = path.with_file_name(name);
        std::fs::rename(&path, &bak).map_err(|source| SimStateError::Io {
            op: "moving aside",
            path: path.display().to_string(),
            source,
        })?;
        moved.push(Moved {
            from: path,
            to: bak,
        });
    }
    if !moved.is_empty() {
        sync_dir(&data_dir.join(SIM_STATE_FILE))?;
    }
    Ok(ResetReport {
        data_dir: data_dir.to_path_buf(),
        moved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_files_are_named_per_device() {
        let dir = Path::new("/d");
        assert_eq!(state_path(dir, None), Path::new("/d/sim-state.json"));
        assert_eq!(
            state_path(dir, Some("work")),
            Path::new("/d/sim-state-work.json")
        );
    }
}
