//! Tool profiles in layer 2: the profile is the base surface, `allow` adds, `deny` removes and
//! always wins; the global and the runtime list both apply; an unknown profile denies; `full`
//! is the same surface as no profile.

use openphone_policy::{
    Admission, Caller, ExposureGrants, Layer, ToolList, ToolPolicy, ToolSelector, Transport,
    VerdictKind, inputs_object, is_mutating, profile, profiles, visible,
};
use openphone_protocol::Command;
use serde_json::json;

use super::support::*;

use openphone_policy::Autonomy::TrustedActions as Trusted;

/// The decision for `tool` under `policy` (JSON), in a trusted session so that only layer 2
/// can refuse a command the caller is granted.
fn under(policy: &str, tool: &str) -> openphone_policy::Decision {
    Case::new(tool)
        .ceiling(Trusted)
        .session(Some(Trusted))
        .policy(policy)
        .decide()
}

/// Layer 2's verdict kind and reason.
fn l2(policy: &str, tool: &str) -> (VerdictKind, String) {
    let d = under(policy, tool);
    let v = d.verdict(Layer::ToolPolicy).unwrap();
    (v.kind, v.reason.to_string())
}

fn admitted(policy: &str, tool: &str) -> bool {
    l2(policy, tool).0 == VerdictKind::Allow
}

const MESSAGING: &str = r#"{"runtimes": {"hermes": {"profile": "messaging"}}}"#;

#[test]
fn a_profile_alone_is_the_surface() {
    for tool in [
        "openphone.device.status",
        "openphone.screen.get",
        "openphone.messages.search",
        "openphone.messages.draft",
        "openphone.contacts.search",
        "openphone.calls.place",
        "openphone.share.text",
    ] {
        let (kind, reason) = l2(MESSAGING, tool);
        assert_eq!(kind, VerdictKind::Allow, "{tool}: {reason}");
        assert!(
            reason.contains("profile `messaging` of runtime `hermes`"),
            "{reason}"
        );
    }
    let d = under(MESSAGING, "openphone.ui.tap");
    assert_eq!(view(&d.requirement), POLICY_DENY);
    let (kind, reason) = l2(MESSAGING, "openphone.ui.tap");
    assert_eq!(kind, VerdictKind::Deny);
    assert_eq!(
        reason,
        "`openphone.ui.tap` is not in profile `messaging` of runtime `hermes` (add it with \
         allow, or choose another profile)"
    );
    // any name of the command is the same command
    assert!(!admitted(MESSAGING, "tap"));
    assert!(admitted(MESSAGING, "sms.send"));
}

#[test]
fn allow_adds_to_the_profile() {
    let p =
        r#"{"runtimes": {"hermes": {"profile": "messaging", "allow": ["tap", "group:calendar"]}}}"#;
    for tool in [
        "openphone.ui.tap",
        "openphone.calendar.add",
        "openphone.calendar.delete",
        "openphone.messages.send",
    ] {
        assert!(admitted(p, tool), "{tool}");
    }
    assert!(!admitted(p, "openphone.ui.swipe"));
    // the same allow list without a profile restricts to its entries
    let no_profile = r#"{"runtimes": {"hermes": {"allow": ["tap", "group:calendar"]}}}"#;
    assert!(admitted(no_profile, "openphone.ui.tap"));
    assert!(!admitted(no_profile, "openphone.messages.send"));
    assert_eq!(
        l2(no_profile, "openphone.messages.send").1,
        "`openphone.messages.send` is not in the runtime `hermes` allow list"
    );
}

#[test]
fn deny_removes_from_the_profile_and_beats_allow() {
    let p =
        r#"{"runtimes": {"hermes": {"profile": "messaging", "deny": ["openphone.calls.place"]}}}"#;
    let (kind, reason) = l2(p, "openphone.calls.place");
    assert_eq!(kind, VerdictKind::Deny);
    assert!(
        reason.contains("deny entry `openphone.calls.place`"),
        "{reason}"
    );
    assert!(admitted(p, "openphone.calls.search"));

    for p in [
        r#"{"runtimes": {"hermes": {"profile": "messaging", "allow": ["tap"], "deny": ["tap"]}}}"#,
        r#"{"runtimes": {"hermes": {"profile": "phone_control", "deny": ["group:ui"]}}}"#,
        r#"{"global": {"deny": ["tap"]}, "runtimes": {"hermes": {"profile": "full"}}}"#,
        r#"{"global": {"profile": "full", "allow": ["tap"]}, "runtimes": {"hermes": {"deny": ["tap"]}}}"#,
    ] {
        let d = under(p, "openphone.ui.tap");
        assert_eq!(view(&d.requirement), POLICY_DENY, "{p}");
    }
}

#[test]
fn the_global_and_the_runtime_profile_both_apply() {
    let p =
        r#"{"global": {"profile": "minimal"}, "runtimes": {"hermes": {"profile": "messaging"}}}"#;
    // in both
    let (kind, reason) = l2(p, "openphone.screen.get");
    assert_eq!(kind, VerdictKind::Allow);
    assert!(
        reason.contains("profile `minimal` of the global tool policy")
            && reason.contains("profile `messaging` of runtime `hermes`"),
        "{reason}"
    );
    // in the runtime's only
    let (kind, reason) = l2(p, "openphone.messages.search");
    assert_eq!(kind, VerdictKind::Deny);
    assert!(
        reason.contains("not in profile `minimal` of the global tool policy"),
        "{reason}"
    );
    // in the global one only
    let p = r#"{"global": {"profile": "phone_control"}, "runtimes": {"hermes": {"profile": "messaging"}}}"#;
    let (kind, reason) = l2(p, "openphone.ui.tap");
    assert_eq!(kind, VerdictKind::Deny);
    assert!(
        reason.contains("not in profile `messaging` of runtime `hermes`"),
        "{reason}"
    );
    // an allow entry of the global list adds to the global profile only
    let p = r#"{"global": {"profile": "minimal", "allow": ["group:messages"]}, "runtimes": {"hermes": {"profile": "messaging"}}}"#;
    assert!(admitted(p, "openphone.messages.search"));
    assert!(!admitted(p, "openphone.contacts.search"));
    // another runtime's profile does not apply
    let p = r#"{"runtimes": {"other": {"profile": "minimal"}}}"#;
    assert!(admitted(p, "openphone.ui.tap"));
}

#[test]
fn an_unknown_profile_denies_everything_and_names_itself() {
    for p in [
        r#"{"runtimes": {"hermes": {"profile": "messagign"}}}"#,
        r#"{"global": {"profile": "messagign", "allow": ["*"]}}"#,
    ] {
        for c in registry().commands() {
            let (kind, reason) = l2(p, &c.name);
            assert_eq!(kind, VerdictKind::Deny, "{p} {}", c.name);
            assert!(
                reason.contains("unknown tool profile `messagign`")
                    && reason.contains("known: minimal, read, messaging, phone_control, full"),
                "{reason}"
            );
        }
    }
    let (_, reason) = l2(
        r#"{"runtimes": {"hermes": {"profile": "messagign"}}}"#,
        "openphone.ui.tap",
    );
    assert!(
        reason.starts_with(
            "`openphone.ui.tap` is refused: runtime `hermes` names an unknown tool profile"
        ),
        "{reason}"
    );
}

#[test]
fn read_keeps_only_reads_and_allow_can_add_a_write() {
    let p = r#"{"runtimes": {"hermes": {"profile": "read", "allow": ["openphone.memory.save"]}}}"#;
    for c in registry().commands() {
        let want = !is_mutating(c) || c.name == "openphone.memory.save";
        assert_eq!(admitted(p, &c.name), want, "{}", c.name);
    }
}

/// The surface a list should have, computed from the rule itself.
fn expected(list: &ToolList, c: &Command) -> bool {
    let base = match &list.profile {
        // an unknown profile admits nothing, whatever the allow list says (fail closed)
        Some(name) => profile(name)
            .is_some_and(|p| p.admits(c) || list.allow.iter().flatten().any(|s| s.matches(c))),
        None => list
            .allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|s| s.matches(c))),
    };
    base && !list.deny.iter().any(|s| s.matches(c))
}

fn selectors(raw: &[&str]) -> Vec<ToolSelector> {
    raw.iter()
        .map(|s| ToolSelector::parse(s).unwrap())
        .collect()
}

#[test]
fn every_profile_allow_and_deny_combination_follows_the_rule() {
    let profile_choices: Vec<Option<String>> = std::iter::once(None)
        .chain(profiles().iter().map(|p| Some(p.name.clone())))
        .chain(std::iter::once(Some("nope".to_owned())))
        .collect();
    let allow_choices: [Option<&[&str]>; 4] = [
        None,
        Some(&[]),
        Some(&["tap", "group:calendar"]),
        Some(&["*"]),
    ];
    let deny_choices: [&[&str]; 3] = [&[], &["sms.send", "group:screen"], &["*"]];
    let mut checked = 0usize;
    for p in &profile_choices {
        for a in &allow_choices {
            for d in &deny_choices {
                let list = ToolList {
                    profile: p.clone(),
                    allow: a.map(selectors),
                    deny: selectors(d),
                };
                let policy = ToolPolicy {
                    global: ToolList::default(),
                    runtimes: [("hermes".to_owned(), list.clone())].into(),
                };
                let text = serde_json::to_string(&policy).unwrap();
                for c in registry().commands() {
                    assert_eq!(
                        admitted(&text, &c.name),
                        expected(&list, c),
                        "{text} / {}",
                        c.name
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

#[test]
fn full_is_the_same_as_no_profile_over_the_whole_registry() {
    let callers = {
        let mut all = Vec::new();
        for transport in [Transport::Websocket, Transport::Mcp] {
            for grants in [ExposureGrants::REMOTE_DEFAULT, ExposureGrants::ALL] {
                let mut c = Caller::remote("hermes", transport, "token:hermes");
                c.grants = grants;
                all.push(c);
            }
        }
        all.push(Caller::builtin("p"));
        all.push(Caller::operator("hermes", Transport::Websocket, "op"));
        all
    };
    let pairs = [
        (r#"{}"#, r#"{"runtimes": {"hermes": {"profile": "full"}}}"#),
        (r#"{}"#, r#"{"global": {"profile": "full"}}"#),
        (
            r#"{"global": {"deny": ["group:ui"]}}"#,
            r#"{"global": {"profile": "full", "deny": ["group:ui"]}}"#,
        ),
        (
            r#"{"runtimes": {"hermes": {"deny": ["sms.send"]}}}"#,
            r#"{"runtimes": {"hermes": {"profile": "full", "deny": ["sms.send"]}}}"#,
        ),
        (
            r#"{"global": {"allow": ["group:ui"]}}"#,
            r#"{"global": {"allow": ["group:ui"]}, "runtimes": {"hermes": {"profile": "full"}}}"#,
        ),
    ];
    for (unset, full) in pairs {
        let unset_policy: ToolPolicy = serde_json::from_str(unset).unwrap();
        let full_policy: ToolPolicy = serde_json::from_str(full).unwrap();
        for caller in &callers {
            for c in registry().commands() {
                assert_eq!(
                    visible(c, caller, &unset_policy),
                    visible(c, caller, &full_policy),
                    "{full} / {} / {}",
                    caller.runtime,
                    c.name
                );
                for session in [Some(Trusted), None] {
                    let mut a = Case::new(&c.name).policy(unset).session(session);
                    a.caller = caller.clone();
                    let mut b = a.clone();
                    b.tool_policy = full_policy.clone();
                    let (da, db) = (a.decide(), b.decide());
                    assert_eq!(da.requirement, db.requirement, "{full} / {}", c.name);
                    let kinds = |d: &openphone_policy::Decision| {
                        d.proof.iter().map(|v| v.kind).collect::<Vec<_>>()
                    };
                    assert_eq!(kinds(&da), kinds(&db), "{full} / {}", c.name);
                }
            }
        }
    }
}

#[test]
fn tool_lists_show_the_profile_surface() {
    let mut caller = Caller::remote("hermes", Transport::Mcp, "token:hermes");
    caller.grants = ExposureGrants::ALL;
    let policy: ToolPolicy = serde_json::from_str(
        r#"{"runtimes": {"hermes": {"profile": "messaging", "allow": ["tap"], "deny": ["openphone.calls.place"]}}}"#,
    )
    .unwrap();
    let shown: Vec<&str> = registry()
        .commands()
        .filter(|c| visible(c, &caller, &policy))
        .map(|c| c.name.as_str())
        .collect();
    // messages.send is `mcp: false`; calls.place is denied
    assert_eq!(
        shown,
        [
            "openphone.device.status",
            "openphone.apps.search",
            "openphone.screen.get",
            "openphone.screen.understand_local",
            "openphone.notifications.list",
            "openphone.notifications.search",
            "openphone.notifications.open",
            "openphone.contacts.search",
            "openphone.messages.search",
            "openphone.messages.draft",
            "openphone.calls.search",
            "openphone.ui.tap",
            "openphone.share.text",
        ]
    );
}

#[test]
fn admission_says_why() {
    let tap = cmd("tap");
    let search = cmd("sms.search");
    let list = |json: serde_json::Value| serde_json::from_value::<ToolList>(json).unwrap();
    let l = list(json!({}));
    assert_eq!(l.admission(&tap), Admission::Unfiltered);
    let l = list(json!({"profile": "messaging", "allow": ["tap"]}));
    assert_eq!(l.admission(&search), Admission::InProfile("messaging"));
    assert_eq!(
        l.admission(&tap),
        Admission::Allowed(&ToolSelector::Name("tap".to_owned()))
    );
    let l = list(json!({"profile": "messaging"}));
    assert_eq!(l.admission(&tap), Admission::NotInProfile("messaging"));
    assert!(!l.allows(&tap) && l.allows(&search));
    let l = list(json!({"allow": []}));
    assert_eq!(l.admission(&tap), Admission::NotInAllowList);
    let l = list(json!({"profile": "x"}));
    assert_eq!(l.admission(&tap), Admission::UnknownProfile("x"));
    assert!(!l.is_empty());
    // serde: the profile is written only when set, and unknown keys are refused
    assert_eq!(
        serde_json::to_value(list(json!({"deny": ["tap"]}))).unwrap(),
        json!({"allow": null, "deny": ["tap"]})
    );
    assert_eq!(
        serde_json::to_value(list(json!({"profile": "read"}))).unwrap()["profile"],
        json!("read")
    );
    assert!(serde_json::from_value::<ToolList>(json!({"profiles": "read"})).is_err());
}

#[test]
fn the_inputs_name_the_profiles() {
    let case = Case::new("openphone.ui.tap").policy(
        r#"{"global": {"profile": "minimal"}, "runtimes": {"hermes": {"profile": "messaging", "allow": ["tap"]}}}"#,
    );
    let object = inputs_object(&case.input());
    assert_eq!(object["tool_policy"]["global"]["profile"], json!("minimal"));
    assert_eq!(
        object["tool_policy"]["runtime"]["profile"],
        json!("messaging")
    );
    assert_eq!(object["tool_policy"]["runtime"]["allow"], json!(["tap"]));
    let plain = Case::new("openphone.ui.tap");
    assert_eq!(
        inputs_object(&plain.input())["tool_policy"]["global"]["profile"],
        json!(null)
    );
    let other = Case::new("openphone.ui.tap").policy(
        r#"{"global": {"profile": "minimal"}, "runtimes": {"hermes": {"profile": "read", "allow": ["tap"]}}}"#,
    );
    assert_ne!(case.inputs_digest(), other.inputs_digest());
}
