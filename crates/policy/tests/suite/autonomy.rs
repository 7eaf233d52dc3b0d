//! Normalisation, inheritance and the no-escalation rule (`runtime-protocol.md` §9).

use openphone_policy::{Autonomy, Caller, Transport, effective_autonomy};

use super::support::*;

use Autonomy::{AskBeforeAction as Ask, ObserveOnly as Observe, TrustedActions as Trusted};

#[test]
fn normalisation_table() {
    let table: &[(&str, Option<Autonomy>)] = &[
        ("observe_only", Some(Observe)),
        ("read_only", Some(Observe)),
        ("dry_run", Some(Observe)),
        ("  Read_Only\n", Some(Observe)),
        ("DRY_RUN", Some(Observe)),
        ("ask_before_action", Some(Ask)),
        ("Ask_Before_Action ", Some(Ask)),
        ("trusted_actions", Some(Trusted)),
        ("yolo", Some(Trusted)),
        ("YOLO", Some(Trusted)),
        ("", None),
        ("   ", None),
        ("\t\n", None),
        ("full_auto", Some(Ask)),
        ("observe-only", Some(Ask)),
        ("trusted", Some(Ask)),
        ("never", Some(Ask)),
        ("null", Some(Ask)),
    ];
    for (raw, want) in table {
        assert_eq!(Autonomy::normalize(raw), *want, "{raw:?}");
    }
}

#[test]
fn canonical_output_only() {
    for (raw, wire) in [
        ("read_only", "observe_only"),
        ("dry_run", "observe_only"),
        ("yolo", "trusted_actions"),
        ("weird", "ask_before_action"),
    ] {
        assert_eq!(Autonomy::normalize(raw).unwrap().as_str(), wire);
        assert_eq!(
            serde_json::to_value(Autonomy::normalize(raw).unwrap()).unwrap(),
            serde_json::json!(wire)
        );
    }
}

#[test]
fn strictness_order() {
    assert!(Observe.strictness() > Ask.strictness());
    assert!(Ask.strictness() > Trusted.strictness());
    assert_eq!(Trusted.stricter(Observe), Observe);
    assert_eq!(Ask.stricter(Trusted), Ask);
    assert_eq!(Observe.stricter(Observe), Observe);
}

/// (request, session, ceiling, operator, effective mode).
type Row = (
    Option<&'static str>,
    Option<Autonomy>,
    Autonomy,
    bool,
    Autonomy,
);

#[test]
fn effective_autonomy_table() {
    let table: &[Row] = &[
        // inheritance
        (None, None, Ask, false, Ask),
        (None, Some(Trusted), Trusted, false, Trusted),
        (None, Some(Observe), Trusted, false, Observe),
        (Some(""), Some(Trusted), Trusted, false, Trusted),
        (None, None, Trusted, false, Ask),
        (None, None, Observe, false, Observe),
        // a request only makes things stricter than the session
        (Some("trusted_actions"), Some(Ask), Trusted, false, Ask),
        (Some("yolo"), Some(Ask), Trusted, false, Ask),
        (
            Some("trusted_actions"),
            Some(Observe),
            Trusted,
            false,
            Observe,
        ),
        (Some("observe_only"), Some(Trusted), Ask, false, Observe),
        (Some("read_only"), Some(Trusted), Ask, false, Observe),
        (Some("ask_before_action"), Some(Trusted), Ask, false, Ask),
        (
            Some("trusted_actions"),
            Some(Trusted),
            Trusted,
            false,
            Trusted,
        ),
        // …and neither lifts a runtime above its ceiling (issue 11, item 4)
        (None, Some(Trusted), Ask, false, Ask),
        (Some(""), Some(Trusted), Ask, false, Ask),
        (Some("trusted_actions"), Some(Trusted), Ask, false, Ask),
        (None, Some(Trusted), Observe, false, Observe),
        (
            Some("trusted_actions"),
            Some(Trusted),
            Observe,
            false,
            Observe,
        ),
        (None, Some(Ask), Observe, false, Observe),
        // without a session, than the ceiling
        (Some("trusted_actions"), None, Ask, false, Ask),
        (Some("yolo"), None, Ask, false, Ask),
        (Some("trusted_actions"), None, Trusted, false, Trusted),
        (Some("ask_before_action"), None, Observe, false, Observe),
        (Some("dry_run"), None, Trusted, false, Observe),
        (Some("nonsense"), None, Trusted, false, Ask),
        // the operator has no ceiling and may ask for any mode
        (Some("trusted_actions"), None, Ask, true, Trusted),
        (Some("yolo"), Some(Ask), Ask, true, Trusted),
        (
            Some("trusted_actions"),
            Some(Observe),
            Observe,
            true,
            Trusted,
        ),
        (Some("observe_only"), Some(Trusted), Ask, true, Observe),
        (None, Some(Trusted), Ask, true, Trusted),
        (None, None, Observe, true, Ask),
        (Some("nonsense"), Some(Trusted), Ask, true, Ask),
    ];
    for (request, session, ceiling, operator, want) in table {
        assert_eq!(
            effective_autonomy(*request, *session, *ceiling, *operator),
            *want,
            "request={request:?} session={session:?} ceiling={ceiling:?} operator={operator}"
        );
    }
}

#[test]
fn runtime_asking_for_trusted_in_an_ask_session_still_confirms() {
    let d = Case::new("openphone.ui.tap")
        .session(Some(Ask))
        .request("trusted_actions")
        .decide();
    assert_eq!(d.effective_autonomy, Ask);
    assert_eq!(view(&d.requirement), CONFIRM);
}

#[test]
fn runtime_with_ceiling_ask_cannot_reach_trusted_but_a_raised_ceiling_can() {
    let case = Case::new("openphone.ui.tap").session(None).request("yolo");
    assert_eq!(view(&case.decide().requirement), CONFIRM);

    let mut raised = case.clone();
    raised.caller.max_autonomy = Trusted;
    let d = raised.decide();
    assert_eq!(d.effective_autonomy, Trusted);
    assert_eq!(view(&d.requirement), Expect::Allow);
}

#[test]
fn operator_can_ask_for_trusted() {
    let mut case = Case::new("openphone.ui.tap")
        .session(Some(Ask))
        .request("trusted_actions");
    case.caller = Caller::operator("cli", Transport::Cli, "user");
    let d = case.decide();
    assert_eq!(d.effective_autonomy, Trusted);
    assert_eq!(view(&d.requirement), Expect::Allow);
    // …but not past the risk floor
    case.command = cmd("openphone.messages.send");
    assert_eq!(view(&case.decide().requirement), CONFIRM_ONE_SHOT);
}

#[test]
fn no_session_and_no_request_is_ask_before_action() {
    let d = Case::new("openphone.calendar.add").session(None).decide();
    assert_eq!(d.effective_autonomy, Ask);
    assert_eq!(view(&d.requirement), CONFIRM);
}
