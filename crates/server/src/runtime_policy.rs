//! The runtimes' authorisation as the configuration says it now, handed to the bridge.
//!
//! A request that waits for the user is decided again when approved, under its runtime's
//! **current** entry (enabled, grants, `max_autonomy`), and a runtime no longer configured is
//! refused (`openphone_core`'s `authority.rs`). This module builds that table from the
//! configuration — every runtime with a credential, the default MCP runtime when it is
//! served, and `builtin` — and [`apply`] hands it to the bridge and withdraws the pending
//! confirmations of disabled or removed runtimes.
//!
//! There is no live reload: the configuration is read once, at start, so a change (a runtime
//! disabled, removed, stripped of a grant, its ceiling lowered) takes effect on restart, where
//! [`apply`] runs before anything is served. A reload would call [`apply`] with the new
//! configuration (and rebuild the credentials).

use std::collections::BTreeMap;

use openphone_core::{BridgeConfig, BridgeError, ToolBridge, Withdrawn};
use openphone_policy::RuntimeAuthorisation;
use openphone_protocol::BUILTIN_RUNTIME_ID;

use crate::config::{Config, RuntimeCredential};

/// The bridge configuration for `config` with these resolved credentials (the default MCP
/// runtime's included when MCP is served).
pub fn bridge_config(config: &Config, credentials: &[RuntimeCredential]) -> BridgeConfig {
    let mut runtimes: BTreeMap<String, RuntimeAuthorisation> = credentials
        .iter()
        .map(|c| {
            let auth = RuntimeAuthorisation {
                enabled: c.enabled,
                grants: c.grants,
                max_autonomy: c.max_autonomy,
            };
            (c.id.clone(), auth)
        })
        .collect();
    // The daemon's own runtime is always there (the runtime manager adds it), enabled unless
    // a `[[runtimes]]` entry says otherwise.
    // Its `[[runtimes]] id = "builtin"` entry (grants, max_autonomy, enabled) when there is
    // one; a configuration that could not be read that far grants it nothing (fail closed:
    // `Config::parse` refuses such a file before this runs).
    let builtin = config
        .builtin_authorisation()
        .unwrap_or(RuntimeAuthorisation::REVOKED);
    runtimes
        .entry(BUILTIN_RUNTIME_ID.to_owned())
        .or_insert(builtin);
    // The OpenClaw adapter's runtime, under its `[openclaw]` grants and ceiling (a table that
    // does not check grants nothing: `Config::parse` refuses it before this runs).
    if let Some(openclaw) = &config.openclaw {
        let auth = openclaw
            .authorisation()
            .unwrap_or(RuntimeAuthorisation::REVOKED);
        runtimes.insert(openphone_openclaw::OPENCLAW.to_owned(), auth);
    }
    // The Hermes adapters' runtimes (`kind = "hermes"`, no token), under their grants.
    runtimes.extend(config.hermes_authorisations());
    BridgeConfig {
        tool_policy: config.tool_policy.clone(),
        runtimes: Some(runtimes),
    }
}

/// Hands the configuration to the bridge, then withdraws the pending confirmations whose
/// runtime is disabled or no longer configured (each logged with its reason). Returns them.
pub async fn apply(
    bridge: &ToolBridge,
    config: &Config,
    credentials: &[RuntimeCredential],
) -> Result<Vec<Withdrawn>, BridgeError> {
    bridge.set_config(bridge_config(config, credentials));
    // Elevated mode and the sender allowlists (`[elevation]`, `[wake]`).
    bridge.set_elevation_config(config.elevation.clone());
    bridge.set_wake_config(config.wake.clone());
    let withdrawn = bridge.withdraw_unauthorised().await?;
    for w in &withdrawn {
        tracing::warn!(
            confirmation = %w.confirmation_id,
            runtime = %w.runtime,
            reason = %w.reason,
            "pending confirmation withdrawn"
        );
    }
    Ok(withdrawn)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openphone_policy::{Autonomy, ExposureGrants};

    #[test]
    fn every_credential_and_builtin_are_in_the_table() {
        let config = Config::parse(
            r#"
[[runtimes]]
id = "hermes"
token = "0123456789abcdef0123"
grants = ["safe_read", "dangerous"]
max_autonomy = "observe_only"

[[runtimes]]
id = "openclaw"
token = "abcdef0123456789abcd"
enabled = false

[[runtimes]]
id = "builtin"
kind = "builtin"
enabled = false
"#,
            "x.toml",
        )
        .unwrap();
        let creds = config.credentials().unwrap();
        let table = bridge_config(&config, &creds).runtimes.unwrap();
        assert_eq!(
            table.keys().map(String::as_str).collect::<Vec<_>>(),
            ["builtin", "hermes", "openclaw"]
        );
        let hermes = table["hermes"];
        assert!(hermes.enabled && hermes.grants.dangerous && !hermes.grants.private_read);
        assert_eq!(hermes.max_autonomy, Autonomy::ObserveOnly);
        assert!(!table["openclaw"].enabled);
        assert!(!table["builtin"].enabled);
        assert_eq!(table["builtin"].grants, ExposureGrants::ALL);
    }

    /// Review of issue 15: the `builtin` entry's grants and max_autonomy were ignored (only
    /// `enabled` was read), so a user who limited the built-in runtime to safe reads still had
    /// it read and send private data.
    #[test]
    fn the_builtin_entry_limits_the_builtin_runtime() {
        let config = Config::parse(
            "[[runtimes]]\nid = \"builtin\"\nkind = \"builtin\"\ngrants = [\"safe_read\"]\n\
             max_autonomy = \"observe_only\"\n",
            "x.toml",
        )
        .unwrap();
        let table = bridge_config(&config, &config.credentials().unwrap())
            .runtimes
            .unwrap();
        let builtin = table["builtin"];
        assert_eq!(builtin.grants, ExposureGrants::REMOTE_DEFAULT);
        assert_eq!(builtin.max_autonomy, Autonomy::ObserveOnly);
        assert!(builtin.enabled);
        // Without an entry: every class, the default ceiling.
        let none = Config::parse("", "x.toml").unwrap();
        let table = bridge_config(&none, &[]).runtimes.unwrap();
        assert_eq!(table["builtin"].grants, ExposureGrants::ALL);
        assert_eq!(table["builtin"].max_autonomy, Autonomy::AskBeforeAction);
    }

    /// Review of issue 15: `[[runtimes]] id = "builtin"` with a token was accepted as a
    /// WebSocket runtime that a remote client could authenticate as.
    #[test]
    fn the_builtin_runtime_takes_no_token() {
        for id in ["builtin", "phone"] {
            let text = format!("[[runtimes]]\nid = \"{id}\"\ntoken = \"0123456789abcdef0123\"\n");
            let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
            assert!(err.contains("takes no token"), "{id}: {err}");
        }
    }
}
