//! Field-level validation of tool params against the manifest input schemas.

use openphone_protocol::FieldError;
use serde_json::json;

use super::support::registry;

fn check(tool: &str, params: serde_json::Value) -> Result<(), Vec<FieldError>> {
    let r = registry();
    r.validate_params(r.resolve(tool).unwrap(), &params)
}

fn fields(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.field.as_str()).collect()
}

#[test]
fn valid_params_pass_and_extra_keys_are_allowed() {
    check(
        "openphone.ui.tap",
        json!({"x": 10, "y": 20.5, "reason": "press OK"}),
    )
    .unwrap();
    check(
        "sms.send",
        json!({"to": "+1555", "body": "hi", "reason": "r", "extra": [1]}),
    )
    .unwrap();
}

#[test]
fn missing_required_fields_are_named() {
    let errors = check("openphone.ui.tap", json!({"x": 1})).unwrap_err();
    let mut f = fields(&errors);
    f.sort_unstable();
    assert_eq!(f, ["reason", "y"]);
    assert!(
        errors
            .iter()
            .all(|e| e.message == "required field is missing")
    );
}

#[test]
fn wrong_types_name_the_field_without_echoing_the_value() {
    let errors = check(
        "openphone.ui.tap",
        json!({"x": "secret-text", "y": 2, "reason": "r"}),
    )
    .unwrap_err();
    assert_eq!(fields(&errors), ["x"]);
    assert!(
        errors[0].message.contains("number"),
        "{}",
        errors[0].message
    );
    assert!(
        !errors[0].message.contains("secret-text"),
        "values must not be echoed"
    );
    let errors = check(
        "openphone.calendar.delete",
        json!({"event_id": 1.5, "reason": "r"}),
    )
    .unwrap_err();
    assert_eq!(fields(&errors), ["event_id"]);
}

#[test]
fn reserved_underscore_keys_are_refused() {
    let errors = check(
        "openphone.screen.get",
        json!({"reason": "r", "_runtime": "builtin"}),
    )
    .unwrap_err();
    assert_eq!(fields(&errors), ["_runtime"]);
}

#[test]
fn params_must_be_an_object() {
    let errors = check("openphone.screen.get", json!(["reason"])).unwrap_err();
    assert_eq!(fields(&errors), [""]);
    assert!(errors[0].message.contains("array"));
}

#[test]
fn unsafe_integers_are_field_errors() {
    let errors = check(
        "openphone.calendar.delete",
        json!({"event_id": 9007199254740993_u64, "reason": "r"}),
    )
    .unwrap_err();
    assert_eq!(fields(&errors), ["event_id"]);
}

#[test]
fn every_command_accepts_just_a_reason_plus_its_required_inputs() {
    // Build a minimal valid params object for every command from its own schema.
    let r = registry();
    for cmd in r.commands() {
        let mut params = serde_json::Map::new();
        for name in cmd.required_inputs() {
            let ty = cmd.input_schema["properties"][name]["type"]
                .as_str()
                .unwrap_or("string");
            let v = match ty {
                "integer" => json!(1),
                "number" => json!(1.5),
                "boolean" => json!(true),
                "object" => json!({}),
                "array" => json!([]),
                _ => json!("text"),
            };
            params.insert(name.to_owned(), v);
        }
        r.validate_params(cmd, &params.into())
            .unwrap_or_else(|e| panic!("{}: {e:?}", cmd.name));
        let errors = r.validate_params(cmd, &json!({})).unwrap_err();
        assert!(fields(&errors).contains(&"reason"), "{}", cmd.name);
    }
}
