//! A `[[runtimes]]` entry as configured, the credential resolved from it (token read, grants
//! parsed), and how its `id`, `grants` and `max_autonomy` are read.

use openphone_policy::{Autonomy, ExposureGrants};
use openphone_protocol::Exposure;
use serde::Deserialize;

/// One `[[runtimes]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    pub id: String,
    /// `websocket` (default), `builtin` or `hermes` (`docs/hermes.md`).
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
    /// The phones (`[[devices]] id`) this runtime may act on; absent: every phone.
    #[serde(default)]
    pub devices: Option<Vec<String>>,
    /// `kind = "hermes"` only: the `hermes` executable (default: the first on `PATH`).
    #[serde(default)]
    pub command: Option<std::path::PathBuf>,
    /// `kind = "hermes"` only: Hermes' home (default: `<data-dir>/hermes-home`, the adapter's own).
    #[serde(default)]
    pub home: Option<std::path::PathBuf>,
    /// `kind = "hermes"` only: an API server the user runs (default: the daemon starts one).
    #[serde(default)]
    pub api_url: Option<String>,
}

fn yes() -> bool {
    true
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
/// Whether a configured id names the daemon's own runtime (`builtin` or one of its aliases).
pub(super) fn is_builtin_id(id: &str) -> bool {
    openphone_protocol::normalize_runtime_id(id)
        .is_ok_and(|id| id == openphone_protocol::BUILTIN_RUNTIME_ID)
}

/// A `grants` list as exposure classes (`default` when absent).
pub(super) fn parse_grants(
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
pub(super) fn parse_max_autonomy(raw: Option<&str>) -> Result<Autonomy, String> {
    match raw {
        None => Ok(Autonomy::AskBeforeAction),
        Some(raw) => {
            Autonomy::parse_canonical(raw).ok_or_else(|| format!("unknown max_autonomy {raw:?}"))
        }
    }
}
