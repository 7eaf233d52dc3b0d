//! Device tokens the gateway issued (`openclaw-node.md` §5.3), one per (gateway, device, role),
//! in `<data-dir>/openclaw-tokens.json` (mode 0600). Never logged or printed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The token file in the data directory.
pub const TOKENS_FILE: &str = "openclaw-tokens.json";

/// One stored device token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredToken {
    pub token: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub issued_at_ms: Option<i64>,
    #[serde(default)]
    pub gateway_version: String,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("token", &"<redacted>")
            .field("scopes", &self.scopes)
            .field("gateway_version", &self.gateway_version)
            .finish()
    }
}

/// A token file problem.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a token file ({message}); delete it and pair again")]
    Malformed { path: String, message: String },
}

/// The token file.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
}

/// The key of one token: normalised URL, device id, role.
pub fn token_key(url: &str, device_id: &str, role: &str) -> String {
    format!(
        "{}|{device_id}|{role}",
        url.trim().trim_end_matches('/').to_ascii_lowercase()
    )
}

impl TokenStore {
    /// The token file of `data_dir`.
    pub fn new(data_dir: &Path) -> TokenStore {
        TokenStore {
            path: data_dir.join(TOKENS_FILE),
        }
    }

    fn read(&self) -> Result<BTreeMap<String, StoredToken>, TokenError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| TokenError::Malformed {
                path: self.path.display().to_string(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(source) => Err(TokenError::Io {
                path: self.path.display().to_string(),
                source,
            }),
        }
    }

    fn write(&self, all: &BTreeMap<String, StoredToken>) -> Result<(), TokenError> {
        let err = |source| TokenError::Io {
            path: self.path.display().to_string(),
            source,
        };
        let text = serde_json::to_string_pretty(all).map_err(|e| TokenError::Malformed {
            path: self.path.display().to_string(),
            message: e.to_string(),
        })?;
        let tmp = self.path.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(&tmp).map_err(err)?;
        file.write_all(text.as_bytes()).map_err(err)?;
        file.sync_all().map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)
    }

    /// The stored token for `key`.
    pub fn get(&self, key: &str) -> Result<Option<StoredToken>, TokenError> {
        Ok(self.read()?.remove(key))
    }

    /// Stores `token` under `key` when it is new or differs (a rotation); an equal token keeps
    /// the stored record. Returns whether anything was written.
    pub fn put(&self, key: &str, token: StoredToken) -> Result<bool, TokenError> {
        let mut all = self.read()?;
        if all.get(key).is_some_and(|t| t.token == token.token) {
            return Ok(false);
        }
        all.insert(key.to_owned(), token);
        self.write(&all)?;
        Ok(true)
    }

    /// Forgets the token under `key`; returns whether there was one.
    pub fn remove(&self, key: &str) -> Result<bool, TokenError> {
        let mut all = self.read()?;
        let had = all.remove(key).is_some();
        if had {
            self.write(&all)?;
        }
        Ok(had)
    }

    /// Forgets every token; returns how many there were.
    pub fn clear(&self) -> Result<usize, TokenError> {
        let all = self.read()?;
        let n = all.len();
        if n > 0 {
            self.write(&BTreeMap::new())?;
        }
        Ok(n)
    }
}
