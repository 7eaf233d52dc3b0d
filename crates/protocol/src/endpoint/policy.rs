//! `policy.explain` (operator): a dry run of one request through the policy stack, and the
//! [`Explanation`] the tool bridge also attaches to every policy denial and confirmation it
//! answers (`error.details.explanation`).
//!
//! The explanation is data, not prose to parse: the decision, the source that made it, every
//! layer's verdict in layer order, and the changes the user could make to get a different
//! outcome, each with its kind, the layer it concerns, and (where there is one) the
//! configuration setting, the value, and the exact command. The policy crate builds it
//! (`openphone_policy::explain`); this module only defines its wire shape.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::autonomy::Autonomy;
use crate::error_code::ErrorCode;

crate::wire_enum!(
    /// The seven policy layers, in evaluation order (`L1` … `L7`).
    #[derive(PartialOrd, Ord)]
    PolicyLayer {
        /// L1: caller enabled, transport flags, exposure grants.
        RuntimeAuthorisation = "runtime_authorisation",
        /// L2: the configured allow and deny lists (and tool profiles).
        ToolPolicy = "tool_policy",
        /// L3: the phone's backend supports the command.
        PlatformSupport = "platform_support",
        /// L4: the effective autonomy.
        Autonomy = "autonomy",
        /// L5: high-risk commands always confirm, one-shot.
        RiskFloor = "risk_floor",
        /// L6: no silent state changes inside background runs.
        BackgroundContext = "background_context",
        /// L7: standing approvals and session grants.
        StandingApprovals = "standing_approvals",
    }
);

impl PolicyLayer {
    /// 1-based position (`1` for L1 … `7` for L7).
    pub fn number(self) -> u8 {
        match self {
            PolicyLayer::RuntimeAuthorisation => 1,
            PolicyLayer::ToolPolicy => 2,
            PolicyLayer::PlatformSupport => 3,
            PolicyLayer::Autonomy => 4,
            PolicyLayer::RiskFloor => 5,
            PolicyLayer::BackgroundContext => 6,
            PolicyLayer::StandingApprovals => 7,
        }
    }
}

crate::wire_enum!(
    /// A layer's verdict, or the merged decision: strictest first is `deny` > `park` >
    /// `confirm` > `allow`.
    PolicyOutcome {
        /// Runs without asking.
        Allow = "allow",
        /// Asks the user first.
        Confirm = "confirm",
        /// Background run: parked for the user's review (nobody can answer now).
        Park = "park",
        /// Refused.
        Deny = "deny",
    }
);

crate::wire_enum!(
    /// What kind of change a [`PolicyChange`] proposes.
    PolicyChangeKind {
        /// L1: add the command's exposure class to the runtime's `grants` in the config.
        GrantExposure = "grant_exposure",
        /// L1: the runtime is disabled; enable it in the config.
        EnableRuntime = "enable_runtime",
        /// L2: remove the deny entry, or admit the command in the allow list or profile that
        /// left it out.
        ToolPolicy = "tool_policy",
        /// Nothing the user can change (the platform lacks the command, or the command is
        /// never offered to this caller or over this transport).
        Unsupported = "unsupported",
        /// L4: another autonomy for the request or session, or a higher `max_autonomy`.
        Autonomy = "autonomy",
        /// L5: nothing lowers the risk floor; every such request asks, one at a time.
        RiskFloor = "risk_floor",
        /// L6: a parked request runs once the user approves its review.
        Background = "background",
        /// L7: a standing approval (or a session grant) would let it run without asking.
        StandingApproval = "standing_approval",
    }
);

/// Who made the decision: the policy `DecisionSource` as data. `kind` is `policy` (with
/// `layer`), `standing_approval` (with `rule_id`) or `session_grant` (with `grant_id`); the
/// other members depend on the kind and are kept as they come, so a new kind passes through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExplainSource {
    pub kind: String,
    /// The kind's own members (`layer`, `rule_id`, `grant_id`, …).
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// One layer's verdict, as the decision's proof holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LayerExplanation {
    pub layer: PolicyLayer,
    pub verdict: PolicyOutcome,
    /// The layer's own reason, unchanged.
    pub reason: String,
    /// The error code of a denying layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
}

/// One thing the user could change to get a different outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyChange {
    pub kind: PolicyChangeKind,
    /// The layer whose verdict the change addresses.
    pub layer: PolicyLayer,
    /// What to do, for a person.
    pub description: String,
    /// The configuration setting concerned, as a dotted path (`runtimes.hermes.grants`,
    /// `tool_policy.global.deny`, `runtimes.hermes.max_autonomy`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    /// The value concerned: the exposure class to grant, the deny entry to remove, the
    /// profile that left the command out, the autonomy mode to use, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The exact `openphone` command that makes the change, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// Why a request is allowed, asks, is parked or is denied, and what would change that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Explanation {
    /// The command's canonical name.
    pub tool: String,
    /// The caller's runtime id.
    pub runtime: String,
    /// The autonomy the decision used.
    pub effective_autonomy: Autonomy,
    /// The merged decision.
    pub decision: PolicyOutcome,
    /// The risk floor asked: the answer covers this one request only, and no standing
    /// approval or session grant lowers it.
    pub one_shot: bool,
    pub source: ExplainSource,
    /// All seven verdicts, in layer order.
    pub layers: Vec<LayerExplanation>,
    /// What the user could change, in layer order (empty for an allowed request).
    pub changes: Vec<PolicyChange>,
}

/// `policy.explain` params: the request to decide, and who would send it. Unknown fields are
/// refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyExplainParams {
    /// The command, by any of its names.
    pub tool: String,
    /// The command's params object (absent: `{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// The runtime to decide for, under its configured authorisation (absent: the operator
    /// itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The request's autonomy (normalised leniently, as a request's is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<String>,
    /// The phone session the request would be made in (its autonomy and session grants
    /// count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_session_id: Option<String>,
    /// The transport it would arrive on (`websocket` when absent; `internal` for `builtin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Decide it as inside a background run (a job or goal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
}

/// `policy.explain` result: the explanation.
pub type PolicyExplainResult = Explanation;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_explanation_round_trips_and_keeps_unknown_source_members() {
        let text = json!({
            "tool": "openphone.ui.tap",
            "runtime": "hermes",
            "effective_autonomy": "ask_before_action",
            "decision": "confirm",
            "one_shot": false,
            "source": {"kind": "some_future_kind", "layer": "autonomy", "extra": 1},
            "layers": [{"layer": "autonomy", "verdict": "confirm", "reason": "ask"},
                       {"layer": "tool_policy", "verdict": "deny", "reason": "no",
                        "code": "tool_not_granted"}],
            "changes": [{"kind": "standing_approval", "layer": "standing_approvals",
                         "description": "grant", "command": "openphone approvals grant"}],
        });
        let e: Explanation = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(e.source.kind, "some_future_kind");
        assert_eq!(e.layers[1].code, Some(ErrorCode::ToolNotGranted));
        assert_eq!(serde_json::to_value(&e).unwrap(), text);
    }

    #[test]
    fn params_refuse_unknown_fields_and_default_the_rest() {
        let p: PolicyExplainParams = serde_json::from_value(json!({"tool": "tap"})).unwrap();
        assert_eq!(p.params, None);
        assert_eq!(p.background, None);
        assert!(
            serde_json::from_value::<PolicyExplainParams>(json!({"tool": "t", "x": 1})).is_err()
        );
        assert_eq!(PolicyLayer::StandingApprovals.number(), 7);
        assert_eq!(PolicyLayer::ALL.len(), 7);
    }
}
