//! Layer 7: standing approvals lower Confirm to Allow below the risk floor, only when they match.

use openphone_policy::{DecisionSource, Layer, Requirement, StandingApproval};
use serde_json::json;

use super::support::*;

use openphone_policy::Autonomy::{ObserveOnly as Observe, TrustedActions as Trusted};

fn constrained(id: &str, tool: &str, key: &str, value: serde_json::Value) -> StandingApproval {
    let mut r = rule(id, tool);
    r.constraints.insert(key.to_owned(), value);
    r
}

fn lowered_by(id: &str) -> DecisionSource {
    DecisionSource::StandingApproval {
        rule_id: id.to_owned(),
    }
}

#[test]
fn a_matching_rule_turns_confirm_into_allow_and_is_recorded() {
    let d = Case::new("openphone.calendar.add")
        .rule(rule("sa-1", "openphone.calendar.add"))
        .decide();
    assert_eq!(d.requirement, Requirement::Allow);
    assert_eq!(d.source, lowered_by("sa-1"));
    assert_eq!(d.source.as_str(), "standing_approval");
    let l7 = d.verdict(Layer::StandingApprovals).unwrap();
    assert_eq!(l7.source, lowered_by("sa-1"));
    assert!(l7.reason.contains("sa-1"));
    // the autonomy layer's Confirm is still in the proof
    assert_eq!(
        d.verdict(Layer::Autonomy).unwrap().kind,
        openphone_policy::VerdictKind::Confirm
    );
}

/// (rule, tool, params, now offset, expected) — everything that must *not* match stays Confirm.
#[test]
fn match_and_mismatch_table() {
    let p = json!({"reason": "r", "package": "com.example.mail", "count": 1});
    let mut other_runtime = rule("sa", "openphone.app.open");
    other_runtime.runtime = "openclaw".to_owned();
    let mut disabled = rule("sa", "openphone.app.open");
    disabled.enabled = false;
    let mut expires_now = rule("sa", "openphone.app.open");
    expires_now.expires_at_ms = Some(NOW);
    let mut expired = rule("sa", "openphone.app.open");
    expired.expires_at_ms = Some(NOW - 1);
    let mut valid_until_later = rule("sa", "openphone.app.open");
    valid_until_later.expires_at_ms = Some(NOW + 1);
    let table: Vec<(&str, StandingApproval, Expect)> = vec![
        (
            "exact name",
            rule("sa", "openphone.app.open"),
            Expect::Allow,
        ),
        ("model-tool name", rule("sa", "open_app"), Expect::Allow),
        ("group", rule("sa", "group:apps"), Expect::Allow),
        ("other group", rule("sa", "group:ui"), CONFIRM),
        ("other tool", rule("sa", "openphone.url.open"), CONFIRM),
        ("star never matches", rule("sa", "*"), CONFIRM),
        ("other runtime", other_runtime, CONFIRM),
        ("disabled", disabled, CONFIRM),
        ("expires exactly now", expires_now, CONFIRM),
        ("expired", expired, CONFIRM),
        ("valid until later", valid_until_later, Expect::Allow),
        (
            "param equal",
            constrained("sa", "open_app", "package", json!("com.example.mail")),
            Expect::Allow,
        ),
        (
            "param differs",
            constrained("sa", "open_app", "package", json!("com.example.bank")),
            CONFIRM,
        ),
        (
            "param missing",
            constrained("sa", "open_app", "activity", json!("Main")),
            CONFIRM,
        ),
        (
            "param type differs",
            constrained("sa", "open_app", "count", json!("1")),
            CONFIRM,
        ),
        (
            "param number equal",
            constrained("sa", "open_app", "count", json!(1)),
            Expect::Allow,
        ),
    ];
    for (what, r, want) in table {
        let d = Case::new("openphone.app.open")
            .params(p.clone())
            .rule(r)
            .decide();
        assert_eq!(view(&d.requirement), want, "{what}");
        let source_is_rule = matches!(d.source, DecisionSource::StandingApproval { .. });
        assert_eq!(source_is_rule, want == Expect::Allow, "{what}");
    }
}

#[test]
fn several_constraints_must_all_match() {
    let mut r = constrained("sa", "type_text", "text", json!("hello"));
    r.constraints.insert("submit".to_owned(), json!(false));
    let case = Case::new("openphone.ui.type_text").rule(r);
    let ok = case
        .clone()
        .params(json!({"reason": "r", "text": "hello", "submit": false}));
    assert_eq!(view(&ok.decide().requirement), Expect::Allow);
    let bad = case.params(json!({"reason": "r", "text": "hello", "submit": true}));
    assert_eq!(view(&bad.decide().requirement), CONFIRM);
}

#[test]
fn never_for_the_risk_floor() {
    for name in [
        "openphone.messages.send",
        "openphone.calls.place",
        "openphone.calendar.delete",
        "openphone.share.text",
    ] {
        let mut background_rule = rule("sa-bg", name);
        background_rule.background = true;
        let interactive = Case::new(name)
            .rule(rule("sa", name))
            .rule(rule("sa-g", "*"));
        let d = interactive.decide();
        assert_eq!(view(&d.requirement), CONFIRM_ONE_SHOT, "{name}");
        assert!(matches!(d.source, DecisionSource::Policy { .. }));
        let d = Case::new(name)
            .session(Some(Trusted))
            .background()
            .rule(background_rule)
            .decide();
        assert_eq!(view(&d.requirement), PARK_ONE_SHOT, "{name}");
    }
}

#[test]
fn background_needs_a_rule_marked_for_background_work() {
    let plain = Case::new("openphone.ui.tap")
        .background()
        .rule(rule("sa", "tap"));
    let d = plain.decide();
    assert_eq!(view(&d.requirement), PARK);
    assert!(d.proof[6].reason.contains("not marked for background"));

    let mut marked = rule("sa-bg", "tap");
    marked.background = true;
    let d = Case::new("openphone.ui.tap")
        .background()
        .rule(marked.clone())
        .decide();
    assert_eq!(view(&d.requirement), Expect::Allow);
    assert_eq!(d.source, lowered_by("sa-bg"));

    // a background rule also serves interactive requests
    let d = Case::new("openphone.ui.tap").rule(marked.clone()).decide();
    assert_eq!(view(&d.requirement), Expect::Allow);

    // observe_only still denies in the background, rule or not
    let d = Case::new("openphone.ui.tap")
        .session(Some(Observe))
        .background()
        .rule(marked)
        .decide();
    assert_eq!(view(&d.requirement), OBSERVE_DENY);
}

#[test]
fn a_deny_is_never_lowered() {
    let mut case = Case::new("openphone.ui.tap")
        .policy(r#"{"global": {"deny": ["tap"]}}"#)
        .rule(rule("sa", "tap"));
    assert_eq!(view(&case.decide().requirement), POLICY_DENY);
    case.tool_policy = Default::default();
    case.caller.grants = openphone_policy::ExposureGrants::REMOTE_DEFAULT;
    assert_eq!(view(&case.decide().requirement), NOT_GRANTED);
}

#[test]
fn the_first_applicable_rule_in_order_is_recorded() {
    let mut disabled = rule("sa-0", "tap");
    disabled.enabled = false;
    let d = Case::new("openphone.ui.tap")
        .rule(disabled)
        .rule(rule("sa-1", "openphone.ui.tap"))
        .rule(rule("sa-2", "group:ui"))
        .decide();
    assert_eq!(d.source, lowered_by("sa-1"));
}

#[test]
fn nothing_to_lower_when_autonomy_already_allows() {
    let d = Case::new("openphone.ui.tap")
        .ceiling(Trusted)
        .session(Some(Trusted))
        .rule(rule("sa", "tap"))
        .decide();
    assert_eq!(d.requirement, Requirement::Allow);
    assert_eq!(
        d.source,
        DecisionSource::Policy {
            layer: Layer::Autonomy
        }
    );
    // and reads have nothing to approve
    let d = Case::new("openphone.screen.get")
        .rule(rule("sa", "group:screen"))
        .decide();
    assert_eq!(d.source.as_str(), "policy");
}

#[test]
fn standing_approvals_deserialize_with_defaults() {
    let r: StandingApproval = serde_json::from_value(json!({
        "id": "sa-9", "runtime": "hermes", "tool": "group:calendar", "enabled": true
    }))
    .unwrap();
    assert_eq!(r.constraints.len(), 0);
    assert_eq!(r.expires_at_ms, None);
    assert!(!r.background);
    let d = Case::new("openphone.calendar.update").rule(r).decide();
    assert_eq!(d.source, lowered_by("sa-9"));
}

/// A session grant (`accept_for_session`) for `hermes` in phone session `s`.
fn grant(id: &str, tool: &str, session: &str) -> StandingApproval {
    let mut r = rule(id, tool);
    r.session = Some(session.to_owned());
    r
}

#[test]
fn a_session_grant_covers_its_own_session_and_is_recorded_as_a_session_grant() {
    let d = Case::new("openphone.ui.tap")
        .rule(grant("g-1", "openphone.ui.tap", "s1"))
        .in_session("s1")
        .params(json!({"x": 1, "y": 2, "reason": "step"}))
        .decide();
    assert_eq!(d.requirement, Requirement::Allow);
    assert_eq!(
        d.source,
        DecisionSource::SessionGrant {
            grant_id: "g-1".to_owned()
        }
    );
    assert_eq!(d.source.as_str(), "session_grant");
    let l7 = d.verdict(Layer::StandingApprovals).unwrap();
    assert!(
        l7.reason.contains("g-1") && l7.reason.contains("s1"),
        "{}",
        l7.reason
    );
}

#[test]
fn a_session_grant_never_covers_another_session_no_session_or_another_runtime() {
    for case in [
        Case::new("openphone.ui.tap").in_session("s2"),
        Case::new("openphone.ui.tap"),
    ] {
        let d = case.rule(grant("g-1", "openphone.ui.tap", "s1")).decide();
        assert!(
            matches!(d.requirement, Requirement::Confirm { .. }),
            "{:?}",
            d.requirement
        );
    }
    let mut other_runtime = grant("g-1", "openphone.ui.tap", "s1");
    other_runtime.runtime = "openclaw".to_owned();
    let d = Case::new("openphone.ui.tap")
        .in_session("s1")
        .rule(other_runtime)
        .decide();
    assert!(matches!(d.requirement, Requirement::Confirm { .. }));
}

#[test]
fn a_session_grant_never_lowers_the_risk_floor_or_a_deny() {
    let d = Case::new("openphone.messages.send")
        .in_session("s1")
        .rule(grant("g-1", "openphone.messages.send", "s1"))
        .decide();
    assert!(matches!(
        d.requirement,
        Requirement::Confirm { one_shot: true, .. }
    ));
    let d = Case::new("openphone.ui.tap")
        .session(Some(Observe))
        .in_session("s1")
        .rule(grant("g-1", "openphone.ui.tap", "s1"))
        .decide();
    assert!(d.requirement.is_deny());
}

/// The grant `accept_for_session` makes for `approved` (the constraints it pins).
fn grant_for(id: &str, tool: &str, session: &str, approved: serde_json::Value) -> StandingApproval {
    let mut r = grant(id, tool, session);
    r.constraints = openphone_policy::session_grant_constraints(&cmd(tool), &approved);
    r
}

/// Review of issue 14: a grant pinned only the first target param present, so a later request
/// could keep it and add another target param the device reads first.
#[test]
fn a_session_grant_cannot_be_stretched_by_adding_another_target_param() {
    let cases = [
        (
            "openphone.app.open",
            json!({"label": "Maps", "reason": "r"}),
            json!({"label": "Maps", "package_or_label": "com.bank", "reason": "r"}),
        ),
        (
            "openphone.messages.draft",
            json!({"contact_query": "Alice", "body": "hi", "reason": "r"}),
            json!({"contact_query": "Alice", "to": "+15550002", "body": "hi", "reason": "r"}),
        ),
        (
            "openphone.messages.draft",
            json!({"body": "no recipient yet", "reason": "r"}),
            json!({"body": "x", "to": "+15550002", "reason": "r"}),
        ),
        (
            "openphone.watchers.stop",
            json!({"watcher_id": 5, "reason": "r"}),
            json!({"watcher_id": 5, "all": true, "reason": "r"}),
        ),
        (
            "openphone.notifications.open",
            json!({"query": "bank", "reason": "r"}),
            json!({"package": "com.other", "reason": "r"}),
        ),
    ];
    for (tool, approved, stretched) in cases {
        let g = grant_for("g-1", tool, "s1", approved.clone());
        let same = Case::new(tool)
            .in_session("s1")
            .params(approved.clone())
            .rule(g.clone())
            .decide();
        assert_eq!(same.requirement, Requirement::Allow, "{tool}: {approved}");
        let d = Case::new(tool)
            .in_session("s1")
            .params(stretched.clone())
            .rule(g)
            .decide();
        assert!(
            matches!(d.requirement, Requirement::Confirm { .. }),
            "{tool}: the grant for {approved} covered {stretched}"
        );
    }
}

/// Issue 28: a job the built-in runtime runs for another runtime names that runtime in its
/// context; the user's background rule for `builtin` is granted for `builtin`'s (the user's)
/// own work and does not cover it. The same rule covers the user's own job.
#[test]
fn a_builtin_rule_does_not_cover_a_job_run_on_behalf_of_another_runtime() {
    let mut builtin = Case::new("openphone.ui.tap");
    builtin.caller = openphone_policy::Caller::builtin("daemon");
    let mut marked = rule("sa-bg", "tap");
    marked.runtime = "builtin".to_owned();
    marked.background = true;

    let mut theirs = builtin.rule(marked);
    theirs.context = openphone_policy::Context::job_for(7, Some("mallory"));
    let d = theirs.decide();
    assert_eq!(view(&d.requirement), PARK);
    assert!(
        d.proof[6]
            .reason
            .contains("this is runtime `mallory`'s job"),
        "{}",
        d.proof[6].reason
    );

    theirs.context = openphone_policy::Context::job(7);
    let d = theirs.decide();
    assert_eq!(view(&d.requirement), Expect::Allow);
    assert_eq!(d.source, lowered_by("sa-bg"));
}
