//! `confirmations.list` and `confirmations.resolve` (operator only).

use serde::{Deserialize, Serialize};

use super::NoParams;
use crate::manifest::Risk;
use crate::tool_result::ToolResult;

/// `confirmations.list` params: none (any fields are ignored).
pub type ConfirmationsListParams = NoParams;

/// One pending confirmation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingConfirmation {
    /// `runtime-confirm-<uuid>`.
    pub confirmation_id: String,
    /// Canonical command name.
    pub tool: String,
    /// The runtime that made the request.
    pub runtime: String,
    pub request_id: String,
    /// Always present; `null` outside a phone session.
    pub phone_session_id: Option<String>,
    /// What the user is asked to approve.
    pub summary: String,
    pub risk: Risk,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// Whether `accept_for_session` would make a session grant for this request (below the
    /// risk floor, inside a phone session); otherwise it counts as a plain `approve`.
    #[serde(default)]
    pub session_grant_offered: bool,
}

/// `confirmations.list` result: the pending confirmations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfirmationsListResult {
    pub confirmations: Vec<PendingConfirmation>,
}

crate::wire_enum!(
    /// The operator's answer to a confirmation.
    ConfirmDecision {
        /// Run this one request.
        Approve = "approve",
        /// Run it, and let the same runtime use the same tool (on the same target, when the
        /// request names one) without asking for the rest of this phone session
        /// (`approvals.md` §7). Below the risk floor only: on a `confirmation: "always"`
        /// request it counts as `approve`, and the downgrade is recorded.
        AcceptForSession = "accept_for_session",
        /// Refuse it.
        Deny = "deny",
    }
);

/// `confirmations.resolve` params. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmationsResolveParams {
    pub confirmation_id: String,
    pub decision: ConfirmDecision,
}

/// `confirmations.resolve` result: the request's final tool result.
pub type ConfirmationsResolveResult = ToolResult;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolve_params_refuse_unknown_fields_and_decisions() {
        let p: ConfirmationsResolveParams =
            serde_json::from_value(json!({"confirmation_id": "c", "decision": "deny"})).unwrap();
        assert_eq!(p.decision, ConfirmDecision::Deny);
        let p: ConfirmationsResolveParams = serde_json::from_value(
            json!({"confirmation_id": "c", "decision": "accept_for_session"}),
        )
        .unwrap();
        assert_eq!(p.decision, ConfirmDecision::AcceptForSession);
        for bad in [
            json!({"confirmation_id": "c", "decision": "deny", "why": "x"}),
            json!({"confirmation_id": "c", "decision": "maybe"}),
            json!({"decision": "approve"}),
        ] {
            assert!(serde_json::from_value::<ConfirmationsResolveParams>(bad).is_err());
        }
    }
}
