//! The runtime's authority **now**: a request that waited for the user is decided again under
//! its runtime's current configuration, not the one it had when it asked (issue 11, item 4).
//!
//! [`BridgeConfig::runtimes`](super::BridgeConfig) holds every configured runtime's
//! authorisation (enabled, grants, ceiling). On approval the stored caller takes its runtime's
//! current entry, so a runtime disabled, stripped of a grant or given a lower ceiling since
//! cannot have the request run; a runtime no longer configured is refused outright. When the
//! daemon starts (there is no live reload: a changed configuration takes effect on restart),
//! [`ToolBridge::withdraw_unauthorised`] withdraws the pending confirmations of disabled and
//! removed runtimes with the reason, so the user is not asked about requests that can no
//! longer run.

use openphone_policy::{Caller, RuntimeAuthorisation};
use openphone_protocol::ErrorCode;
use openphone_store as store;

use super::ToolBridge;
use super::types::{BridgeError, ConfirmDecision, StoredRequest};
use crate::locks::read;

/// `resolved_by` of a confirmation withdrawn because of the configuration.
pub const RESOLVED_BY_CONFIGURATION: &str = "daemon:configuration";

/// A pending confirmation withdrawn because its runtime lost its authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withdrawn {
    pub confirmation_id: String,
    pub runtime: String,
    /// Why, as the final result's message says it.
    pub reason: String,
}

/// Where a runtime stands in the current configuration.
pub(super) enum Standing {
    /// Configured: the caller under its current authorisation (the operator, and every caller
    /// of a bridge without runtime configuration, as it came).
    Configured(Caller),
    /// No longer configured: the caller with no authority left.
    Removed(Caller),
}

impl Standing {
    /// The caller to decide with.
    pub(super) fn caller(&self) -> &Caller {
        match self {
            Standing::Configured(c) | Standing::Removed(c) => c,
        }
    }
}

impl ToolBridge {
    /// `caller` under its runtime's current configuration.
    pub(super) fn standing(&self, caller: &Caller) -> Standing {
        if caller.is_operator() {
            return Standing::Configured(caller.clone());
        }
        let config = read(&self.config);
        let Some(runtimes) = &config.runtimes else {
            return Standing::Configured(caller.clone());
        };
        match runtimes.get(&caller.runtime) {
            Some(current) => Standing::Configured(caller.with_authorisation(*current)),
            None => Standing::Removed(caller.with_authorisation(RuntimeAuthorisation::REVOKED)),
        }
    }

    /// Withdraws every pending confirmation whose runtime is disabled or no longer configured:
    /// final result `denied` / `tool_not_granted` with the reason, resolved by
    /// [`RESOLVED_BY_CONFIGURATION`]; nothing runs. The daemon calls this at start, after
    /// [`ToolBridge::recover`] and before it serves anything. Without runtime configuration
    /// (`BridgeConfig::runtimes` is `None`) nothing is withdrawn.
    pub async fn withdraw_unauthorised(&self) -> Result<Vec<Withdrawn>, BridgeError> {
        if read(&self.config).runtimes.is_none() {
            return Ok(Vec::new());
        }
        let pending = self.store.list_confirmations(&store::ConfirmationFilter {
            state: Some(store::ConfirmationState::Pending),
            ..Default::default()
        })?;
        let mut withdrawn = Vec::new();
        for record in pending {
            let Ok(stored) = serde_json::from_value::<StoredRequest>(record.request.clone()) else {
                continue;
            };
            let runtime = stored.caller.runtime.clone();
            let reason = match self.standing(&stored.caller) {
                Standing::Configured(c) if c.enabled => continue,
                Standing::Configured(_) => {
                    format!("runtime `{runtime}` is disabled in the configuration")
                }
                Standing::Removed(_) => format!("runtime `{runtime}` is no longer configured"),
            };
            let message = format!("withdrawn: {reason}; the request was not run");
            let denial = (ErrorCode::ToolNotGranted, message.as_str());
            match self
                .resolve_as(
                    RESOLVED_BY_CONFIGURATION,
                    &record.confirmation_id,
                    ConfirmDecision::Deny,
                    denial,
                )
                .await
            {
                Ok(_) => withdrawn.push(Withdrawn {
                    confirmation_id: record.confirmation_id,
                    runtime,
                    reason,
                }),
                // Expired meanwhile: it has its final result (`timeout`) already.
                Err(BridgeError::PendingConfirmationNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(withdrawn)
    }
}
