//! `openphone protocol …` and `openphone info`.

use serde_json::{Value, json};

use super::support::{edit, manifest_copy, run, shipped_manifest_dir};

const COMMANDS: &str = "openphone-commands.json";

fn command_mut<'a>(doc: &'a mut Value, name: &str) -> &'a mut serde_json::Map<String, Value> {
    doc["commands"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == name)
        .unwrap()
        .as_object_mut()
        .unwrap()
}

#[test]
fn check_passes_on_the_shipped_manifests_with_counts() {
    let (code, out, err) = run(&["protocol", "check", "--json"], "");
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], true);
    // The 37 upstream-compatible commands and the 5 goal commands this project adds (2 reads
    // like openphone.jobs.list, 3 writes like openphone.jobs.create).
    assert_eq!(v["commands"], 42);
    assert_eq!(v["names_including_aliases"], 60);
    assert_eq!(v["by_risk"], json!({"low": 10, "medium": 28, "high": 4}));
    assert_eq!(
        v["by_confirmation"],
        json!({"none": 15, "ask_before_action": 23, "always": 4})
    );
    assert_eq!(
        v["by_exposure"],
        json!({"safe_read": 6, "private_read": 9, "dangerous": 27})
    );
    assert_eq!(
        v["not_over_mcp"],
        json!(["openphone.messages.send", "openphone.calls.place"])
    );

    // The checkout's files on disk are the ones built in.
    let dir = shipped_manifest_dir();
    let (code, text, _) = run(
        &["protocol", "check", "--manifest-dir", dir.to_str().unwrap()],
        "",
    );
    assert_eq!(code, 0);
    assert!(
        text.contains("commands: 42 (60 names with aliases, 27 mutating)"),
        "{text}"
    );
}

#[test]
fn check_fails_on_a_broken_copy_naming_rule_and_command() {
    type Break = fn(&mut Value);
    let cases: [(&str, &str, &str, Break); 5] = [
        (
            COMMANDS,
            "commands.high_risk_always_confirms",
            "openphone.calendar.delete",
            |d| {
                command_mut(d, "openphone.calendar.delete")["confirmation"] =
                    json!("ask_before_action");
            },
        ),
        (
            COMMANDS,
            "commands.input_schema_shape",
            "openphone.url.open",
            |d| {
                command_mut(d, "openphone.url.open")["input_schema"]["required"] = json!(["url"]);
            },
        ),
        (
            COMMANDS,
            "commands.unique_android_tool",
            "openphone.ui.swipe",
            |d| {
                command_mut(d, "openphone.ui.swipe")["android_tool"] = json!("tap");
            },
        ),
        (
            COMMANDS,
            "commands.capability_exists",
            "openphone.clipboard.set",
            |d| {
                command_mut(d, "openphone.clipboard.set")["capability"] = json!("clipboard.steal");
            },
        ),
        (
            "openphone-events.json",
            "events.direction",
            "runtime.tool.result",
            |d| {
                for e in d["events"].as_array_mut().unwrap() {
                    if e["name"] == "runtime.tool.result" {
                        e["direction"] = json!("up");
                    }
                }
            },
        ),
    ];
    for (file, rule, subject, breaker) in cases {
        let dir = manifest_copy();
        edit(dir.path(), file, breaker);
        let path = dir.path().to_str().unwrap();
        let (code, _, err) = run(&["protocol", "check", "--manifest-dir", path], "");
        assert_eq!(code, 1, "{rule}: {err}");
        assert!(
            err.contains(rule) && err.contains(subject),
            "{rule}/{subject} not named in: {err}"
        );

        let (code, out, _) = run(&["protocol", "check", "--json", "--manifest-dir", path], "");
        assert_eq!(code, 1);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["ok"], false);
        assert!(
            v["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["rule"] == rule && e["subject"] == subject),
            "{out}"
        );
    }
}

#[test]
fn check_reports_a_missing_manifest_file() {
    let dir = manifest_copy();
    std::fs::remove_file(dir.path().join("openphone-events.json")).unwrap();
    let (code, _, err) = run(
        &[
            "protocol",
            "check",
            "--manifest-dir",
            dir.path().to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("openphone-events.json"), "{err}");
}

#[test]
fn hash_reads_stdin_and_matches_the_spec_vector() {
    let (code, out, _) = run(
        &["protocol", "hash"],
        "{\"to\":\"+15551234567\",\n \"body\":\"on my way\"}\n",
    );
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        "sha256:1e920af2c02daa49a449d1ebe938e08f196a9dfa6a3c05b36adbabbd7387193b"
    );
}

#[test]
fn hash_refuses_non_json_with_exit_2() {
    for bad in ["not json", "{\"a\":1,\"a\":2}", "", "[1,"] {
        let (code, out, err) = run(&["protocol", "hash"], bad);
        assert_eq!(code, 2, "{bad:?}");
        assert!(out.is_empty());
        assert!(
            err.starts_with("openphone: stdin is not a JSON value"),
            "{err}"
        );
    }
}

#[test]
fn validate_params_prints_ok_or_field_errors() {
    let (code, out, _) = run(
        &[
            "protocol",
            "validate-params",
            "tap",
            r#"{"x": 1, "y": 2, "reason": "press OK"}"#,
        ],
        "",
    );
    assert_eq!((code, out.trim()), (0, "ok"));

    let (code, out, _) = run(
        &[
            "protocol",
            "validate-params",
            "openphone.ui.tap",
            r#"{"x": "left"}"#,
            "--json",
        ],
        "",
    );
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    let mut fields: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    fields.sort_unstable();
    assert_eq!(fields, ["reason", "x", "y"]);

    let (code, _, err) = run(
        &["protocol", "validate-params", "openphone.teleport", "{}"],
        "",
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown command \"openphone.teleport\""),
        "{err}"
    );

    let (code, _, err) = run(&["protocol", "validate-params", "tap", "{x:1}"], "");
    assert_eq!(code, 2);
    assert!(err.contains("params are not valid JSON"), "{err}");
}

#[test]
fn commands_lists_every_manifest_command() {
    let (code, out, _) = run(&["protocol", "commands", "--json"], "");
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let list = v.as_array().unwrap();
    assert_eq!(list.len(), 42);
    assert!(list.iter().all(|c| {
        c["input_schema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("reason"))
    }));
    let (code, text, _) = run(&["protocol", "commands"], "");
    assert_eq!(code, 0);
    assert!(text.contains("openphone.messages.send") && text.contains("aliases: sms.send"));
}

#[test]
fn info_advertises_the_protocol_range() {
    let (code, out, _) = run(&["info", "--json"], "");
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["runtime_protocol"],
        json!({"name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1})
    );
}
