//! Every manifest command × caller profile × transport × platform flag × autonomy spelling ×
//! context, checked against plain tables written from the specification (not from the code).

use std::collections::BTreeSet;

use openphone_policy::{
    Autonomy, Caller, Context, ExposureGrants, Layer, PolicyInput, ToolPolicy, Transport, decide,
};
use openphone_protocol::Command;
use serde_json::json;

use super::support::*;

/// Expected requirement for a caller that passed L1–L3, by
/// (risk, confirmation, effective mode, context) — `approvals.md` §5.2 and
/// `runtime-protocol.md` §8.2/§9.
const ORACLE: &[(&str, &str, &str, &str, Expect)] = &[
    // reads: Allow in every mode and context
    ("low", "none", "observe_only", "interactive", Expect::Allow),
    (
        "low",
        "none",
        "ask_before_action",
        "interactive",
        Expect::Allow,
    ),
    (
        "low",
        "none",
        "trusted_actions",
        "interactive",
        Expect::Allow,
    ),
    ("low", "none", "observe_only", "background", Expect::Allow),
    (
        "low",
        "none",
        "ask_before_action",
        "background",
        Expect::Allow,
    ),
    (
        "low",
        "none",
        "trusted_actions",
        "background",
        Expect::Allow,
    ),
    (
        "medium",
        "none",
        "observe_only",
        "interactive",
        Expect::Allow,
    ),
    (
        "medium",
        "none",
        "ask_before_action",
        "interactive",
        Expect::Allow,
    ),
    (
        "medium",
        "none",
        "trusted_actions",
        "interactive",
        Expect::Allow,
    ),
    (
        "medium",
        "none",
        "observe_only",
        "background",
        Expect::Allow,
    ),
    (
        "medium",
        "none",
        "ask_before_action",
        "background",
        Expect::Allow,
    ),
    (
        "medium",
        "none",
        "trusted_actions",
        "background",
        Expect::Allow,
    ),
    // low-risk mutations
    (
        "low",
        "ask_before_action",
        "observe_only",
        "interactive",
        OBSERVE_DENY,
    ),
    (
        "low",
        "ask_before_action",
        "ask_before_action",
        "interactive",
        CONFIRM,
    ),
    (
        "low",
        "ask_before_action",
        "trusted_actions",
        "interactive",
        Expect::Allow,
    ),
    (
        "low",
        "ask_before_action",
        "observe_only",
        "background",
        OBSERVE_DENY,
    ),
    (
        "low",
        "ask_before_action",
        "ask_before_action",
        "background",
        PARK,
    ),
    (
        "low",
        "ask_before_action",
        "trusted_actions",
        "background",
        PARK,
    ),
    // medium-risk mutations
    (
        "medium",
        "ask_before_action",
        "observe_only",
        "interactive",
        OBSERVE_DENY,
    ),
    (
        "medium",
        "ask_before_action",
        "ask_before_action",
        "interactive",
        CONFIRM,
    ),
    (
        "medium",
        "ask_before_action",
        "trusted_actions",
        "interactive",
        Expect::Allow,
    ),
    (
        "medium",
        "ask_before_action",
        "observe_only",
        "background",
        OBSERVE_DENY,
    ),
    (
        "medium",
        "ask_before_action",
        "ask_before_action",
        "background",
        PARK,
    ),
    (
        "medium",
        "ask_before_action",
        "trusted_actions",
        "background",
        PARK,
    ),
    // the risk floor
    (
        "high",
        "always",
        "observe_only",
        "interactive",
        OBSERVE_DENY,
    ),
    (
        "high",
        "always",
        "ask_before_action",
        "interactive",
        CONFIRM_ONE_SHOT,
    ),
    (
        "high",
        "always",
        "trusted_actions",
        "interactive",
        CONFIRM_ONE_SHOT,
    ),
    ("high", "always", "observe_only", "background", OBSERVE_DENY),
    (
        "high",
        "always",
        "ask_before_action",
        "background",
        PARK_ONE_SHOT,
    ),
    (
        "high",
        "always",
        "trusted_actions",
        "background",
        PARK_ONE_SHOT,
    ),
];

/// (risk, confirmation, default_exposure, mutating) combinations the manifest holds today. A new
/// combination fails this suite until the oracle has been reviewed for it.
const MANIFEST_COMBOS: &[(&str, &str, &str, bool)] = &[
    ("low", "none", "safe_read", false),
    ("low", "none", "private_read", false),
    ("medium", "none", "private_read", false),
    ("low", "ask_before_action", "dangerous", true),
    ("medium", "ask_before_action", "dangerous", true),
    ("high", "always", "dangerous", true),
];

/// Caller profiles and the exposure classes each holds (`runtime-protocol.md` §4.1).
#[derive(Debug, Clone, Copy)]
enum Profile {
    RemoteDefault,
    RemotePrivate,
    RemoteAll,
    Builtin,
    Operator,
}

const GRANTS: &[(&str, &str, bool)] = &[
    ("remote_default", "safe_read", true),
    ("remote_default", "private_read", false),
    ("remote_default", "dangerous", false),
    ("remote_private", "safe_read", true),
    ("remote_private", "private_read", true),
    ("remote_private", "dangerous", false),
    ("remote_all", "safe_read", true),
    ("remote_all", "private_read", true),
    ("remote_all", "dangerous", true),
    ("builtin", "safe_read", true),
    ("builtin", "private_read", true),
    ("builtin", "dangerous", true),
    ("operator", "safe_read", true),
    ("operator", "private_read", true),
    ("operator", "dangerous", true),
];

impl Profile {
    const ALL: [Profile; 5] = [
        Profile::RemoteDefault,
        Profile::RemotePrivate,
        Profile::RemoteAll,
        Profile::Builtin,
        Profile::Operator,
    ];

    fn name(self) -> &'static str {
        match self {
            Profile::RemoteDefault => "remote_default",
            Profile::RemotePrivate => "remote_private",
            Profile::RemoteAll => "remote_all",
            Profile::Builtin => "builtin",
            Profile::Operator => "operator",
        }
    }

    fn caller(self, transport: Transport) -> Caller {
        let mut c = match self {
            Profile::RemoteDefault => Caller::remote("hermes", transport, "t"),
            Profile::RemotePrivate => {
                let mut c = Caller::remote("hermes", transport, "t");
                c.grants =
                    ExposureGrants::REMOTE_DEFAULT.with(openphone_protocol::Exposure::PrivateRead);
                c
            }
            Profile::RemoteAll => {
                let mut c = Caller::remote("hermes", transport, "t");
                c.grants = ExposureGrants::ALL;
                c
            }
            Profile::Builtin => Caller::builtin("goal-runner"),
            Profile::Operator => Caller::operator("cli", transport, "user"),
        };
        c.transport = transport;
        c
    }

    fn is_operator(self) -> bool {
        matches!(self, Profile::Operator)
    }
}

/// (request autonomy, session autonomy, expected mode for a runtime with the default ceiling
/// `ask_before_action`, expected mode for the operator).
const AUTONOMY_CASES: &[(Option<&str>, Option<&str>, &str, &str)] = &[
    (
        Some("observe_only"),
        Some("trusted_actions"),
        "observe_only",
        "observe_only",
    ),
    (Some("read_only"), None, "observe_only", "observe_only"),
    (
        Some("dry_run"),
        Some("ask_before_action"),
        "observe_only",
        "observe_only",
    ),
    (
        Some("ask_before_action"),
        Some("trusted_actions"),
        "ask_before_action",
        "ask_before_action",
    ),
    // the default ceiling caps a runtime's trusted session (issue 11, item 4)
    (
        Some("trusted_actions"),
        Some("trusted_actions"),
        "ask_before_action",
        "trusted_actions",
    ),
    (
        Some("yolo"),
        Some("trusted_actions"),
        "ask_before_action",
        "trusted_actions",
    ),
    (
        Some(" YOLO "),
        Some("trusted_actions"),
        "ask_before_action",
        "trusted_actions",
    ),
    // no escalation: the session (or, without one, the ceiling) caps a runtime's request
    (
        Some("yolo"),
        Some("ask_before_action"),
        "ask_before_action",
        "trusted_actions",
    ),
    (
        Some("trusted_actions"),
        Some("observe_only"),
        "observe_only",
        "trusted_actions",
    ),
    (
        Some("trusted_actions"),
        None,
        "ask_before_action",
        "trusted_actions",
    ),
    // unknown values fail safe
    (
        Some("full_auto"),
        Some("trusted_actions"),
        "ask_before_action",
        "ask_before_action",
    ),
    // inheritance: request → session → ask_before_action
    (None, Some("observe_only"), "observe_only", "observe_only"),
    (
        None,
        Some("trusted_actions"),
        "ask_before_action",
        "trusted_actions",
    ),
    (
        Some(""),
        Some("trusted_actions"),
        "ask_before_action",
        "trusted_actions",
    ),
    (
        Some("   "),
        Some("observe_only"),
        "observe_only",
        "observe_only",
    ),
    (None, None, "ask_before_action", "ask_before_action"),
    (Some(""), None, "ask_before_action", "ask_before_action"),
];

fn canonical(mode: &str) -> Autonomy {
    match mode {
        "observe_only" => Autonomy::ObserveOnly,
        "ask_before_action" => Autonomy::AskBeforeAction,
        "trusted_actions" => Autonomy::TrustedActions,
        other => panic!("not a canonical mode in the table: {other}"),
    }
}

fn oracle(risk: &str, confirmation: &str, mode: &str, context: &str) -> (usize, Expect) {
    ORACLE
        .iter()
        .enumerate()
        .find(|(_, (r, c, m, x, _))| {
            *r == risk && *c == confirmation && *m == mode && *x == context
        })
        .map(|(i, row)| (i, row.4))
        .unwrap_or_else(|| panic!("oracle has no row for {risk}/{confirmation}/{mode}/{context}"))
}

fn granted(profile: Profile, exposure: &str) -> bool {
    GRANTS
        .iter()
        .find(|(p, e, _)| *p == profile.name() && *e == exposure)
        .map(|row| row.2)
        .unwrap_or_else(|| panic!("grant table has no row for {}/{exposure}", profile.name()))
}

/// The expected requirement and, for a denial, the layer that must be reported.
fn expected(
    command: &Command,
    profile: Profile,
    transport: Transport,
    platform: bool,
    mode: &str,
    context: &str,
    used: &mut BTreeSet<usize>,
) -> (Expect, Option<Layer>) {
    if !command.mcp && transport == Transport::Mcp {
        return (TRANSPORT_DENY, Some(Layer::RuntimeAuthorisation));
    }
    if !granted(profile, command.default_exposure.as_str()) {
        return (NOT_GRANTED, Some(Layer::RuntimeAuthorisation));
    }
    if command.executor.as_str() == "device" && !platform {
        return (PLATFORM_DENY, Some(Layer::PlatformSupport));
    }
    let (row, expect) = oracle(
        command.risk.as_str(),
        command.confirmation.as_str(),
        mode,
        context,
    );
    used.insert(row);
    let layer = match expect {
        Expect::Deny(..) => Some(Layer::Autonomy),
        Expect::Allow | Expect::Confirm { .. } => None,
    };
    (expect, layer)
}

#[test]
fn manifest_combinations_are_the_reviewed_ones() {
    let found: BTreeSet<(String, String, String, bool)> = registry()
        .commands()
        .map(|c| {
            (
                c.risk.as_str().to_owned(),
                c.confirmation.as_str().to_owned(),
                c.default_exposure.as_str().to_owned(),
                c.mutating,
            )
        })
        .collect();
    let reviewed: BTreeSet<(String, String, String, bool)> = MANIFEST_COMBOS
        .iter()
        .map(|(r, c, e, m)| ((*r).to_owned(), (*c).to_owned(), (*e).to_owned(), *m))
        .collect();
    pretty_assertions::assert_eq!(found, reviewed);
}

#[test]
fn every_command_profile_transport_platform_autonomy_and_context() {
    let mut used = BTreeSet::new();
    let mut checked = 0usize;
    let policy = ToolPolicy::default();
    let params = json!({"reason": "matrix"});
    let contexts = [
        ("interactive", Context::Interactive),
        ("background", Context::job(7)),
    ];
    for command in registry().commands() {
        for profile in Profile::ALL {
            for transport in [Transport::Websocket, Transport::Mcp] {
                let caller = profile.caller(transport);
                for platform in [true, false] {
                    for (request, session, mode_runtime, mode_operator) in AUTONOMY_CASES {
                        let mode = if profile.is_operator() {
                            mode_operator
                        } else {
                            mode_runtime
                        };
                        for (context_name, context) in &contexts {
                            let input = PolicyInput {
                                command,
                                caller: &caller,
                                request_autonomy: *request,
                                session_autonomy: session.map(canonical),
                                tool_policy: &policy,
                                platform_supported: platform,
                                context,
                                standing_approvals: &[],
                                phone_session_id: None,
                                params: &params,
                                now_ms: NOW,
                                elevation: None,
                            };
                            let decision = decide(&input);
                            let (expect, deny_layer) = expected(
                                command,
                                profile,
                                transport,
                                platform,
                                mode,
                                context_name,
                                &mut used,
                            );
                            let what = format!(
                                "{} as {} over {transport} platform={platform} request={request:?} session={session:?} {context_name}",
                                command.name,
                                profile.name()
                            );
                            assert_eq!(view(&decision.requirement), expect, "{what}");
                            assert_eq!(decision.effective_autonomy, canonical(mode), "{what}");
                            let layers: Vec<Layer> =
                                decision.proof.iter().map(|v| v.layer).collect();
                            assert_eq!(layers, Layer::ALL.to_vec(), "{what}");
                            if let Some(layer) = deny_layer {
                                assert_eq!(
                                    decision.source,
                                    openphone_policy::DecisionSource::Policy { layer },
                                    "{what}"
                                );
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(
        used.len(),
        ORACLE.len(),
        "every oracle row is exercised; unused rows: {:?}",
        (0..ORACLE.len())
            .filter(|i| !used.contains(i))
            .collect::<Vec<_>>()
    );
    assert!(checked >= 25_000, "checked {checked}");
}

#[test]
fn reads_are_allowed_in_every_mode_and_context_once_layers_1_to_3_pass() {
    for command in registry()
        .commands()
        .filter(|c| c.confirmation.as_str() == "none")
    {
        for mode in [
            "observe_only",
            "ask_before_action",
            "trusted_actions",
            "yolo",
            "dry_run",
        ] {
            for background in [false, true] {
                let mut case = Case::new(&command.name).request(mode).session(None);
                case.caller.max_autonomy = Autonomy::TrustedActions;
                if background {
                    case = case.background();
                }
                assert_eq!(
                    view(&case.decide().requirement),
                    Expect::Allow,
                    "{}",
                    command.name
                );
            }
        }
    }
}

#[test]
fn the_three_headline_behaviours_from_the_issue() {
    // observe_only: every mutating command denied, reads run
    for command in registry().commands() {
        let d = Case::new(&command.name)
            .session(Some(Autonomy::ObserveOnly))
            .decide();
        let want = if command.mutating {
            OBSERVE_DENY
        } else {
            Expect::Allow
        };
        assert_eq!(view(&d.requirement), want, "{}", command.name);
    }
    // trusted_actions (a session the user opened so, for a runtime whose ceiling the user
    // raised): medium-risk mutations run; the four risk-floor commands still confirm
    for name in [
        "openphone.ui.tap",
        "openphone.calendar.add",
        "openphone.memory.save",
    ] {
        let d = Case::new(name)
            .ceiling(Autonomy::TrustedActions)
            .session(Some(Autonomy::TrustedActions))
            .decide();
        assert_eq!(view(&d.requirement), Expect::Allow, "{name}");
    }
    for name in [
        "openphone.messages.send",
        "openphone.calls.place",
        "openphone.calendar.delete",
        "openphone.share.text",
    ] {
        let d = Case::new(name)
            .ceiling(Autonomy::TrustedActions)
            .session(Some(Autonomy::TrustedActions))
            .decide();
        assert_eq!(view(&d.requirement), CONFIRM_ONE_SHOT, "{name}");
    }
}
