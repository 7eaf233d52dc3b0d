//! Each layer on its own, the deny-wins ordering and the shape of the proof.

use openphone_policy::{
    Caller, DecisionSource, ExposureGrants, Layer, ToolList, ToolPolicy, ToolSelector, Transport,
    VerdictKind,
};
use openphone_protocol::Exposure;

use super::support::*;

use openphone_policy::Autonomy::{ObserveOnly as Observe, TrustedActions as Trusted};

fn kinds(d: &openphone_policy::Decision) -> Vec<VerdictKind> {
    d.proof.iter().map(|v| v.kind).collect()
}

#[test]
fn proof_has_seven_entries_in_layer_order_whatever_the_outcome() {
    for name in [
        "openphone.screen.get",
        "openphone.ui.tap",
        "openphone.messages.send",
    ] {
        for case in [
            Case::new(name),
            Case::new(name).session(Some(Observe)),
            Case::new(name).session(Some(Trusted)).background(),
            Case::new(name).policy(r#"{"global": {"deny": ["*"]}}"#),
        ] {
            let d = case.decide();
            assert_eq!(d.proof.len(), 7);
            let layers: Vec<Layer> = d.proof.iter().map(|v| v.layer).collect();
            assert_eq!(layers, Layer::ALL.to_vec());
            let numbers: Vec<u8> = d.proof.iter().map(|v| v.layer.number()).collect();
            assert_eq!(numbers, vec![1, 2, 3, 4, 5, 6, 7]);
            assert!(d.proof.iter().all(|v| !v.reason.is_empty()));
        }
    }
}

#[test]
fn deny_wins_and_the_first_denying_layer_is_reported() {
    // L1 (disabled) + L2 (deny list) + L3 (unsupported) + L4 (observe_only) all deny.
    let mut case = Case::new("openphone.ui.tap")
        .session(Some(Observe))
        .policy(r#"{"global": {"deny": ["group:ui"]}}"#);
    case.platform_supported = false;
    case.caller.enabled = false;
    let steps = [
        (Layer::RuntimeAuthorisation, NOT_GRANTED),
        (Layer::ToolPolicy, POLICY_DENY),
        (Layer::PlatformSupport, PLATFORM_DENY),
        (Layer::Autonomy, OBSERVE_DENY),
    ];
    for (i, (layer, want)) in steps.iter().enumerate() {
        let d = case.decide();
        assert_eq!(view(&d.requirement), *want, "step {i}");
        assert_eq!(d.source, DecisionSource::Policy { layer: *layer });
        let denying = d
            .proof
            .iter()
            .filter(|v| v.kind == VerdictKind::Deny)
            .count();
        assert_eq!(denying, 4 - i, "every denying layer stays in the proof");
        // lift the reported denial, the next one surfaces
        match i {
            0 => case.caller.enabled = true,
            1 => case.tool_policy = ToolPolicy::default(),
            2 => case.platform_supported = true,
            _ => {}
        }
    }
    case.session = Some(Trusted);
    case.caller.max_autonomy = Trusted;
    assert_eq!(view(&case.decide().requirement), Expect::Allow);
}

#[test]
fn deny_beats_confirm_and_park() {
    // observe_only in the background on the risk floor: L4 Deny, L5 Confirm, L6 Park.
    let d = Case::new("openphone.messages.send")
        .session(Some(Observe))
        .background()
        .decide();
    assert_eq!(view(&d.requirement), OBSERVE_DENY);
    assert_eq!(
        kinds(&d),
        vec![
            VerdictKind::Allow,
            VerdictKind::Allow,
            VerdictKind::Allow,
            VerdictKind::Deny,
            VerdictKind::Confirm,
            VerdictKind::Park,
            VerdictKind::Allow,
        ]
    );
}

#[test]
fn l1_disabled_runtime() {
    let mut case = Case::new("openphone.screen.get");
    case.caller.enabled = false;
    let d = case.decide();
    assert_eq!(view(&d.requirement), NOT_GRANTED);
    assert!(d.proof[0].reason.contains("disabled"));
}

#[test]
fn l1_remote_runtime_false_only_for_builtin() {
    let mut case = Case::new("openphone.ui.tap");
    case.command.remote_runtime = false;
    assert_eq!(view(&case.decide().requirement), TRANSPORT_DENY);
    case.caller = Caller::operator("cli", Transport::Cli, "user");
    assert_eq!(view(&case.decide().requirement), TRANSPORT_DENY);
    case.caller = Caller::builtin("goal-runner");
    assert_eq!(view(&case.decide().requirement), CONFIRM);
}

#[test]
fn l1_mcp_false_never_over_mcp_whatever_the_grants() {
    for name in ["openphone.messages.send", "sms.send", "calls_place"] {
        let mut case = Case::new(name).session(Some(Trusted));
        case.caller.transport = Transport::Mcp;
        let d = case.decide();
        assert_eq!(view(&d.requirement), TRANSPORT_DENY, "{name}");
        case.caller = Caller::operator("cli", Transport::Mcp, "user");
        assert_eq!(view(&case.decide().requirement), TRANSPORT_DENY, "{name}");
        for t in [
            Transport::Websocket,
            Transport::Cli,
            Transport::Openclaw,
            Transport::Internal,
        ] {
            case.caller.transport = t;
            assert_eq!(
                view(&case.decide().requirement),
                CONFIRM_ONE_SHOT,
                "{name} over {t}"
            );
        }
    }
    // an mcp: true command is fine over MCP
    let mut case = Case::new("openphone.ui.tap");
    case.caller.transport = Transport::Mcp;
    assert_eq!(view(&case.decide().requirement), CONFIRM);
}

#[test]
fn l1_exposure_grants() {
    let table: &[(&str, ExposureGrants, Expect)] = &[
        (
            "openphone.screen.get",
            ExposureGrants::REMOTE_DEFAULT,
            Expect::Allow,
        ),
        (
            "openphone.contacts.search",
            ExposureGrants::REMOTE_DEFAULT,
            NOT_GRANTED,
        ),
        (
            "openphone.ui.tap",
            ExposureGrants::REMOTE_DEFAULT,
            NOT_GRANTED,
        ),
        (
            "openphone.contacts.search",
            ExposureGrants::REMOTE_DEFAULT.with(Exposure::PrivateRead),
            Expect::Allow,
        ),
        (
            "openphone.ui.tap",
            ExposureGrants::REMOTE_DEFAULT.with(Exposure::PrivateRead),
            NOT_GRANTED,
        ),
        (
            "openphone.ui.tap",
            ExposureGrants::NONE.with(Exposure::Dangerous),
            CONFIRM,
        ),
        ("openphone.screen.get", ExposureGrants::NONE, NOT_GRANTED),
        ("openphone.ui.tap", ExposureGrants::ALL, CONFIRM),
    ];
    for (name, grants, want) in table {
        let mut case = Case::new(name);
        case.caller.grants = *grants;
        assert_eq!(view(&case.decide().requirement), *want, "{name} {grants:?}");
    }
    assert_eq!(
        Caller::remote("x", Transport::Websocket, "p").grants,
        ExposureGrants::REMOTE_DEFAULT
    );
    assert_eq!(Caller::builtin("p").grants, ExposureGrants::ALL);
    assert_eq!(
        Caller::operator("x", Transport::Cli, "p").grants,
        ExposureGrants::ALL
    );
}

#[test]
fn l2_tool_policy_table() {
    // (policy json, tool, expected) with a trusted session so that mutating Allow is visible
    let table: &[(&str, &str, Expect)] = &[
        (r#"{}"#, "openphone.ui.tap", Expect::Allow),
        (
            r#"{"global": {"deny": ["group:ui"]}}"#,
            "openphone.ui.tap",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"deny": ["group:ui"]}}"#,
            "openphone.input.press_key",
            Expect::Allow,
        ),
        (
            r#"{"global": {"deny": ["group:messages"]}}"#,
            "openphone.messages.search",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"deny": ["group:messages"]}}"#,
            "openphone.calls.search",
            Expect::Allow,
        ),
        // every name form of a command
        (
            r#"{"global": {"deny": ["sms.search"]}}"#,
            "openphone.messages.search",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"deny": ["messages_search"]}}"#,
            "openphone.messages.search",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"deny": ["openphone.messages.search"]}}"#,
            "sms.search",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"deny": ["*"]}}"#,
            "openphone.screen.get",
            POLICY_DENY,
        ),
        // an allow list restricts to its entries
        (
            r#"{"global": {"allow": ["group:ui"]}}"#,
            "openphone.ui.swipe",
            Expect::Allow,
        ),
        (
            r#"{"global": {"allow": ["group:ui"]}}"#,
            "openphone.screen.get",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"allow": []}}"#,
            "openphone.screen.get",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"allow": ["*"]}}"#,
            "openphone.screen.get",
            Expect::Allow,
        ),
        // deny wins over allow, in any combination of scopes
        (
            r#"{"global": {"allow": ["*"], "deny": ["tap"]}}"#,
            "openphone.ui.tap",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"allow": ["openphone.ui.tap"]}, "runtimes": {"hermes": {"deny": ["group:ui"]}}}"#,
            "openphone.ui.tap",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"deny": ["tap"]}, "runtimes": {"hermes": {"allow": ["tap"]}}}"#,
            "openphone.ui.tap",
            POLICY_DENY,
        ),
        // per-runtime lists apply to their runtime only
        (
            r#"{"runtimes": {"other": {"deny": ["*"]}}}"#,
            "openphone.ui.tap",
            Expect::Allow,
        ),
        (
            r#"{"runtimes": {"hermes": {"deny": ["*"]}}}"#,
            "openphone.ui.tap",
            POLICY_DENY,
        ),
        (
            r#"{"runtimes": {"hermes": {"allow": ["group:screen"]}}}"#,
            "openphone.ui.tap",
            POLICY_DENY,
        ),
        // both allow lists must admit
        (
            r#"{"global": {"allow": ["group:ui", "group:screen"]}, "runtimes": {"hermes": {"allow": ["group:screen"]}}}"#,
            "openphone.ui.tap",
            POLICY_DENY,
        ),
        (
            r#"{"global": {"allow": ["group:ui", "group:screen"]}, "runtimes": {"hermes": {"allow": ["group:screen"]}}}"#,
            "openphone.screen.get",
            Expect::Allow,
        ),
    ];
    for (policy, tool, want) in table {
        let d = Case::new(tool)
            .ceiling(Trusted)
            .session(Some(Trusted))
            .policy(policy)
            .decide();
        assert_eq!(view(&d.requirement), *want, "{policy} / {tool}");
        if *want == POLICY_DENY {
            assert_eq!(
                d.source,
                DecisionSource::Policy {
                    layer: Layer::ToolPolicy
                }
            );
        }
    }
}

#[test]
fn l2_tool_selectors_parse_strictly() {
    assert_eq!(ToolSelector::parse(" * ").unwrap(), ToolSelector::All);
    assert_eq!(
        ToolSelector::parse("group:ui").unwrap(),
        ToolSelector::Group("ui".to_owned())
    );
    assert!(ToolSelector::parse("").is_err());
    assert!(ToolSelector::parse("group:").is_err());
    assert!(serde_json::from_str::<ToolPolicy>(r#"{"global": {"deny": [""]}}"#).is_err());
    assert!(serde_json::from_str::<ToolPolicy>(r#"{"global": {"denny": []}}"#).is_err());
    let list = ToolList {
        profile: None,
        allow: Some(vec![ToolSelector::parse("group:ui").unwrap()]),
        deny: vec![ToolSelector::parse("sms.send").unwrap()],
    };
    let json = serde_json::to_value(&list).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"allow": ["group:ui"], "deny": ["sms.send"]})
    );
    assert_eq!(serde_json::from_value::<ToolList>(json).unwrap(), list);
}

#[test]
fn l3_unsupported_is_denied_never_downgraded() {
    for name in [
        "openphone.screen.get",
        "openphone.ui.tap",
        "openphone.messages.send",
    ] {
        for session in [Some(Trusted), Some(Observe), None] {
            for background in [false, true] {
                let mut case = Case::new(name).session(session).rule(rule("r1", name));
                case.platform_supported = false;
                if background {
                    case = case.background();
                    case.approvals[0].background = true;
                }
                let d = case.decide();
                assert_eq!(view(&d.requirement), PLATFORM_DENY, "{name} {session:?}");
                assert_eq!(
                    d.source,
                    DecisionSource::Policy {
                        layer: Layer::PlatformSupport
                    }
                );
            }
        }
    }
}

#[test]
fn l3_runtime_commands_are_served_by_the_daemon() {
    for name in [
        "openphone.memory.search",
        "openphone.jobs.list",
        "openphone.watchers.create",
    ] {
        let mut case = Case::new(name).ceiling(Trusted).session(Some(Trusted));
        case.platform_supported = false;
        assert_eq!(view(&case.decide().requirement), Expect::Allow, "{name}");
    }
}

#[test]
fn l5_risk_floor_confirms_one_shot_in_every_mode_that_does_not_deny() {
    for name in [
        "openphone.messages.send",
        "openphone.calls.place",
        "openphone.calendar.delete",
        "openphone.share.text",
    ] {
        for (session, want) in [
            (Some(Observe), OBSERVE_DENY),
            (
                Some(openphone_policy::Autonomy::AskBeforeAction),
                CONFIRM_ONE_SHOT,
            ),
            (Some(Trusted), CONFIRM_ONE_SHOT),
            (None, CONFIRM_ONE_SHOT),
        ] {
            let d = Case::new(name).session(session).decide();
            assert_eq!(view(&d.requirement), want, "{name} {session:?}");
            assert_eq!(d.proof[4].kind, VerdictKind::Confirm);
        }
    }
}

#[test]
fn l6_background_parks_every_mutation_whatever_the_autonomy() {
    let d = Case::new("openphone.ui.tap")
        .session(Some(Trusted))
        .background()
        .decide();
    assert_eq!(view(&d.requirement), PARK);
    assert_eq!(
        d.requirement.code().map(|c| c.as_str()),
        Some("background.confirmation_required")
    );
    assert_eq!(
        d.source,
        DecisionSource::Policy {
            layer: Layer::BackgroundContext
        }
    );
    let mut goal = Case::new("openphone.calendar.update").session(Some(Trusted));
    goal.context = openphone_policy::Context::goal("goal-1");
    assert_eq!(view(&goal.decide().requirement), PARK);
    // interactive confirmations carry the interactive code
    let d = Case::new("openphone.ui.tap").decide();
    assert_eq!(
        d.requirement.code().map(|c| c.as_str()),
        Some("mutating_tool_requires_confirmation")
    );
    assert_eq!(
        Case::new("openphone.screen.get")
            .decide()
            .requirement
            .code(),
        None
    );
}

#[test]
fn visible_hides_only_what_layers_1_and_2_deny() {
    use openphone_policy::{ToolPolicy, visible};
    let open = ToolPolicy::default();
    let mut mcp = Caller::remote("desk", Transport::Mcp, "token:desk");
    mcp.grants = openphone_policy::ExposureGrants::ALL;
    // L1: mcp: false never shows over MCP, whatever the grants; it does over the WebSocket.
    assert!(!visible(&cmd("openphone.messages.send"), &mcp, &open));
    let mut ws = mcp.clone();
    ws.transport = Transport::Websocket;
    assert!(visible(&cmd("openphone.messages.send"), &ws, &open));
    // L1: exposure grants.
    let reader = Caller::remote("r", Transport::Mcp, "token:r");
    assert!(visible(&cmd("openphone.screen.get"), &reader, &open));
    assert!(!visible(&cmd("openphone.ui.tap"), &reader, &open));
    // L2: tool policy.
    let deny_ui = Case::new("openphone.ui.tap")
        .policy(r#"{"global": {"deny": ["group:ui"]}}"#)
        .tool_policy;
    assert!(!visible(&cmd("openphone.ui.tap"), &mcp, &deny_ui));
    assert!(visible(&cmd("openphone.screen.get"), &mcp, &deny_ui));
    // Autonomy and the risk floor never hide a tool: they decide at call time.
    let mut observer = mcp.clone();
    observer.max_autonomy = openphone_policy::Autonomy::ObserveOnly;
    assert!(visible(&cmd("openphone.calendar.delete"), &observer, &open));
}
