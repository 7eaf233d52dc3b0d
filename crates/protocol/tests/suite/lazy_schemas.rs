//! Schemas compiled on first use: the shipped manifests load without compiling any schema,
//! a test compiles every one of them, and a schema that does not compile is still reported.

use openphone_protocol::{Registry, Rule, SchemaCompile};
use serde_json::json;

use super::support::Docs;

/// The shipped manifests' schemas are compiled lazily at run time, so this is the check that
/// every one of them compiles (loading no longer catches it).
#[test]
fn shipped_manifests_compile_every_schema() {
    let lazy = Registry::embedded().unwrap();
    lazy.compile_all().unwrap();
    let docs = Docs::shipped();
    Registry::load(&docs.sources())
        .unwrap()
        .compile_all()
        .unwrap();
}

fn broken_tap_schema() -> Docs {
    let mut d = Docs::shipped();
    d.command("openphone.ui.tap")["input_schema"]["properties"]["x"]["type"] = json!("spaceship");
    d.command("openphone.ui.swipe")["output_schema"] = json!({"type": "spaceship"});
    d.runtime_schema["properties"]["version"] = json!({"type": 12});
    d
}

#[test]
fn a_schema_that_does_not_compile_is_reported_by_compile_all_when_loaded_lazily() {
    let d = broken_tap_schema();
    let at_load = Registry::load(&d.sources()).unwrap_err();
    let lazy = Registry::load_with(&d.sources(), SchemaCompile::OnFirstUse).unwrap();
    let errors = lazy.compile_all().unwrap_err();
    for (rule, subject) in [
        (Rule::CommandSchemaCompiles, Some("openphone.ui.tap")),
        (Rule::CommandSchemaCompiles, Some("openphone.ui.swipe")),
        (Rule::RuntimeSchemaCompiles, None),
    ] {
        assert!(
            at_load.has(rule, subject),
            "{rule:?} {subject:?}: {at_load}"
        );
        assert!(errors.has(rule, subject), "{rule:?} {subject:?}: {errors}");
    }
    assert_eq!(errors.0.len(), 3, "{errors}");
}

#[test]
fn params_of_a_command_whose_schema_does_not_compile_get_a_clear_error_not_a_pass() {
    let d = broken_tap_schema();
    let lazy = Registry::load_with(&d.sources(), SchemaCompile::OnFirstUse).unwrap();
    let tap = lazy.resolve("openphone.ui.tap").unwrap();
    let errors = lazy
        .validate_params(tap, &json!({"x": 1, "y": 2, "reason": "r"}))
        .unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .message
            .contains("openphone.ui.tap's input schema does not compile"),
        "{errors:?}"
    );
    // Other commands still validate, each compiled on its first call.
    let text = lazy.resolve("openphone.ui.type_text").unwrap();
    let missing = lazy.validate_params(text, &json!({})).unwrap_err();
    assert!(missing.iter().any(|e| e.field == "reason"), "{missing:?}");
}
