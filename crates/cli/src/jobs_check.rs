//! `openphone jobs check-review <record.json>`: checks a stored background review offline
//! (`agent-jobs.md` §9.12) with `openphone_jobs::check_stored` — a bare background
//! confirmation record (`pending_tool_request_json`) or a whole job record — and names the
//! first rule it breaks.
//!
//! Exit codes: 0 valid, 1 invalid, 2 unreadable (no such file, not JSON, a duplicate key).
//! With `--json` the answer is one object: `{"valid": true, "kind", "confirmation_id",
//! "job_id", "tool", "review_state", "job_status"?}` or `{"valid": false, "check",
//! "message"}`.

use std::path::Path;
use std::process::ExitCode;

use openphone_jobs::{CheckFailure, Checked, check_stored};
use openphone_protocol::parse_json_strict;
use serde_json::{Value, json};

/// Exit code of a valid record.
const VALID: u8 = 0;
/// Exit code of an invalid record.
const INVALID: u8 = 1;
/// Exit code of an unreadable input.
const UNREADABLE: u8 = 2;

/// Runs the check on the file at `path`; prints the answer (stdout) or why the file cannot be
/// read (stderr).
pub fn run(path: &Path, json: bool) -> ExitCode {
    let (code, out, err) = outcome(path, json);
    if let Some(out) = out {
        println!("{out}");
    }
    if let Some(err) = err {
        eprintln!("openphone: {err}");
    }
    ExitCode::from(code)
}

/// The exit code, the text for stdout and the text for stderr.
fn outcome(path: &Path, json: bool) -> (u8, Option<String>, Option<String>) {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            return (
                UNREADABLE,
                None,
                Some(format!("cannot read {}: {e}", path.display())),
            );
        }
    };
    let value = match parse_json_strict(&text) {
        Ok(value) => value,
        Err(e) => {
            return (
                UNREADABLE,
                None,
                Some(format!("{} is not a JSON document: {e}", path.display())),
            );
        }
    };
    match check_stored(&value) {
        Ok(checked) => (VALID, Some(valid_text(&checked, json)), None),
        Err(failure) => (INVALID, Some(invalid_text(&failure, json)), None),
    }
}

fn valid_text(checked: &Checked, json: bool) -> String {
    if json {
        let mut out = match serde_json::to_value(checked) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        out.insert("valid".into(), Value::Bool(true));
        return Value::Object(out).to_string();
    }
    let status = checked
        .job_status
        .map(|s| format!(", job {}", s.as_str()))
        .unwrap_or_default();
    format!(
        "valid: review {} of job {} for {} ({}{status})",
        checked.confirmation_id, checked.job_id, checked.tool, checked.review_state
    )
}

fn invalid_text(failure: &CheckFailure, json: bool) -> String {
    if json {
        return json!({"valid": false, "check": failure.check, "message": failure.message})
            .to_string();
    }
    format!("invalid: {} ({})", failure.message, failure.check)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn exit_codes_say_valid_invalid_or_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        assert_eq!(outcome(&missing, false).0, UNREADABLE);
        let not_json = dir.path().join("bad.json");
        std::fs::write(&not_json, "{\"a\":1,\"a\":2}").unwrap();
        assert_eq!(outcome(&not_json, false).0, UNREADABLE);
        let invalid = dir.path().join("invalid.json");
        std::fs::write(&invalid, "{\"schema\":\"x\"}").unwrap();
        let (code, out, _) = outcome(&invalid, true);
        assert_eq!(code, INVALID);
        let out: Value = serde_json::from_str(&out.unwrap()).unwrap();
        assert_eq!(out["valid"], false);
        assert_eq!(out["check"], "record.schema");
    }
}
