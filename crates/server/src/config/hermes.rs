//! `[[runtimes]]` entries with `kind = "hermes"`: the Hermes Agent adapter's runtimes
//! (`docs/hermes.md`). They take no token (the daemon drives Hermes itself); `command`,
//! `home` and `api_url` are theirs alone.

use openphone_policy::{ExposureGrants, RuntimeAuthorisation};

use super::runtimes::{parse_grants, parse_max_autonomy};
use super::{Config, ConfigError};

/// The `kind` value of a Hermes runtime.
pub const HERMES_KIND: &str = "hermes";

impl Config {
    /// The Hermes runtimes, checked: no token, options only on them, `api_url` loopback.
    pub fn hermes_runtimes(&self) -> Result<Vec<openphone_hermes::HermesConfig>, ConfigError> {
        let mut out = Vec::new();
        for rt in &self.runtimes {
            let err = |message: String| ConfigError::Runtime {
                id: rt.id.clone(),
                message,
            };
            let is_hermes = rt.kind.as_deref().map(str::trim) == Some(HERMES_KIND);
            if !is_hermes {
                if rt.command.is_some() || rt.home.is_some() || rt.api_url.is_some() {
                    return Err(err(
                        "`command`, `home` and `api_url` belong to kind = \"hermes\" runtimes"
                            .into(),
                    ));
                }
                continue;
            }
            if rt.token.is_some() || rt.token_env.is_some() {
                return Err(err(
                    "a Hermes runtime takes no token: the daemon starts and drives Hermes \
                     itself; remove `token`/`token_env`"
                        .into(),
                ));
            }
            let authorisation = RuntimeAuthorisation {
                enabled: rt.enabled,
                grants: parse_grants(rt.grants.as_deref(), ExposureGrants::REMOTE_DEFAULT)
                    .map_err(err)?,
                max_autonomy: parse_max_autonomy(rt.max_autonomy.as_deref()).map_err(err)?,
            };
            let mut config = openphone_hermes::HermesConfig::new(&rt.id, authorisation);
            config.enabled = rt.enabled;
            config.command.clone_from(&rt.command);
            config.home.clone_from(&rt.home);
            config.api_url.clone_from(&rt.api_url);
            config.confirmation_timeout_ms =
                u64::try_from(self.mcp.confirmation_timeout_ms).unwrap_or(120_000);
            config.check().map_err(|e| err(e.to_string()))?;
            out.push(config);
        }
        Ok(out)
    }

    /// The Hermes runtimes' authorisations, by runtime id (for the bridge's runtime table).
    pub fn hermes_authorisations(&self) -> Vec<(String, RuntimeAuthorisation)> {
        self.hermes_runtimes()
            .map(|list| {
                list.into_iter()
                    .map(|c| (c.runtime_id.clone(), c.authorisation))
                    .collect()
            })
            .unwrap_or_default()
    }
}
