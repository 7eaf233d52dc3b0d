//! The typed verdict of one layer.

use std::borrow::Cow;
use std::fmt;

use openphone_protocol::ErrorCode;
use serde::{Deserialize, Serialize};

/// The seven layers, in evaluation (and proof) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// L1: caller enabled, transport flags, exposure grants.
    RuntimeAuthorisation,
    /// L2: configured allow/deny lists.
    ToolPolicy,
    /// L3: the device backend supports the command.
    PlatformSupport,
    /// L4: the effective autonomy.
    Autonomy,
    /// L5: `confirmation: always` / high risk always confirms.
    RiskFloor,
    /// L6: no silent state changes inside background runs.
    BackgroundContext,
    /// L7: user-made rules that may lower Confirm to Allow.
    StandingApprovals,
}

impl Layer {
    /// Every layer, in order.
    pub const ALL: [Layer; 7] = [
        Layer::RuntimeAuthorisation,
        Layer::ToolPolicy,
        Layer::PlatformSupport,
        Layer::Autonomy,
        Layer::RiskFloor,
        Layer::BackgroundContext,
        Layer::StandingApprovals,
    ];

    /// 1-based position (`L1` … `L7`).
    pub fn number(self) -> u8 {
        match self {
            Layer::RuntimeAuthorisation => 1,
            Layer::ToolPolicy => 2,
            Layer::PlatformSupport => 3,
            Layer::Autonomy => 4,
            Layer::RiskFloor => 5,
            Layer::BackgroundContext => 6,
            Layer::StandingApprovals => 7,
        }
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::RuntimeAuthorisation => "runtime_authorisation",
            Layer::ToolPolicy => "tool_policy",
            Layer::PlatformSupport => "platform_support",
            Layer::Autonomy => "autonomy",
            Layer::RiskFloor => "risk_floor",
            Layer::BackgroundContext => "background_context",
            Layer::StandingApprovals => "standing_approvals",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{} {}", self.number(), self.as_str())
    }
}

/// What one layer says. Merge strictness: `Deny` > `Park` > `Confirm` > `Allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// No objection.
    Allow,
    /// Ask the user before executing.
    Confirm,
    /// Background context: park the request for review (a Confirm nobody can answer now; the
    /// bridge answers `background.confirmation_required`).
    Park,
    /// Refuse.
    Deny,
}

impl VerdictKind {
    /// Merge rank: higher wins.
    pub fn strictness(self) -> u8 {
        match self {
            VerdictKind::Allow => 0,
            VerdictKind::Confirm => 1,
            VerdictKind::Park => 2,
            VerdictKind::Deny => 3,
        }
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Allow => "allow",
            VerdictKind::Confirm => "confirm",
            VerdictKind::Park => "park",
            VerdictKind::Deny => "deny",
        }
    }
}

/// The `details.policy` value of a denial (`runtime-protocol.md` §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDetail {
    /// L1: disabled caller or exposure class not granted.
    RuntimeRegistryDeny,
    /// L1: `mcp: false` over MCP, or `remote_runtime: false` from a remote runtime.
    TransportNotAllowed,
    /// L2: a deny entry, or missing from an allow list.
    ToolPolicyDeny,
    /// L3: the device backend lacks the command.
    PlatformUnsupported,
    /// L4: a mutating command under `observe_only`.
    ObserveOnlyBlocksMutation,
}

impl PolicyDetail {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyDetail::RuntimeRegistryDeny => "runtime_registry_deny",
            PolicyDetail::TransportNotAllowed => "transport_not_allowed",
            PolicyDetail::ToolPolicyDeny => "tool_policy_deny",
            PolicyDetail::PlatformUnsupported => "platform_unsupported",
            PolicyDetail::ObserveOnlyBlocksMutation => "observe_only_blocks_mutation",
        }
    }
}

impl fmt::Display for PolicyDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who decided (`approvals.md` §7; only the sources the policy stack itself can produce).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DecisionSource {
    /// A policy layer decided without a prompt; the layer is named.
    Policy { layer: Layer },
    /// A user rule turned Confirm into Allow; the rule id is recorded.
    StandingApproval { rule_id: String },
    /// An earlier `accept_for_session` in this phone session turned Confirm into Allow; the
    /// grant id is recorded.
    SessionGrant { grant_id: String },
    /// The user approved a parked background action on its review (`agent-jobs.md` §9):
    /// satisfies the Confirm or Park of that one request only (even a one-shot one, the review
    /// being the one-shot confirmation of exactly this request); the review's id is recorded.
    BackgroundReview { confirmation_id: String },
}

impl DecisionSource {
    /// The §7 source string (`policy`, `standing_approval`).
    pub fn as_str(&self) -> &'static str {
        match self {
            DecisionSource::Policy { .. } => "policy",
            DecisionSource::StandingApproval { .. } => "standing_approval",
            DecisionSource::SessionGrant { .. } => "session_grant",
            DecisionSource::BackgroundReview { .. } => "background_review",
        }
    }
}

/// One layer's verdict, with its reason. A proof is the seven verdicts in layer order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Verdict {
    pub layer: Layer,
    pub kind: VerdictKind,
    /// Why, in words a person understands. Borrowed when fixed: most verdicts of an allowed
    /// call have a fixed reason, and each one is built on every call.
    pub reason: Cow<'static, str>,
    /// The error code of a denial.
    pub code: Option<ErrorCode>,
    /// The `details.policy` value of a denial.
    pub policy_detail: Option<PolicyDetail>,
    pub source: DecisionSource,
}

impl Verdict {
    /// No objection from `layer`.
    pub fn allow(layer: Layer, reason: impl Into<Cow<'static, str>>) -> Verdict {
        Verdict::plain(layer, VerdictKind::Allow, reason)
    }

    /// `layer` asks for a confirmation.
    pub fn confirm(layer: Layer, reason: impl Into<Cow<'static, str>>) -> Verdict {
        Verdict::plain(layer, VerdictKind::Confirm, reason)
    }

    /// `layer` parks the request for review.
    pub fn park(layer: Layer, reason: impl Into<Cow<'static, str>>) -> Verdict {
        Verdict::plain(layer, VerdictKind::Park, reason)
    }

    /// `layer` refuses, with a code and a `details.policy` value.
    pub fn deny(
        layer: Layer,
        code: ErrorCode,
        detail: PolicyDetail,
        reason: impl Into<Cow<'static, str>>,
    ) -> Verdict {
        Verdict {
            layer,
            kind: VerdictKind::Deny,
            reason: reason.into(),
            code: Some(code),
            policy_detail: Some(detail),
            source: DecisionSource::Policy { layer },
        }
    }

    fn plain(layer: Layer, kind: VerdictKind, reason: impl Into<Cow<'static, str>>) -> Verdict {
        Verdict {
            layer,
            kind,
            reason: reason.into(),
            code: None,
            policy_detail: None,
            source: DecisionSource::Policy { layer },
        }
    }
}
