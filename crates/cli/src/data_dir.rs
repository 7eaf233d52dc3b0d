//! Where the daemon's data directory is: `--data-dir`, else `OPENPHONE_DATA_DIR`, else
//! `$XDG_DATA_HOME/openphone`, else `~/.local/share/openphone`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct DataDir {
    /// The data directory (default: $OPENPHONE_DATA_DIR, else $XDG_DATA_HOME/openphone, else
    /// ~/.local/share/openphone).
    #[arg(long, value_name = "DIR", env = "OPENPHONE_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

impl DataDir {
    pub fn resolve(&self) -> Result<PathBuf> {
        if let Some(dir) = &self.data_dir {
            return Ok(dir.clone());
        }
        match default_location() {
            Some(dir) => Ok(dir),
            None => bail!("no data directory: pass --data-dir or set OPENPHONE_DATA_DIR"),
        }
    }
}

/// The data directory when neither `--data-dir` nor `OPENPHONE_DATA_DIR` names one:
/// `$XDG_DATA_HOME/openphone`, else `~/.local/share/openphone` (none without `HOME`).
pub fn default_location() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("openphone"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/share/openphone"))
}
