//! The daemon's configuration file (TOML): runtimes and their tokens, tool policy, limits.
//!
//! Every table is closed: an unknown key is an error naming the key. Documented with an
//! example in `docs/openphone.example.toml`.//!
//! This file holds the whole file's type ([`Config`]), its parsing and checks, and what the
//! daemon derives from it; `config/tables.rs` the plain tables (`[goals]`, `[jobs]`,
//! `[store]`, `[log]`, `[endpoint]`, `[mcp]`, `[limits]`), `config/runtimes.rs` a
//! `[[runtimes]]` entry and the credential resolved from it, `config/error.rs` the error.

use std::collections::BTreeMap;
use std::path::Path;

use openphone_policy::{ExposureGrants, RuntimeAuthorisation, ToolPolicy};
use serde::Deserialize;

mod devices;
mod error;
mod hermes;
mod resolve;
mod runtimes;
mod tables;
#[cfg(test)]
mod tests;

pub use devices::{DeviceConfig, DeviceKind, DeviceSpec};
pub use error::ConfigError;
pub use resolve::{CONFIG_ENV, ConfigLocation, ConfigSource};
pub use runtimes::{RuntimeConfig, RuntimeCredential};
pub use tables::{
    EndpointConfig, GoalsConfig, JobsConfig, Limits, LogConfig, McpConfig, McpHttpConfig,
    StoreConfig,
};

use runtimes::{is_builtin_id, parse_grants, parse_max_autonomy};
use tables::check_origins;

/// The whole configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Allow `--listen` on a non-loopback address without TLS.
    pub insecure_listen: bool,
    /// Elevated mode (`[elevation]`): how far and how long `openphone elevate` may raise a
    /// runtime's autonomy ceiling (`docs/security.md`).
    pub elevation: openphone_core::ElevationConfig,
    /// Sender allowlists (`[wake]`): which contacts and apps may wake a runtime.
    pub wake: openphone_core::WakeConfig,
    /// Runtimes allowed to connect to the endpoint.
    pub runtimes: Vec<RuntimeConfig>,
    /// Per-surface routing (surface → runtime id), applied by the runtime manager.
    pub routing: BTreeMap<String, String>,
    /// Global and per-runtime tool profiles and allow/deny lists (policy layer 2). After
    /// [`Config::parse`] this holds the `[[runtimes]] profile` shorthands too, and every
    /// profile it names exists.
    pub tool_policy: ToolPolicy,
    pub limits: Limits,
    /// The MCP server (`docs/mcp.md`).
    pub mcp: McpConfig,
    /// The WebSocket endpoint at `/v1/runtime`.
    pub endpoint: EndpointConfig,
    /// What the daemon logs on stderr.
    pub log: LogConfig,
    /// How long stored results are kept (`[store]`).
    pub store: StoreConfig,
    /// The built-in runtime's model and limits (`[builtin]`); without it the built-in runtime
    /// answers `runtime_not_configured` with the fix.
    pub builtin: Option<openphone_agent::BuiltinConfig>,
    /// Background agent jobs (`[jobs]`).
    pub jobs: JobsConfig,
    /// The OpenClaw node adapter (`[openclaw]`, `docs/openclaw.md`): the runtime `openclaw`.
    pub openclaw: Option<openphone_openclaw::OpenclawConfig>,
    /// Where goals' delta reports go besides the phone's shade (`[goals]`, `docs/goals.md`).
    pub goals: GoalsConfig,
    /// The daemon's one phone (`[device]`: `kind`, `serial`, `adb_path`, `scenario`).
    pub device: Option<DeviceConfig>,
    /// Several phones (`[[devices]]`, each with an `id`); not with `[device]`.
    pub devices: Vec<DeviceConfig>,
    /// Where this configuration came from, in words ("config file /x.toml (named by
    /// --config)", "no config file (…)"), for errors that depend on it; not a key of the file.
    #[serde(skip)]
    pub origin: Option<String>,
    /// The file it was read from, made absolute (`None` for the defaults); not a key of the
    /// file. The daemon writes it to `endpoint.json` so `status` and `doctor` can name it.
    #[serde(skip)]
    pub path: Option<std::path::PathBuf>,
}
impl Config {
    /// Parses TOML text; `origin` names the file in errors. An inline runtime `token` that
    /// [`check_token`](crate::auth::check_token) refuses is an error naming the file and key.
    /// A runtime's `profile` shorthand is moved into its tool-policy list; an unknown profile
    /// name, or two different profiles for one runtime, is an error.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_owned(),
            message: e.to_string().trim().replace('\n', " "),
        })?;
        for rt in &config.runtimes {
            if openphone_protocol::normalize_runtime_id(&rt.id)
                .is_ok_and(|id| id == crate::auth::OPERATOR_RUNTIME)
            {
                return Err(ConfigError::Parse {
                    path: origin.to_owned(),
                    message: format!(
                        "runtime id {:?} is reserved: `operator` names the user in job, \
                         watcher and audit records, so a runtime with that id would act as the \
                         user; pick another id",
                        rt.id
                    ),
                });
            }
            if let Some(token) = &rt.token
                && let Err(weak) = crate::auth::check_token(token)
            {
                return Err(ConfigError::Parse {
                    path: origin.to_owned(),
                    message: format!(
                        "the `token` of runtime {:?} is refused: {weak} (use a long random \
                         string, e.g. `openssl rand -hex 32`)",
                        rt.id
                    ),
                });
            }
        }
        if let Some(openclaw) = &config.openclaw {
            openclaw.check().map_err(|e| ConfigError::Parse {
                path: origin.to_owned(),
                message: e.to_string(),
            })?;
            if config
                .runtimes
                .iter()
                .any(|r| r.id == openphone_openclaw::OPENCLAW)
            {
                return Err(ConfigError::Parse {
                    path: origin.to_owned(),
                    message: "runtime \"openclaw\" is configured by the [openclaw] table; remove \
                              its [[runtimes]] entry"
                        .into(),
                });
            }
        }
        config.apply_profiles(origin)?;
        config
            .elevation
            .check()
            .map_err(|message| ConfigError::Parse {
                path: origin.to_owned(),
                message,
            })?;
        config.builtin_authorisation()?;
        config.hermes_runtimes()?;
        config.device_specs()?;
        if let Some(builtin) = &config.builtin
            && let Err(problem) = builtin.check()
        {
            return Err(ConfigError::Parse {
                path: origin.to_owned(),
                message: problem.to_string(),
            });
        }
        Ok(config)
    }

    /// Moves each `[[runtimes]] profile` into `[tool_policy.runtimes.<id>]` and checks that every
    /// profile named exists.
    fn apply_profiles(&mut self, origin: &str) -> Result<(), ConfigError> {
        for rt in &self.runtimes {
            let Some(shorthand) = &rt.profile else {
                continue;
            };
            if let Err(unknown) = openphone_policy::profiles::resolve_profile(shorthand) {
                return Err(ConfigError::Runtime {
                    id: rt.id.clone(),
                    message: format!("profile: {unknown}"),
                });
            }
            let list = self.tool_policy.runtimes.entry(rt.id.clone()).or_default();
            match &list.profile {
                Some(table) if table != shorthand => {
                    return Err(ConfigError::Runtime {
                        id: rt.id.clone(),
                        message: format!(
                            "`profile = {shorthand:?}` in [[runtimes]] and `profile = {table:?}` \
                             in [tool_policy.runtimes.{}] differ (set the profile in one place)",
                            rt.id
                        ),
                    });
                }
                Some(_) => {}
                None => list.profile = Some(shorthand.clone()),
            }
        }
        let named = std::iter::once(("[tool_policy.global]".to_owned(), &self.tool_policy.global))
            .chain(
                self.tool_policy
                    .runtimes
                    .iter()
                    .map(|(id, list)| (format!("[tool_policy.runtimes.{id}]"), list)),
            );
        for (table, list) in named {
            if let Some(name) = &list.profile
                && let Err(unknown) = openphone_policy::profiles::resolve_profile(name)
            {
                return Err(ConfigError::Parse {
                    path: origin.to_owned(),
                    message: format!("{table} profile: {unknown}"),
                });
            }
        }
        // A list for a runtime that does not exist applies to nothing: a misspelt id would
        // leave the real runtime on the global surface without a word.
        let known: Vec<String> = self
            .runtimes
            .iter()
            .map(|r| r.id.clone())
            .chain([
                self.mcp.default_runtime.clone(),
                openphone_protocol::BUILTIN_RUNTIME_ID.to_owned(),
            ])
            .chain(
                self.openclaw
                    .as_ref()
                    .map(|_| openphone_openclaw::OPENCLAW.to_owned()),
            )
            .collect();
        if let Some(unknown) = self
            .tool_policy
            .runtimes
            .keys()
            .find(|id| !known.contains(id))
        {
            return Err(ConfigError::Parse {
                path: origin.to_owned(),
                message: format!(
                    "[tool_policy.runtimes.{unknown}] names no runtime (configured: {}); \
                     fix the id or add a [[runtimes]] entry",
                    known.join(", ")
                ),
            });
        }
        Ok(())
    }

    /// The phones `[device]` or `[[devices]]` name (`None`: neither table, the daemon's default
    /// simulated phone).
    pub fn device_specs(&self) -> Result<Option<Vec<DeviceSpec>>, ConfigError> {
        devices::configured(self.device.as_ref(), &self.devices)
    }

    /// Which phones each runtime may act on (`[[runtimes]] devices`; a runtime without the key
    /// may act on every phone), each id checked against `ids`, the phones the daemon drives.
    pub fn device_grants(
        &self,
        ids: &[String],
    ) -> Result<openphone_core::DeviceGrants, ConfigError> {
        let mut grants = openphone_core::DeviceGrants::all();
        for rt in &self.runtimes {
            let Some(list) = &rt.devices else {
                continue;
            };
            if let Some(unknown) = list.iter().find(|d| !ids.contains(d)) {
                return Err(ConfigError::Runtime {
                    id: rt.id.clone(),
                    message: format!(
                        "`devices` names {unknown:?}, which is not a phone of this daemon \
                         (its phones: {})",
                        ids.join(", ")
                    ),
                });
            }
            grants.limit(&rt.id, list.clone());
        }
        Ok(grants)
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: origin.clone(),
            source,
        })?;
        let mut config = Config::parse(&text, &origin)?;
        config.origin = Some(format!("config file {origin}"));
        config.path = Some(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(config)
    }

    /// Checks the `[mcp]` table.
    pub fn check_mcp(&self) -> Result<(), ConfigError> {
        let err = |message: String| ConfigError::Parse {
            path: "mcp".into(),
            message,
        };
        let m = &self.mcp;
        if !(1_000..=600_000).contains(&m.confirmation_timeout_ms) {
            return Err(err(format!(
                "confirmation_timeout_ms {} is outside 1000..=600000",
                m.confirmation_timeout_ms
            )));
        }
        if m.local_confirmation_wait_ms > 600_000 || m.elicitation_timeout_ms > 600_000 {
            return Err(err("waits are at most 600000 ms".into()));
        }
        if m.default_runtime.trim().is_empty() {
            return Err(err("default_runtime is empty".into()));
        }
        check_origins(&m.http.extra_allowed_origins).map_err(err)
    }

    /// Checks the `[store]` table.
    pub fn check_store(&self) -> Result<(), ConfigError> {
        if self.jobs.max_jobs == 0 || self.jobs.max_jobs > 1_000_000 {
            return Err(ConfigError::Parse {
                path: "jobs".into(),
                message: "max_jobs must be between 1 and 1000000".into(),
            });
        }
        let runtime = self.jobs.background_runtime.trim();
        if runtime != openphone_protocol::BUILTIN_RUNTIME_ID
            && !self.runtimes.iter().any(|r| r.id == runtime)
        {
            return Err(ConfigError::Parse {
                path: "jobs".into(),
                message: format!(
                    "background_runtime {runtime:?} is neither `builtin` nor the id of a \
                     [[runtimes]] entry"
                ),
            });
        }
        let s = &self.store;
        if s.result_retention_days == 0 || s.result_retention_mb == 0 {
            return Err(ConfigError::Parse {
                path: "store".into(),
                message: "result_retention_days and result_retention_mb must be at least 1".into(),
            });
        }
        s.postgres(std::path::Path::new("."))
            .map_err(|message| ConfigError::Parse {
                path: "store".into(),
                message,
            })?;
        Ok(())
    }

    /// Checks the `[limits]` and `[endpoint]` tables.
    pub fn check_endpoint(&self) -> Result<(), ConfigError> {
        let err = |path: &str, message: String| ConfigError::Parse {
            path: path.into(),
            message,
        };
        let l = &self.limits;
        for (name, value) in [
            ("max_connections", l.max_connections),
            ("max_unauthenticated", l.max_unauthenticated),
            (
                "max_connections_per_principal",
                l.max_connections_per_principal,
            ),
        ] {
            if value == 0 {
                return Err(err("limits", format!("{name} must be at least 1")));
            }
        }
        for (name, value) in [
            ("hello_timeout_ms", l.hello_timeout_ms),
            ("header_read_timeout_ms", l.header_read_timeout_ms),
            ("body_read_timeout_ms", l.body_read_timeout_ms),
        ] {
            if !(100..=600_000).contains(&value) {
                return Err(err(
                    "limits",
                    format!("{name} {value} is outside 100..=600000"),
                ));
            }
        }
        check_origins(&self.endpoint.extra_allowed_origins).map_err(|m| err("endpoint", m))
    }

    /// The runtimes and routing for the [`openphone_core::RuntimeManager`].
    pub fn runtimes_config(&self) -> Result<openphone_core::RuntimesConfig, ConfigError> {
        use openphone_core::{RuntimeEntry, RuntimeKind, Surface};
        let mut runtimes = Vec::new();
        for r in &self.runtimes {
            let kind = match r.kind.as_deref().map(str::trim) {
                None | Some("websocket") => RuntimeKind::Websocket,
                Some("builtin") => RuntimeKind::Builtin,
                Some(hermes::HERMES_KIND) => RuntimeKind::Hermes,
                Some(other) => {
                    return Err(ConfigError::Runtime {
                        id: r.id.clone(),
                        message: format!("kind {other:?} is not websocket, builtin or hermes"),
                    });
                }
            };
            runtimes.push(RuntimeEntry {
                id: r.id.clone(),
                kind,
                enabled: r.enabled,
            });
        }
        if let Some(openclaw) = &self.openclaw {
            runtimes.push(RuntimeEntry {
                id: openphone_openclaw::OPENCLAW.to_owned(),
                kind: RuntimeKind::Openclaw,
                enabled: openclaw.enabled,
            });
        }
        let mut routing = std::collections::BTreeMap::new();
        for (surface, runtime) in &self.routing {
            let Some(s) = Surface::parse_trimmed(surface) else {
                return Err(ConfigError::Parse {
                    path: "routing".into(),
                    message: format!("unknown surface {surface:?} (chat, volume, background)"),
                });
            };
            routing.insert(s, runtime.clone());
        }
        Ok(openphone_core::RuntimesConfig { runtimes, routing })
    }

    /// The built-in runtime's authorisation: its `[[runtimes]] id = "builtin"` entry (enabled,
    /// `grants` — every class unless listed —, `max_autonomy`), or the defaults without one.
    pub fn builtin_authorisation(&self) -> Result<RuntimeAuthorisation, ConfigError> {
        let mut auth = openphone_policy::Caller::builtin("daemon").authorisation();
        let Some(rt) = self.runtimes.iter().find(|r| is_builtin_id(&r.id)) else {
            return Ok(auth);
        };
        let err = |message: String| ConfigError::Runtime {
            id: rt.id.clone(),
            message,
        };
        if rt.token.is_some() || rt.token_env.is_some() {
            return Err(err(
                "the built-in runtime runs inside the daemon and takes no token; remove \
                 `token`/`token_env` (its grants and max_autonomy still apply)"
                    .into(),
            ));
        }
        auth.enabled = rt.enabled;
        auth.grants = parse_grants(rt.grants.as_deref(), ExposureGrants::ALL).map_err(err)?;
        if rt.max_autonomy.is_some() {
            auth.max_autonomy = parse_max_autonomy(rt.max_autonomy.as_deref()).map_err(err)?;
        }
        Ok(auth)
    }

    /// The runtime credentials, with tokens resolved (inline or from the environment).
    pub fn credentials(&self) -> Result<Vec<RuntimeCredential>, ConfigError> {
        let mut out: Vec<RuntimeCredential> = Vec::new();
        for rt in &self.runtimes {
            let err = |message: String| ConfigError::Runtime {
                id: rt.id.clone(),
                message,
            };
            if rt.id.trim().is_empty() {
                return Err(err("empty id".into()));
            }
            if out.iter().any(|c| c.id == rt.id) {
                return Err(err("configured twice".into()));
            }
            let (token, source) = match (&rt.token, &rt.token_env) {
                (Some(t), None) => (t.clone(), "`token`".to_owned()),
                (None, Some(var)) => (
                    std::env::var(var)
                        .map_err(|_| err(format!("environment variable {var} is not set")))?,
                    format!("the token in environment variable {var} (`token_env`)"),
                ),
                (Some(_), Some(_)) => {
                    return Err(err("set `token` or `token_env`, not both".into()));
                }
                // A runtime without a token cannot connect over the endpoint (e.g. `builtin`).
                (None, None) => continue,
            };
            if is_builtin_id(&rt.id) {
                return Err(err(
                    "the built-in runtime runs inside the daemon and takes no token; remove \
                     `token`/`token_env` (its grants and max_autonomy still apply)"
                        .into(),
                ));
            }
            if let Err(weak) = crate::auth::check_token(&token) {
                return Err(err(format!(
                    "{source} is refused: {weak} (use a long random string, e.g. `openssl \
                     rand -hex 32`)"
                )));
            }
            let grants =
                parse_grants(rt.grants.as_deref(), ExposureGrants::REMOTE_DEFAULT).map_err(err)?;
            let max_autonomy = parse_max_autonomy(rt.max_autonomy.as_deref()).map_err(err)?;
            out.push(RuntimeCredential {
                id: rt.id.clone(),
                token,
                enabled: rt.enabled,
                grants,
                max_autonomy,
                trust_client_confirmation: rt.trust_client_confirmation,
                mcp_only: false,
            });
        }
        Ok(out)
    }
}
