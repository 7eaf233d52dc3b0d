//! "Why was this denied?": a [`Decision`] turned into an [`Explanation`] — the decision and
//! its source, every layer's verdict in layer order, and what the user could change to get a
//! different outcome.
//!
//! Pure, like the rest of the crate: the explanation is a function of the same
//! [`PolicyInput`] the decision was made from and of the decision itself. The reasons are the
//! verdicts' own; the changes are data (kind, layer, the configuration setting and value they
//! concern, the exact command when there is one) with a description for a person.
//!
//! Which changes are listed follows the merge rule, so each one can actually change the
//! outcome:
//!
//! - **deny**: one or more changes for every denying layer (all of them must be lifted);
//! - **confirm / park**: the autonomy change (L4) only when nothing else asks — not under the
//!   risk floor, not in a background run; the risk floor (L5) says that nothing lowers it; a
//!   park (L6) names the review; below the floor a standing approval (L7) with its exact
//!   command, and, in a phone session, the session grant an approval can give;
//! - **allow**: nothing.

use openphone_protocol::endpoint::{
    ExplainSource, Explanation, LayerExplanation, PolicyChange, PolicyChangeKind, PolicyLayer,
    PolicyOutcome,
};
use serde_json::{Map, Value};

use crate::autonomy::Autonomy;
use crate::decision::{Decision, Requirement};
use crate::input::{Admission, PolicyInput, ToolList, Transport};
use crate::verdict::{DecisionSource, Layer, VerdictKind};

/// Explains `decision`, which was made from `input`.
pub fn explain(input: &PolicyInput<'_>, decision: &Decision) -> Explanation {
    let (outcome, one_shot) = match &decision.requirement {
        Requirement::Allow => (PolicyOutcome::Allow, false),
        Requirement::Confirm {
            one_shot,
            park_for_review: true,
            ..
        } => (PolicyOutcome::Park, *one_shot),
        Requirement::Confirm {
            one_shot,
            park_for_review: false,
            ..
        } => (PolicyOutcome::Confirm, *one_shot),
        Requirement::Deny { .. } => (PolicyOutcome::Deny, false),
    };
    let layers = decision
        .proof
        .iter()
        .map(|v| LayerExplanation {
            layer: wire_layer(v.layer),
            verdict: wire_outcome(v.kind),
            reason: v.reason.clone(),
            code: v.code,
        })
        .collect();
    Explanation {
        tool: input.command.name.clone(),
        runtime: input.caller.runtime.clone(),
        effective_autonomy: decision.effective_autonomy,
        decision: outcome,
        one_shot,
        source: source(&decision.source),
        layers,
        changes: changes(input, decision),
    }
}

/// The wire form of a layer.
pub fn wire_layer(layer: Layer) -> PolicyLayer {
    match layer {
        Layer::RuntimeAuthorisation => PolicyLayer::RuntimeAuthorisation,
        Layer::ToolPolicy => PolicyLayer::ToolPolicy,
        Layer::PlatformSupport => PolicyLayer::PlatformSupport,
        Layer::Autonomy => PolicyLayer::Autonomy,
        Layer::RiskFloor => PolicyLayer::RiskFloor,
        Layer::BackgroundContext => PolicyLayer::BackgroundContext,
        Layer::StandingApprovals => PolicyLayer::StandingApprovals,
    }
}

/// The wire form of a verdict kind.
pub fn wire_outcome(kind: VerdictKind) -> PolicyOutcome {
    match kind {
        VerdictKind::Allow => PolicyOutcome::Allow,
        VerdictKind::Confirm => PolicyOutcome::Confirm,
        VerdictKind::Park => PolicyOutcome::Park,
        VerdictKind::Deny => PolicyOutcome::Deny,
    }
}

/// The decision source exactly as it serialises (so a new kind passes through unchanged).
fn source(source: &DecisionSource) -> ExplainSource {
    let mut fields = match serde_json::to_value(source) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let kind = match fields.remove("kind") {
        Some(Value::String(kind)) => kind,
        _ => source.as_str().to_owned(),
    };
    ExplainSource { kind, fields }
}

fn change(kind: PolicyChangeKind, layer: Layer, description: String) -> PolicyChange {
    PolicyChange {
        kind,
        layer: wire_layer(layer),
        description,
        setting: None,
        value: None,
        command: None,
    }
}

fn with_setting(mut c: PolicyChange, setting: String, value: impl Into<String>) -> PolicyChange {
    c.setting = Some(setting);
    c.value = Some(value.into());
    c
}

fn changes(input: &PolicyInput<'_>, decision: &Decision) -> Vec<PolicyChange> {
    let objecting = |kinds: &[VerdictKind]| {
        decision
            .proof
            .iter()
            .filter(|v| kinds.contains(&v.kind))
            .map(|v| v.layer)
            .collect::<Vec<_>>()
    };
    match &decision.requirement {
        Requirement::Allow => Vec::new(),
        Requirement::Deny { .. } => objecting(&[VerdictKind::Deny])
            .into_iter()
            .flat_map(|layer| denial_changes(input, layer))
            .collect(),
        Requirement::Confirm {
            one_shot,
            park_for_review,
            ..
        } => {
            let mut out = Vec::new();
            for layer in objecting(&[VerdictKind::Confirm, VerdictKind::Park]) {
                match layer {
                    // Trusting the runtime more helps only when nothing else asks.
                    Layer::Autonomy if !*one_shot && !*park_for_review => {
                        out.push(autonomy_confirm_change(input));
                    }
                    Layer::RiskFloor => out.push(risk_floor_change(input)),
                    Layer::BackgroundContext => out.push(change(
                        PolicyChangeKind::Background,
                        layer,
                        format!(
                            "inside a background run `{}` is parked for your review; it runs \
                             once you approve the review",
                            input.command.name
                        ),
                    )),
                    _ => {}
                }
            }
            if !*one_shot {
                out.extend(standing_approval_changes(input, *park_for_review));
            }
            out
        }
    }
}

/// What lifts the denial of `layer`.
fn denial_changes(input: &PolicyInput<'_>, layer: Layer) -> Vec<PolicyChange> {
    match layer {
        Layer::RuntimeAuthorisation => authorisation_changes(input),
        Layer::ToolPolicy => tool_policy_changes(input),
        Layer::PlatformSupport => vec![change(
            PolicyChangeKind::Unsupported,
            layer,
            format!(
                "this phone's backend does not offer `{}`; no setting changes that",
                input.command.name
            ),
        )],
        Layer::Autonomy => observe_only_changes(input),
        // These layers never deny.
        Layer::RiskFloor | Layer::BackgroundContext | Layer::StandingApprovals => Vec::new(),
    }
}

/// L1: every check of the layer that fails, in the layer's order.
fn authorisation_changes(input: &PolicyInput<'_>) -> Vec<PolicyChange> {
    let layer = Layer::RuntimeAuthorisation;
    let (cmd, caller) = (input.command, input.caller);
    let runtime = caller.runtime.as_str();
    let mut out = Vec::new();
    if !caller.enabled {
        out.push(with_setting(
            change(
                PolicyChangeKind::EnableRuntime,
                layer,
                format!(
                    "runtime `{runtime}` is disabled: set `enabled = true` in its \
                     `[[runtimes]]` entry of the config (read at the next start)"
                ),
            ),
            format!("runtimes.{runtime}.enabled"),
            "true",
        ));
    }
    if !cmd.remote_runtime && !caller.is_builtin() {
        out.push(change(
            PolicyChangeKind::Unsupported,
            layer,
            format!(
                "`{}` is only for the daemon's own runtime (`builtin`); no setting offers it \
                 to `{runtime}`",
                cmd.name
            ),
        ));
    }
    if !cmd.mcp && caller.transport == Transport::Mcp {
        out.push(change(
            PolicyChangeKind::Unsupported,
            layer,
            format!(
                "`{}` is never callable over MCP; call it over the WebSocket endpoint or the CLI",
                cmd.name
            ),
        ));
    }
    if !caller.grants.contains(cmd.default_exposure) {
        let exposure = cmd.default_exposure.as_str();
        out.push(with_setting(
            change(
                PolicyChangeKind::GrantExposure,
                layer,
                format!(
                    "add `{exposure}` to `grants` of runtime `{runtime}` in the config (read at \
                     the next start)"
                ),
            ),
            format!("runtimes.{runtime}.grants"),
            exposure,
        ));
    }
    out
}

/// L2: the deny entries that select the command, else the allow list or profile that leaves it
/// out — in the global list and the runtime's own.
fn tool_policy_changes(input: &PolicyInput<'_>) -> Vec<PolicyChange> {
    let layer = Layer::ToolPolicy;
    let cmd = input.command;
    let runtime = input.caller.runtime.as_str();
    let scopes: [(String, String, Option<&ToolList>); 2] = [
        (
            "tool_policy.global".to_owned(),
            "the global tool policy".to_owned(),
            Some(&input.tool_policy.global),
        ),
        (
            format!("tool_policy.runtimes.{runtime}"),
            format!("the tool policy of runtime `{runtime}`"),
            input.tool_policy.for_runtime(runtime),
        ),
    ];
    let mut out = Vec::new();
    for (key, scope, list) in &scopes {
        if let Some(entry) = list.and_then(|l| l.denying_entry(cmd)) {
            out.push(with_setting(
                change(
                    PolicyChangeKind::ToolPolicy,
                    layer,
                    format!(
                        "remove the deny entry `{entry}` from {scope} (`[{key}] deny`); a deny \
                         entry always wins"
                    ),
                ),
                format!("{key}.deny"),
                entry.to_string(),
            ));
        }
    }
    if !out.is_empty() {
        return out;
    }
    for (key, scope, list) in &scopes {
        let Some(list) = list else { continue };
        let described = match list.admission(cmd) {
            Admission::Unfiltered | Admission::InProfile(_) | Admission::Allowed(_) => continue,
            Admission::NotInAllowList => (
                format!(
                    "`{}` is not in the allow list of {scope}: add it (or `group:{}`) to \
                     `allow` in `[{key}]`",
                    cmd.name, cmd.category
                ),
                format!("{key}.allow"),
                cmd.name.clone(),
            ),
            Admission::NotInProfile(profile) => (
                format!(
                    "{scope} uses profile `{profile}`, which leaves `{}` out: add it to `allow` \
                     in `[{key}]` or choose a wider profile",
                    cmd.name
                ),
                format!("{key}.profile"),
                profile.to_owned(),
            ),
            Admission::UnknownProfile(profile) => (
                format!(
                    "{scope} names profile `{profile}`, which does not exist, so it admits \
                     nothing: correct the name in `[{key}]` (`openphone policy profiles` lists \
                     them)"
                ),
                format!("{key}.profile"),
                profile.to_owned(),
            ),
        };
        let (description, setting, value) = described;
        out.push(with_setting(
            change(PolicyChangeKind::ToolPolicy, layer, description),
            setting,
            value,
        ));
    }
    if out.is_empty() {
        out.push(change(
            PolicyChangeKind::ToolPolicy,
            layer,
            format!(
                "the tool policy leaves `{}` out; admit it in the `[tool_policy]` lists",
                cmd.name
            ),
        ));
    }
    out
}

/// L4 deny: every source of `observe_only` that made the effective mode.
fn observe_only_changes(input: &PolicyInput<'_>) -> Vec<PolicyChange> {
    let layer = Layer::Autonomy;
    let caller = input.caller;
    let requested = input.request_autonomy.and_then(Autonomy::normalize);
    let observe = |mode: Option<Autonomy>| mode == Some(Autonomy::ObserveOnly);
    // The operator takes the request's mode when given, else the session's; a runtime gets
    // the strictest of request, session and ceiling.
    let (from_request, from_session, from_ceiling) = if caller.is_operator() {
        let request = observe(requested);
        (
            request,
            requested.is_none() && observe(input.session_autonomy),
            false,
        )
    } else {
        (
            observe(requested),
            observe(input.session_autonomy),
            caller.max_autonomy == Autonomy::ObserveOnly,
        )
    };
    let mut out = Vec::new();
    if from_request {
        let mut c = change(
            PolicyChangeKind::Autonomy,
            layer,
            "the request asks for `observe_only`: send it with `ask_before_action` (or without \
             an autonomy)"
                .to_owned(),
        );
        c.value = Some(Autonomy::AskBeforeAction.as_str().to_owned());
        out.push(c);
    }
    if from_session {
        let session = input.phone_session_id.unwrap_or("of the request");
        let mut c = change(
            PolicyChangeKind::Autonomy,
            layer,
            format!(
                "phone session {session} runs in `observe_only`: make the request in a session \
                 opened in `ask_before_action` or `trusted_actions`"
            ),
        );
        c.value = Some(Autonomy::AskBeforeAction.as_str().to_owned());
        out.push(c);
    }
    if from_ceiling {
        let runtime = caller.runtime.as_str();
        out.push(with_setting(
            change(
                PolicyChangeKind::Autonomy,
                layer,
                format!(
                    "runtime `{runtime}` has `max_autonomy = \"observe_only\"`: raise it to \
                     `ask_before_action` in the config (read at the next start)"
                ),
            ),
            format!("runtimes.{runtime}.max_autonomy"),
            Autonomy::AskBeforeAction.as_str(),
        ));
    }
    if out.is_empty() {
        let mut c = change(
            PolicyChangeKind::Autonomy,
            layer,
            "the effective autonomy is `observe_only`: use `ask_before_action`".to_owned(),
        );
        c.value = Some(Autonomy::AskBeforeAction.as_str().to_owned());
        out.push(c);
    }
    out
}

/// L4 confirm (nothing else asking): `trusted_actions` when the runtime's ceiling allows it,
/// else the ceiling first.
fn autonomy_confirm_change(input: &PolicyInput<'_>) -> PolicyChange {
    let layer = Layer::Autonomy;
    let caller = input.caller;
    let trusted = Autonomy::TrustedActions.as_str();
    if caller.is_operator() || caller.max_autonomy == Autonomy::TrustedActions {
        let mut c = change(
            PolicyChangeKind::Autonomy,
            layer,
            format!(
                "send the request with autonomy `{trusted}` (or make it in a phone session \
                 opened in `{trusted}`) to run it without asking"
            ),
        );
        c.value = Some(trusted.to_owned());
        c
    } else {
        let runtime = caller.runtime.as_str();
        with_setting(
            change(
                PolicyChangeKind::Autonomy,
                layer,
                format!(
                    "runtime `{runtime}` may not go beyond `{}`: raise its `max_autonomy` to \
                     `{trusted}` in the config (read at the next start), then use `{trusted}` \
                     for the request or its phone session",
                    caller.max_autonomy
                ),
            ),
            format!("runtimes.{runtime}.max_autonomy"),
            trusted,
        )
    }
}

fn risk_floor_change(input: &PolicyInput<'_>) -> PolicyChange {
    change(
        PolicyChangeKind::RiskFloor,
        Layer::RiskFloor,
        format!(
            "`{}` (risk {}) is on the risk floor: it asks every time, one request at a time, in \
             every autonomy mode; nothing lowers it — no setting, standing approval or session \
             grant",
            input.command.name, input.command.risk
        ),
    )
}

/// L7, below the risk floor: a standing approval (for a background run, one marked for
/// background work), and in an interactive phone session the session grant an approval can
/// give.
fn standing_approval_changes(input: &PolicyInput<'_>, park: bool) -> Vec<PolicyChange> {
    let layer = Layer::StandingApprovals;
    let (tool, runtime) = (input.command.name.as_str(), input.caller.runtime.as_str());
    let mut out = Vec::new();
    let mut grant = format!("openphone approvals grant --runtime {runtime} --tool {tool}");
    let description = if park {
        grant.push_str(" --background");
        format!(
            "a standing approval marked for background work lets `{runtime}` run `{tool}` in \
             background runs without a review"
        )
    } else {
        format!("a standing approval lets `{runtime}` run `{tool}` without asking")
    };
    let mut c = change(PolicyChangeKind::StandingApproval, layer, description);
    c.value = Some(tool.to_owned());
    c.command = Some(grant);
    out.push(c);
    if let (false, Some(session)) = (park, input.phone_session_id) {
        out.push(change(
            PolicyChangeKind::StandingApproval,
            layer,
            format!(
                "approve its confirmation with `openphone confirmations approve \
                 <confirmation_id> --for-session`: later `{tool}` requests of `{runtime}` (on the \
                 same target, when the request names one) then run without asking for the rest \
                 of phone session {session}"
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::decide;
    use crate::input::{
        Caller, Context, ExposureGrants, StandingApproval, ToolPolicy, ToolSelector,
    };
    use openphone_protocol::{Command, ErrorCode, Registry};
    use serde_json::json;

    fn command(name: &str) -> &'static Command {
        Registry::embedded().unwrap().resolve(name).unwrap()
    }

    /// One request: everything a decision needs, with defaults a test changes.
    struct Case {
        command: &'static Command,
        caller: Caller,
        request: Option<&'static str>,
        session: Option<Autonomy>,
        phone_session: Option<&'static str>,
        policy: ToolPolicy,
        supported: bool,
        context: Context,
        rules: Vec<StandingApproval>,
    }

    impl Case {
        fn new(tool: &str) -> Case {
            let mut caller = Caller::remote("hermes", Transport::Websocket, "token:hermes");
            caller.grants = ExposureGrants::ALL;
            Case {
                command: command(tool),
                caller,
                request: None,
                session: None,
                phone_session: None,
                policy: ToolPolicy::default(),
                supported: true,
                context: Context::Interactive,
                rules: Vec::new(),
            }
        }

        fn explain(&self) -> Explanation {
            let params = json!({});
            let input = PolicyInput {
                command: self.command,
                caller: &self.caller,
                request_autonomy: self.request,
                session_autonomy: self.session,
                tool_policy: &self.policy,
                platform_supported: self.supported,
                context: &self.context,
                standing_approvals: &self.rules,
                phone_session_id: self.phone_session,
                params: &params,
                now_ms: 1_000,
            };
            explain(&input, &decide(&input))
        }
    }

    fn kinds(e: &Explanation) -> Vec<PolicyChangeKind> {
        e.changes.iter().map(|c| c.kind).collect()
    }

    #[test]
    fn a_read_is_allowed_with_seven_layers_and_nothing_to_change() {
        let e = Case::new("openphone.screen.get").explain();
        assert_eq!(e.decision, PolicyOutcome::Allow);
        assert_eq!(e.tool, "openphone.screen.get");
        assert_eq!(e.runtime, "hermes");
        assert_eq!(
            e.layers.iter().map(|l| l.layer).collect::<Vec<_>>(),
            PolicyLayer::ALL
        );
        assert!(e.changes.is_empty());
        assert_eq!(e.source.kind, "policy");
        assert_eq!(e.source.fields["layer"], "autonomy");
    }

    #[test]
    fn l1_ungranted_names_the_exposure_class_and_the_setting() {
        let mut case = Case::new("openphone.ui.tap");
        case.caller.grants = ExposureGrants::REMOTE_DEFAULT;
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        assert_eq!(e.layers[0].code, Some(ErrorCode::ToolNotGranted));
        assert_eq!(kinds(&e), [PolicyChangeKind::GrantExposure]);
        let c = &e.changes[0];
        assert_eq!(c.layer, PolicyLayer::RuntimeAuthorisation);
        assert_eq!(c.setting.as_deref(), Some("runtimes.hermes.grants"));
        assert_eq!(
            c.value.as_deref(),
            Some(case.command.default_exposure.as_str())
        );
    }

    #[test]
    fn l1_disabled_and_mcp_only_flags() {
        let mut case = Case::new("openphone.ui.tap");
        case.caller.enabled = false;
        let e = case.explain();
        assert_eq!(kinds(&e), [PolicyChangeKind::EnableRuntime]);
        assert_eq!(
            e.changes[0].setting.as_deref(),
            Some("runtimes.hermes.enabled")
        );

        // `mcp: false` (messages.send) over MCP
        let mut case = Case::new("openphone.messages.send");
        case.caller.transport = Transport::Mcp;
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        assert_eq!(kinds(&e), [PolicyChangeKind::Unsupported]);
        assert!(e.changes[0].description.contains("MCP"));

        // `remote_runtime: false` (none ships; the flag on a copy)
        let mut local = command("openphone.ui.tap").clone();
        local.remote_runtime = false;
        let mut case = Case::new("openphone.ui.tap");
        case.command = Box::leak(Box::new(local));
        let e = case.explain();
        assert_eq!(kinds(&e), [PolicyChangeKind::Unsupported]);
        assert!(e.changes[0].description.contains("builtin"));
        case.caller = Caller::builtin("daemon");
        assert_eq!(case.explain().decision, PolicyOutcome::Confirm);
    }

    #[test]
    fn l2_names_the_deny_entry_and_its_scope() {
        let mut case = Case::new("openphone.ui.tap");
        case.policy.runtimes.insert(
            "hermes".to_owned(),
            crate::input::ToolList {
                deny: vec![ToolSelector::parse("group:ui").unwrap()],
                ..Default::default()
            },
        );
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        assert_eq!(kinds(&e), [PolicyChangeKind::ToolPolicy]);
        let c = &e.changes[0];
        assert_eq!(
            c.setting.as_deref(),
            Some("tool_policy.runtimes.hermes.deny")
        );
        assert_eq!(c.value.as_deref(), Some("group:ui"));
        assert!(c.description.contains("group:ui"), "{}", c.description);
    }

    #[test]
    fn l2_names_the_allow_list_or_profile_that_left_it_out() {
        let mut case = Case::new("openphone.ui.tap");
        case.policy.global.allow = Some(vec![ToolSelector::parse("group:screen").unwrap()]);
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        let c = &e.changes[0];
        assert_eq!(c.kind, PolicyChangeKind::ToolPolicy);
        assert_eq!(c.setting.as_deref(), Some("tool_policy.global.allow"));
        assert_eq!(c.value.as_deref(), Some("openphone.ui.tap"));

        // `read` keeps only the reads: a tap is left out, and the profile is named
        case.policy.global.allow = None;
        case.policy.global.profile = Some("read".to_owned());
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        let c = &e.changes[0];
        assert_eq!(c.setting.as_deref(), Some("tool_policy.global.profile"));
        assert_eq!(c.value.as_deref(), Some("read"));
        assert!(c.description.contains("leaves"), "{}", c.description);

        case.policy.global.profile = Some("no_such_profile".to_owned());
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        assert!(e.changes[0].description.contains("does not exist"));
    }

    #[test]
    fn l3_unsupported_has_nothing_to_change() {
        let mut case = Case::new("openphone.ui.tap");
        case.supported = false;
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        assert_eq!(kinds(&e), [PolicyChangeKind::Unsupported]);
        assert_eq!(e.changes[0].layer, PolicyLayer::PlatformSupport);
        assert_eq!(e.changes[0].setting, None);
        assert_eq!(e.changes[0].command, None);
    }

    #[test]
    fn l4_observe_only_names_each_source() {
        let mut case = Case::new("openphone.ui.tap");
        case.caller.max_autonomy = Autonomy::ObserveOnly;
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        assert_eq!(e.effective_autonomy, Autonomy::ObserveOnly);
        assert_eq!(kinds(&e), [PolicyChangeKind::Autonomy]);
        assert_eq!(
            e.changes[0].setting.as_deref(),
            Some("runtimes.hermes.max_autonomy")
        );

        let mut case = Case::new("openphone.ui.tap");
        case.request = Some("read_only");
        case.session = Some(Autonomy::ObserveOnly);
        case.phone_session = Some("phone-sess-1");
        let e = case.explain();
        assert_eq!(e.changes.len(), 2, "{e:?}");
        assert!(e.changes.iter().all(|c| c.setting.is_none()));
        assert!(e.changes[1].description.contains("phone-sess-1"));
    }

    #[test]
    fn l4_confirm_suggests_trusted_actions_or_the_ceiling_then_a_standing_approval() {
        let mut case = Case::new("openphone.ui.tap");
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Confirm);
        assert!(!e.one_shot);
        assert_eq!(
            kinds(&e),
            [
                PolicyChangeKind::Autonomy,
                PolicyChangeKind::StandingApproval
            ]
        );
        assert_eq!(
            e.changes[0].setting.as_deref(),
            Some("runtimes.hermes.max_autonomy")
        );
        assert_eq!(
            e.changes[1].command.as_deref(),
            Some("openphone approvals grant --runtime hermes --tool openphone.ui.tap")
        );

        case.caller.max_autonomy = Autonomy::TrustedActions;
        case.phone_session = Some("phone-sess-9");
        let e = case.explain();
        assert_eq!(e.changes[0].setting, None);
        assert_eq!(e.changes[0].value.as_deref(), Some("trusted_actions"));
        // the session grant an approval can give, as a description only
        assert_eq!(e.changes.len(), 3);
        assert!(e.changes[2].description.contains("--for-session"));
        assert!(e.changes[2].description.contains("phone-sess-9"));
        assert_eq!(e.changes[2].command, None);
    }

    #[test]
    fn l5_risk_floor_is_one_shot_and_nothing_lowers_it() {
        let mut case = Case::new("openphone.messages.send");
        case.caller.max_autonomy = Autonomy::TrustedActions;
        case.request = Some("trusted_actions");
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Confirm);
        assert!(e.one_shot);
        assert_eq!(kinds(&e), [PolicyChangeKind::RiskFloor]);
        assert_eq!(e.changes[0].layer, PolicyLayer::RiskFloor);
        // under ask_before_action too: no autonomy or standing-approval advice
        let e = Case::new("openphone.messages.send").explain();
        assert_eq!(kinds(&e), [PolicyChangeKind::RiskFloor]);
    }

    #[test]
    fn l6_background_parks_and_names_the_review_and_a_background_rule() {
        let mut case = Case::new("openphone.ui.tap");
        case.context = Context::job(3);
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Park);
        assert_eq!(
            kinds(&e),
            [
                PolicyChangeKind::Background,
                PolicyChangeKind::StandingApproval
            ]
        );
        assert!(
            e.changes[1]
                .command
                .as_deref()
                .is_some_and(|c| c.ends_with("--background"))
        );
    }

    #[test]
    fn l7_a_standing_approval_allows_and_is_the_source() {
        let mut case = Case::new("openphone.ui.tap");
        case.rules.push(StandingApproval {
            id: "sa-1".to_owned(),
            runtime: "hermes".to_owned(),
            tool: ToolSelector::parse("openphone.ui.tap").unwrap(),
            constraints: Default::default(),
            expires_at_ms: None,
            background: false,
            enabled: true,
            session: None,
        });
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Allow);
        assert_eq!(e.source.kind, "standing_approval");
        assert_eq!(e.source.fields["rule_id"], "sa-1");
        assert!(e.changes.is_empty());
    }

    #[test]
    fn the_operator_has_no_ceiling_to_raise() {
        let mut case = Case::new("openphone.ui.tap");
        case.caller = Caller::operator("operator", Transport::Websocket, "op");
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Confirm);
        assert_eq!(e.changes[0].kind, PolicyChangeKind::Autonomy);
        assert_eq!(e.changes[0].setting, None);
        case.request = Some("observe_only");
        let e = case.explain();
        assert_eq!(e.decision, PolicyOutcome::Deny);
        assert_eq!(e.changes.len(), 1);
        assert_eq!(e.changes[0].value.as_deref(), Some("ask_before_action"));
    }

    #[test]
    fn the_wire_form_is_snake_case() {
        let e = Case::new("openphone.ui.tap").explain();
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["decision"], "confirm");
        assert_eq!(v["effective_autonomy"], "ask_before_action");
        assert_eq!(v["source"], json!({"kind": "policy", "layer": "autonomy"}));
        assert_eq!(v["layers"][3]["verdict"], "confirm");
        assert!(v["layers"][3].get("code").is_none());
        assert_eq!(v["changes"][1]["kind"], "standing_approval");
    }
}
