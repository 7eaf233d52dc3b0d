//! The `[openclaw]` table of the daemon's configuration: the gateway to connect to, the
//! credential, the name the phone shows, and what the `openclaw` runtime is granted.
//!
//! Closed like every table: an unknown key is an error naming it. The gateway URL follows the
//! outbound transport rule (`wss` always, `ws` only to loopback and private addresses), checked
//! before any connection.

use openphone_policy::{Autonomy, ExposureGrants, RuntimeAuthorisation};
use openphone_protocol::Exposure;
use serde::Deserialize;

/// The runtime id of the adapter.
pub const OPENCLAW: &str = "openclaw";

/// The `[openclaw]` table. Its debug form hides the inline `token` and `setup_code`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenclawConfig {
    /// The gateway's WebSocket URL, e.g. `wss://gateway.example:18789` or
    /// `ws://127.0.0.1:18789`.
    pub url: String,
    /// The shared gateway token, inline (`gateway.auth.token`).
    #[serde(default)]
    pub token: Option<String>,
    /// Or the name of an environment variable holding it.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The gateway password (`gateway.auth.mode: password`), from this environment variable.
    #[serde(default)]
    pub password_env: Option<String>,
    /// A bootstrap token from a setup code (`openclaw qr --json`), used only while no device
    /// token is stored, from this environment variable.
    #[serde(default)]
    pub bootstrap_token_env: Option<String>,
    /// Or a whole setup code (`openclaw qr --json`, its `setupCode`: base64url of
    /// `{url, bootstrapToken, expiresAtMs}`) from this environment variable. Its URL must be
    /// `url`; its bootstrap token is used only while no device token is stored, and not after
    /// it expires.
    #[serde(default)]
    pub setup_code_env: Option<String>,
    /// Or the setup code inline (it is short-lived and single-use; prefer `setup_code_env`).
    #[serde(default)]
    pub setup_code: Option<String>,
    /// The name operators see for this phone (default `OpenPhone`).
    #[serde(default = "default_display_name")]
    pub display_name: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Exposure classes the `openclaw` runtime is granted: `safe_read`, `private_read`,
    /// `dangerous` (default `["safe_read"]`). The commands it is granted are the ones
    /// published to the gateway.
    #[serde(default)]
    pub grants: Option<Vec<String>>,
    /// The runtime's autonomy ceiling (default `ask_before_action`).
    #[serde(default)]
    pub max_autonomy: Option<String>,
    /// Pin every phone session to this OpenClaw session key (e.g. `agent:main:main`); by
    /// default each phone session is its own conversation, `openphone-<phone session id>`.
    #[serde(default)]
    pub session_key: Option<String>,
    /// The longest an invoke with `timeoutMs: 0` (no gateway deadline) is held (ms, default
    /// 600 000).
    #[serde(default = "default_ceiling")]
    pub invoke_ceiling_ms: u64,
    /// Lifetime of the phone confirmations OpenClaw's requests create (ms, default 300 000,
    /// at most 600 000). It outlives the gateway's ~30 s invoke deadline: the answer is then
    /// deferred (a pending receipt, and the outcome posted into the session later).
    #[serde(default = "default_confirmation_timeout")]
    pub confirmation_timeout_ms: i64,
    /// First reconnect delay (ms, default 1 000); doubles up to `backoff_max_ms`.
    #[serde(default = "default_backoff_initial")]
    pub backoff_initial_ms: u64,
    /// Longest reconnect delay (ms, default 30 000).
    #[serde(default = "default_backoff_max")]
    pub backoff_max_ms: u64,
    /// Retry cadence while the device pairing is pending (ms, default 15 000).
    #[serde(default = "default_pairing_retry")]
    pub pairing_retry_ms: u64,
    /// While an invoke is held for the user's confirmation, an empty progress chunk goes to
    /// the gateway this often (ms, default 10 000, at least 1 000: one chunk a second at most).
    #[serde(default = "default_progress_every")]
    pub progress_every_ms: u64,
}

impl std::fmt::Debug for OpenclawConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("OpenclawConfig")
            .field("url", &self.url)
            .field("token", &hidden(&self.token))
            .field("token_env", &self.token_env)
            .field("password_env", &self.password_env)
            .field("bootstrap_token_env", &self.bootstrap_token_env)
            .field("setup_code_env", &self.setup_code_env)
            .field("setup_code", &hidden(&self.setup_code))
            .field("display_name", &self.display_name)
            .field("enabled", &self.enabled)
            .field("grants", &self.grants)
            .field("max_autonomy", &self.max_autonomy)
            .field("session_key", &self.session_key)
            .field("invoke_ceiling_ms", &self.invoke_ceiling_ms)
            .field("confirmation_timeout_ms", &self.confirmation_timeout_ms)
            .field("backoff_initial_ms", &self.backoff_initial_ms)
            .field("backoff_max_ms", &self.backoff_max_ms)
            .field("pairing_retry_ms", &self.pairing_retry_ms)
            .field("progress_every_ms", &self.progress_every_ms)
            .finish()
    }
}

fn yes() -> bool {
    true
}
fn default_display_name() -> String {
    "OpenPhone".to_owned()
}
fn default_ceiling() -> u64 {
    600_000
}
fn default_confirmation_timeout() -> i64 {
    300_000
}
fn default_backoff_initial() -> u64 {
    1_000
}
fn default_backoff_max() -> u64 {
    30_000
}
fn default_pairing_retry() -> u64 {
    15_000
}
fn default_progress_every() -> u64 {
    10_000
}

/// A problem with the `[openclaw]` table, named precisely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[openclaw] {0}")]
pub struct OpenclawConfigError(pub String);

/// The credential a connect may present (§5.2), resolved from the configuration.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    pub token: Option<String>,
    pub password: Option<String>,
    pub bootstrap_token: Option<String>,
    /// When the bootstrap token of a setup code expires (ms since the epoch).
    pub bootstrap_expires_at_ms: Option<u64>,
}

/// A decoded setup code (§5.1): the gateway it is for, its single-use bootstrap token and
/// when that expires.
#[derive(Clone, PartialEq, Eq)]
pub struct SetupCode {
    pub url: String,
    pub bootstrap_token: String,
    pub expires_at_ms: Option<u64>,
}

impl std::fmt::Debug for SetupCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetupCode")
            .field("url", &self.url)
            .field("bootstrap_token", &"<redacted>")
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

impl SetupCode {
    /// Decodes `setupCode` (base64url, padded or not, surrounding whitespace ignored). The
    /// error names what is wrong and never contains the token.
    pub fn decode(code: &str) -> Result<SetupCode, String> {
        use base64::Engine as _;
        let trimmed = code.trim().trim_end_matches('=');
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(trimmed)
            .map_err(|_| {
                "the setup code is not base64url (copy `setupCode` from `openclaw qr --json`)"
                    .to_owned()
            })?;
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|_| "the setup code does not hold a JSON object".to_owned())?;
        let url = value
            .get("url")
            .and_then(serde_json::Value::as_str)
            .filter(|u| !u.trim().is_empty())
            .ok_or("the setup code has no `url`")?;
        let token = value
            .get("bootstrapToken")
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or("the setup code has no `bootstrapToken`")?;
        let expires_at_ms = match value.get("expiresAtMs") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or("the setup code's `expiresAtMs` is not a time in ms")?,
            ),
        };
        Ok(SetupCode {
            url: url.trim().to_owned(),
            bootstrap_token: token.to_owned(),
            expires_at_ms,
        })
    }
}

/// Two gateway URLs name the same gateway: scheme and host case-insensitive, the scheme's
/// default port (`ws` 80, `wss` 443) the same as none, a trailing `/` ignored; the path as
/// written.
fn same_gateway(a: &str, b: &str) -> bool {
    fn parts(url: &str) -> (String, String, String) {
        let url = url.trim();
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let scheme = scheme.to_ascii_lowercase();
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut authority = authority.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "wss" | "https" => ":443",
            _ => ":80",
        };
        if authority.ends_with(default) {
            authority.truncate(authority.len() - default.len());
        }
        (scheme, authority, path.trim_end_matches('/').to_owned())
    }
    parts(a) == parts(b)
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field(
                "bootstrap_token",
                &self.bootstrap_token.as_ref().map(|_| "<redacted>"),
            )
            .field("bootstrap_expires_at_ms", &self.bootstrap_expires_at_ms)
            .finish()
    }
}

impl OpenclawConfig {
    /// A table for `url` with every other key at its default.
    pub fn new(url: &str) -> OpenclawConfig {
        OpenclawConfig {
            url: url.to_owned(),
            token: None,
            token_env: None,
            password_env: None,
            bootstrap_token_env: None,
            setup_code_env: None,
            setup_code: None,
            display_name: default_display_name(),
            enabled: true,
            grants: None,
            max_autonomy: None,
            session_key: None,
            invoke_ceiling_ms: default_ceiling(),
            confirmation_timeout_ms: default_confirmation_timeout(),
            backoff_initial_ms: default_backoff_initial(),
            backoff_max_ms: default_backoff_max(),
            pairing_retry_ms: default_pairing_retry(),
            progress_every_ms: default_progress_every(),
        }
    }

    /// Checks everything that can be checked without connecting: the URL's transport, the
    /// grants, the ceiling, the display name and the timings. Returns the effective URL.
    pub fn check(&self) -> Result<String, OpenclawConfigError> {
        let url = openphone_protocol::check_outbound_url(&self.url)
            .map_err(|e| OpenclawConfigError(format!("url: {e}")))?;
        self.authorisation()?;
        let name = self.display_name.trim();
        if name.is_empty() || name.chars().count() > 64 {
            return Err(OpenclawConfigError(
                "display_name must be 1 to 64 characters".into(),
            ));
        }
        if self.token.is_some() && self.token_env.is_some() {
            return Err(OpenclawConfigError(
                "set `token` or `token_env`, not both".into(),
            ));
        }
        let bootstraps = [
            self.bootstrap_token_env.is_some(),
            self.setup_code_env.is_some(),
            self.setup_code.is_some(),
        ];
        if bootstraps.iter().filter(|set| **set).count() > 1 {
            return Err(OpenclawConfigError(
                "set one of `bootstrap_token_env`, `setup_code_env` and `setup_code`".into(),
            ));
        }
        if self.backoff_initial_ms < 10 || self.backoff_max_ms < self.backoff_initial_ms {
            return Err(OpenclawConfigError(
                "backoff_initial_ms must be at least 10 and at most backoff_max_ms".into(),
            ));
        }
        if self.pairing_retry_ms < 100 || self.invoke_ceiling_ms < 1_000 {
            return Err(OpenclawConfigError(
                "pairing_retry_ms must be at least 100 and invoke_ceiling_ms at least 1000".into(),
            ));
        }
        if self.progress_every_ms < 1_000 {
            return Err(OpenclawConfigError(
                "progress_every_ms must be at least 1000 (one progress chunk a second at most)"
                    .into(),
            ));
        }
        if !(1_000..=600_000).contains(&self.confirmation_timeout_ms) {
            return Err(OpenclawConfigError(
                "confirmation_timeout_ms must be between 1000 and 600000".into(),
            ));
        }
        if let Some(key) = &self.session_key
            && key.trim().is_empty()
        {
            return Err(OpenclawConfigError("session_key is empty".into()));
        }
        Ok(url)
    }

    /// The `openclaw` runtime's authorisation (enabled, grants, ceiling).
    pub fn authorisation(&self) -> Result<RuntimeAuthorisation, OpenclawConfigError> {
        let grants = match &self.grants {
            None => ExposureGrants::REMOTE_DEFAULT,
            Some(list) => {
                let mut g = ExposureGrants::NONE;
                for name in list {
                    let exposure = Exposure::ALL
                        .iter()
                        .copied()
                        .find(|e| e.as_str() == name)
                        .ok_or_else(|| OpenclawConfigError(format!("unknown grant {name:?}")))?;
                    g = g.with(exposure);
                }
                g
            }
        };
        let max_autonomy = match self.max_autonomy.as_deref() {
            None => Autonomy::AskBeforeAction,
            Some(raw) => Autonomy::parse_canonical(raw)
                .ok_or_else(|| OpenclawConfigError(format!("unknown max_autonomy {raw:?}")))?,
        };
        Ok(RuntimeAuthorisation {
            enabled: self.enabled,
            grants,
            max_autonomy,
        })
    }

    /// The configured credentials, environment variables read now. A variable that is named
    /// but not set is an error naming it.
    pub fn credentials(&self) -> Result<Credentials, OpenclawConfigError> {
        let env =
            |key: &str, var: &Option<String>| -> Result<Option<String>, OpenclawConfigError> {
                match var {
                    None => Ok(None),
                    Some(var) => std::env::var(var).map(Some).map_err(|_| {
                        OpenclawConfigError(format!("{key}: environment variable {var} is not set"))
                    }),
                }
            };
        let token = match (&self.token, env("token_env", &self.token_env)?) {
            (Some(t), _) => Some(t.clone()),
            (None, t) => t,
        };
        let (bootstrap_token, bootstrap_expires_at_ms) = match (
            &self.setup_code,
            env("setup_code_env", &self.setup_code_env)?,
        ) {
            (Some(code), _) => self.setup_credential("setup_code", code)?,
            (None, Some(code)) => self.setup_credential("setup_code_env", &code)?,
            (None, None) => (
                env("bootstrap_token_env", &self.bootstrap_token_env)?.filter(|t| !t.is_empty()),
                None,
            ),
        };
        Ok(Credentials {
            token: token.filter(|t| !t.is_empty()),
            password: env("password_env", &self.password_env)?.filter(|t| !t.is_empty()),
            bootstrap_token,
            bootstrap_expires_at_ms,
        })
    }

    /// The bootstrap token and expiry of the setup code in `key`, checked against `url`.
    fn setup_credential(
        &self,
        key: &str,
        code: &str,
    ) -> Result<(Option<String>, Option<u64>), OpenclawConfigError> {
        let code =
            SetupCode::decode(code).map_err(|e| OpenclawConfigError(format!("{key}: {e}")))?;
        if !same_gateway(&code.url, &self.url) {
            return Err(OpenclawConfigError(format!(
                "{key}: the setup code is for {}, but url is {}",
                code.url, self.url
            )));
        }
        Ok((Some(code.bootstrap_token), code.expires_at_ms))
    }
}
