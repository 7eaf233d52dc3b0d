//! The seven layers. Each is a pure function of the [`PolicyInput`]; none looks at another's
//! verdict.

use openphone_protocol::{ErrorCode, Executor, Risk};

use crate::autonomy::Autonomy;
pub use crate::class::{is_mutating, is_risk_floor};
use crate::input::{Admission, PolicyInput, RuleMatch, ToolList};
use crate::verdict::{DecisionSource, Layer, PolicyDetail, Verdict};

impl Layer {
    /// Runs this layer on the input.
    pub fn check(self, input: &PolicyInput<'_>) -> Verdict {
        match self {
            Layer::RuntimeAuthorisation => runtime_authorisation(input),
            Layer::ToolPolicy => tool_policy(input),
            Layer::PlatformSupport => platform_support(input),
            Layer::Autonomy => autonomy(input),
            Layer::RiskFloor => risk_floor(input),
            Layer::BackgroundContext => background_context(input),
            Layer::StandingApprovals => standing_approvals(input),
        }
    }
}

/// L1 — runtime authorisation: enabled; `remote_runtime: false` only for `builtin`;
/// `mcp: false` never over MCP; the exposure class granted.
pub fn runtime_authorisation(input: &PolicyInput<'_>) -> Verdict {
    let layer = Layer::RuntimeAuthorisation;
    let (cmd, caller) = (input.command, input.caller);
    if !caller.enabled {
        return Verdict::deny(
            layer,
            ErrorCode::ToolNotGranted,
            PolicyDetail::RuntimeRegistryDeny,
            format!("runtime `{}` is disabled", caller.runtime),
        );
    }
    if !cmd.remote_runtime && !caller.is_builtin() {
        return Verdict::deny(
            layer,
            ErrorCode::ToolNotGranted,
            PolicyDetail::TransportNotAllowed,
            format!(
                "`{}` is not available to remote runtimes (only `builtin`); caller is `{}`",
                cmd.name, caller.runtime
            ),
        );
    }
    if !cmd.mcp && caller.transport == crate::input::Transport::Mcp {
        return Verdict::deny(
            layer,
            ErrorCode::ToolNotGranted,
            PolicyDetail::TransportNotAllowed,
            format!("`{}` is never callable over MCP", cmd.name),
        );
    }
    if !caller.grants.contains(cmd.default_exposure) {
        return Verdict::deny(
            layer,
            ErrorCode::ToolNotGranted,
            PolicyDetail::RuntimeRegistryDeny,
            format!(
                "runtime `{}` is not granted the `{}` exposure class of `{}`",
                caller.runtime, cmd.default_exposure, cmd.name
            ),
        );
    }
    Verdict::allow(
        layer,
        format!(
            "runtime `{}` over {} is granted `{}`",
            caller.runtime, caller.transport, cmd.default_exposure
        ),
    )
}

/// L2 — tool policy: the global list and the runtime's list (each a profile, an allow list
/// and a deny list, see [`ToolList`]). Any deny entry wins; then each list must admit the
/// command: its profile holds it or an allow entry adds it, or — without a profile — its allow
/// list (if present) names it. A list naming an unknown profile admits nothing.
pub fn tool_policy(input: &PolicyInput<'_>) -> Verdict {
    let layer = Layer::ToolPolicy;
    let cmd = input.command;
    let runtime = input.caller.runtime.as_str();
    let per_runtime = input.tool_policy.for_runtime(runtime);
    // (global?, the list); `scope` and `owner` name a list in a reason (written only when
    // one is given: an allowed call has a fixed reason).
    let lists: [(bool, Option<&ToolList>); 2] = [
        (true, Some(&input.tool_policy.global)),
        (false, per_runtime),
    ];
    let scope = |global: bool| -> String {
        if global {
            "global".to_owned()
        } else {
            format!("runtime `{runtime}`")
        }
    };
    let owner = |global: bool| -> String {
        if global {
            "the global tool policy".to_owned()
        } else {
            format!("runtime `{runtime}`")
        }
    };
    let deny = |reason: String| {
        Verdict::deny(
            layer,
            ErrorCode::ToolNotGranted,
            PolicyDetail::ToolPolicyDeny,
            reason,
        )
    };
    for (global, list) in &lists {
        if let Some(entry) = list.and_then(|l| l.denying_entry(cmd)) {
            return deny(format!(
                "`{}` denied by {} deny entry `{entry}`",
                cmd.name,
                scope(*global)
            ));
        }
    }
    let mut profiles_used: Vec<String> = Vec::new();
    for (global, list) in &lists {
        let Some(list) = list else { continue };
        match list.admission(cmd) {
            Admission::Unfiltered | Admission::Allowed(_) => {}
            Admission::InProfile(name) => {
                profiles_used.push(format!("profile `{name}` of {}", owner(*global)));
            }
            Admission::NotInAllowList => {
                return deny(format!(
                    "`{}` is not in the {} allow list",
                    cmd.name,
                    scope(*global)
                ));
            }
            Admission::NotInProfile(name) => {
                return deny(format!(
                    "`{}` is not in profile `{name}` of {} (add it with allow, or choose \
                     another profile)",
                    cmd.name,
                    owner(*global)
                ));
            }
            Admission::UnknownProfile(name) => {
                let unknown = crate::error::PolicyError::UnknownProfile {
                    name: name.to_owned(),
                    known: crate::profiles::known_profile_names(),
                };
                return deny(format!(
                    "`{}` is refused: {} names an {unknown}",
                    cmd.name,
                    owner(*global)
                ));
            }
        }
    }
    if profiles_used.is_empty() {
        Verdict::allow(layer, "no tool-policy entry refuses the command")
    } else {
        Verdict::allow(
            layer,
            format!(
                "no tool-policy entry refuses the command ({} holds it)",
                profiles_used.join(" and ")
            ),
        )
    }
}

/// L3 — platform support: device commands need the backend's support; an unsupported command is
/// denied, never replaced by another action. Runtime-executor commands are served by the daemon.
pub fn platform_support(input: &PolicyInput<'_>) -> Verdict {
    let layer = Layer::PlatformSupport;
    let cmd = input.command;
    match cmd.executor {
        Executor::Runtime => Verdict::allow(layer, "served by the daemon's runtime services"),
        Executor::Device if input.platform_supported => {
            Verdict::allow(layer, "the device backend supports the command")
        }
        Executor::Device => Verdict::deny(
            layer,
            ErrorCode::ToolNotSupportedByPhonePlatform,
            PolicyDetail::PlatformUnsupported,
            format!(
                "the phone platform does not support `{}`; it is not replaced by another action",
                cmd.name
            ),
        ),
    }
}

/// L4 — autonomy: reads run in every mode; `observe_only` denies mutating commands;
/// `ask_before_action` confirms them; `trusted_actions` runs them (the risk floor still asks).
pub fn autonomy(input: &PolicyInput<'_>) -> Verdict {
    let layer = Layer::Autonomy;
    let mode = input.effective_autonomy();
    if !is_mutating(input.command) {
        return Verdict::allow(layer, read_in_mode(mode));
    }
    match mode {
        Autonomy::ObserveOnly => Verdict::deny(
            layer,
            ErrorCode::ObserveOnlyMutationDenied,
            PolicyDetail::ObserveOnlyBlocksMutation,
            "observe_only: mutating commands are denied",
        ),
        Autonomy::AskBeforeAction => match input.elevation_used() {
            Some(e) => Verdict::confirm(
                layer,
                format!(
                    "ask_before_action under elevation `{}` (until {} ms): mutating commands \
                     ask first",
                    e.grant_id, e.expires_at_ms
                ),
            ),
            None => Verdict::confirm(layer, "ask_before_action: mutating commands ask first"),
        },
        Autonomy::TrustedActions => match input.elevation_used() {
            Some(e) => Verdict::allow(
                layer,
                format!(
                    "trusted_actions under elevation `{}` (until {} ms): low/medium-risk \
                     mutating commands run without asking",
                    e.grant_id, e.expires_at_ms
                ),
            ),
            None => Verdict::allow(
                layer,
                "trusted_actions: low/medium-risk mutating commands run without asking",
            ),
        },
    }
}

/// The autonomy layer's reason for a read in `mode`.
fn read_in_mode(mode: Autonomy) -> &'static str {
    match mode {
        Autonomy::ObserveOnly => "read: runs in every mode (mode observe_only)",
        Autonomy::AskBeforeAction => "read: runs in every mode (mode ask_before_action)",
        Autonomy::TrustedActions => "read: runs in every mode (mode trusted_actions)",
    }
}

/// The risk floor's reason for a command of `risk` under it.
fn below_risk_floor(risk: Risk) -> &'static str {
    match risk {
        Risk::Low => "below the risk floor (risk low)",
        Risk::Medium => "below the risk floor (risk medium)",
        Risk::High => "below the risk floor (risk high)",
    }
}

/// L5 — risk floor: `confirmation: always` (high risk) confirms, one-shot, in every mode.
pub fn risk_floor(input: &PolicyInput<'_>) -> Verdict {
    let layer = Layer::RiskFloor;
    if is_risk_floor(input.command) {
        Verdict::confirm(
            layer,
            format!(
                "risk floor: `{}` (risk {}) always asks, one-shot",
                input.command.name, input.command.risk
            ),
        )
    } else {
        Verdict::allow(layer, below_risk_floor(input.command.risk))
    }
}

/// L6 — background context: inside a job or goal run a mutating command is parked for review,
/// whatever the autonomy (a Deny elsewhere still wins).
pub fn background_context(input: &PolicyInput<'_>) -> Verdict {
    let layer = Layer::BackgroundContext;
    match (input.context.is_background(), is_mutating(input.command)) {
        (false, _) => Verdict::allow(layer, "interactive context"),
        (true, false) => Verdict::allow(layer, "background context: reads run"),
        (true, true) => Verdict::park(
            layer,
            "background context: a state-changing command is parked for review",
        ),
    }
}

/// L7 — standing approvals: names the first enabled, unexpired rule matching runtime, tool and
/// param constraints (and marked `background: true` inside a background run). Such a verdict is
/// still Allow — "no objection" — but carries the rule as its source; [`crate::decide`] uses it
/// to lower a Confirm or Park to Allow. Never for mutating commands on the risk floor; reads have
/// nothing to approve.
pub fn standing_approvals(input: &PolicyInput<'_>) -> Verdict {
    let layer = Layer::StandingApprovals;
    let cmd = input.command;
    if !is_mutating(cmd) {
        return Verdict::allow(layer, "read: nothing to approve");
    }
    if is_risk_floor(cmd) {
        return Verdict::allow(layer, "standing approvals never lower the risk floor");
    }
    let mut skipped: Vec<String> = Vec::new();
    for rule in input.standing_approvals {
        let outcome = rule.check(
            cmd,
            &input.caller.runtime,
            input.params,
            input.context,
            input.phone_session_id,
            input.now_ms,
        );
        match outcome {
            RuleMatch::Applies => {
                let (reason, source) = match &rule.session {
                    Some(session) => (
                        format!(
                            "session grant `{}` (phone session {session}) covers `{}`",
                            rule.id, cmd.name
                        ),
                        DecisionSource::SessionGrant {
                            grant_id: rule.id.clone(),
                        },
                    ),
                    None => (
                        format!("standing approval `{}` covers `{}`", rule.id, cmd.name),
                        DecisionSource::StandingApproval {
                            rule_id: rule.id.clone(),
                        },
                    ),
                };
                return Verdict {
                    layer,
                    kind: crate::verdict::VerdictKind::Allow,
                    reason: reason.into(),
                    code: None,
                    policy_detail: None,
                    source,
                };
            }
            RuleMatch::OtherRuntime | RuleMatch::OtherTool | RuleMatch::OtherSession => {}
            RuleMatch::Disabled => skipped.push(format!("`{}` disabled", rule.id)),
            RuleMatch::Expired => skipped.push(format!("`{}` expired", rule.id)),
            RuleMatch::ParamsMismatch => {
                skipped.push(format!("`{}` param constraints differ", rule.id));
            }
            RuleMatch::NotForBackground => {
                skipped.push(format!("`{}` not marked for background work", rule.id));
            }
            RuleMatch::OtherPrincipal => skipped.push(format!(
                "`{}` is granted for `{}`, and this is runtime `{}`'s job",
                rule.id,
                rule.runtime,
                input.context.on_behalf_of().unwrap_or_default()
            )),
        }
    }
    if skipped.is_empty() {
        Verdict::allow(layer, "no standing approval applies")
    } else {
        Verdict::allow(
            layer,
            format!("no standing approval applies ({})", skipped.join("; ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openphone_protocol::{Confirmation, Registry};

    #[test]
    fn inconsistent_entries_fail_safe() {
        let mut cmd = Registry::embedded()
            .unwrap()
            .resolve("openphone.screen.get")
            .unwrap()
            .clone();
        assert!(!is_mutating(&cmd) && !is_risk_floor(&cmd));
        cmd.mutating = true;
        assert!(is_mutating(&cmd));
        cmd.mutating = false;
        cmd.confirmation = Confirmation::AskBeforeAction;
        assert!(is_mutating(&cmd) && !is_risk_floor(&cmd));
        cmd.risk = Risk::High;
        assert!(is_risk_floor(&cmd));
    }

    /// The fixed reasons read as the formatted ones they replaced (a proof's text is kept).
    #[test]
    fn fixed_reasons_say_what_their_format_said() {
        for mode in [
            Autonomy::ObserveOnly,
            Autonomy::AskBeforeAction,
            Autonomy::TrustedActions,
        ] {
            assert_eq!(
                read_in_mode(mode),
                format!("read: runs in every mode (mode {mode})")
            );
        }
        for risk in [Risk::Low, Risk::Medium, Risk::High] {
            assert_eq!(
                below_risk_floor(risk),
                format!("below the risk floor (risk {risk})")
            );
        }
    }

    #[test]
    fn every_layer_names_itself_in_its_verdict() {
        let registry = Registry::embedded().unwrap();
        let cmd = registry.resolve("tap").unwrap();
        let caller = crate::Caller::builtin("p");
        let policy = crate::ToolPolicy::default();
        let ctx = crate::Context::Interactive;
        let params = serde_json::json!({});
        let input = PolicyInput {
            command: cmd,
            caller: &caller,
            request_autonomy: None,
            session_autonomy: None,
            tool_policy: &policy,
            platform_supported: true,
            context: &ctx,
            standing_approvals: &[],
            phone_session_id: None,
            params: &params,
            now_ms: 0,
            elevation: None,
        };
        for layer in Layer::ALL {
            let v = layer.check(&input);
            assert_eq!(v.layer, layer);
            assert_eq!(v.source, DecisionSource::Policy { layer });
        }
    }
}
