use openphone_mcp::{CallError, ToolTable, call_result, resolve_call};
use openphone_protocol::{ErrorCode, ToolStatus};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::registry;

#[test]
fn exposed_canonical_alias_and_model_tool_names_resolve() {
    let table = ToolTable::new(registry()).unwrap();
    let screen = registry().resolve("openphone.screen.get").unwrap();
    let mut names = vec![
        "openphone_screen_get".to_owned(),
        " openphone_screen_get ".to_owned(),
    ];
    names.extend(screen.all_names().map(str::to_owned));
    assert!(
        names.len() >= 3,
        "canonical, exposed and a model-tool name at least"
    );
    for name in &names {
        assert_eq!(
            table.resolve_call(name).unwrap().name,
            "openphone.screen.get",
            "{name}"
        );
        assert_eq!(
            resolve_call(registry(), name).unwrap().name,
            "openphone.screen.get"
        );
    }
    // aliases and model-tool names resolve but are never listed
    let listed: Vec<&str> = table.tool_names().collect();
    for name in screen.all_names() {
        assert!(!listed.contains(&name), "{name} must not be listed");
    }
}

#[test]
fn mcp_false_commands_are_refused_under_every_name() {
    let table = ToolTable::new(registry()).unwrap();
    for canonical in ["openphone.messages.send", "openphone.calls.place"] {
        let cmd = registry().resolve(canonical).unwrap();
        assert!(!cmd.mcp);
        let mut names: Vec<String> = cmd.all_names().map(str::to_owned).collect();
        names.push(openphone_mcp::tool_name(canonical));
        assert!(names.len() >= 3);
        for name in names {
            let err = table.resolve_call(&name).unwrap_err();
            assert_eq!(
                err,
                CallError::NotExposed {
                    name: name.clone(),
                    command: canonical.to_owned(),
                }
            );
            assert_eq!(err.code(), ErrorCode::ToolNotGranted);
            assert!(
                err.protocol_error().is_none(),
                "a tool result, not a protocol error"
            );
            let result = err.tool_result("mcp-stdio", "mcp:k1").unwrap();
            result.check().unwrap();
            assert_eq!(result.status, ToolStatus::Denied);
            let error = result.error.as_ref().unwrap();
            assert_eq!(
                error.details.as_ref().unwrap()["policy"],
                json!("transport_not_allowed")
            );
            // A policy outcome: a result, not an error a host counts as a failure.
            let shaped = call_result(&result);
            assert_eq!(shaped.is_error, Some(false));
            let structured = shaped.structured_content.as_ref().unwrap();
            assert_eq!(structured["outcome"], json!("denied"));
            assert_eq!(structured["done"], json!(false));
            assert!(matches!(
                resolve_call(registry(), &name),
                Err(CallError::NotExposed { .. })
            ));
        }
    }
}

#[test]
fn unknown_names_are_protocol_errors_with_the_unknown_tool_code() {
    let table = ToolTable::new(registry()).unwrap();
    for name in [
        "openphone_nope",
        "openphone.ui.tap.element",
        "OPENPHONE_UI_TAP",
    ] {
        let err = table.resolve_call(name).unwrap_err();
        assert_eq!(err, CallError::UnknownTool(name.to_owned()));
        assert!(err.tool_result("r", "q").is_none());
        let data = err.protocol_error().unwrap();
        assert_eq!(data.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(data.code.0, -32602);
        assert_eq!(data.message, format!("Unknown tool: {name}"));
        assert_eq!(data.data.unwrap()["code"], json!("unknown_tool"));
    }
}

#[test]
fn a_call_without_a_name_is_a_tool_result() {
    let table = ToolTable::new(registry()).unwrap();
    for name in ["", "   "] {
        let err = table.resolve_call(name).unwrap_err();
        assert_eq!(err, CallError::MissingName);
        assert!(err.protocol_error().is_none());
        let result = err.tool_result("mcp-stdio", "r1").unwrap();
        assert_eq!(result.error.as_ref().unwrap().code, ErrorCode::MissingTool);
        assert_eq!(call_result(&result).is_error, Some(true));
    }
}
