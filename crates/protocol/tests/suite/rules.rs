//! Every load-time rule, broken once in a copy of the shipped manifests.

use std::collections::HashSet;

use openphone_protocol::Rule;
use serde_json::json;

use super::support::Docs;

type Breaker = fn(&mut Docs);

/// (rule, subject the error must name, how to break it)
fn cases() -> Vec<(Rule, Option<&'static str>, Breaker)> {
    vec![
        (Rule::CommandsJson, None, |d| d.commands = json!([1, 2])),
        (Rule::CommandsVersion, None, |d| {
            d.commands["version"] = json!(2)
        }),
        (Rule::CommandsArray, None, |d| {
            d.commands["commands"] = json!({})
        }),
        (Rule::CommandsManifestDeprecation, None, |d| {
            d.commands["deprecated"] = json!("yes")
        }),
        (Rule::CommandRequiredFields, Some("openphone.ui.tap"), |d| {
            d.command("openphone.ui.tap")["description"] = json!("  ");
        }),
        (
            Rule::CommandModelToolFormat,
            Some("openphone.ui.tap"),
            |d| {
                d.command("openphone.ui.tap")["android_tool"] = json!("Tap-Now");
            },
        ),
        (Rule::CommandEnumValues, Some("openphone.ui.tap"), |d| {
            d.command("openphone.ui.tap")["risk"] = json!("extreme");
        }),
        (
            Rule::CommandUniqueNames,
            Some("openphone.share.text"),
            |d| {
                d.command("openphone.share.text")
                    .insert("aliases".into(), json!(["sms.send"]));
            },
        ),
        (
            Rule::CommandUniqueModelTool,
            Some("openphone.ui.swipe"),
            |d| {
                d.command("openphone.ui.swipe")["android_tool"] = json!("tap");
            },
        ),
        (
            Rule::CommandCapabilityExists,
            Some("openphone.ui.tap"),
            |d| {
                d.command("openphone.ui.tap")["capability"] = json!("teleport.use");
            },
        ),
        (
            Rule::CommandInputSchemaShape,
            Some("openphone.ui.tap"),
            |d| {
                d.command("openphone.ui.tap")["input_schema"]["required"] = json!(["x", "y"]);
            },
        ),
        (Rule::CommandSchemaCompiles, Some("openphone.ui.tap"), |d| {
            d.command("openphone.ui.tap")["input_schema"]["properties"]["x"]["type"] =
                json!("spaceship");
        }),
        (
            Rule::CommandHighRiskAlwaysConfirms,
            Some("openphone.share.text"),
            |d| {
                d.command("openphone.share.text")["confirmation"] = json!("ask_before_action");
            },
        ),
        (Rule::CommandProjectFields, Some("openphone.ui.tap"), |d| {
            d.command("openphone.ui.tap")
                .insert("grant_targets".into(), json!(["teleport_to"]));
        }),
        (Rule::CommandDeprecation, Some("openphone.ui.tap"), |d| {
            d.command("openphone.ui.tap")
                .insert("superseded_by".into(), json!("openphone.ui.tap_element"));
        }),
        (Rule::CommandMutatingFlag, Some("openphone.ui.tap"), |d| {
            d.command("openphone.ui.tap")["mutating"] = json!(false);
        }),
        (Rule::EventsJson, None, |d| d.events = json!("events")),
        (Rule::EventsVersion, None, |d| {
            d.events["version"] = json!(2)
        }),
        (Rule::EventsArray, None, |d| {
            d.events["events"] = json!(null)
        }),
        (Rule::EventUniqueNames, Some("runtime.tool.result"), |d| {
            d.events["events"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "runtime.tool.result", "direction": "phone_to_runtime"}));
        }),
        (Rule::EventDirection, Some("runtime.tool.result"), |d| {
            let events = d.events["events"].as_array_mut().unwrap();
            let e = events
                .iter_mut()
                .find(|e| e["name"] == "runtime.tool.result")
                .unwrap();
            e["direction"] = json!("sideways");
        }),
        (
            Rule::EventTransportMapping,
            Some("openclaw/node.event"),
            |d| {
                d.events["transport_mappings"][0]["events"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"protocol": "runtime.no_such.event", "wire": "openphone.x"}));
            },
        ),
        (Rule::CapabilitiesJson, None, |d| d.capabilities = json!(7)),
        (Rule::CapabilitiesVersion, None, |d| {
            d.capabilities["version"] = json!("1")
        }),
        (Rule::CapabilitiesArray, None, |d| {
            d.capabilities["capabilities"] = json!("none")
        }),
        (Rule::CapabilityUniqueIds, Some("apps.read"), |d| {
            d.capabilities["capabilities"]
                .as_array_mut()
                .unwrap()
                .push(json!({"id": "apps.read", "risk": "low"}));
        }),
        (Rule::CapabilityRiskValue, Some("apps.read"), |d| {
            let caps = d.capabilities["capabilities"].as_array_mut().unwrap();
            let c = caps.iter_mut().find(|c| c["id"] == "apps.read").unwrap();
            c["risk"] = json!("tiny");
        }),
        (Rule::RuntimeSchemaJson, None, |d| {
            d.runtime_schema = json!([])
        }),
        (Rule::RuntimeSchemaTitle, None, |d| {
            d.runtime_schema["title"] = json!("Something else")
        }),
        (Rule::RuntimeSchemaDefs, Some("toolResult"), |d| {
            d.runtime_schema["$defs"]
                .as_object_mut()
                .unwrap()
                .remove("toolResult");
        }),
        (Rule::RuntimeSchemaCompiles, None, |d| {
            d.runtime_schema["properties"]["version"] = json!({"type": 12});
        }),
    ]
}

#[test]
fn shipped_manifests_pass_every_rule() {
    let registry = Docs::shipped().load().unwrap();
    assert!(registry.warnings().is_empty(), "{:?}", registry.warnings());
}

#[test]
fn each_broken_rule_is_reported_with_its_subject() {
    for (rule, subject, breaker) in cases() {
        let mut docs = Docs::shipped();
        breaker(&mut docs);
        let errors = match docs.load() {
            Ok(_) => panic!("{} was broken but the manifests loaded", rule.id()),
            Err(e) => e,
        };
        assert!(
            errors.has(rule, subject),
            "expected [{}] naming {subject:?}, got:\n{errors}",
            rule.id()
        );
        let text = errors.to_string();
        assert!(
            text.contains(rule.id()),
            "message must name the rule: {text}"
        );
        if let Some(subject) = subject {
            assert!(
                text.contains(subject),
                "message must name {subject}: {text}"
            );
        }
    }
}

#[test]
fn every_rule_has_a_breaking_case() {
    let covered: HashSet<Rule> = cases().into_iter().map(|(r, _, _)| r).collect();
    let warnings = [Rule::WarnReadExposure, Rule::WarnConfirmingIsDangerous];
    for rule in Rule::ALL {
        if warnings.contains(rule) {
            continue;
        }
        assert!(
            covered.contains(rule),
            "no failing fixture for rule {}",
            rule.id()
        );
    }
}

#[test]
fn consistency_checks_are_warnings_not_errors() {
    let mut docs = Docs::shipped();
    docs.command("openphone.ui.tap")["default_exposure"] = json!("safe_read");
    let registry = docs
        .load()
        .expect("a warning must not reject the manifests");
    let rules: HashSet<Rule> = registry.warnings().iter().map(|w| w.rule).collect();
    assert!(rules.contains(&Rule::WarnReadExposure));
    assert!(rules.contains(&Rule::WarnConfirmingIsDangerous));
}

#[test]
fn unsupported_version_message_states_range_and_value() {
    for bad in [json!(0), json!("1"), json!(1.5), json!(null), json!(true)] {
        let mut docs = Docs::shipped();
        docs.commands["version"] = bad.clone();
        let text = docs.load().unwrap_err().to_string();
        assert!(text.contains("1..=1"), "{text}");
        assert!(text.contains(&bad.to_string()), "{text}");
    }
    let mut docs = Docs::shipped();
    docs.commands.as_object_mut().unwrap().remove("version");
    assert!(docs.load().unwrap_err().to_string().contains("missing"));
}

#[test]
fn alias_equal_to_another_commands_name_is_rejected() {
    let mut docs = Docs::shipped();
    docs.command("openphone.ui.tap")
        .insert("aliases".into(), json!(["openphone.ui.swipe"]));
    assert!(
        docs.load()
            .unwrap_err()
            .has(Rule::CommandUniqueNames, Some("openphone.ui.tap"))
    );
}

#[test]
fn duplicate_command_name_is_rejected_even_when_other_rules_fail() {
    let mut docs = Docs::shipped();
    let mut copy = docs.command("openphone.ui.tap").clone();
    copy["android_tool"] = json!("tap_again");
    copy["risk"] = json!("bogus");
    docs.commands["commands"]
        .as_array_mut()
        .unwrap()
        .push(copy.into());
    let errors = docs.load().unwrap_err();
    assert!(
        errors.has(Rule::CommandUniqueNames, Some("openphone.ui.tap")),
        "{errors}"
    );
    assert!(
        errors.has(Rule::CommandEnumValues, Some("openphone.ui.tap")),
        "{errors}"
    );
}

#[test]
fn deprecation_rules() {
    // superseded_by without deprecated
    let mut docs = Docs::shipped();
    docs.command("openphone.ui.tap")
        .insert("superseded_by".into(), json!("openphone.ui.tap_element"));
    assert!(
        docs.load()
            .unwrap_err()
            .has(Rule::CommandDeprecation, Some("openphone.ui.tap"))
    );
    // names itself (through its own alias)
    let mut docs = Docs::shipped();
    let cmd = docs.command("openphone.calendar.add");
    cmd.insert("deprecated".into(), json!(true));
    cmd.insert("superseded_by".into(), json!("calendar.add"));
    assert!(
        docs.load()
            .unwrap_err()
            .has(Rule::CommandDeprecation, Some("openphone.calendar.add"))
    );
    // unknown target
    let mut docs = Docs::shipped();
    let cmd = docs.command("openphone.calendar.add");
    cmd.insert("deprecated".into(), json!(true));
    cmd.insert("superseded_by".into(), json!("openphone.calendar.nope"));
    assert!(
        docs.load()
            .unwrap_err()
            .has(Rule::CommandDeprecation, Some("openphone.calendar.add"))
    );
    // deprecated not a boolean
    let mut docs = Docs::shipped();
    docs.command("openphone.calendar.add")
        .insert("deprecated".into(), json!("true"));
    assert!(
        docs.load()
            .unwrap_err()
            .has(Rule::CommandDeprecation, Some("openphone.calendar.add"))
    );
    // a valid deprecation loads and is kept
    let mut docs = Docs::shipped();
    let cmd = docs.command("openphone.ui.tap");
    cmd.insert("deprecated".into(), json!(true));
    cmd.insert("superseded_by".into(), json!("openphone.ui.tap_element"));
    let registry = docs.load().unwrap();
    let tap = registry.resolve("tap").unwrap();
    assert!(tap.deprecated);
    assert_eq!(
        tap.superseded_by.as_deref(),
        Some("openphone.ui.tap_element")
    );
}

#[test]
fn mapping_wire_names_must_be_unique_but_one_event_may_map_twice() {
    let mut docs = Docs::shipped();
    docs.events["transport_mappings"][0]["events"]
        .as_array_mut()
        .unwrap()
        .push(json!({"protocol": "runtime.presence.offline", "wire": "node.presence.alive"}));
    assert!(
        docs.load()
            .unwrap_err()
            .has(Rule::EventTransportMapping, Some("openclaw/node.event"))
    );
}

#[test]
fn input_schema_must_be_an_object_schema() {
    let mut docs = Docs::shipped();
    docs.command("openphone.ui.tap")["input_schema"]["type"] = json!("array");
    assert!(
        docs.load()
            .unwrap_err()
            .has(Rule::CommandInputSchemaShape, Some("openphone.ui.tap"))
    );
}
