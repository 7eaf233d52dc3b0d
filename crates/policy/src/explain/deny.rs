//! The changes that lift a denial, one function per denying layer: runtime authorisation
//! (L1), tool policy (L2), and the observe-only autonomy (L4). Each names the configuration
//! setting and value to change, and the exact command when there is one.

use openphone_protocol::endpoint::{PolicyChange, PolicyChangeKind};

use super::{change, with_setting};
use crate::autonomy::Autonomy;
use crate::input::{Admission, PolicyInput, ToolList, Transport};
use crate::verdict::Layer;

/// What lifts the denial of `layer`.
pub(super) fn denial_changes(input: &PolicyInput<'_>, layer: Layer) -> Vec<PolicyChange> {
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
