//! The runtime message schema: its title, the twelve message definitions, and that it
//! compiles as JSON Schema 2020-12.

use serde_json::Value;

use super::{Report, Rule, SchemaCompile, describe, parse_object};

/// The twelve definitions the runtime schema must hold (§4.7).
const RUNTIME_SCHEMA_DEFS: [&str; 12] = [
    "attentionRequest",
    "toolRequest",
    "toolResult",
    "runtimeEvent",
    "confirmation",
    "assistantOutput",
    "surfacePresent",
    "surfaceReplace",
    "surfaceDismiss",
    "surfaceActionResult",
    "surfaceActionInvocation",
    "phoneSurfaceDismissed",
];

/// The title the runtime schema must carry.
const RUNTIME_SCHEMA_TITLE: &str = "OpenPhone Runtime Agent Protocol";

/// Checks the runtime schema; the schema document (`null` when it is not a JSON object).
pub(super) fn check(text: &str, compile: SchemaCompile, r: &mut Report) -> Value {
    let Some(doc) = parse_object(text, Rule::RuntimeSchemaJson, r) else {
        return Value::Null;
    };
    if doc.get("title").and_then(Value::as_str) != Some(RUNTIME_SCHEMA_TITLE) {
        r.err(
            Rule::RuntimeSchemaTitle,
            None,
            format!(
                "title must be {RUNTIME_SCHEMA_TITLE:?}, found {}",
                describe(doc.get("title"))
            ),
        );
    }
    match doc.get("$defs").and_then(Value::as_object) {
        None => r.err(Rule::RuntimeSchemaDefs, None, "`$defs` must be an object"),
        Some(defs) => {
            for name in RUNTIME_SCHEMA_DEFS {
                if !defs.get(name).is_some_and(Value::is_object) {
                    r.err(
                        Rule::RuntimeSchemaDefs,
                        Some(name),
                        "definition missing from `$defs`",
                    );
                }
            }
        }
    }
    let value = Value::Object(doc);
    if compile == SchemaCompile::AtLoad
        && let Err(e) = jsonschema::draft202012::new(&value)
    {
        r.err(
            Rule::RuntimeSchemaCompiles,
            None,
            format!("does not compile: {e}"),
        );
    }
    value
}
