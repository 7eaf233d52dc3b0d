use openphone_mcp::{ToolTable, call_result, invalid_arguments, json_pointer, retryable};
use openphone_protocol::{ErrorCode, ToolResult, ToolStatus};
use pretty_assertions::assert_eq;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use super::registry;

fn text_of(result: &CallToolResult) -> &str {
    assert_eq!(result.content.len(), 1);
    match &result.content[0] {
        ContentBlock::Text(t) => &t.text,
        other => panic!("expected a text block, got {other:?}"),
    }
}

fn error_of(result: &CallToolResult) -> Value {
    serde_json::from_str::<Value>(text_of(result)).unwrap()["error"].clone()
}

fn pending(id: &str) -> ToolResult {
    let mut r = ToolResult::failure(
        "mcp-stdio",
        "mcp:key-1",
        ErrorCode::MutatingToolRequiresConfirmation,
        "the user must confirm on the phone",
    );
    let mut body = Map::new();
    body.insert("confirmation_id".into(), json!(id));
    body.insert("summary".into(), json!("Tap at (10, 20)"));
    body.insert("timeout_ms".into(), json!(120_000));
    body.insert("expires_at_ms".into(), json!(1_700_000_120_000_u64));
    r.result = body;
    r
}

#[test]
fn ok_is_structured_content_with_a_text_mirror() {
    let mut body = Map::new();
    body.insert("foreground_app".into(), json!("com.example.mail"));
    body.insert("width".into(), json!(1080));
    let tr = ToolResult::ok("mcp-stdio", "mcp:abc", body);
    let shaped = call_result(&tr);
    assert_eq!(
        serde_json::to_value(&shaped).unwrap(),
        json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": "{\"foreground_app\":\"com.example.mail\",\"width\":1080}"}],
            "structuredContent": {"foreground_app": "com.example.mail", "width": 1080},
            "isError": false,
            "_meta": {"dev.openphone/toolResult": {
                "request_id": "mcp:abc",
                "status": "ok",
                "audit_id": "runtime:mcp-stdio:mcp:abc"
            }}
        })
    );
    let mirror: Value = serde_json::from_str(text_of(&shaped)).unwrap();
    assert_eq!(Some(mirror), shaped.structured_content);
}

#[test]
fn needs_confirmation_is_a_policy_outcome_saying_where_to_approve() {
    let id = "runtime-confirm-3f2a";
    let shaped = call_result(&pending(id));
    // Not an error result: hosts that count errors (Hermes' circuit breaker) must not count
    // a pending confirmation; the outcome says plainly that nothing happened.
    assert_eq!(shaped.is_error, Some(false));
    let structured = shaped.structured_content.clone().unwrap();
    assert_eq!(structured["outcome"], json!("pending"));
    assert_eq!(structured["done"], json!(false));
    assert_eq!(structured["confirmation_id"], json!(id));
    assert_eq!(structured["error"], error_of(&shaped));
    let error = error_of(&shaped);
    assert_eq!(error["code"], json!("mutating_tool_requires_confirmation"));
    assert_eq!(error["retryable"], json!(false));
    assert_eq!(error["details"]["confirmation_id"], json!(id));
    assert_eq!(error["details"]["summary"], json!("Tap at (10, 20)"));
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with(&format!(
        "Waiting for the user to confirm on the phone (confirmation {id})"
    )));
    assert!(message.contains(&format!("openphone confirmations approve {id}")));
    assert!(
        message.contains("openphone_confirmation_status"),
        "{message}"
    );
    assert!(message.contains("never runs the action twice"), "{message}");
    let meta = &shaped.meta.as_ref().unwrap().0["dev.openphone/toolResult"];
    assert_eq!(meta["status"], json!("needs_confirmation"));
    assert_eq!(meta["confirmation_id"], json!(id));
    assert_eq!(meta["request_id"], json!("mcp:key-1"));
    assert_eq!(
        meta["error"]["code"],
        json!("mutating_tool_requires_confirmation")
    );

    // through the table: the poll tool is named
    let table = ToolTable::new(registry()).unwrap();
    let via_table = error_of(&table.call_result(&pending(id)));
    let tool = table.confirmations_tool().unwrap();
    assert!(via_table["message"].as_str().unwrap().contains(tool));
}

#[test]
fn every_status_is_mapped() {
    let cases = [
        (ToolStatus::Ok, None),
        (
            ToolStatus::NeedsConfirmation,
            Some(ErrorCode::MutatingToolRequiresConfirmation),
        ),
        (ToolStatus::Denied, Some(ErrorCode::UserDeniedConfirmation)),
        (
            ToolStatus::Denied,
            Some(ErrorCode::ObserveOnlyMutationDenied),
        ),
        (ToolStatus::Denied, Some(ErrorCode::ToolNotGranted)),
        (ToolStatus::Error, Some(ErrorCode::ToolError)),
        (ToolStatus::Error, Some(ErrorCode::FrameworkUnavailable)),
        (ToolStatus::Timeout, Some(ErrorCode::Timeout)),
        (ToolStatus::Cancelled, Some(ErrorCode::Cancelled)),
    ];
    for (status, code) in cases {
        let tr = match code {
            None => ToolResult::ok("mcp", "r", Map::new()),
            Some(ErrorCode::MutatingToolRequiresConfirmation) => pending("runtime-confirm-1"),
            Some(code) => ToolResult::failure("mcp", "r", code, "bridge says no"),
        };
        assert_eq!(tr.status, status);
        let shaped = call_result(&tr);
        let meta = &shaped.meta.as_ref().unwrap().0["dev.openphone/toolResult"];
        assert_eq!(meta["status"], json!(status.as_str()));
        if status == ToolStatus::Ok {
            assert_eq!(shaped.is_error, Some(false));
            assert!(shaped.structured_content.is_some());
            assert!(meta.get("error").is_none());
            continue;
        }
        let code = code.unwrap();
        match openphone_mcp::policy_outcome(status) {
            Some(outcome) => {
                assert_eq!(shaped.is_error, Some(false), "{status:?}");
                let structured = shaped.structured_content.as_ref().unwrap();
                assert_eq!(structured["outcome"], json!(outcome), "{status:?}");
                assert_eq!(structured["done"], json!(false), "{status:?}");
            }
            None => {
                assert_eq!(shaped.is_error, Some(true), "{status:?}");
                assert_eq!(shaped.structured_content, None, "{status:?}");
            }
        }
        let error = error_of(&shaped);
        assert_eq!(error["code"], json!(code.as_str()));
        assert_eq!(error["retryable"], json!(retryable(code)));
        assert!(error["details"].is_object());
        assert!(error["message"].as_str().unwrap().ends_with('.'));
        assert_eq!(meta["error"]["code"], json!(code.as_str()));
    }
}

#[test]
fn policy_outcomes_are_pending_denied_and_expired_only() {
    assert_eq!(
        openphone_mcp::policy_outcome(ToolStatus::NeedsConfirmation),
        Some("pending")
    );
    assert_eq!(
        openphone_mcp::policy_outcome(ToolStatus::Denied),
        Some("denied")
    );
    assert_eq!(
        openphone_mcp::policy_outcome(ToolStatus::Timeout),
        Some("expired")
    );
    for status in [ToolStatus::Ok, ToolStatus::Error, ToolStatus::Cancelled] {
        assert_eq!(openphone_mcp::policy_outcome(status), None, "{status:?}");
    }
}

#[test]
fn a_large_result_is_summarised_in_its_text_and_whole_in_structured_content() {
    let mut body = Map::new();
    body.insert("foreground_app".into(), json!("com.example.mail"));
    body.insert("title".into(), json!("x".repeat(200)));
    let nodes: Vec<Value> = (0..100)
        .map(|i| json!({"id": format!("n{i}"), "text": "Inbox row", "clickable": true}))
        .collect();
    body.insert("nodes".into(), Value::Array(nodes));
    let whole = Value::Object(body.clone()).to_string();
    let shaped = call_result(&ToolResult::ok("mcp", "r", body.clone()));
    assert_eq!(shaped.is_error, Some(false));
    assert_eq!(shaped.structured_content, Some(Value::Object(body.clone())));
    let text = text_of(&shaped);
    assert!(
        text.len() * 5 < whole.len(),
        "{} vs {}",
        text.len(),
        whole.len()
    );
    assert!(
        text.contains("foreground_app: \"com.example.mail\""),
        "{text}"
    );
    assert!(text.contains("nodes: [100 items]"), "{text}");
    assert!(text.contains('…'), "a long string is cut: {text}");
    assert!(
        text.ends_with("The full result is the structured content."),
        "{text}"
    );

    // a replayed answer says it answers an earlier call
    let mut replayed = ToolResult::ok("mcp", "r", body);
    replayed.replayed = true;
    assert!(text_of(&call_result(&replayed)).starts_with("Done earlier"));
}

#[test]
fn retryable_follows_the_spec_table() {
    for code in [
        ErrorCode::InvalidParams,
        ErrorCode::MissingReason,
        ErrorCode::Timeout,
        ErrorCode::RateLimited,
        ErrorCode::FrameworkUnavailable,
    ] {
        assert!(retryable(code), "{code}");
    }
    for code in [
        ErrorCode::ToolNotGranted,
        ErrorCode::ObserveOnlyMutationDenied,
        ErrorCode::UserDeniedConfirmation,
        ErrorCode::MutatingToolRequiresConfirmation,
        ErrorCode::Cancelled,
        ErrorCode::ExecutionResultUnknown,
    ] {
        assert!(!retryable(code), "{code}");
    }
}

#[test]
fn denial_messages_tell_the_model_what_to_do_next() {
    let tr = ToolResult::failure(
        "mcp",
        "r",
        ErrorCode::UserDeniedConfirmation,
        "the user declined.",
    );
    assert_eq!(
        error_of(&call_result(&tr))["message"],
        json!("the user declined. Do not retry without asking the user.")
    );
    let tr = ToolResult::failure(
        "mcp",
        "r",
        ErrorCode::ObserveOnlyMutationDenied,
        "observe_only",
    );
    assert!(
        error_of(&call_result(&tr))["message"]
            .as_str()
            .unwrap()
            .contains("may only read")
    );
}

#[test]
fn invalid_arguments_name_every_field_and_are_tool_results() {
    let cmd = registry().resolve("openphone.ui.tap").unwrap();
    let args = json!({"x": "left", "reason": "open the mail"});
    let errors = registry().validate_params(cmd, &args).unwrap_err();
    let tr = invalid_arguments("mcp-stdio", "mcp:r9", cmd, &errors);
    tr.check().unwrap();
    assert_eq!(tr.status, ToolStatus::Error);
    let shaped = call_result(&tr);
    assert_eq!(shaped.is_error, Some(true));
    let error = error_of(&shaped);
    assert_eq!(error["code"], json!("invalid_params"));
    assert_eq!(error["retryable"], json!(true));
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("openphone.ui.tap"), "{message}");
    assert!(
        message.contains("x:"),
        "the wrong-typed field is named: {message}"
    );
    assert!(
        message.contains("y: required field is missing"),
        "{message}"
    );
    assert!(message.ends_with("Fix the listed arguments and call again."));
    let listed = error["details"]["errors"].as_array().unwrap();
    assert_eq!(listed.len(), errors.len());
    assert!(
        listed
            .iter()
            .any(|e| e["field"] == json!("x") && e["pointer"] == json!("/x"))
    );

    // the bridge's own invalid_params result (field names in the message) maps the same way
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let bridge = ToolResult::failure(
        "mcp-stdio",
        "mcp:r9",
        ErrorCode::InvalidParams,
        format!("invalid params for {}: {}", cmd.name, text.join("; ")),
    );
    let shaped = call_result(&bridge);
    assert_eq!(shaped.is_error, Some(true));
    assert!(
        error_of(&shaped)["message"]
            .as_str()
            .unwrap()
            .contains("x:")
    );
}

#[test]
fn field_errors_are_capped() {
    let cmd = registry().resolve("openphone.ui.tap").unwrap();
    let errors: Vec<_> = (0..25)
        .map(|i| openphone_protocol::FieldError {
            field: format!("f{i}"),
            message: "bad".into(),
        })
        .collect();
    let tr = invalid_arguments("mcp", "r", cmd, &errors);
    let details = tr.error.as_ref().unwrap().details.as_ref().unwrap();
    assert_eq!(details["errors"].as_array().unwrap().len(), 20);
    assert_eq!(details["omitted"], json!(5));
}

#[test]
fn field_paths_become_json_pointers() {
    assert_eq!(json_pointer(""), "");
    assert_eq!(json_pointer("x"), "/x");
    assert_eq!(json_pointer("delivery.mode"), "/delivery/mode");
    assert_eq!(json_pointer("items[0]"), "/items/0");
    assert_eq!(json_pointer("items[0].name"), "/items/0/name");
    assert_eq!(json_pointer("a/b~c"), "/a~1b~0c");
}

#[test]
fn a_replayed_result_says_so() {
    let tr = ToolResult::ok("mcp", "r1", Map::new()).readdressed("mcp", "r2");
    let shaped = call_result(&tr);
    let meta = &shaped.meta.as_ref().unwrap().0["dev.openphone/toolResult"];
    assert_eq!(meta["request_id"], json!("r2"));
    assert_eq!(meta["replayed"], json!(true));
}
