//! The loop's answers to the model that do not depend on who runs it: the request of one
//! model call, a tool call's arguments parsed, the answers to a call of an unknown tool or
//! with unusable arguments, the reason recorded for a call that gives none, what the model is
//! told about a result, and whether a result was parked for a background review.

use openphone_model::{ChatRequest, Message, ToolCall, ToolChoice};
use openphone_protocol::{Command, ErrorCode, ToolResult, ToolStatus};
use serde_json::{Map, Value, json};

use crate::prompt::{self, Image, TOOL_RESULT_CHARS};
use crate::tools::ToolCatalogue;
use crate::transcript::{self, Kept};

/// The longest `reason` the loop writes for a tool call (characters).
const REASON_CHARS: usize = 200;

/// The request of one model call: the system prompt, then the history fitted to
/// `max_history_chars` (nothing from `run_start` on is left out), with the tools on offer.
/// Images are sent once, in the call right after the tool call that produced them: older
/// messages lose theirs here (later calls read the placeholder).
pub(crate) fn chat_request(
    system: String,
    messages: &mut [Kept],
    run_start: usize,
    tools: &ToolCatalogue,
    max_history_chars: u32,
    max_tokens: u32,
) -> ChatRequest {
    let last = messages.len().saturating_sub(1);
    for kept in &mut messages[..last] {
        if transcript::has_images(&kept.message) {
            kept.message = transcript::without_images(&kept.message);
        }
    }
    let budget = usize::try_from(max_history_chars).unwrap_or(usize::MAX);
    let history = transcript::fit(messages, budget, run_start);
    let mut sent = Vec::with_capacity(history.len() + 1);
    sent.push(Message::system(system));
    sent.extend(history);
    ChatRequest {
        messages: sent,
        tools: tools.specs().to_vec(),
        tool_choice: Some(ToolChoice::Auto),
        max_tokens: Some(max_tokens),
    }
}

/// The answer to a call of a tool that is not offered: the model is told which ones are.
pub(crate) fn unknown_tool(call: &ToolCall, tools: &ToolCatalogue) -> (Message, Value) {
    let offered: Vec<&str> = tools.names().collect();
    let text = format!(
        "Error unknown_tool: no tool named {:?} is offered. Use one of: {}.",
        openphone_protocol::log_value(&call.name).to_string(),
        offered.join(", ")
    );
    let meta = json!({"tool": Value::Null, "status": "error", "error_code": "unknown_tool"});
    (Message::tool(call.id.clone(), text), meta)
}

/// The answer to a call whose arguments are not one JSON object: nothing ran.
pub(crate) fn invalid_arguments(
    call: &ToolCall,
    command: &Command,
    problem: &str,
) -> (Message, Value) {
    let text = format!(
        "Error invalid_arguments: {problem}. Nothing was run. Call {} again with one JSON \
         object that matches its schema.",
        command.android_tool
    );
    let meta = json!({"tool": command.name, "status": "error",
        "error_code": "invalid_arguments"});
    (Message::tool(call.id.clone(), text), meta)
}

/// The arguments of a tool call as a JSON object (empty text is `{}`).
pub(crate) fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, not {}",
            kind_of(&other)
        )),
        Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The reason recorded for a call whose arguments give none: what the model said before
/// calling, or a plain note.
pub(crate) fn fallback_reason(said: &str, command: &Command) -> String {
    let said = said.trim();
    if said.is_empty() {
        format!("the built-in assistant called {}", command.android_tool)
    } else {
        openphone_core::summary::cut(said, REASON_CHARS)
    }
}

/// What the model is told about a result: a plain first line of ours, then the result (or the
/// error) wrapped as phone data, without image bytes. Returns the images taken out.
pub(crate) fn describe(result: ToolResult, command: &Command, asked: bool) -> (String, Vec<Image>) {
    let tool = command.android_tool.as_str();
    let code = result.error.as_ref().map(|e| e.code);
    let headline = match (result.status, code) {
        (ToolStatus::Ok, _) if asked => {
            format!("The user approved {tool} on the phone and it ran. Its result:")
        }
        (ToolStatus::Ok, _) => format!("{tool} ran. Its result:"),
        (ToolStatus::Denied, Some(ErrorCode::UserDeniedConfirmation)) => format!(
            "The user declined {tool} on the phone: it was NOT done. Do not try it again, or \
             the same thing another way, unless the user asks. Tell the user it was not done."
        ),
        (ToolStatus::Denied, _) => format!(
            "{tool} was refused by the phone's policy: it was NOT done. Do not retry it; tell \
             the user if it matters. Details:"
        ),
        (ToolStatus::Timeout, _) => format!(
            "Nobody answered the confirmation for {tool} in time: it was NOT done. Tell the user."
        ),
        (ToolStatus::Cancelled, _) => {
            format!("{tool} was withdrawn before it ran: it was NOT done.")
        }
        (ToolStatus::NeedsConfirmation, _) => {
            format!("{tool} is waiting for the user's review and has not run.")
        }
        (ToolStatus::Error, _) => format!(
            "{tool} failed. Read the error; if the arguments were wrong, fix them and call it \
             again. The error:"
        ),
    };
    let mut payload = match (result.status, result.error) {
        (ToolStatus::Ok, _) | (_, None) => Value::Object(result.result),
        (_, Some(error)) => json!({
            "code": error.code.as_str(),
            "message": error.message,
            "details": error.details,
        }),
    };
    let images = prompt::strip_images(&mut payload);
    let body = prompt::wrap(
        &format!("tool_result:{}", command.name),
        &payload,
        TOOL_RESULT_CHARS,
    );
    (format!("{headline}\n{body}"), images)
}

/// Whether the bridge parked the call for a background review (policy layer 6).
pub(crate) fn is_parked(result: &ToolResult) -> bool {
    result
        .error
        .as_ref()
        .is_some_and(|e| e.code == ErrorCode::BackgroundConfirmationRequired)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openphone_model::ContentPart;
    use openphone_protocol::Registry;

    fn command(name: &str) -> &'static Command {
        Registry::embedded().unwrap().resolve(name).unwrap()
    }

    #[test]
    fn arguments_must_be_one_object() {
        assert!(parse_arguments("").unwrap().is_empty());
        assert_eq!(parse_arguments(r#"{"a":1}"#).unwrap()["a"], 1);
        assert!(parse_arguments("[1]").unwrap_err().contains("an array"));
        assert!(
            parse_arguments("{\"to\": ")
                .unwrap_err()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn results_are_told_plainly_and_wrapped() {
        let send = command("openphone.messages.send");
        let denied = ToolResult::failure(
            "builtin",
            "r1",
            ErrorCode::UserDeniedConfirmation,
            "the user denied this request",
        );
        let (text, _) = describe(denied, send, true);
        assert!(
            text.starts_with("The user declined messages_send"),
            "{text}"
        );
        assert!(text.contains("<untrusted_data source=\"tool_result:openphone.messages.send\">"));

        let mut ok = ToolResult::failure("builtin", "r2", ErrorCode::ToolError, "x");
        ok.status = ToolStatus::Ok;
        ok.error = None;
        ok.result.insert(
            "screenshot".into(),
            json!({"mime_type": "image/png", "data_base64": "AAAA"}),
        );
        let (text, images) = describe(ok, command("openphone.screen.get"), false);
        assert!(text.starts_with("get_screen ran."), "{text}");
        assert!(!text.contains("AAAA"));
        assert_eq!(images.len(), 1);
    }

    #[test]
    fn images_are_not_stored() {
        let message = Message::user_parts(vec![
            ContentPart::text("look"),
            ContentPart::image_data("image/png", b"png"),
        ]);
        let stored = serde_json::to_string(&transcript::without_images(&message)).unwrap();
        assert!(!stored.contains("base64"), "{stored}");
        assert!(stored.contains("look"));
    }
}
