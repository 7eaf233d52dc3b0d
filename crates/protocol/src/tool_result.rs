//! The tool-result wire shape (`runtime-protocol.md` §12).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error_code::ErrorCode;

/// The status of a tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Executed; `result` holds the output.
    Ok,
    /// Waiting for the user; `result.confirmation_id` names the confirmation.
    NeedsConfirmation,
    /// Refused by policy, by the user or by the backend.
    Denied,
    /// Malformed request, backend failure or unknown outcome.
    Error,
    /// The confirmation expired.
    Timeout,
    /// Withdrawn before execution.
    Cancelled,
}

impl ToolStatus {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::NeedsConfirmation => "needs_confirmation",
            ToolStatus::Denied => "denied",
            ToolStatus::Error => "error",
            ToolStatus::Timeout => "timeout",
            ToolStatus::Cancelled => "cancelled",
        }
    }
}

/// The `error` member of a non-ok tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Map<String, Value>>,
}

/// A tool result as it travels on the wire.
///
/// Invariants (kept by the constructors, checked by [`ToolResult::check`]):
/// `requires_confirmation` is true exactly when the status is `needs_confirmation`; `error` is
/// absent for `ok` and present otherwise; `audit_id` is `runtime:<runtime>:<request_id>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub request_id: String,
    pub status: ToolStatus,
    pub requires_confirmation: bool,
    #[serde(default)]
    pub result: Map<String, Value>,
    pub audit_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openphone_task_id: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub replayed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `runtime:<runtime>:<request_id>`.
pub fn audit_id(runtime: &str, request_id: &str) -> String {
    format!("runtime:{runtime}:{request_id}")
}

impl ToolResult {
    /// An executed request.
    pub fn ok(runtime: &str, request_id: &str, result: Map<String, Value>) -> Self {
        Self {
            request_id: request_id.to_owned(),
            status: ToolStatus::Ok,
            requires_confirmation: false,
            result,
            audit_id: audit_id(runtime, request_id),
            openphone_task_id: None,
            replayed: false,
            error: None,
        }
    }

    /// A non-ok result with the status the catalogue gives the code (`error` when the code has
    /// none).
    pub fn failure(
        runtime: &str,
        request_id: &str,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> Self {
        let status = code.tool_status().unwrap_or(ToolStatus::Error);
        Self {
            request_id: request_id.to_owned(),
            status,
            requires_confirmation: status == ToolStatus::NeedsConfirmation,
            result: Map::new(),
            audit_id: audit_id(runtime, request_id),
            openphone_task_id: None,
            replayed: false,
            error: Some(ToolError {
                code,
                message: message.into(),
                details: None,
            }),
        }
    }

    /// Adds `details` to the error (no effect on an ok result).
    pub fn with_details(mut self, details: Map<String, Value>) -> Self {
        if let Some(error) = self.error.as_mut() {
            error.details = Some(details);
        }
        self
    }

    /// The same result answering request `request_id` of `runtime`, which it was recorded for
    /// before that request arrived (a keyed retry answered from the stored final result): a
    /// replay, so `replayed` is true.
    pub fn readdressed(&self, runtime: &str, request_id: &str) -> Self {
        self.addressed(request_id, audit_id(runtime, request_id), true)
    }

    /// The same result answering `first`, the earlier answer of a request that then waited for
    /// this final result (after a confirmation was approved, denied, expired or withdrawn): it
    /// takes `first`'s `request_id` and `audit_id`, and `replayed` is false, because the result
    /// came about after that request arrived.
    pub fn answering(&self, first: &ToolResult) -> Self {
        self.addressed(&first.request_id, first.audit_id.clone(), false)
    }

    /// Re-addressing, written once: the address and `replayed` change, nothing else does.
    fn addressed(&self, request_id: &str, audit_id: String, replayed: bool) -> Self {
        Self {
            request_id: request_id.to_owned(),
            audit_id,
            replayed,
            ..self.clone()
        }
    }

    /// Checks the wire invariants; returns the first broken one.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.requires_confirmation != (self.status == ToolStatus::NeedsConfirmation) {
            return Err("requires_confirmation must be true exactly for needs_confirmation");
        }
        match (self.status, &self.error) {
            (ToolStatus::Ok, Some(_)) => Err("an ok result carries no error"),
            (
                ToolStatus::NeedsConfirmation
                | ToolStatus::Denied
                | ToolStatus::Error
                | ToolStatus::Timeout
                | ToolStatus::Cancelled,
                None,
            ) => Err("every non-ok result carries an error"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn denied_result_wire_shape() {
        let mut details = Map::new();
        details.insert("policy".into(), json!("observe_only_blocks_mutation"));
        let r = ToolResult::failure(
            "openclaw",
            "req-123",
            ErrorCode::ObserveOnlyMutationDenied,
            "observe_only forbids changes",
        )
        .with_details(details);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({
                "request_id": "req-123",
                "status": "denied",
                "requires_confirmation": false,
                "result": {},
                "audit_id": "runtime:openclaw:req-123",
                "error": {
                    "code": "observe_only_mutation_denied",
                    "message": "observe_only forbids changes",
                    "details": {"policy": "observe_only_blocks_mutation"}
                }
            })
        );
        r.check().unwrap();
    }

    #[test]
    fn every_status_keeps_the_invariants() {
        let ok = ToolResult::ok("hermes", "r1", Map::new());
        ok.check().unwrap();
        assert!(serde_json::to_value(&ok).unwrap().get("error").is_none());
        for code in [
            ErrorCode::MutatingToolRequiresConfirmation,
            ErrorCode::ToolNotGranted,
            ErrorCode::InvalidParams,
            ErrorCode::Timeout,
            ErrorCode::Cancelled,
        ] {
            let r = ToolResult::failure("hermes", "r1", code, "m");
            r.check().unwrap();
            assert_eq!(Some(r.status), code.tool_status());
            let back: ToolResult =
                serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
            assert_eq!(back, r);
        }
    }

    #[test]
    fn readdressed_result_names_the_new_request_and_is_marked_replayed() {
        let r = ToolResult::ok("hermes", "r1", Map::new()).readdressed("hermes", "r2");
        assert_eq!(r.request_id, "r2");
        assert_eq!(r.audit_id, "runtime:hermes:r2");
        assert!(r.replayed);
    }

    #[test]
    fn a_result_answering_the_request_that_waited_for_it_is_not_a_replay() {
        let first = ToolResult::failure(
            "hermes",
            "r2",
            ErrorCode::MutatingToolRequiresConfirmation,
            "waiting",
        );
        let mut recorded = ToolResult::ok("hermes", "r1", Map::new());
        recorded.replayed = true;
        let answer = recorded.answering(&first);
        assert_eq!(
            answer,
            ToolResult {
                request_id: "r2".into(),
                audit_id: "runtime:hermes:r2".into(),
                replayed: false,
                ..recorded
            }
        );
    }

    #[test]
    fn broken_invariants_are_reported() {
        let mut r = ToolResult::ok("x", "y", Map::new());
        r.requires_confirmation = true;
        assert!(r.check().is_err());
        let mut r = ToolResult::failure("x", "y", ErrorCode::Denied, "no");
        r.error = None;
        assert!(r.check().is_err());
    }
}
