//! Reading a `tools.invoke` answer the way a benchmark client needs it: the frame's id, the
//! tool result's `status` and error code, nothing else. The tool result's own `result` (12 KB
//! for a `screen.get`) is skipped, never built into a JSON tree: parsing it twice, as the
//! typed `ServerMessage` does, cost the client ~200 µs per `screen.get` answer, which on two
//! cores capped that row near 10,000 calls/s whatever the server (docs/benchmarks.md,
//! "Ceilings"). A frame that is not an answer to the call (an event, another id) is `None`.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::Outcome;

/// The members of a JSON-RPC frame this reader looks at; the rest is skipped.
#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<FrameError>,
}

#[derive(Deserialize)]
struct FrameError {
    #[serde(default)]
    data: Option<FrameErrorData>,
}

#[derive(Deserialize)]
struct FrameErrorData {
    code: String,
}

/// The members of a tool result this reader looks at.
#[derive(Deserialize)]
struct ToolAnswer {
    status: String,
    #[serde(default)]
    error: Option<ToolAnswerError>,
}

#[derive(Deserialize)]
struct ToolAnswerError {
    code: String,
}

/// Classifies `text` as the answer to the `tools.invoke` with id `ours` (a number, as the
/// benchmark sends): `Some(outcome)` when it is that answer, `None` when it is another frame.
/// A frame that is not JSON-RPC is an error.
pub(super) fn tool_answer(text: &str, ours: u64) -> Result<Option<Outcome>, serde_json::Error> {
    let frame: Frame<'_> = serde_json::from_str(text)?;
    if frame.method.is_some() {
        return Ok(None);
    }
    let is_ours = frame
        .id
        .is_some_and(|id| id.get().parse::<u64>() == Ok(ours));
    if !is_ours {
        return Ok(None);
    }
    if let Some(error) = frame.error {
        let code = error.data.map_or_else(|| "error".to_owned(), |d| d.code);
        return Ok(Some(Outcome::Failed(code)));
    }
    let Some(result) = frame.result else {
        return Ok(Some(Outcome::failed("bad_answer")));
    };
    Ok(Some(
        match serde_json::from_str::<ToolAnswer>(result.get()) {
            Ok(answer) if answer.status == "ok" => Outcome::Ok,
            Ok(answer) => Outcome::Failed(match answer.error {
                Some(e) => format!("tool:{}", e.code),
                None => format!("tool:{}", answer.status),
            }),
            Err(_) => Outcome::failed("bad_answer"),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(outcome: Option<Outcome>) -> String {
        match outcome {
            None => "none".to_owned(),
            Some(Outcome::Ok) => "ok".to_owned(),
            Some(Outcome::Failed(k)) => k,
        }
    }

    #[test]
    fn an_ok_answer_is_ok_whatever_its_result_holds() {
        let text = r#"{"jsonrpc":"2.0","id":7,"result":{"request_id":"r","status":"ok",
            "requires_confirmation":false,"result":{"screen":{"nodes":[{"text":"a\"b"}]}},"audit_id":"a"}}"#;
        assert_eq!(kind(tool_answer(text, 7).unwrap()), "ok");
    }

    #[test]
    fn a_failed_tool_is_counted_by_its_error_code_or_status() {
        let text = r#"{"jsonrpc":"2.0","id":3,"result":{"status":"denied","error":{"code":"permission_denied","message":"no"}}}"#;
        assert_eq!(
            kind(tool_answer(text, 3).unwrap()),
            "tool:permission_denied"
        );
        let text = r#"{"jsonrpc":"2.0","id":3,"result":{"status":"needs_confirmation"}}"#;
        assert_eq!(
            kind(tool_answer(text, 3).unwrap()),
            "tool:needs_confirmation"
        );
    }

    #[test]
    fn an_error_frame_is_counted_by_its_data_code() {
        let text = r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"slow down","data":{"code":"rate_limited","retry_after_ms":100}}}"#;
        assert_eq!(kind(tool_answer(text, 4).unwrap()), "rate_limited");
    }

    #[test]
    fn events_and_other_ids_are_not_the_answer() {
        let event = r#"{"jsonrpc":"2.0","method":"event","params":{"id":5}}"#;
        assert_eq!(kind(tool_answer(event, 5).unwrap()), "none");
        let other = r#"{"jsonrpc":"2.0","id":6,"result":{"status":"ok"}}"#;
        assert_eq!(kind(tool_answer(other, 5).unwrap()), "none");
        let string_id = r#"{"jsonrpc":"2.0","id":"5","result":{"status":"ok"}}"#;
        assert_eq!(kind(tool_answer(string_id, 5).unwrap()), "none");
    }

    #[test]
    fn a_result_that_is_not_a_tool_result_is_a_bad_answer_and_junk_an_error() {
        let text = r#"{"jsonrpc":"2.0","id":1,"result":{"nothing":true}}"#;
        assert_eq!(kind(tool_answer(text, 1).unwrap()), "bad_answer");
        assert!(tool_answer("not json", 1).is_err());
    }
}
