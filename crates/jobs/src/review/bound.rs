//! Bound results (§9.7): what a settled review hands the resumed run, as a JSON object
//! serialised to at most 4000 characters and stored in the checkpoint's `tool_result`.
//!
//! - a successful approval: `{"status":"ok","tool":"…","result":{…}}`;
//! - anything else: `{"status":"<code>","reason":"<reason>","tool":"…"}` (e.g.
//!   `background.action_denied` / `user_denied`).
//!
//! **\[project\]** A result too long for 4000 characters keeps its status and tool, and its
//! `result` becomes `{"truncated":true,"preview":"…"}`: the start of the result's JSON text,
//! as much of it as fits.

use openphone_protocol::ErrorCode;
use serde_json::{Map, Value, json};

use super::MAX_TOOL_RESULT_CHARS;

/// The `status` of a successful approval's bound result.
pub const STATUS_OK: &str = "ok";

/// A bound result: its status and its serialised text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundResult {
    /// `ok` or the error code (`background.action_denied`, …).
    pub status: String,
    /// The JSON text (at most 4000 characters).
    pub text: String,
}

impl BoundResult {
    /// The result of an approved, executed call: `result` is the tool's result object, cut to
    /// a preview when the whole would pass 4000 characters.
    pub fn ok(tool: &str, result: &Value) -> BoundResult {
        let whole = json!({"status": STATUS_OK, "tool": tool, "result": result}).to_string();
        if chars(&whole) <= MAX_TOOL_RESULT_CHARS {
            return BoundResult {
                status: STATUS_OK.to_owned(),
                text: whole,
            };
        }
        let result_text = result.to_string();
        let with_preview = |preview: &str| {
            json!({"status": STATUS_OK, "tool": tool,
                   "result": {"truncated": true, "preview": preview}})
            .to_string()
        };
        let build = |keep: usize| {
            let preview: String = result_text.chars().take(keep).collect();
            with_preview(&preview)
        };
        // The longest preview that fits (escapes make the written text longer than the
        // characters kept, so search rather than subtract).
        let (mut fits, mut too_long) = (0_usize, MAX_TOOL_RESULT_CHARS + 1);
        while too_long - fits > 1 {
            let mid = fits + (too_long - fits) / 2;
            if chars(&build(mid)) <= MAX_TOOL_RESULT_CHARS {
                fits = mid;
            } else {
                too_long = mid;
            }
        }
        BoundResult {
            status: STATUS_OK.to_owned(),
            text: build(fits),
        }
    }

    /// A result that is not a success: `{"status": code, "reason"?: reason, "tool": tool}`.
    pub fn error(code: ErrorCode, reason: Option<&str>, tool: &str) -> BoundResult {
        let mut map = Map::new();
        map.insert("status".into(), Value::String(code.as_str().to_owned()));
        if let Some(reason) = reason {
            map.insert("reason".into(), Value::String(reason.to_owned()));
        }
        map.insert("tool".into(), Value::String(tool.to_owned()));
        BoundResult {
            status: code.as_str().to_owned(),
            text: Value::Object(map).to_string(),
        }
    }

    /// `background.action_denied` / `user_denied`.
    pub fn denied(tool: &str) -> BoundResult {
        BoundResult::error(ErrorCode::BackgroundActionDenied, Some("user_denied"), tool)
    }

    /// `background.confirmation_timeout` / `approval_expired`.
    pub fn expired(tool: &str) -> BoundResult {
        BoundResult::error(
            ErrorCode::BackgroundConfirmationTimeout,
            Some("approval_expired"),
            tool,
        )
    }

    /// `background.review_error` with `reason`.
    pub fn review_error(reason: &str, tool: &str) -> BoundResult {
        BoundResult::error(ErrorCode::BackgroundReviewError, Some(reason), tool)
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_become_a_preview_that_fits() {
        let small = BoundResult::ok("messages_send", &json!({"sent": true}));
        assert_eq!(
            serde_json::from_str::<Value>(&small.text).unwrap(),
            json!({"status": "ok", "tool": "messages_send", "result": {"sent": true}})
        );
        // Characters that JSON escapes (quotes, newlines) grow when written: still fits.
        for filler in ["x", "\"", "\n", "é", "\u{1F600}"] {
            let big = json!({"body": filler.repeat(5_000)});
            let bound = BoundResult::ok("messages_send", &big);
            assert!(
                bound.text.chars().count() <= MAX_TOOL_RESULT_CHARS,
                "{filler:?}"
            );
            let parsed: Value = serde_json::from_str(&bound.text).unwrap();
            assert_eq!(parsed["status"], "ok");
            assert_eq!(parsed["result"]["truncated"], true);
            let preview = parsed["result"]["preview"].as_str().unwrap();
            assert!(big.to_string().starts_with(preview));
            assert!(
                preview.chars().count() > 500,
                "{filler:?}: the preview is too short"
            );
        }
    }

    #[test]
    fn error_results_name_status_reason_and_tool() {
        assert_eq!(
            serde_json::from_str::<Value>(&BoundResult::denied("t").text).unwrap(),
            json!({"status": "background.action_denied", "reason": "user_denied", "tool": "t"})
        );
        assert_eq!(
            BoundResult::expired("t").status,
            "background.confirmation_timeout"
        );
    }
}
