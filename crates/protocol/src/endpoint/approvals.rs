//! `approvals.list`, `approvals.grant`, `approvals.revoke` (operator only): the standing
//! approvals the user manages and the session grants made by `accept_for_session`
//! (`approvals.md` §1, §7; policy layer 7).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

crate::wire_enum!(
    /// What kind of rule an approval is.
    ApprovalKind {
        /// Made by the user (`approvals grant`); applies in any session until revoked or
        /// expired.
        Standing = "standing",
        /// Made by approving a confirmation `accept_for_session`; applies only in that phone
        /// session while it is active.
        SessionGrant = "session_grant",
    }
);

crate::wire_enum!(
    /// Whether an approval applies now.
    ApprovalState {
        /// Applies to the next matching request.
        Active = "active",
        /// Its expiry passed.
        Expired = "expired",
        /// Revoked by the user.
        Revoked = "revoked",
        /// A session grant whose phone session has ended.
        Ended = "ended",
    }
);

/// One standing approval or session grant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalInfo {
    /// The id `approvals revoke` takes.
    pub approval_id: String,
    pub kind: ApprovalKind,
    pub state: ApprovalState,
    /// The runtime it applies to.
    pub runtime: String,
    /// A canonical command name or `group:<category>`.
    pub tool: String,
    /// Exact-match param constraints (`{}` for none).
    pub constraints: Map<String, Value>,
    /// When it stops applying (Unix ms); `null` for no expiry.
    pub expires_at_ms: Option<i64>,
    /// Whether it also applies inside background runs.
    pub background: bool,
    /// A session grant's phone session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_session_id: Option<String>,
    /// The confirmation that made a session grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation_id: Option<String>,
    /// Who made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub created_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

/// `approvals.list` params. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsListParams {
    /// Only this runtime's.
    pub runtime: Option<String>,
    /// Also the expired, revoked and ended ones (default: active only).
    pub all: bool,
}

/// `approvals.list` result, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalsListResult {
    pub approvals: Vec<ApprovalInfo>,
}

/// `approvals.grant` params: a standing approval. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsGrantParams {
    /// A configured runtime id.
    pub runtime: String,
    /// A command (any of its names) or `group:<category>`. `*` is refused: an approval names
    /// what it approves.
    pub tool: String,
    /// Exact-match param constraints, e.g. `{"package_or_label": "Maps"}`.
    #[serde(default)]
    pub constraints: Map<String, Value>,
    /// Expiry, Unix ms (must be in the future).
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
    /// Expiry as a duration from now by the daemon's clock, ms (instead of `expires_at_ms`).
    #[serde(default)]
    pub expires_in_ms: Option<i64>,
    /// Also inside background runs.
    #[serde(default)]
    pub background: bool,
    #[serde(default)]
    pub note: Option<String>,
}

/// `approvals.grant` result: the approval as stored.
pub type ApprovalsGrantResult = ApprovalInfo;

/// `approvals.revoke` params. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsRevokeParams {
    pub approval_id: String,
}

/// `approvals.revoke` result: the approval, now revoked (a second revoke returns it as the
/// first left it).
pub type ApprovalsRevokeResult = ApprovalInfo;
