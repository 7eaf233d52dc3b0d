//! The JSON Schema of the endpoint, generated from the types of [`crate::endpoint`]
//! (schemars derives beside the serde ones; the few hand-written serde impls have hand-written
//! schemas here). [`endpoint_schema`] is one draft 2020-12 document: `$defs` holds every
//! type, `methods` names each method's params and result by reference, `event` and `error`
//! the two other frames. It is committed as `docs/endpoint.schema.json`; a protocol test fails
//! when that file is stale and checks every example of `docs/endpoint.md` against it.

use schemars::Schema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::endpoint::{
    ErrorResponse, EventNotification, MethodName, Request, Response, ServerMessage, method_schemas,
};

/// What a macro outside this crate (`wire_enum!`) needs to write a schema.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde_json;
}

/// A schema of exactly these strings.
pub fn string_enum<'a>(values: impl IntoIterator<Item = &'a str>) -> Schema {
    let values: Vec<Value> = values.into_iter().map(Value::from).collect();
    let mut map = Map::new();
    map.insert("type".to_owned(), Value::from("string"));
    map.insert("enum".to_owned(), Value::Array(values));
    Schema::from(map)
}

/// The endpoint's JSON Schema document.
pub fn endpoint_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let methods: Map<String, Value> = MethodName::ALL
        .iter()
        .map(|method| {
            let (params, result) = method_schemas(*method, &mut generator);
            (
                method.as_str().to_owned(),
                json!({ "params": params, "result": result }),
            )
        })
        .collect();
    let request = generator.subschema_for::<Request>();
    let response = generator.subschema_for::<Response>();
    let event = generator.subschema_for::<EventNotification>();
    let error = generator.subschema_for::<ErrorResponse>();
    let frame = generator.subschema_for::<ServerMessage>();
    let defs = generator.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "OpenPhone endpoint (/v1/runtime)",
        "description": "Generated from openphone_protocol::endpoint (crates/protocol/src/schema.rs); do not edit. Regenerate with OPENPHONE_UPDATE_SCHEMA=1 cargo test -p openphone-protocol --test all endpoint_schema.",
        "request": request,
        "response": response,
        "event": event,
        "error": error,
        "server_message": frame,
        "methods": methods,
        "$defs": defs,
    })
}
