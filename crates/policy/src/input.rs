//! Everything a decision depends on: the command, the caller, the autonomies, the tool-policy
//! configuration, platform support, the context, standing approvals, the params and the time.

use std::collections::BTreeMap;
use std::fmt;

use openphone_protocol::{BUILTIN_RUNTIME_ID, Command, Exposure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::autonomy::{Autonomy, effective_autonomy};
use crate::elevation::Elevation;
use crate::error::PolicyError;
pub use crate::selector::ToolSelector;

/// The transport a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The runtime WebSocket endpoint.
    Websocket,
    /// MCP (streamable HTTP or stdio).
    Mcp,
    /// The `openphone` CLI.
    Cli,
    /// The OpenClaw node transport.
    Openclaw,
    /// In-process callers (goal runner, jobs, adaptive-surface actions).
    Internal,
}

impl Transport {
    /// Every transport.
    pub const ALL: [Transport; 5] = [
        Transport::Websocket,
        Transport::Mcp,
        Transport::Cli,
        Transport::Openclaw,
        Transport::Internal,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Websocket => "websocket",
            Transport::Mcp => "mcp",
            Transport::Cli => "cli",
            Transport::Openclaw => "openclaw",
            Transport::Internal => "internal",
        }
    }

    /// Parses the wire string (trimmed, case-sensitive).
    pub fn parse(raw: &str) -> Result<Transport, PolicyError> {
        let raw = raw.trim();
        Transport::ALL
            .into_iter()
            .find(|t| t.as_str() == raw)
            .ok_or_else(|| PolicyError::UnknownTransport(raw.to_owned()))
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use openphone_protocol::Role;

/// The exposure classes granted to a caller (`runtime-protocol.md` §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExposureGrants {
    pub safe_read: bool,
    pub private_read: bool,
    pub dangerous: bool,
}

impl ExposureGrants {
    /// The default for a remote runtime: `safe_read` only.
    pub const REMOTE_DEFAULT: ExposureGrants = ExposureGrants {
        safe_read: true,
        private_read: false,
        dangerous: false,
    };

    /// All three classes (`builtin` and the operator).
    pub const ALL: ExposureGrants = ExposureGrants {
        safe_read: true,
        private_read: true,
        dangerous: true,
    };

    /// Nothing granted.
    pub const NONE: ExposureGrants = ExposureGrants {
        safe_read: false,
        private_read: false,
        dangerous: false,
    };

    /// Whether a class is granted.
    pub fn contains(self, exposure: Exposure) -> bool {
        match exposure {
            Exposure::SafeRead => self.safe_read,
            Exposure::PrivateRead => self.private_read,
            Exposure::Dangerous => self.dangerous,
        }
    }

    /// These grants plus one class.
    pub fn with(mut self, exposure: Exposure) -> ExposureGrants {
        match exposure {
            Exposure::SafeRead => self.safe_read = true,
            Exposure::PrivateRead => self.private_read = true,
            Exposure::Dangerous => self.dangerous = true,
        }
        self
    }

    /// The granted classes' wire strings, in class order.
    pub fn names(self) -> Vec<&'static str> {
        Exposure::ALL
            .iter()
            .copied()
            .filter(|e| self.contains(*e))
            .map(Exposure::as_str)
            .collect()
    }
}

/// The authenticated caller of a tool request, with its configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// Runtime id (`builtin`, `openclaw`, `hermes`, …).
    pub runtime: String,
    pub transport: Transport,
    /// Authenticated principal (token name, MCP client, OS user).
    pub principal: String,
    pub role: Role,
    /// Whether the runtime is enabled in the configuration.
    pub enabled: bool,
    /// Granted exposure classes.
    pub grants: ExposureGrants,
    /// The runtime's autonomy ceiling (`max_autonomy`); ignored for the operator.
    pub max_autonomy: Autonomy,
}

impl Caller {
    /// A remote runtime with the defaults: enabled, `safe_read` only, ceiling
    /// `ask_before_action`.
    pub fn remote(runtime: &str, transport: Transport, principal: &str) -> Caller {
        Caller {
            runtime: runtime.to_owned(),
            transport,
            principal: principal.to_owned(),
            role: Role::Runtime,
            enabled: true,
            grants: ExposureGrants::REMOTE_DEFAULT,
            max_autonomy: Autonomy::AskBeforeAction,
        }
    }

    /// The daemon's own runtime: all exposure classes, transport `internal`, ceiling
    /// `ask_before_action` (jobs and goals get their mode from their session, capped by this
    /// ceiling like any runtime's).
    pub fn builtin(principal: &str) -> Caller {
        Caller {
            runtime: BUILTIN_RUNTIME_ID.to_owned(),
            transport: Transport::Internal,
            principal: principal.to_owned(),
            role: Role::Runtime,
            enabled: true,
            grants: ExposureGrants::ALL,
            max_autonomy: Autonomy::AskBeforeAction,
        }
    }

    /// The operator credential: all exposure classes, no autonomy ceiling.
    pub fn operator(runtime: &str, transport: Transport, principal: &str) -> Caller {
        Caller {
            runtime: runtime.to_owned(),
            transport,
            principal: principal.to_owned(),
            role: Role::Operator,
            enabled: true,
            grants: ExposureGrants::ALL,
            max_autonomy: Autonomy::TrustedActions,
        }
    }

    /// Whether this is the daemon's own runtime.
    pub fn is_builtin(&self) -> bool {
        self.runtime == BUILTIN_RUNTIME_ID
    }

    /// Whether this caller holds the operator credential.
    pub fn is_operator(&self) -> bool {
        match self.role {
            Role::Operator => true,
            Role::Runtime => false,
        }
    }

    /// The configured part of this caller: enabled, grants, ceiling.
    pub fn authorisation(&self) -> RuntimeAuthorisation {
        RuntimeAuthorisation {
            enabled: self.enabled,
            grants: self.grants,
            max_autonomy: self.max_autonomy,
        }
    }

    /// The same caller (runtime, transport, principal, role) under another authorisation —
    /// the runtime's current configuration, when a stored request is decided again.
    pub fn with_authorisation(&self, current: RuntimeAuthorisation) -> Caller {
        Caller {
            enabled: current.enabled,
            grants: current.grants,
            max_autonomy: current.max_autonomy,
            ..self.clone()
        }
    }
}

/// What the configuration says about one runtime and the policy reads: whether it is
/// enabled (layer 1), its granted exposure classes (layer 1) and its autonomy ceiling
/// `max_autonomy` (layer 4). A request carries these as of the moment it arrived; a request
/// approved later is decided again under the runtime's **current** authorisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RuntimeAuthorisation {
    pub enabled: bool,
    pub grants: ExposureGrants,
    pub max_autonomy: Autonomy,
}

impl RuntimeAuthorisation {
    /// No authority at all: disabled, nothing granted, ceiling `observe_only` — what a runtime
    /// that is no longer configured is decided with.
    pub const REVOKED: RuntimeAuthorisation = RuntimeAuthorisation {
        enabled: false,
        grants: ExposureGrants::NONE,
        max_autonomy: Autonomy::ObserveOnly,
    };
}

/// One tool list: an optional tool profile, an allow list and a deny list.
///
/// The profile (by name, see [`profiles`](mod@crate::profiles)) is the base surface and
/// `allow` adds to it. Without a profile, no allow list admits everything and a present one
/// restricts to its entries (an empty allow list admits nothing). `deny` removes from either
/// and always wins. An unknown profile name admits nothing (fail closed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolList {
    /// A named tool profile (`crate::profiles`), the base surface before `allow` and `deny`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    pub allow: Option<Vec<ToolSelector>>,
    pub deny: Vec<ToolSelector>,
}

/// How a [`ToolList`]'s surface (before `deny`) treats one command, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission<'a> {
    /// Neither a profile nor an allow list: everything is admitted.
    Unfiltered,
    /// The list's profile holds the command.
    InProfile(&'a str),
    /// An allow entry selects the command (with or without a profile).
    Allowed(&'a ToolSelector),
    /// Refused: the profile does not hold the command and no allow entry adds it.
    NotInProfile(&'a str),
    /// Refused: no profile, and the allow list has no entry for the command.
    NotInAllowList,
    /// Refused: the list names a profile that does not exist.
    UnknownProfile(&'a str),
}

impl Admission<'_> {
    /// Whether the command is on the surface.
    pub fn admits(self) -> bool {
        match self {
            Admission::Unfiltered | Admission::InProfile(_) | Admission::Allowed(_) => true,
            Admission::NotInProfile(_)
            | Admission::NotInAllowList
            | Admission::UnknownProfile(_) => false,
        }
    }
}

impl ToolList {
    /// The first deny entry that selects the command.
    pub fn denying_entry(&self, command: &Command) -> Option<&ToolSelector> {
        self.deny.iter().find(|s| s.matches(command))
    }

    /// Whether the list's surface before `deny` (profile and allow list) holds the command, and
    /// why.
    pub fn admission(&self, command: &Command) -> Admission<'_> {
        let allowed = || {
            self.allow
                .iter()
                .flatten()
                .find(|s| s.matches(command))
                .map(Admission::Allowed)
        };
        match &self.profile {
            Some(name) => match crate::profiles::profile(name) {
                None => Admission::UnknownProfile(name),
                Some(p) if p.admits(command) => Admission::InProfile(name),
                Some(_) => allowed().unwrap_or(Admission::NotInProfile(name)),
            },
            None => match &self.allow {
                None => Admission::Unfiltered,
                Some(_) => allowed().unwrap_or(Admission::NotInAllowList),
            },
        }
    }

    /// Whether the profile and the allow list admit the command (`deny` not considered).
    pub fn allows(&self, command: &Command) -> bool {
        self.admission(command).admits()
    }

    /// Whether the list says nothing at all.
    pub fn is_empty(&self) -> bool {
        self.profile.is_none() && self.allow.is_none() && self.deny.is_empty()
    }
}

/// Tool-policy configuration: a global list and one per runtime id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPolicy {
    pub global: ToolList,
    pub runtimes: BTreeMap<String, ToolList>,
}

impl ToolPolicy {
    /// The per-runtime list for a runtime, if configured.
    pub fn for_runtime(&self, runtime: &str) -> Option<&ToolList> {
        self.runtimes.get(runtime)
    }
}

/// A background run (no user present).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BackgroundRun {
    /// An agent job run (`agent-jobs.md`).
    Job {
        job_id: u64,
        /// The runtime whose job it is, when that is not the user (the operator or the
        /// built-in runtime): the job runs as `builtin` with that runtime's authority, and a
        /// standing approval granted for `builtin` (the user's own work) does not apply to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_behalf_of: Option<String>,
    },
    /// A goal run (`goals.md`).
    Goal { goal_id: String },
    /// A watcher reading what it watches (a screen, a page) with nobody present.
    Watcher { watcher_id: i64 },
}

/// Where the request comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Context {
    /// A runtime calls a tool in a phone session; someone can answer a confirmation.
    Interactive,
    /// Inside a job or goal run with nobody present.
    Background { run: BackgroundRun },
}

impl Context {
    /// A background job run of the user's own job.
    pub fn job(job_id: u64) -> Context {
        Context::job_for(job_id, None)
    }

    /// A background run of a job made on behalf of `on_behalf_of` (a runtime other than the
    /// user's own; `None` for the user's jobs).
    pub fn job_for(job_id: u64, on_behalf_of: Option<&str>) -> Context {
        Context::Background {
            run: BackgroundRun::Job {
                job_id,
                on_behalf_of: on_behalf_of.map(str::to_owned),
            },
        }
    }

    /// The runtime a background job run acts for, when it is not the user's own job.
    pub fn on_behalf_of(&self) -> Option<&str> {
        match self {
            Context::Background {
                run:
                    BackgroundRun::Job {
                        on_behalf_of: Some(runtime),
                        ..
                    },
            } => Some(runtime),
            _ => None,
        }
    }

    /// A background goal run.
    pub fn goal(goal_id: &str) -> Context {
        Context::Background {
            run: BackgroundRun::Goal {
                goal_id: goal_id.to_owned(),
            },
        }
    }

    /// A watcher's check (its poll of a screen or a page).
    pub fn watcher(watcher_id: i64) -> Context {
        Context::Background {
            run: BackgroundRun::Watcher { watcher_id },
        }
    }

    /// Whether nobody is present.
    pub fn is_background(&self) -> bool {
        match self {
            Context::Interactive => false,
            Context::Background { .. } => true,
        }
    }
}

/// A user-made rule that may turn Confirm into Allow below the risk floor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingApproval {
    pub id: String,
    /// The runtime it applies to (exact match).
    pub runtime: String,
    /// The command (any name form) or `group:<category>`. `*` never matches: a standing
    /// approval names what it approves.
    pub tool: ToolSelector,
    /// Exact-match constraints on the request params: every key must be present with an equal
    /// JSON value; a `null` constraint means the request must not carry the param (or carry
    /// `null`).
    #[serde(default)]
    pub constraints: BTreeMap<String, Value>,
    /// The rule stops applying when `now_ms >= expires_at_ms`.
    #[serde(default)]
    pub expires_at_ms: Option<u64>,
    /// Whether the rule also applies inside background runs.
    #[serde(default)]
    pub background: bool,
    pub enabled: bool,
    /// A session grant (`accept_for_session`): the rule applies only to requests made in this
    /// phone session while it is active. `None`: a standing approval the user made.
    #[serde(default)]
    pub session: Option<String>,
}

/// Why a standing approval does not apply to a request (or `Applies`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleMatch {
    Applies,
    Disabled,
    Expired,
    OtherRuntime,
    OtherTool,
    ParamsMismatch,
    NotForBackground,
    /// The request is work done on behalf of another principal (a runtime's background job
    /// run by `builtin`): a rule is granted for the runtime it names, and only that runtime's
    /// own work is covered by it.
    OtherPrincipal,
    /// A session grant of another phone session (or the request is in none, or its session
    /// has ended).
    OtherSession,
}

impl StandingApproval {
    /// Whether this rule applies to the request (ignoring risk, which layer 7 checks).
    pub fn check(
        &self,
        command: &Command,
        runtime: &str,
        params: &Value,
        context: &Context,
        phone_session: Option<&str>,
        now_ms: u64,
    ) -> RuleMatch {
        if !self.enabled {
            return RuleMatch::Disabled;
        }
        if self.expires_at_ms.is_some_and(|at| now_ms >= at) {
            return RuleMatch::Expired;
        }
        if self.runtime != runtime {
            return RuleMatch::OtherRuntime;
        }
        if context
            .on_behalf_of()
            .is_some_and(|principal| principal != self.runtime)
        {
            return RuleMatch::OtherPrincipal;
        }
        let tool_matches = match &self.tool {
            ToolSelector::All => false,
            ToolSelector::Group(_) | ToolSelector::Name(_) => self.tool.matches(command),
        };
        if !tool_matches {
            return RuleMatch::OtherTool;
        }
        if self
            .session
            .as_deref()
            .is_some_and(|granted_in| phone_session != Some(granted_in))
        {
            return RuleMatch::OtherSession;
        }
        let params_match =
            self.constraints
                .iter()
                .all(|(key, expected)| match (params.get(key), expected) {
                    (None | Some(Value::Null), Value::Null) => true,
                    (found, expected) => found == Some(expected),
                });
        if !params_match {
            return RuleMatch::ParamsMismatch;
        }
        if context.is_background() && !self.background {
            return RuleMatch::NotForBackground;
        }
        RuleMatch::Applies
    }
}

/// The inputs of one decision. Borrowed: building it allocates nothing.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInput<'a> {
    /// The resolved command (from the registry).
    pub command: &'a Command,
    pub caller: &'a Caller,
    /// The raw `autonomy` the request carried, if any.
    pub request_autonomy: Option<&'a str>,
    /// The phone session's autonomy, when a phone session is known.
    pub session_autonomy: Option<Autonomy>,
    pub tool_policy: &'a ToolPolicy,
    /// Whether the device backend supports this command (ignored for runtime-executor
    /// commands, which the daemon serves itself).
    pub platform_supported: bool,
    pub context: &'a Context,
    pub standing_approvals: &'a [StandingApproval],
    /// The request's phone session, when it is active and belongs to the caller (session
    /// grants apply only inside the session they were given in).
    pub phone_session_id: Option<&'a str>,
    /// The request params as received (only read for standing-approval constraints and, as a
    /// hash, for the inputs digest).
    pub params: &'a Value,
    /// The current time, supplied by the caller (the policy never reads a clock).
    pub now_ms: u64,
    /// The caller's elevation the user granted, if any ([`Elevation`]): while it lasts it
    /// lifts the caller's ceiling.
    pub elevation: Option<&'a Elevation>,
}

impl PolicyInput<'_> {
    /// The effective autonomy of this request (§9), under the caller's ceiling as an active
    /// elevation lifts it.
    pub fn effective_autonomy(&self) -> Autonomy {
        effective_autonomy(
            self.request_autonomy,
            self.session_autonomy,
            self.ceiling(),
            self.caller.is_operator(),
        )
    }

    /// The caller's autonomy ceiling now: `max_autonomy`, lifted by an active elevation.
    pub fn ceiling(&self) -> Autonomy {
        Elevation::ceiling(self.elevation, self.caller.max_autonomy, self.now_ms)
    }

    /// The elevation that lifts this request's effective autonomy above what the configured
    /// ceiling alone gives, if one does.
    pub fn elevation_used(&self) -> Option<&Elevation> {
        let without = effective_autonomy(
            self.request_autonomy,
            self.session_autonomy,
            self.caller.max_autonomy,
            self.caller.is_operator(),
        );
        self.elevation
            .filter(|_| self.effective_autonomy().strictness() < without.strictness())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openphone_protocol::Registry;
    use serde_json::json;

    fn command(name: &str) -> Command {
        Registry::embedded().unwrap().resolve(name).unwrap().clone()
    }

    #[test]
    fn selectors_match_every_name_form_and_groups() {
        let send = command("sms.send");
        for entry in [
            "openphone.messages.send",
            "sms.send",
            "messages_send",
            "group:messages",
            "*",
        ] {
            assert!(
                ToolSelector::parse(entry).unwrap().matches(&send),
                "{entry}"
            );
        }
        for entry in [
            "openphone.messages.search",
            "group:calls",
            "messages",
            "group:message",
        ] {
            assert!(
                !ToolSelector::parse(entry).unwrap().matches(&send),
                "{entry}"
            );
        }
        assert_eq!(
            ToolSelector::parse("group: ui ").unwrap().to_string(),
            "group:ui"
        );
        assert_eq!(
            ToolSelector::parse("  "),
            Err(PolicyError::EmptyToolSelector)
        );
        assert_eq!(
            ToolSelector::parse("group:"),
            Err(PolicyError::EmptyToolGroup)
        );
    }

    #[test]
    fn rule_check_reports_why() {
        let tap = command("tap");
        let mut rule = StandingApproval {
            id: "sa".to_owned(),
            runtime: "hermes".to_owned(),
            tool: ToolSelector::parse("tap").unwrap(),
            constraints: BTreeMap::from([("x".to_owned(), json!(1))]),
            expires_at_ms: Some(100),
            background: false,
            enabled: true,
            session: None,
        };
        let p = json!({"x": 1});
        let i = Context::Interactive;
        let bg = Context::job(1);
        assert_eq!(
            rule.check(&tap, "hermes", &p, &i, None, 99),
            RuleMatch::Applies
        );
        assert_eq!(
            rule.check(&tap, "hermes", &p, &i, None, 100),
            RuleMatch::Expired
        );
        assert_eq!(
            rule.check(&tap, "other", &p, &i, None, 0),
            RuleMatch::OtherRuntime
        );
        assert_eq!(
            rule.check(&command("swipe"), "hermes", &p, &i, None, 0),
            RuleMatch::OtherTool
        );
        assert_eq!(
            rule.check(&tap, "hermes", &json!({"x": 2}), &i, None, 0),
            RuleMatch::ParamsMismatch
        );
        assert_eq!(
            rule.check(&tap, "hermes", &json!([1]), &i, None, 0),
            RuleMatch::ParamsMismatch
        );
        assert_eq!(
            rule.check(&tap, "hermes", &p, &bg, None, 0),
            RuleMatch::NotForBackground
        );
        rule.background = true;
        assert_eq!(
            rule.check(&tap, "hermes", &p, &bg, None, 0),
            RuleMatch::Applies
        );
        rule.tool = ToolSelector::All;
        assert_eq!(
            rule.check(&tap, "hermes", &p, &i, None, 0),
            RuleMatch::OtherTool
        );
        rule.tool = ToolSelector::parse("tap").unwrap();
        rule.session = Some("s1".to_owned());
        assert_eq!(
            rule.check(&tap, "hermes", &p, &i, Some("s1"), 0),
            RuleMatch::Applies
        );
        for other in [None, Some("s2")] {
            assert_eq!(
                rule.check(&tap, "hermes", &p, &i, other, 0),
                RuleMatch::OtherSession
            );
        }
        rule.enabled = false;
        assert_eq!(
            rule.check(&tap, "hermes", &p, &i, None, 0),
            RuleMatch::Disabled
        );
    }

    #[test]
    fn transports_parse_strictly() {
        for t in Transport::ALL {
            assert_eq!(Transport::parse(t.as_str()), Ok(t));
        }
        assert_eq!(Transport::parse(" mcp "), Ok(Transport::Mcp));
        assert!(Transport::parse("MCP").is_err());
        assert!(Transport::parse("http").is_err());
    }
}
