//! Builders shared by the suites: an owned test case that lends itself as a `PolicyInput`.

use openphone_policy::{
    Autonomy, Caller, Context, Decision, PolicyInput, Requirement, StandingApproval, ToolPolicy,
    Transport, decide,
};
use openphone_protocol::Command;
use serde_json::{Value, json};

pub use openphone_test_support::registry;

/// A command of the shipped manifest, by any name.
pub fn cmd(name: &str) -> Command {
    registry()
        .resolve(name)
        .unwrap_or_else(|| panic!("no command {name}"))
        .clone()
}

pub const NOW: u64 = 1_700_000_000_000;

/// Everything one decision needs, owned.
#[derive(Debug, Clone)]
pub struct Case {
    pub command: Command,
    pub caller: Caller,
    pub request: Option<String>,
    pub session: Option<Autonomy>,
    pub tool_policy: ToolPolicy,
    pub platform_supported: bool,
    pub context: Context,
    pub approvals: Vec<StandingApproval>,
    /// The request's active phone session (for session grants).
    pub phone_session: Option<String>,
    pub params: Value,
    pub now_ms: u64,
    /// The caller's elevation (`openphone elevate`), if any.
    pub elevation: Option<openphone_policy::Elevation>,
}

impl Case {
    /// A remote runtime `hermes` over WebSocket, granted all exposure classes, in an
    /// `ask_before_action` session, interactive, platform supported, no rules.
    pub fn new(tool: &str) -> Case {
        let mut caller = Caller::remote("hermes", Transport::Websocket, "token:hermes");
        caller.grants = openphone_policy::ExposureGrants::ALL;
        Case {
            command: cmd(tool),
            caller,
            request: None,
            session: Some(Autonomy::AskBeforeAction),
            tool_policy: ToolPolicy::default(),
            platform_supported: true,
            context: Context::Interactive,
            approvals: Vec::new(),
            phone_session: None,
            params: json!({"reason": "test"}),
            now_ms: NOW,
            elevation: None,
        }
    }

    pub fn session(mut self, a: Option<Autonomy>) -> Case {
        self.session = a;
        self
    }

    /// The runtime's configured ceiling (`max_autonomy`), raised or lowered by the user.
    pub fn ceiling(mut self, a: Autonomy) -> Case {
        self.caller.max_autonomy = a;
        self
    }

    pub fn request(mut self, raw: &str) -> Case {
        self.request = Some(raw.to_owned());
        self
    }

    pub fn background(mut self) -> Case {
        self.context = Context::job(42);
        self
    }

    pub fn params(mut self, p: Value) -> Case {
        self.params = p;
        self
    }

    pub fn rule(mut self, r: StandingApproval) -> Case {
        self.approvals.push(r);
        self
    }

    /// The request is made in this (active) phone session.
    pub fn in_session(mut self, id: &str) -> Case {
        self.phone_session = Some(id.to_owned());
        self
    }

    pub fn policy(mut self, json_text: &str) -> Case {
        self.tool_policy = serde_json::from_str(json_text).expect("tool policy json");
        self
    }

    pub fn input(&self) -> PolicyInput<'_> {
        PolicyInput {
            command: &self.command,
            caller: &self.caller,
            request_autonomy: self.request.as_deref(),
            session_autonomy: self.session,
            tool_policy: &self.tool_policy,
            platform_supported: self.platform_supported,
            context: &self.context,
            standing_approvals: &self.approvals,
            phone_session_id: self.phone_session.as_deref(),
            params: &self.params,
            now_ms: self.now_ms,
            elevation: self.elevation.as_ref(),
        }
    }

    pub fn decide(&self) -> Decision {
        decide(&self.input())
    }

    /// The digest of this case's inputs.
    pub fn inputs_digest(&self) -> String {
        openphone_policy::inputs_digest(&self.input())
    }
}

/// A standing approval for `hermes`, enabled, no constraints, no expiry, interactive only.
pub fn rule(id: &str, tool: &str) -> StandingApproval {
    StandingApproval {
        id: id.to_owned(),
        runtime: "hermes".to_owned(),
        tool: openphone_policy::ToolSelector::parse(tool).unwrap(),
        constraints: Default::default(),
        expires_at_ms: None,
        background: false,
        enabled: true,
        session: None,
    }
}

/// A compact, comparable view of a requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Allow,
    Confirm {
        one_shot: bool,
        park: bool,
    },
    /// (error code, details.policy)
    Deny(&'static str, &'static str),
}

pub fn view(r: &Requirement) -> Expect {
    match r {
        Requirement::Allow => Expect::Allow,
        Requirement::Confirm {
            one_shot,
            park_for_review,
            ..
        } => Expect::Confirm {
            one_shot: *one_shot,
            park: *park_for_review,
        },
        Requirement::Deny {
            code,
            policy_detail,
            ..
        } => Expect::Deny(code.as_str(), policy_detail.as_str()),
    }
}

pub const CONFIRM: Expect = Expect::Confirm {
    one_shot: false,
    park: false,
};
pub const CONFIRM_ONE_SHOT: Expect = Expect::Confirm {
    one_shot: true,
    park: false,
};
pub const PARK: Expect = Expect::Confirm {
    one_shot: false,
    park: true,
};
pub const PARK_ONE_SHOT: Expect = Expect::Confirm {
    one_shot: true,
    park: true,
};
pub const OBSERVE_DENY: Expect = Expect::Deny(
    "observe_only_mutation_denied",
    "observe_only_blocks_mutation",
);
pub const NOT_GRANTED: Expect = Expect::Deny("tool_not_granted", "runtime_registry_deny");
pub const TRANSPORT_DENY: Expect = Expect::Deny("tool_not_granted", "transport_not_allowed");
pub const POLICY_DENY: Expect = Expect::Deny("tool_not_granted", "tool_policy_deny");
pub const PLATFORM_DENY: Expect = Expect::Deny(
    "tool_not_supported_by_phone_platform",
    "platform_unsupported",
);
