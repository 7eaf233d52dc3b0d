//! Which configuration file a command uses, decided in one place for every command that starts
//! or inspects a daemon (`serve`, `mcp serve --autostart`, `config path|check`, `doctor`):
//! `--config FILE`, else `OPENPHONE_CONFIG`, else `$XDG_CONFIG_HOME/openphone/config.toml`
//! (`~/.config/openphone/config.toml` without `XDG_CONFIG_HOME`) when that file exists, else
//! none (the defaults: no model, the simulated phone).

use std::path::{Path, PathBuf};

use super::{Config, ConfigError};

/// The environment variable that names the config file when `--config` does not.
pub const CONFIG_ENV: &str = "OPENPHONE_CONFIG";

/// Why a config file was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// `--config FILE`.
    Flag,
    /// `OPENPHONE_CONFIG`.
    Env,
    /// The default location, where the file exists.
    Default,
    /// None was named and the default location holds no file.
    None,
}

impl ConfigSource {
    /// The machine name: `flag`, `env`, `default`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigSource::Flag => "flag",
            ConfigSource::Env => "env",
            ConfigSource::Default => "default",
            ConfigSource::None => "none",
        }
    }

    /// Why, in words: "from --config", "from OPENPHONE_CONFIG", …
    pub fn reason(self) -> &'static str {
        match self {
            ConfigSource::Flag => "named by --config",
            ConfigSource::Env => "named by OPENPHONE_CONFIG",
            ConfigSource::Default => "found at the default location",
            ConfigSource::None => {
                "no file: --config and OPENPHONE_CONFIG are unset and the \
                                   default location holds none"
            }
        }
    }
}

/// The outcome of the resolution: the file (when any), why, and the default location (where a
/// new file belongs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigLocation {
    /// The file to read; `None` with [`ConfigSource::None`].
    pub path: Option<PathBuf>,
    pub source: ConfigSource,
    /// `$XDG_CONFIG_HOME/openphone/config.toml` or `~/.config/openphone/config.toml`; `None`
    /// without either variable.
    pub default_path: Option<PathBuf>,
}

impl ConfigLocation {
    /// Resolves from the flag's value and the process environment.
    pub fn resolve(flag: Option<&Path>) -> ConfigLocation {
        Self::resolve_with(flag, |name| std::env::var_os(name))
    }

    /// Resolves from the flag's value and `env` (the environment lookup).
    pub fn resolve_with(
        flag: Option<&Path>,
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> ConfigLocation {
        let set = |name: &str| env(name).filter(|v| !v.is_empty());
        let default_path = match set("XDG_CONFIG_HOME") {
            Some(xdg) if Path::new(&xdg).is_absolute() => Some(PathBuf::from(xdg)),
            // The XDG spec: a relative XDG_CONFIG_HOME is invalid and ignored.
            _ => set("HOME").map(|home| PathBuf::from(home).join(".config")),
        }
        .map(|dir| dir.join("openphone").join("config.toml"));
        let (path, source) = if let Some(flag) = flag {
            (Some(flag.to_path_buf()), ConfigSource::Flag)
        } else if let Some(env) = set(CONFIG_ENV) {
            (Some(PathBuf::from(env)), ConfigSource::Env)
        } else if let Some(default) = default_path.as_ref().filter(|p| p.exists()) {
            (Some(default.clone()), ConfigSource::Default)
        } else {
            (None, ConfigSource::None)
        };
        ConfigLocation {
            path,
            source,
            default_path,
        }
    }

    /// Reads the file (a named file that is missing is an error naming it and who named it),
    /// or the defaults without one. The config remembers where it came from
    /// ([`Config::origin`]).
    pub fn load(&self) -> Result<Config, ConfigError> {
        let Some(path) = &self.path else {
            return Ok(Config {
                origin: Some(self.describe()),
                ..Config::default()
            });
        };
        let mut config = Config::load(path).map_err(|e| match e {
            ConfigError::Read { path, source } => ConfigError::Read {
                path: format!("{path} ({})", self.source.reason()),
                source,
            },
            other => other,
        })?;
        config.origin = Some(self.describe());
        Ok(config)
    }

    /// One phrase for messages: "config file /x/config.toml (named by --config)", or "no
    /// config file (none at /home/u/.config/openphone/config.toml; create it or pass
    /// --config FILE)".
    pub fn describe(&self) -> String {
        match &self.path {
            Some(path) => format!("config file {} ({})", path.display(), self.source.reason()),
            None => format!(
                "no config file ({}; create it or pass --config FILE / set {CONFIG_ENV})",
                match &self.default_path {
                    Some(default) => format!("none at {}", default.display()),
                    None => "HOME is unset, so there is no default location".to_owned(),
                }
            ),
        }
    }
}
