//! The configuration's plain tables: `[goals]`, `[jobs]`, `[store]`, `[log]`, `[endpoint]`,
//! `[mcp]` (with `[mcp.http]`) and `[limits]`, each closed (an unknown key is an error naming
//! it) and with its defaults.

use std::path::PathBuf;

use serde::Deserialize;

use super::error::ConfigError;

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
            background_runtime: openphone_protocol::BUILTIN_RUNTIME_ID.to_owned(),
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
    /// A PostgreSQL server shared by a fleet of daemons (`postgres://user@host:port/db`, no
    /// password in it): the store lives there instead of `openphone.db` (docs/fleet.md).
    pub url: Option<String>,
    /// A file holding the PostgreSQL password (one trailing newline ignored).
    pub password_file: Option<PathBuf>,
    /// An environment variable holding the PostgreSQL password.
    pub password_env: Option<String>,
    /// `auto` (TLS unless the server is on loopback or a Unix socket), `require`, `disable`
    /// (refused for a server that is not on loopback).
    pub tls: Option<String>,
    /// Extra trusted CA certificates (PEM) for a server with a private CA.
    pub tls_ca_file: Option<PathBuf>,
    /// This daemon's id in the fleet (default: the machine's host name): unique among live
    /// daemons, stable across restarts. Letters, digits, `.`, `_`, `-`.
    pub host_id: Option<String>,
    /// A label shown beside the host id in fleet views (default: the host id).
    pub label: Option<String>,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            result_retention_days: 7,
            result_retention_mb: 64,
            url: None,
            password_file: None,
            password_env: None,
            tls: None,
            tls_ca_file: None,
            host_id: None,
            label: None,
        }
    }
}

impl StoreConfig {
    /// The PostgreSQL store's settings when `url` is set (`None`: SQLite in the data
    /// directory). Reads the password from its file or variable; every error names the key.
    pub fn postgres(
        &self,
        data_dir: &std::path::Path,
    ) -> Result<Option<openphone_store_pg::PgConfig>, String> {
        let Some(url) = self.url.as_deref().map(str::trim) else {
            if self.password_file.is_some()
                || self.password_env.is_some()
                || self.tls.is_some()
                || self.tls_ca_file.is_some()
                || self.host_id.is_some()
                || self.label.is_some()
            {
                return Err(
                    "password_file, password_env, tls, tls_ca_file, host_id and label need \
                            `url` (the PostgreSQL server)"
                        .into(),
                );
            }
            return Ok(None);
        };
        let host_id = match &self.host_id {
            Some(id) => id.trim().to_owned(),
            None => openphone_store_pg::default_host_id().ok_or(
                "host_id is not set and the machine's host name is not a valid one: set \
                 `host_id = \"…\"` (letters, digits, `.`, `_`, `-`)",
            )?,
        };
        openphone_store_pg::check_host_id(&host_id).map_err(|e| format!("host_id: {e}"))?;
        let mut config = openphone_store_pg::PgConfig::new(url, host_id.clone(), data_dir);
        config.label = self.label.clone().unwrap_or(host_id);
        if let Some(tls) = &self.tls {
            config.tls = tls.trim().parse().map_err(|e| format!("tls: {e}"))?;
        }
        config.tls_ca_file = self.tls_ca_file.clone();
        let source = match (&self.password_file, &self.password_env) {
            (Some(_), Some(_)) => {
                return Err("set one of password_file and password_env, not both".into());
            }
            (Some(file), None) => Some(openphone_store_pg::PasswordSource::File(file.clone())),
            (None, Some(var)) => Some(openphone_store_pg::PasswordSource::Env(var.clone())),
            (None, None) => None,
        };
        if let Some(source) = source {
            config.password = Some(source.read().map_err(|e| e.to_string())?);
        }
        Ok(Some(config))
    }

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
pub(super) fn check_origins(origins: &[String]) -> Result<(), String> {
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
