//! Scenario files: the built-in demo, the checked-in JSON Schema, and malformed input
//! rejected with the path of the offending field.

use std::path::PathBuf;

use openphone_device::sim::{DEFAULT_SCENARIO, scenario_schema};
use openphone_device::{ScenarioError, SimState};
use serde_json::{Value, json};

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/sim-scenario.schema.json")
}

/// The checked-in schema is the one generated from the types. Regenerate with
/// `UPDATE_SCHEMAS=1 cargo test -p openphone-device scenario_schema_is_current`.
#[test]
fn scenario_schema_is_current() {
    let generated = serde_json::to_string_pretty(&scenario_schema()).unwrap() + "\n";
    let path = schema_path();
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale; run with UPDATE_SCHEMAS=1",
        path.display()
    );
}

fn schema_validator() -> jsonschema::Validator {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

#[test]
fn the_default_scenario_is_valid_and_rich_enough_for_a_demo() {
    let doc: Value = serde_json::from_str(DEFAULT_SCENARIO).unwrap();
    let validator = schema_validator();
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let state = SimState::default_scenario().unwrap();
    let today = |ms: i64| (ms - state.clock.start_ms).abs() < 12 * 3_600_000;
    assert!(
        state.events.iter().filter(|e| today(e.start_ms)).count() >= 4,
        "a day's calendar"
    );
    assert!(state.threads.len() >= 3, "a few threads");
    assert!(
        state.notifications.iter().filter(|n| !n.read).count() >= 3,
        "unread notifications"
    );
    assert!(
        state
            .calls
            .iter()
            .any(|c| c.call_type == openphone_device::sim::CallType::Missed)
    );
    assert!(state.contacts.len() >= 8);
    for role in [
        "settings", "messages", "phone", "contacts", "calendar", "browser", "clock", "notes",
        "camera",
    ] {
        assert!(
            state.apps.iter().any(|a| a
                .role
                .is_some_and(|r| serde_json::to_value(r).unwrap() == role)),
            "an app with role {role}"
        );
    }
}

#[test]
fn a_minimal_scenario_gets_the_standard_apps() {
    let state = SimState::from_json(r#"{ "version": 1 }"#).unwrap();
    assert_eq!(state.apps.len(), 9);
    assert_eq!(state.calendars.len(), 1);
    assert!(schema_validator().is_valid(&json!({ "version": 1 })));
}

fn with(path: &[&str], value: Value) -> String {
    let mut doc: Value = serde_json::from_str(DEFAULT_SCENARIO).unwrap();
    let mut slot = &mut doc;
    for key in path {
        slot = match key.parse::<usize>() {
            Ok(i) => &mut slot[i],
            Err(_) => &mut slot[*key],
        };
    }
    *slot = value;
    doc.to_string()
}

fn rejected(text: &str) -> (String, String) {
    match SimState::from_json(text) {
        Ok(_) => panic!("scenario unexpectedly accepted"),
        Err(ScenarioError::Invalid { path, message }) => (path, message),
        Err(other) => panic!("expected a field error, got {other}"),
    }
}

#[test]
fn malformed_scenarios_name_the_offending_field() {
    let cases = [
        (
            with(&["contacts", "2", "name"], json!(42)),
            "contacts[2].name",
            "invalid type",
        ),
        (
            with(
                &["contacts", "2", "phones", "0", "number"],
                json!("call me"),
            ),
            "contacts[2].phones[0].number",
            "not a phone number",
        ),
        (
            with(&["events", "1", "calendar_id"], json!(77)),
            "events[1].calendar_id",
            "no calendar with id 77",
        ),
        (
            with(&["events", "0", "end_ms"], json!(0)),
            "events[0].end_ms",
            "must be after start_ms",
        ),
        (
            with(
                &["threads", "1", "messages", "0", "direction"],
                json!("sideways"),
            ),
            "threads[1].messages[0].direction",
            "unknown variant",
        ),
        (
            with(&["notifications", "0", "target", "thread_id"], json!(9999)),
            "notifications[0].target.thread_id",
            "no thread",
        ),
        (
            with(
                &["notifications", "0", "package"],
                json!("com.example.gone"),
            ),
            "notifications[0].package",
            "no installed app",
        ),
        (
            with(&["calls", "0", "type"], json!("pocket")),
            "calls[0].type",
            "unknown variant",
        ),
        (
            with(&["alarms", "0", "hour"], json!(24)),
            "alarms[0].hour",
            "0-23",
        ),
        (
            with(&["apps", "1", "package"], json!("com.android.settings")),
            "apps[1].package",
            "duplicate package",
        ),
        (
            with(&["contacts", "3", "id"], json!(1)),
            "contacts[3].id",
            "duplicate contact id",
        ),
        (
            with(
                &["apps", "9", "screens", "0", "elements", "0", "navigate"],
                json!("nowhere"),
            ),
            "apps[9].screens[0].elements[0].navigate",
            "no screen",
        ),
        (
            with(&["device", "screen", "width"], json!(10)),
            "device.screen.width",
            "between",
        ),
        (
            with(&["version"], json!(2)),
            "version",
            "unsupported version",
        ),
        (
            with(&["web_pages", "0", "url"], json!("ftp://x")),
            "web_pages[0].url",
            "http(s)",
        ),
    ];
    for (text, want_path, want_message) in cases {
        let (path, message) = rejected(&text);
        assert_eq!(path, want_path, "{message}");
        assert!(message.contains(want_message), "{path}: {message}");
    }
    // A typo in a field name is an unknown field, at its path.
    let mut doc: Value = serde_json::from_str(DEFAULT_SCENARIO).unwrap();
    doc["contacts"][0]["nmae"] = json!("typo");
    let (path, message) = rejected(&doc.to_string());
    assert_eq!(path, "contacts[0].nmae");
    assert!(message.contains("unknown field"), "{message}");
    assert!(
        !schema_validator().is_valid(&doc),
        "the schema rejects it too"
    );
    // The error renders as `path: message`.
    let err = SimState::from_json(&with(&["contacts", "2", "name"], json!(42))).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("contacts[2].name: invalid type: integer `42`, expected a string"),
        "{err}"
    );
    assert_eq!(err.path(), Some("contacts[2].name"));
}

#[test]
fn syntax_errors_give_line_and_column() {
    let err = SimState::from_json("{\n  \"version\": 1,\n  \"contacts\": [}\n").unwrap_err();
    match err {
        ScenarioError::Syntax { line, .. } => assert_eq!(line, 3),
        other => panic!("expected a syntax error, got {other}"),
    }
    assert!(SimState::from_json("{\"version\":1} trailing").is_err());
}

#[test]
fn scenario_files_load_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.json");
    std::fs::write(&path, r#"{ "version": 1, "contacts": [ { "id": 1, "name": "Zoë", "phones": [ { "number": "+1 555 0100" } ] } ] }"#).unwrap();
    let state = SimState::from_file(&path).unwrap();
    assert_eq!(state.contacts[0].phones[0].label, "mobile");
    let missing = SimState::from_file(&dir.path().join("absent.json")).unwrap_err();
    assert!(matches!(missing, ScenarioError::Io { .. }));
}
