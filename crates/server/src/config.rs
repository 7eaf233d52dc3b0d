//! The daemon's configuration file (TOML): runtimes and their tokens, tool policy, limits.
//!
//! Every table is closed: an unknown key is an error naming the key. Documented with an
//! example in `docs/openphone.example.toml`.

use std::collections::BTreeMap;
use std::path::Path;

use openphone_policy::{Autonomy, ExposureGrants, RuntimeAuthorisation, ToolPolicy};
use openphone_protocol::Exposure;
use serde::Deserialize;

/// A configuration problem, named precisely.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config: runtime {id:?}: {message}")]
    Runtime { id: String, message: String },
}

/// The whole configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Allow `--listen` on a non-loopback address without TLS.
    pub insecure_listen: bool,
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
}

/// The `[goals]` table: the channels of goals' delta reports (`docs/goals.md`). A goal whose
/// `delivery` is `telegram` or `webhook` needs the matching settings here; without them its
/// reports stay `pending` with an error naming what is missing.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GoalsConfig {
    /// The Telegram bot's token (from @BotFather). Never logged.
    pub telegram_bot_token: Option<String>,
    /// The chat the reports go to.
    pub telegram_chat_id: Option<String>,
    /// The Bot API's address (default `https://api.telegram.org`).
    pub telegram_api: Option<String>,
    /// A URL that receives each report as a JSON `POST`.
    pub webhook_url: Option<String>,
}

impl std::fmt::Debug for GoalsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoalsConfig")
            .field(
                "telegram_bot_token",
                &self.telegram_bot_token.as_ref().map(|_| "<redacted>"),
            )
            .field("telegram_chat_id", &self.telegram_chat_id)
            .field("telegram_api", &self.telegram_api)
            .field("webhook_url", &self.webhook_url)
            .finish()
    }
}

impl GoalsConfig {
    /// Checks the table: a token and a chat id come together; addresses are http(s) URLs.
    pub fn check(&self) -> Result<(), ConfigError> {
        let err = |message: String| ConfigError::Parse {
            path: "goals".into(),
            message,
        };
        let blank = |v: &Option<String>| v.as_deref().is_none_or(|t| t.trim().is_empty());
        if blank(&self.telegram_bot_token) != blank(&self.telegram_chat_id) {
            return Err(err(
                "telegram_bot_token and telegram_chat_id are set together (both or neither)".into(),
            ));
        }
        for (field, value) in [
            ("telegram_api", &self.telegram_api),
            ("webhook_url", &self.webhook_url),
        ] {
            if let Some(url) = value
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(err(format!("{field} must be an http:// or https:// URL")));
            }
        }
        Ok(())
    }
}

/// The `[jobs]` table: background agent jobs (`docs/jobs.md`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobsConfig {
    /// Which runtime runs `agent_turn` jobs: `builtin` (default; the built-in loop with the
    /// `[builtin]` model, or `[builtin.background_model]`), or the id of a configured runtime
    /// the job is dispatched to as an attention request (`agent-jobs.md` §7.3).
    pub background_runtime: String,
    /// How many jobs the store keeps (finished ones are trimmed first; default 200). A
    /// quarter of it (rounded up) is reserved for the user's own jobs: runtimes together hold
    /// at most the rest.
    pub max_jobs: usize,
    /// How many live jobs one runtime may hold (its own, counted by `created_by`; default 20,
    /// never more than the runtimes' share of `max_jobs`). The user's jobs are not counted.
    pub max_jobs_per_runtime: usize,
}

impl Default for JobsConfig {
    fn default() -> JobsConfig {
        JobsConfig {
            background_runtime: "builtin".to_owned(),
            max_jobs: openphone_jobs::limits::MAX_JOBS,
            max_jobs_per_runtime: openphone_store::JobQuota::DEFAULT_PER_RUNTIME,
        }
    }
}

/// The `[store]` table: retention of the final results kept for replay. The audit log is never
/// pruned. The store keeps at least 24 hours and the 128 most recent results whatever is set.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Results older than this many days are dropped (their keyed retries then answer
    /// `execution_result_unknown`, never run again).
    pub result_retention_days: u32,
    /// When stored results take more than this many MiB, the oldest are dropped.
    pub result_retention_mb: u64,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            result_retention_days: 7,
            result_retention_mb: 64,
        }
    }
}

impl StoreConfig {
    /// The store's retention policy for these settings.
    pub fn retention(&self) -> openphone_store::Retention {
        openphone_store::Retention {
            max_age_ms: i64::from(self.result_retention_days) * 24 * 60 * 60 * 1000,
            max_bytes: self.result_retention_mb.saturating_mul(1024 * 1024),
            ..openphone_store::Retention::default()
        }
    }
}

/// The `[log]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Write an access line for each audit record of a tool call (`event="runtime_tool"`,
    /// target `openphone::access`). Off by default: the audit log always has the record; the
    /// line is for watching a daemon live (`openphone serve --access-log` turns it on too).
    pub access: bool,
}

/// The `[endpoint]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointConfig {
    /// Browser origins accepted on `/v1/runtime` besides the loopback ones (`:*` = any port).
    /// An upgrade without `Origin` (every non-browser client) is always accepted.
    pub extra_allowed_origins: Vec<String>,
}

/// The `[mcp]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Serve MCP at all (`/mcp` and `mcp.sock`).
    pub enabled: bool,
    /// How long a call waits inline for the user's decision before answering with the pending
    /// result (ms).
    pub local_confirmation_wait_ms: u64,
    /// Lifetime of the confirmations MCP calls create (ms, at most 600 000).
    pub confirmation_timeout_ms: i64,
    /// How long a confirming host's prompt may take (ms).
    pub elicitation_timeout_ms: u64,
    /// Runtime id of the default MCP credential (`mcp.token` in the data directory), used
    /// unless a `[[runtimes]]` entry with this id configures it.
    pub default_runtime: String,
    pub http: McpHttpConfig,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            enabled: true,
            local_confirmation_wait_ms: 20_000,
            confirmation_timeout_ms: 120_000,
            elicitation_timeout_ms: 45_000,
            default_runtime: "mcp".into(),
            http: McpHttpConfig::default(),
        }
    }
}

/// The `[mcp.http]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpHttpConfig {
    /// Browser origins accepted besides the loopback ones, e.g. `"https://app.example:443"`
    /// (`:*` = any port).
    pub extra_allowed_origins: Vec<String>,
}

/// One `[[runtimes]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    pub id: String,
    /// `websocket` (default) or `builtin`.
    #[serde(default)]
    pub kind: Option<String>,
    /// The bearer token, inline.
    #[serde(default)]
    pub token: Option<String>,
    /// Or the name of an environment variable holding it.
    #[serde(default)]
    pub token_env: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Exposure classes: `safe_read`, `private_read`, `dangerous` (default `["safe_read"]`).
    #[serde(default)]
    pub grants: Option<Vec<String>>,
    /// Autonomy ceiling (default `ask_before_action`).
    #[serde(default)]
    pub max_autonomy: Option<String>,
    /// MCP only: the host's own confirmation prompt may approve this runtime's requests below
    /// the risk floor (`confirmation: "always"` still needs the phone). Default false.
    #[serde(default)]
    pub trust_client_confirmation: bool,
    /// Shorthand for `[tool_policy.runtimes.<id>] profile`: the runtime's tool profile
    /// (`openphone policy profiles`). Setting both to different names is an error.
    #[serde(default)]
    pub profile: Option<String>,
}

fn yes() -> bool {
    true
}

/// Endpoint limits.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest accepted frame (bytes); larger → close 1009.
    pub max_frame_bytes: usize,
    /// Concurrent requests per connection.
    pub max_in_flight: usize,
    /// Token-bucket refill per credential (requests per second).
    pub rate_per_sec: f64,
    /// Token-bucket size per credential.
    pub rate_burst: f64,
    /// Idle keepalive ping interval (ms).
    pub ping_interval_ms: u64,
    /// TCP connections open at once, authenticated or not (further ones are refused with 503;
    /// lowered to fit the process's descriptor limit). `endpoint.sock` is not counted.
    pub max_connections: usize,
    /// TCP connections that have not authenticated yet. A newcomer over this cap takes the
    /// place of the oldest unauthenticated connection (one that has sent nothing first), which
    /// is closed: idle strangers can never keep a credential holder out. Lowered so that the
    /// reserves of the authenticated classes fit in `max_connections`.
    pub max_unauthenticated: usize,
    /// Places of `max_connections` kept for each authenticated class (the operator, runtimes,
    /// MCP hosts): one class may fill the shared places, never another class's reserve.
    pub reserved_per_class: usize,
    /// Authenticated TCP connections one runtime or MCP credential may hold at once (the
    /// operator is not capped): within a class, one token holder cannot take every place.
    pub max_connections_per_principal: usize,
    /// A TCP connection that has not authenticated and an endpoint connection that has not
    /// completed `hello` within this time (ms, from the accept) is closed.
    pub hello_timeout_ms: u64,
    /// Time a client has to send a request's headers, and longest idle keep-alive between
    /// requests (ms); slower ones are cut off.
    pub header_read_timeout_ms: u64,
    /// Time a client has to send a request's whole body once its headers are in (ms); a
    /// slower `POST` is answered 408 and its connection closed.
    pub body_read_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: openphone_protocol::limits::ENDPOINT_FRAME_BYTES,
            max_in_flight: 16,
            rate_per_sec: 20.0,
            rate_burst: 40.0,
            ping_interval_ms: 20_000,
            max_connections: 512,
            max_unauthenticated: 128,
            reserved_per_class: 8,
            max_connections_per_principal: 64,
            hello_timeout_ms: 10_000,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 10_000,
        }
    }
}

/// Extra allowed origins need a scheme: `null` is what sandboxed frames and `file:` pages send,
/// and allowing it would let any web page through.
fn check_origins(origins: &[String]) -> Result<(), String> {
    match origins
        .iter()
        .find(|o| !(o.starts_with("http://") || o.starts_with("https://")))
    {
        Some(origin) => Err(format!(
            "extra_allowed_origins entry {origin:?} needs a scheme (http:// or https://)"
        )),
        None => Ok(()),
    }
}

/// A runtime credential resolved from config (token read, grants parsed).
#[derive(Clone)]
pub struct RuntimeCredential {
    pub id: String,
    pub token: String,
    pub enabled: bool,
    pub grants: ExposureGrants,
    pub max_autonomy: Autonomy,
    /// MCP: the host's prompt may approve below the risk floor.
    pub trust_client_confirmation: bool,
    /// Accepted on MCP only, never on the WebSocket endpoint (the default MCP runtime).
    pub mcp_only: bool,
}

impl std::fmt::Debug for RuntimeCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeCredential")
            .field("id", &self.id)
            .field("token", &"<redacted>")
            .field("enabled", &self.enabled)
            .field("grants", &self.grants)
            .field("max_autonomy", &self.max_autonomy)
            .field("trust_client_confirmation", &self.trust_client_confirmation)
            .finish()
    }
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
        config.builtin_authorisation()?;
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
                openphone_policy::BUILTIN_RUNTIME.to_owned(),
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

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: origin.clone(),
            source,
        })?;
        Config::parse(&text, &origin)
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
        if runtime != "builtin" && !self.runtimes.iter().any(|r| r.id == runtime) {
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
                Some(other) => {
                    return Err(ConfigError::Runtime {
                        id: r.id.clone(),
                        message: format!("kind {other:?} is not websocket or builtin"),
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

/// Whether a configured id names the daemon's own runtime (`builtin` or one of its aliases).
fn is_builtin_id(id: &str) -> bool {
    openphone_protocol::normalize_runtime_id(id)
        .is_ok_and(|id| id == openphone_policy::BUILTIN_RUNTIME)
}

/// A `grants` list as exposure classes (`default` when absent).
fn parse_grants(
    list: Option<&[String]>,
    default: ExposureGrants,
) -> Result<ExposureGrants, String> {
    let Some(list) = list else {
        return Ok(default);
    };
    let mut g = ExposureGrants::NONE;
    for name in list {
        let exposure = Exposure::ALL
            .iter()
            .copied()
            .find(|e| e.as_str() == name)
            .ok_or_else(|| format!("unknown grant {name:?}"))?;
        g = g.with(exposure);
    }
    Ok(g)
}

/// A `max_autonomy` value (`ask_before_action` when absent).
fn parse_max_autonomy(raw: Option<&str>) -> Result<Autonomy, String> {
    match raw {
        None => Ok(Autonomy::AskBeforeAction),
        Some(raw) => {
            Autonomy::parse_canonical(raw).ok_or_else(|| format!("unknown max_autonomy {raw:?}"))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openphone.example.toml");
        let cfg = Config::load(&path).unwrap();
        assert_eq!(cfg.runtimes.len(), 3);
        assert_eq!(cfg.limits, Limits::default());
        assert_eq!(cfg.mcp, McpConfig::default());
        assert_eq!(cfg.endpoint, EndpointConfig::default());
        assert_eq!(cfg.log, LogConfig::default());
        assert_eq!(cfg.store, StoreConfig::default());
        cfg.check_mcp().unwrap();
        cfg.check_endpoint().unwrap();
        cfg.check_store().unwrap();
        assert_eq!(cfg.routing.get("chat").map(String::as_str), Some("hermes"));
        assert_eq!(
            cfg.tool_policy
                .for_runtime("hermes")
                .unwrap()
                .profile
                .as_deref(),
            Some("messaging")
        );
    }

    #[test]
    fn store_retention_settings_become_the_stores_policy() {
        let cfg = Config::parse(
            "[store]\nresult_retention_days = 2\nresult_retention_mb = 3\n",
            "x.toml",
        )
        .unwrap();
        cfg.check_store().unwrap();
        let r = cfg.store.retention();
        assert_eq!(r.max_age_ms, 2 * 86_400_000);
        assert_eq!(r.max_bytes, 3 * 1024 * 1024);
        for text in [
            "[store]\nresult_retention_days = 0\n",
            "[store]\nresult_retention_mb = 0\n",
        ] {
            let err = Config::parse(text, "x.toml")
                .and_then(|c| c.check_store().map(|()| c))
                .unwrap_err();
            assert!(err.to_string().contains("at least 1"), "{text}: {err}");
        }
        let err = Config::parse("[store]\nkeep = 1\n", "x.toml").unwrap_err();
        assert!(err.to_string().contains("keep"), "{err}");
    }

    #[test]
    fn bad_mcp_settings_are_named() {
        for (text, needle) in [
            (
                "[mcp]\nconfirmation_timeout_ms = 700000\n",
                "confirmation_timeout_ms",
            ),
            (
                "[mcp.http]\nextra_allowed_origins = [\"app.example\"]\n",
                "scheme",
            ),
            ("[mcp]\nwait = 3\n", "wait"),
            ("[mcp.http]\nextra_allowed_origins = [\"null\"]\n", "scheme"),
        ] {
            let err = Config::parse(text, "x.toml")
                .and_then(|c| c.check_mcp().map(|()| c))
                .unwrap_err();
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn bad_front_door_settings_are_named() {
        for (text, needle) in [
            ("[limits]\nmax_connections = 0\n", "max_connections"),
            ("[limits]\nmax_unauthenticated = 0\n", "max_unauthenticated"),
            (
                "[limits]\nmax_connections_per_principal = 0\n",
                "max_connections_per_principal",
            ),
            ("[limits]\nhello_timeout_ms = 5\n", "hello_timeout_ms"),
            (
                "[limits]\nheader_read_timeout_ms = 900000\n",
                "header_read_timeout_ms",
            ),
            ("[endpoint]\nextra_allowed_origins = [\"null\"]\n", "scheme"),
            ("[endpoint]\norigins = []\n", "origins"),
        ] {
            let err = Config::parse(text, "x.toml")
                .and_then(|c| c.check_endpoint().map(|()| c))
                .unwrap_err();
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn weak_runtime_tokens_are_refused_naming_the_key() {
        for (token, needle) in [
            ("abc", "3 characters"),
            ("", "empty"),
            ("                    ", "empty"),
            ("0123456789 abcdef0123", "whitespace"),
        ] {
            let text = format!("[[runtimes]]\nid = \"a\"\ntoken = \"{token}\"\n");
            let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
            assert!(err.contains("x.toml") && err.contains("`token`"), "{err}");
            assert!(err.contains(needle), "{token:?}: {err}");
        }
    }

    #[test]
    fn a_runtime_named_operator_is_refused_as_it_would_act_as_the_user() {
        for id in ["operator", " Operator "] {
            let text = format!(
                "[[runtimes]]\nid = \"{id}\"\ntoken = \"0123456789abcdef0123456789abcdef\"\n"
            );
            let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
            assert!(err.contains("reserved"), "{id:?}: {err}");
        }
        let text =
            "[[runtimes]]\nid = \"operators\"\ntoken = \"0123456789abcdef0123456789abcdef\"\n";
        assert!(Config::parse(text, "x.toml").is_ok());
    }

    #[test]
    fn the_access_log_is_off_unless_asked_for() {
        assert!(!Config::parse("", "x.toml").unwrap().log.access);
        assert!(
            Config::parse("[log]\naccess = true\n", "x.toml")
                .unwrap()
                .log
                .access
        );
        let err = Config::parse("[log]\nlevel = \"debug\"\n", "x.toml").unwrap_err();
        assert!(err.to_string().contains("level"), "{err}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::parse("[limits]\nmax_frame = 3\n", "x.toml").unwrap_err();
        assert!(err.to_string().contains("max_frame"), "{err}");
        let err = Config::parse("[[runtimes]]\nid = \"a\"\ntokn = \"x\"\n", "x.toml").unwrap_err();
        assert!(err.to_string().contains("tokn"), "{err}");
    }

    #[test]
    fn runtimes_resolve_with_grants_and_policy() {
        let cfg = Config::parse(
            r#"
[[runtimes]]
id = "hermes"
token = "0123456789abcdef0123"
grants = ["safe_read", "dangerous"]
max_autonomy = "trusted_actions"

[tool_policy.global]
deny = ["group:calls"]

[limits]
rate_burst = 5.0
"#,
            "x.toml",
        )
        .unwrap();
        let creds = cfg.credentials().unwrap();
        assert_eq!(creds[0].id, "hermes");
        assert!(creds[0].grants.dangerous && !creds[0].grants.private_read);
        assert_eq!(creds[0].max_autonomy, Autonomy::TrustedActions);
        assert_eq!(cfg.limits.rate_burst, 5.0);
        assert_eq!(cfg.limits.max_in_flight, 16);
        assert_eq!(cfg.tool_policy.global.deny.len(), 1);
        assert!(!format!("{:?}", creds[0]).contains("0123456789"));
    }

    const TOKEN: &str = "0123456789abcdef0123";

    #[test]
    fn tool_profiles_are_read_from_both_tables_and_the_runtime_shorthand() {
        let cfg = Config::parse(
            &format!(
                r#"
[[runtimes]]
id = "hermes"
token = "{TOKEN}"
profile = "messaging"

[[runtimes]]
id = "claw"
token = "{TOKEN}x"
profile = "read"

[tool_policy.global]
profile = "phone_control"
deny = ["group:calls"]

[tool_policy.runtimes.hermes]
allow = ["openphone.ui.tap"]

[tool_policy.runtimes.claw]
profile = "read"
"#
            ),
            "x.toml",
        )
        .unwrap();
        let tp = &cfg.tool_policy;
        assert_eq!(tp.global.profile.as_deref(), Some("phone_control"));
        let hermes = tp.for_runtime("hermes").unwrap();
        assert_eq!(hermes.profile.as_deref(), Some("messaging"));
        assert_eq!(hermes.allow.as_ref().map(Vec::len), Some(1));
        assert_eq!(
            tp.for_runtime("claw").unwrap().profile.as_deref(),
            Some("read")
        );
        // a shorthand with no tool-policy table creates one
        let cfg = Config::parse(
            &format!("[[runtimes]]\nid = \"a\"\ntoken = \"{TOKEN}\"\nprofile = \"minimal\"\n"),
            "x.toml",
        )
        .unwrap();
        assert_eq!(
            cfg.tool_policy.for_runtime("a").unwrap().profile.as_deref(),
            Some("minimal")
        );
        assert!(
            Config::parse("", "x.toml")
                .unwrap()
                .tool_policy
                .global
                .profile
                .is_none()
        );
    }

    /// Review of issue 14: a misspelt runtime id under `[tool_policy.runtimes]` restricted
    /// nothing and left the real runtime on the global surface.
    #[test]
    fn a_tool_policy_for_a_runtime_that_does_not_exist_is_refused() {
        let text = format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\n\
             [tool_policy.runtimes.hermez]\nprofile = \"read\"\n"
        );
        let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(
            err.contains("[tool_policy.runtimes.hermez] names no runtime"),
            "{err}"
        );
        assert!(err.contains("configured: hermes, mcp, builtin"), "{err}");
        for id in ["hermes", "mcp", "builtin"] {
            let ok = format!(
                "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\n\
                 [tool_policy.runtimes.{id}]\nprofile = \"read\"\n"
            );
            assert!(Config::parse(&ok, "x.toml").is_ok(), "{id}");
        }
    }

    #[test]
    fn an_unknown_profile_is_refused_listing_the_known_ones() {
        for (text, needle) in [
            (
                "[tool_policy.global]\nprofile = \"everything\"\n",
                "[tool_policy.global]",
            ),
            (
                "[tool_policy.runtimes.hermes]\nprofile = \"Messaging\"\n",
                "[tool_policy.runtimes.hermes]",
            ),
            (
                &format!(
                    "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\nprofile = \"mini\"\n"
                ),
                "runtime \"hermes\"",
            ),
        ] {
            let err = Config::parse(text, "x.toml").unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(err.contains("unknown tool profile"), "{err}");
            assert!(
                err.contains("known: minimal, read, messaging, phone_control, full"),
                "{err}"
            );
        }
        let err = Config::parse("[tool_policy.global]\nprofiles = \"read\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("profiles"), "{err}");
    }

    #[test]
    fn two_different_profiles_for_one_runtime_are_refused_naming_both() {
        let text = format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\nprofile = \"messaging\"\n\n\
             [tool_policy.runtimes.hermes]\nprofile = \"read\"\n"
        );
        let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(
            err.contains("hermes") && err.contains("\"messaging\"") && err.contains("\"read\""),
            "{err}"
        );
        assert!(err.contains("[tool_policy.runtimes.hermes]"), "{err}");
        // the same profile twice is fine
        let same = text.replace("\"read\"", "\"messaging\"");
        let cfg = Config::parse(&same, "x.toml").unwrap();
        assert_eq!(
            cfg.tool_policy
                .for_runtime("hermes")
                .unwrap()
                .profile
                .as_deref(),
            Some("messaging")
        );
    }

    #[test]
    fn the_builtin_table_is_closed_and_checked() {
        let cfg = Config::parse(
            "[builtin]\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"llama3.2\"\n\
             max_turns = 8\n\n[builtin.background_model]\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
             model = \"small\"\n",
            "x.toml",
        )
        .unwrap();
        let builtin = cfg.builtin.unwrap();
        assert_eq!((builtin.model.as_str(), builtin.max_turns), ("llama3.2", 8));
        assert_eq!(builtin.background_model.unwrap().model, "small");
        assert!(Config::parse("", "x.toml").unwrap().builtin.is_none());
        // The commented `[builtin]` block of the example names every key, and parses once
        // uncommented (with one key source).
        let example = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openphone.example.toml"),
        )
        .unwrap();
        let block: String = example[example.find("# [builtin]").unwrap()..]
            .lines()
            .filter_map(|line| line.strip_prefix("# "))
            .filter(|line| line.starts_with('[') || line.contains(" = "))
            .filter(|line| !line.starts_with("api_key_file"))
            .map(|line| format!("{line}\n"))
            .collect();
        let documented = Config::parse(&block, "example").unwrap().builtin.unwrap();
        assert_eq!(documented.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(documented.confirmation_timeout_secs, 120);
        assert!(documented.background_model.is_some());
        for (text, needle) in [
            (
                "[builtin]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\nmodle = 1\n",
                "modle",
            ),
            (
                "[builtin]\nbase_url = \"http://h/v1\"\nmodel = \"\"\n",
                "model is empty",
            ),
            (
                "[builtin]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\nmax_turns = 0\n",
                "max_turns",
            ),
        ] {
            let err = Config::parse(text, "x.toml").unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
