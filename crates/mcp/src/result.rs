//! ToolBridge results as MCP `CallToolResult`s (`mcp.md` §5.2, §5.3, §7.5).

use openphone_protocol::{Command, ErrorCode, FieldError, ToolResult, ToolStatus};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, MetaObject};
use serde_json::{Map, Value, json};

/// `_meta` key of a call result: `{request_id, status, audit_id, error?, confirmation_id?}`.
pub const META_TOOL_RESULT: &str = "dev.openphone/toolResult";

/// At most this many field errors are reported (`mcp.md` §5.4); the bridge's own cap.
pub use openphone_core::request::MAX_FIELD_ERRORS;

/// Shapes a ToolBridge result without knowing the manifest: a pending confirmation points at
/// the operator surfaces and at `openphone_confirmation_status`. A server uses
/// [`crate::ToolTable::call_result`], which names `openphone_confirmations_get` when the
/// manifest has it.
pub fn call_result(result: &ToolResult) -> CallToolResult {
    shape(result, None)
}

pub(crate) fn shape(result: &ToolResult, confirmations_tool: Option<&str>) -> CallToolResult {
    if result.status == ToolStatus::Ok {
        let text = success_text(result);
        return success(result, result.result.clone(), text);
    }
    not_ok(result, confirmations_tool)
}

/// [`shape`] of a result the caller is done with: a success's data moves into the answer
/// instead of being copied (issue 34).
pub(crate) fn shape_owned(
    mut result: ToolResult,
    confirmations_tool: Option<&str>,
) -> CallToolResult {
    if result.status == ToolStatus::Ok {
        // A result that exists only as text is read as a tree first: its summary lists its
        // members. Its text came from a `Map` (`ObjectText`), so it parses.
        if let Err(e) = result.materialize() {
            tracing::error!(error = %e, "a tool result's text did not parse");
        }
        let text = success_text(&result);
        let data = std::mem::take(&mut result.result);
        result.unseal();
        return success(&result, data, text);
    }
    not_ok(&result, confirmations_tool)
}

/// The text of a success: its summary, from the text the bridge kept when it sealed it.
fn success_text(result: &ToolResult) -> String {
    summary(&result.result, result.sealed_text(), result.replayed)
}

/// A successful result: `data` (the result's own, moved or copied) is the structured content,
/// `text` its summary. Built field by field: `CallToolResult::structured` would also write
/// `data` out as text, only for that text to be replaced by the summary.
fn success(result: &ToolResult, data: Map<String, Value>, text: String) -> CallToolResult {
    with_structured(text, Value::Object(data)).with_meta(Some(tool_result_meta(result, None)))
}

/// What `CallToolResult::structured(structured)` answers, with `text` as its text block.
fn with_structured(text: String, structured: Value) -> CallToolResult {
    let mut shaped = CallToolResult::success(vec![ContentBlock::text(text)]);
    shaped.structured_content = Some(structured);
    shaped
}

/// A result that is not a success: an error, or a policy outcome.
fn not_ok(result: &ToolResult, confirmations_tool: Option<&str>) -> CallToolResult {
    let code = result
        .error
        .as_ref()
        .map_or(ErrorCode::ToolError, |e| e.code);
    let confirmation_id = pending_confirmation(result);
    let confirmation_id = confirmation_id.as_deref();
    let message = match confirmation_id {
        Some(id) => pending_message(id, confirmations_tool),
        None => error_message(result, code),
    };
    let mut details = Map::new();
    if confirmation_id.is_some() {
        for (k, v) in &result.result {
            details.insert(k.clone(), v.clone());
        }
    }
    if let Some(more) = result.error.as_ref().and_then(|e| e.details.as_ref()) {
        for (k, v) in more {
            details.insert(k.clone(), v.clone());
        }
    }
    let error = json!({
        "code": code.as_str(),
        "message": message,
        "retryable": retryable(code),
        "details": details,
    });
    let text = json!({ "error": error.clone() });
    let meta = Some(tool_result_meta(result, confirmation_id));
    match policy_outcome(result.status) {
        // A decision, not a failure: a result the host's failure counter does not count,
        // with the outcome in `structuredContent` (every output schema is an open object).
        Some(outcome) => {
            let mut structured = Map::new();
            structured.insert("outcome".into(), json!(outcome));
            structured.insert("done".into(), json!(false));
            if let Some(id) = confirmation_id {
                structured.insert("confirmation_id".into(), json!(id));
            }
            structured.insert("error".into(), error);
            with_structured(text.to_string(), Value::Object(structured)).with_meta(meta)
        }
        None => CallToolResult::error(vec![ContentBlock::text(text.to_string())]).with_meta(meta),
    }
}

/// The `structuredContent.outcome` of a policy outcome — a result that is the phone's or the
/// user's decision rather than a failure: `pending` (waiting for the user), `denied` (refused
/// by the policy or the user), `expired` (nobody decided in time). These are answered with
/// `isError: false` so that hosts which count error results towards a circuit breaker (Hermes
/// Agent opens it after three) do not stop talking to the phone over a "no"; the text and
/// `structuredContent.done: false` say plainly that nothing happened. `None`: an error
/// (`isError: true`) or a success.
pub fn policy_outcome(status: ToolStatus) -> Option<&'static str> {
    match status {
        ToolStatus::NeedsConfirmation => Some("pending"),
        ToolStatus::Denied => Some("denied"),
        ToolStatus::Timeout => Some("expired"),
        ToolStatus::Ok | ToolStatus::Error | ToolStatus::Cancelled => None,
    }
}

/// Longest string value quoted whole in a result summary; longer ones are cut with `…`.
pub(crate) const SUMMARY_STRING_CHARS: usize = 80;
/// Longest result summary (characters) before its remaining fields are only counted.
pub(crate) const SUMMARY_MAX_CHARS: usize = 600;

/// How a summary of a replayed result begins.
pub(crate) const REPLAYED: &str =
    "Done earlier (this answers an identical earlier call; nothing ran again).";

/// The text block of a successful result: a compact summary, because `structuredContent`
/// carries the data (a second full copy doubled every answer: a screen read was 25,568
/// characters in Hermes where 11,189 carried it). A result whose JSON fits in
/// `SUMMARY_MAX_CHARS` is that JSON; a larger one is summarised: scalars are shown (strings cut at
/// `SUMMARY_STRING_CHARS`), arrays and objects by their size, and the summary says where the
/// full result is. A `replayed` result says that it answers an earlier identical call.
pub fn summary_text(result: &Map<String, Value>, replayed: bool) -> String {
    summary(result, None, replayed)
}

/// [`summary_text`], given the result's JSON text when the bridge kept it (a read's result is
/// written to text once, for its audit digest: `ToolResult::seal`), so that its size is known
/// without writing it again.
fn summary(result: &Map<String, Value>, sealed: Option<&str>, replayed: bool) -> String {
    let whole = match sealed {
        Some(text) => (text.len() <= SUMMARY_MAX_CHARS).then(|| text.to_owned()),
        None => json_within(result, SUMMARY_MAX_CHARS),
    };
    // A small result is its own best summary: the JSON, whole.
    if let Some(whole) = whole {
        return if replayed {
            format!("{REPLAYED} {whole}")
        } else {
            whole
        };
    }
    let members = result
        .iter()
        .map(|(key, value)| (key.as_str(), shown(value)));
    summarized(members, replayed)
}

/// The summary of a result too long to be shown whole: its members, in order, as [`shown`]
/// shows them, as many as fit.
pub(crate) fn summarized<'a>(
    members: impl Iterator<Item = (&'a str, String)>,
    replayed: bool,
) -> String {
    const END: &str = " The full result is the structured content.";
    // Written straight into the text (a part per member, then their join, took two more
    // allocations a member: issue 34).
    let mut text = String::with_capacity(SUMMARY_MAX_CHARS + REPLAYED.len() + END.len() + 32);
    text.push_str(if replayed { REPLAYED } else { "Done." });
    let mut used = 0usize;
    let mut left_out = 0usize;
    let mut shown_any = false;
    for (key, shown) in members {
        // "key: shown"
        let part = key.len() + 2 + shown.len();
        if used + part > SUMMARY_MAX_CHARS {
            left_out += 1;
            continue;
        }
        used += part + 2;
        text.push_str(if shown_any { ", " } else { " " });
        text.push_str(key);
        text.push_str(": ");
        text.push_str(&shown);
        shown_any = true;
    }
    if shown_any {
        if left_out > 0 {
            text.push_str(&format!(", and {left_out} more fields"));
        }
        text.push('.');
    }
    text.push_str(END);
    text
}

/// How a summary shows one member's value: a scalar as JSON (a string cut at
/// `SUMMARY_STRING_CHARS`), an array or object by its size.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(text) => shown_string(text),
        Value::Array(items) => shown_items(items.len()),
        Value::Object(fields) => shown_fields(fields.len()),
    }
}

pub(crate) fn shown_string(text: &str) -> String {
    let cut: String = text.chars().take(SUMMARY_STRING_CHARS).collect();
    if cut.len() < text.len() {
        Value::String(format!("{cut}…")).to_string()
    } else {
        Value::String(cut).to_string()
    }
}

pub(crate) fn shown_items(count: usize) -> String {
    format!("[{count} items]")
}

pub(crate) fn shown_fields(count: usize) -> String {
    format!("{{{count} fields}}")
}

/// The compact JSON of `object` when it is at most `limit` bytes long; `None` for a longer one,
/// found without writing more than `limit` bytes of it (a large result is never written out
/// whole only to learn that it is large).
fn json_within(object: &Map<String, Value>, limit: usize) -> Option<String> {
    /// Takes bytes until one more would pass `limit`, then fails the serialisation.
    struct Bounded {
        bytes: Vec<u8>,
        limit: usize,
    }
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.bytes.len() + buf.len() > self.limit {
                return Err(std::io::ErrorKind::Other.into());
            }
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded {
        bytes: Vec::with_capacity(limit.min(256)),
        limit,
    };
    serde_json::to_writer(&mut out, object).ok()?;
    String::from_utf8(out.bytes).ok()
}

/// The confirmation a `needs_confirmation` result waits on.
fn pending_confirmation(result: &ToolResult) -> Option<String> {
    result
        .pending_confirmation()
        .map(|pending| pending.confirmation_id)
}

/// The text of a pending result: the action has not happened, where to approve, how to learn
/// the outcome, and not to repeat the call.
pub fn pending_message(confirmation_id: &str, confirmations_tool: Option<&str>) -> String {
    let tool = confirmations_tool.unwrap_or(crate::status_tool::CONFIRMATION_STATUS_TOOL);
    format!(
        "Waiting for the user to confirm on the phone (confirmation {confirmation_id}); \
         the action has not happened yet. The user approves or denies it on the phone, \
         in the dashboard or with `openphone confirmations approve {confirmation_id}`. \
         Call {tool} with this confirmation_id to get the outcome; an identical repeat of \
         this call joins the same confirmation and never runs the action twice."
    )
}

/// The bridge's message followed by what the model should do next.
fn error_message(result: &ToolResult, code: ErrorCode) -> String {
    let base = result
        .error
        .as_ref()
        .map(|e| e.message.trim().trim_end_matches('.').to_owned())
        .unwrap_or_else(|| code.as_str().to_owned());
    match next_step(code) {
        Some(next) => format!("{base}. {next}"),
        None => format!("{base}."),
    }
}

/// The next step for the model, per `mcp.md` §5.3.
pub fn next_step(code: ErrorCode) -> Option<&'static str> {
    use ErrorCode as C;
    Some(match code {
        C::InvalidParams => "Fix the listed arguments and call again.",
        C::MissingReason => "Add a short `reason` the user will see and call again.",
        C::ToolNotGranted => "This connection may not use this tool; do not retry.",
        C::ObserveOnlyMutationDenied => "This connection may only read; do not retry.",
        C::UserDeniedConfirmation => "Do not retry without asking the user.",
        C::Timeout => "The confirmation expired; ask again only if still needed.",
        C::RateLimited => "Wait for the pending confirmations or calls to finish, then retry.",
        C::FrameworkUnavailable => "Ask the user to connect or unlock the phone, then retry.",
        C::ToolNotSupportedByPhonePlatform => "This phone cannot do this; do not retry.",
        C::IdempotencyConflict => "Use a new idempotency key for a different call.",
        C::ExecutionResultUnknown => {
            "The action may or may not have happened; check the phone before acting again."
        }
        C::Cancelled => "The call was cancelled before it ran.",
        C::AuditUnavailable => {
            "The phone cannot write its audit log; ask the user to fix its data directory, then retry."
        }
        C::ConfirmationCancelled => {
            "The user dismissed the prompt; do not retry without asking the user."
        }
        C::DaemonUnavailable => "Start the daemon with `openphone serve`, then retry.",
        C::ConfirmationInvalid => "Call the tool again without `requestState` to start over.",
        _ => return None,
    })
}

/// Whether repeating the call (after fixing what the message names) can succeed. A pending
/// confirmation is `false`: the model polls instead of repeating the call.
pub fn retryable(code: ErrorCode) -> bool {
    use ErrorCode as C;
    match code {
        C::InvalidParams
        | C::MissingReason
        | C::MissingTool
        | C::PayloadTooLarge
        | C::Timeout
        | C::RateLimited
        | C::FrameworkUnavailable
        | C::TaskUnavailable
        | C::RuntimeNotConnected
        | C::SendFailed
        | C::SnapshotUnavailable
        | C::StaleRevision
        | C::DaemonUnavailable
        | C::AuditUnavailable
        | C::ConfirmationInvalid
        | C::JobStateConflict
        | C::GoalStateConflict
        | C::DeviceNotFound
        | C::DeviceUnauthorized
        | C::DeviceOffline
        | C::DeviceTimeout
        | C::AdbServerUnavailable => true,
        C::UnsupportedVersion
        | C::MissingRequestId
        | C::MissingRuntimeIdentity
        | C::RuntimeMismatch
        | C::ToolRegistryUnavailable
        | C::UnknownTool
        | C::ToolNotGranted
        | C::ToolNotSupportedByPhonePlatform
        | C::ObserveOnlyMutationDenied
        | C::MutatingToolRequiresConfirmation
        | C::UserDeniedConfirmation
        | C::PendingConfirmationNotFound
        | C::IdempotencyConflict
        | C::ToolError
        | C::ConfirmationRequired
        | C::Denied
        | C::FrameworkConfirmationFailed
        | C::ExecutionResultUnknown
        | C::Cancelled
        | C::BackgroundConfirmationRequired
        | C::UnknownCommand
        | C::UnsupportedNode
        | C::StatefulToolRefused
        | C::UnsupportedAdbTool
        | C::ElementNotFound
        | C::AmbiguousElement
        | C::ElementDisabled
        | C::ElementBoundsUnavailable
        | C::MissingRuntime
        | C::MissingText
        | C::RuntimeNotConfigured
        | C::EventUnsupported
        | C::OutputInvalid
        | C::SessionMismatch
        | C::SurfaceNotActive
        | C::BackgroundConfirmationTimeout
        | C::BackgroundActionDenied
        | C::BackgroundReviewError
        | C::BackgroundReviewUnlockRequired
        | C::BackgroundReviewExpired
        | C::BackgroundReviewAlreadyResolved
        | C::BackgroundReviewResolved
        | C::BackgroundReviewCommitFailed
        | C::BackgroundReviewInterruptedResultUnknown
        | C::BackgroundReviewResultMissing
        | C::JobNotFound
        | C::GoalNotFound
        | C::GoalActionNotFound
        | C::JobLimitReached
        | C::ConfirmationCancelled
        | C::UnsupportedOnDevice
        | C::StaleElement
        | C::FrameworkConfirmationRequired => false,
    }
}

fn tool_result_meta(result: &ToolResult, confirmation_id: Option<&str>) -> MetaObject {
    let mut body = JsonObject::new();
    body.insert("request_id".into(), json!(result.request_id));
    body.insert("status".into(), json!(result.status.as_str()));
    body.insert("audit_id".into(), json!(result.audit_id));
    if let Some(error) = &result.error {
        let mut e = JsonObject::new();
        e.insert("code".into(), json!(error.code.as_str()));
        e.insert("message".into(), json!(error.message));
        if let Some(details) = &error.details {
            e.insert("details".into(), Value::Object(details.clone()));
        }
        body.insert("error".into(), Value::Object(e));
    }
    if let Some(id) = confirmation_id {
        body.insert("confirmation_id".into(), json!(id));
    }
    if result.replayed {
        body.insert("replayed".into(), json!(true));
    }
    let mut meta = JsonObject::new();
    meta.insert(META_TOOL_RESULT.into(), Value::Object(body));
    MetaObject(meta)
}

/// An `invalid_params` ToolBridge result from the manifest validators' field errors
/// (`Registry::validate_params`): the message names every field, `details.errors` holds
/// `{field, pointer, message}` for at most [`MAX_FIELD_ERRORS`] of them.
pub fn invalid_arguments(
    runtime: &str,
    request_id: &str,
    command: &Command,
    errors: &[FieldError],
) -> ToolResult {
    let listed: Vec<String> = errors
        .iter()
        .take(MAX_FIELD_ERRORS)
        .map(ToString::to_string)
        .collect();
    let entries: Vec<Value> = errors
        .iter()
        .take(MAX_FIELD_ERRORS)
        .map(|e| json!({"field": e.field, "pointer": json_pointer(&e.field), "message": e.message}))
        .collect();
    let mut details = Map::new();
    details.insert("errors".into(), Value::Array(entries));
    if errors.len() > MAX_FIELD_ERRORS {
        details.insert("omitted".into(), json!(errors.len() - MAX_FIELD_ERRORS));
    }
    ToolResult::failure(
        runtime,
        request_id,
        ErrorCode::InvalidParams,
        format!(
            "invalid arguments for {}: {}",
            command.name,
            listed.join("; ")
        ),
    )
    .with_details(details)
}

/// `delivery.mode` → `/delivery/mode`, `items[0]` → `/items/0`, `` → `` (RFC 6901 escapes).
pub fn json_pointer(field: &str) -> String {
    FieldError {
        field: field.to_owned(),
        message: String::new(),
    }
    .pointer()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The summary as it was written before it was written in place (a part per member,
    /// joined): the reference the one-pass writer must match.
    fn summarized_by_parts(members: &[(&str, String)], replayed: bool) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut used = 0usize;
        let mut left_out = 0usize;
        for (key, shown) in members {
            let part = format!("{key}: {shown}");
            if used + part.len() > SUMMARY_MAX_CHARS {
                left_out += 1;
                continue;
            }
            used += part.len() + 2;
            parts.push(part);
        }
        let mut text = String::from(if replayed { REPLAYED } else { "Done." });
        if !parts.is_empty() {
            text.push(' ');
            text.push_str(&parts.join(", "));
            if left_out > 0 {
                text.push_str(&format!(", and {left_out} more fields"));
            }
            text.push('.');
        }
        text.push_str(" The full result is the structured content.");
        text
    }

    /// Written in one pass, the summary is the one the parts made: no members, members that
    /// fit, members left out (also between shown ones), a member too long for any summary,
    /// multi-byte text, replayed or not.
    #[test]
    fn the_summary_written_in_place_is_the_summary_made_of_parts() {
        let long = "y".repeat(SUMMARY_MAX_CHARS);
        let cases: Vec<Vec<(&str, String)>> = vec![
            vec![],
            vec![("a", "1".into())],
            vec![("battery", "81".into()), ("model", "\"sim é\"".into())],
            vec![("long", long.clone())],
            vec![
                ("a", "1".into()),
                ("long", long.clone()),
                ("b", "[3 items]".into()),
            ],
            (0..80)
                .map(|i| {
                    (
                        ["k", "key", "a_longer_key"][i % 3],
                        format!("{i:>width$}", width = i % 17),
                    )
                })
                .collect(),
        ];
        for members in &cases {
            for replayed in [false, true] {
                assert_eq!(
                    summarized(members.iter().map(|(k, v)| (*k, v.clone())), replayed),
                    summarized_by_parts(members, replayed),
                    "{members:?}, replayed {replayed}"
                );
            }
        }
    }

    /// A sealed result (its text kept by the bridge) is summarised as the same result unsealed,
    /// small or large, replayed or not.
    #[test]
    fn a_sealed_result_has_the_summary_of_the_unsealed_one() {
        for n in [0, 10, 550, 600, 2000] {
            let data = match json!({"text": "x".repeat(n), "n": 1, "list": [1, 2]}) {
                Value::Object(map) => map,
                _ => unreachable!(),
            };
            for replayed in [false, true] {
                let mut result = ToolResult::ok("r", "q", data.clone());
                result.replayed = replayed;
                result.seal();
                assert!(result.sealed_text().is_some());
                assert_eq!(
                    text_of(&shape(&result, None)),
                    summary_text(&data, replayed),
                    "{n} {replayed}"
                );
            }
        }
    }

    fn text_of(shaped: &CallToolResult) -> String {
        shaped.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default()
    }

    /// `json_within` is the JSON `Value::to_string` writes, exactly when that fits the limit —
    /// on both sides of the limit, with escapes and multi-byte characters in the text.
    #[test]
    fn the_bounded_json_is_the_whole_json_when_it_fits_and_none_otherwise() {
        for filler in ["a", "é", "\"", "\n", "😀"] {
            for n in 0..=260 {
                let mut object = Map::new();
                object.insert("text".into(), json!(filler.repeat(n)));
                object.insert("nested".into(), json!({"k": [1, 2.5, null, true]}));
                let whole = Value::Object(object.clone()).to_string();
                let bounded = json_within(&object, SUMMARY_MAX_CHARS);
                if whole.len() <= SUMMARY_MAX_CHARS {
                    assert_eq!(bounded.as_deref(), Some(whole.as_str()));
                } else {
                    assert_eq!(bounded, None, "{} bytes", whole.len());
                }
            }
        }
    }
}
