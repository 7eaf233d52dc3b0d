//! Elevated mode on the endpoint (`docs/security.md`, Elevated mode): `runtime.elevate` grants
//! one runtime a higher autonomy ceiling for a while, `runtime.revoke_elevation` ends it early,
//! and `runtime.list` shows each runtime's active elevation. Every grant, revocation and
//! expiry is pushed as `runtime.elevation.changed` ([`ElevationChanged`]), so a dashboard or a
//! CLI watching the bus sees it without reloading.

use serde::{Deserialize, Serialize};

use crate::autonomy::Autonomy;

/// One runtime's elevation: the ceiling `to` the user granted it until `expires_at_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ElevationInfo {
    /// `elev-<uuid>`, named in the audit records of its grant, its use (the layer-4 verdict of
    /// every request decided under it), its expiry and its revocation.
    pub grant_id: String,
    pub runtime: String,
    /// The ceiling while the grant lasts (looser than the runtime's configured `max_autonomy`,
    /// never above the configuration's cap).
    pub to: Autonomy,
    pub granted_at_ms: i64,
    pub expires_at_ms: i64,
    /// Who granted it (the operator's principal).
    pub granted_by: String,
}

/// `runtime.elevate` params. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuntimeElevateParams {
    /// The runtime to elevate (a configured, enabled runtime).
    pub runtime: String,
    /// The ceiling to grant: `ask_before_action` or `trusted_actions` (canonical names only).
    pub to: String,
    /// How long, in seconds (at least 1, at most the configuration's
    /// `[elevation] max_duration_secs`).
    pub duration_secs: u64,
}

/// `runtime.elevate` result: the grant (it replaces the runtime's earlier one, if any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeElevateResult {
    pub elevation: ElevationInfo,
    /// The grant this one replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<ElevationInfo>,
}

/// `runtime.revoke_elevation` params. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuntimeRevokeElevationParams {
    pub runtime: String,
}

/// `runtime.revoke_elevation` result: the grant that ended (`null` when the runtime had none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeRevokeElevationResult {
    pub revoked: Option<ElevationInfo>,
}

crate::wire_enum!(
    /// What happened to an elevation.
    ElevationChange {
        /// The operator granted it (replacing the runtime's earlier grant, if any).
        Granted = "granted",
        /// The operator ended it early.
        Revoked = "revoked",
        /// Its time passed (the daemon's sweep recorded it).
        Expired = "expired",
    }
);

/// `runtime.elevation.changed` payload (to operators and the runtime concerned): an elevation
/// was granted, revoked or expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ElevationChanged {
    pub change: ElevationChange,
    /// The grant the change concerns.
    pub elevation: ElevationInfo,
    /// On a grant: the earlier grant it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<ElevationInfo>,
    /// When it happened (Unix ms).
    pub at_ms: i64,
}
