//! What a `[[runtimes]]` entry with `kind = "hermes"` says, and how the adapter finds Hermes:
//! the `hermes` executable (`command`, else the first `hermes` on `PATH`), its home
//! (`home`, else `<data-dir>/hermes-home`, which the adapter creates 0700 and owns; never the
//! user's own `~/.hermes` or `HERMES_HOME` unless `home` names it) and its API server
//! (`api_url`: one the user runs; absent: the adapter starts `hermes gateway run` with the API
//! server on a free loopback port).

use std::path::{Path, PathBuf};

use openphone_policy::RuntimeAuthorisation;

/// The adapter's own Hermes home in the data directory (the default `home`).
pub const OWN_HOME_DIR: &str = "hermes-home";
/// The environment variable Hermes reads its home from.
pub const HERMES_HOME_ENV: &str = "HERMES_HOME";
/// The environment variable holding the key of an API server the user runs (`api_url`);
/// Hermes' own name for it.
pub const API_KEY_ENV: &str = "API_SERVER_KEY";

/// One Hermes runtime as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct HermesConfig {
    /// The runtime id (`[[runtimes]] id`, usually `hermes`).
    pub runtime_id: String,
    /// `enabled = false` keeps the runtime configured but never starts Hermes.
    pub enabled: bool,
    /// `command`: the `hermes` executable.
    pub command: Option<PathBuf>,
    /// `home`: Hermes' home directory (its `config.yaml`, `.env`, plugins); `None`: the
    /// adapter's own `<data-dir>/hermes-home`.
    pub home: Option<PathBuf>,
    /// `api_url`: the root of an API server the user runs (`http://127.0.0.1:8642`).
    pub api_url: Option<String>,
    /// The runtime's grants and ceiling, as the daemon resolved them.
    pub authorisation: RuntimeAuthorisation,
    /// How long a phone tool call waits for the user's decision before Hermes is told it is
    /// still pending (milliseconds).
    pub confirmation_timeout_ms: u64,
    /// How long Hermes' API server gets to answer its health check after start (ms).
    pub start_timeout_ms: u64,
}

/// Why the configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HermesConfigError {
    #[error(
        "no `hermes` executable: none on PATH and no `command` in the [[runtimes]] entry of \
         {runtime:?} (install Hermes Agent, e.g. `pip install \"hermes-agent[mcp,cron]\"`, or \
         set command = \"/path/to/hermes\")"
    )]
    NoCommand { runtime: String },
    #[error("`command` {path:?} of runtime {runtime:?} is not an executable file")]
    BadCommand { runtime: String, path: PathBuf },
    #[error(
        "`api_url` {url:?} of runtime {runtime:?} must be http:// on a loopback address \
         (Hermes' API server holds the agent; it is not exposed past this machine)"
    )]
    BadApiUrl { runtime: String, url: String },
}

impl HermesConfig {
    /// A configuration with the defaults for everything the entry does not say.
    pub fn new(runtime_id: &str, authorisation: RuntimeAuthorisation) -> HermesConfig {
        HermesConfig {
            runtime_id: runtime_id.to_owned(),
            enabled: true,
            command: None,
            home: None,
            api_url: None,
            authorisation,
            confirmation_timeout_ms: 300_000,
            start_timeout_ms: 60_000,
        }
    }

    /// Checks what can be checked without starting anything: `api_url` is loopback HTTP.
    pub fn check(&self) -> Result<(), HermesConfigError> {
        if let Some(url) = &self.api_url {
            api_root(url).ok_or_else(|| HermesConfigError::BadApiUrl {
                runtime: self.runtime_id.clone(),
                url: url.clone(),
            })?;
        }
        Ok(())
    }

    /// The `hermes` executable: `command`, else the first `hermes` on `path_var` (`PATH`).
    pub fn resolve_command(
        &self,
        path_var: Option<&std::ffi::OsStr>,
    ) -> Result<PathBuf, HermesConfigError> {
        if let Some(command) = &self.command {
            if is_executable(command) {
                return Ok(command.clone());
            }
            return Err(HermesConfigError::BadCommand {
                runtime: self.runtime_id.clone(),
                path: command.clone(),
            });
        }
        path_var
            .into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("hermes"))
            .find(|p| is_executable(p))
            .ok_or_else(|| HermesConfigError::NoCommand {
                runtime: self.runtime_id.clone(),
            })
    }

    /// Hermes' home and whether the adapter owns it: `home` when configured (the user's,
    /// used as it is), else `<data_dir>/hermes-home` (the adapter's own). The daemon's
    /// `HERMES_HOME` is deliberately not consulted: the phone's tools go into the user's own
    /// Hermes home only when the configuration says so.
    pub fn resolve_home(&self, data_dir: &Path) -> (PathBuf, bool) {
        match &self.home {
            Some(home) => (home.clone(), false),
            None => (data_dir.join(OWN_HOME_DIR), true),
        }
    }
}

/// The API root of a loopback `http://` URL without its trailing `/`, or `None`.
pub fn api_root(url: &str) -> Option<String> {
    let rest = url.trim().strip_prefix("http://")?;
    let host_port = rest.split('/').next().unwrap_or_default();
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    loopback.then(|| url.trim().trim_end_matches('/').to_owned())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_url_must_be_loopback_http() {
        assert_eq!(
            api_root("http://127.0.0.1:8642/").as_deref(),
            Some("http://127.0.0.1:8642")
        );
        assert!(api_root("http://localhost:8642").is_some());
        assert!(api_root("http://[::1]:8642").is_some());
        assert!(api_root("https://127.0.0.1:8642").is_none());
        assert!(api_root("http://10.0.0.2:8642").is_none());
        assert!(api_root("http://example.com").is_none());
    }

    #[test]
    fn the_default_home_is_the_adapters_own_never_the_users() {
        let mut c = HermesConfig::new("hermes", RuntimeAuthorisation::REVOKED);
        assert_eq!(
            c.resolve_home(Path::new("/data")),
            (PathBuf::from("/data/hermes-home"), true)
        );
        c.home = Some(PathBuf::from("/u/.hermes"));
        assert_eq!(
            c.resolve_home(Path::new("/data")),
            (PathBuf::from("/u/.hermes"), false)
        );
    }

    #[test]
    fn a_missing_hermes_says_how_to_get_one() {
        let c = HermesConfig::new("hermes", RuntimeAuthorisation::REVOKED);
        let e = c
            .resolve_command(Some(std::ffi::OsStr::new("/nonexistent")))
            .unwrap_err();
        assert!(e.to_string().contains("pip install"), "{e}");
    }
}
