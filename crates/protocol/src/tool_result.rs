//! The tool-result wire shape (`runtime-protocol.md` §12).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error_code::ErrorCode;
use crate::sealed::Sealed;

/// The status of a tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
//
// `Serialize` is written by hand (`sealed.rs`): a result whose `result` exists only as text
// (`ToolResult::ok_text`) writes that text. Equality compares `result` maps, so such a result
// equals another only after `ToolResult::materialize`. (Not a doc comment: the wire schema
// takes this type's documentation as its description.)
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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
    /// `result` written to JSON text by [`ToolResult::seal`] (a cache, never a wire member), or
    /// the only form of `result` ([`ToolResult::ok_text`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub sealed: Sealed,
}

/// The `result` body of a `needs_confirmation` answer: which confirmation waits, what the user
/// is shown, and until when it waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingConfirmation {
    pub confirmation_id: String,
    pub summary: String,
    /// How long the confirmation waits from its creation, ms (absent in a host's re-answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// When it expires, Unix ms (absent in a host's re-answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
}

/// The `error.details` of a policy denial: the layer that denied and what it looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DenialDetails {
    /// The denying policy layer (`runtime-protocol.md` §8.2).
    pub policy: String,
    pub tool: String,
    pub runtime: String,
    pub autonomy: String,
    pub risk: String,
    pub phone_platform: String,
}

impl DenialDetails {
    /// As the map `ToolError::details` holds.
    pub fn to_map(&self) -> Map<String, Value> {
        to_map(self)
    }
}

/// A struct with named fields as a JSON object (empty if it were ever not one).
fn to_map<T: Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// For `skip_serializing_if` (the schema reads it; `sealed.rs` writes the wire form).
pub(crate) fn is_false(b: &bool) -> bool {
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
            sealed: Sealed::NONE,
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
            sealed: Sealed::NONE,
        }
    }

    /// A `needs_confirmation` answer pointing at `pending`.
    pub fn needs_confirmation(
        runtime: &str,
        request_id: &str,
        message: impl Into<String>,
        pending: &PendingConfirmation,
    ) -> Self {
        let mut result = Self::failure(
            runtime,
            request_id,
            ErrorCode::MutatingToolRequiresConfirmation,
            message,
        );
        result.result = to_map(pending);
        result
    }

    /// The confirmation this answer waits on, when it is a `needs_confirmation` answer.
    pub fn pending_confirmation(&self) -> Option<PendingConfirmation> {
        // `framework_confirmation_required`: the user's confirmation of an OS dialog the
        // request raised on the phone.
        let code = self.error.as_ref().map(|e| e.code);
        if self.status != ToolStatus::NeedsConfirmation
            || !matches!(
                code,
                Some(
                    ErrorCode::MutatingToolRequiresConfirmation
                        | ErrorCode::FrameworkConfirmationRequired
                )
            )
        {
            return None;
        }
        serde_json::from_value(Value::Object(self.result.clone())).ok()
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

// The status a code is reported with belongs to the result, which names both.
impl ErrorCode {
    /// The tool-result status a tool-bridge code is reported with (§13.1); `None` for codes
    /// that are not tool-bridge outcomes.
    pub fn tool_status(self) -> Option<ToolStatus> {
        use ErrorCode as C;
        match self {
            C::FrameworkUnavailable
            | C::PayloadTooLarge
            | C::UnsupportedVersion
            | C::MissingRequestId
            | C::MissingRuntimeIdentity
            | C::RuntimeMismatch
            | C::MissingTool
            | C::MissingReason
            | C::UnknownTool
            | C::InvalidParams
            | C::PendingConfirmationNotFound
            | C::IdempotencyConflict
            | C::TaskUnavailable
            | C::ToolError
            | C::FrameworkConfirmationFailed
            | C::ExecutionResultUnknown
            | C::AuditUnavailable
            | C::DaemonUnavailable
            | C::ConfirmationInvalid
            | C::UnsupportedOnDevice
            | C::DeviceNotFound
            | C::DeviceUnauthorized
            | C::DeviceOffline
            | C::DeviceTimeout
            | C::AdbServerUnavailable
            | C::StaleElement => Some(ToolStatus::Error),
            C::ToolRegistryUnavailable
            | C::ToolNotGranted
            | C::ToolNotSupportedByPhonePlatform
            | C::ObserveOnlyMutationDenied
            | C::UserDeniedConfirmation
            | C::ConfirmationCancelled
            | C::RateLimited
            | C::Denied
            | C::UnknownCommand => Some(ToolStatus::Denied),
            C::MutatingToolRequiresConfirmation
            | C::ConfirmationRequired
            | C::FrameworkConfirmationRequired => Some(ToolStatus::NeedsConfirmation),
            C::Timeout => Some(ToolStatus::Timeout),
            C::Cancelled => Some(ToolStatus::Cancelled),
            C::BackgroundConfirmationRequired
            | C::SnapshotUnavailable
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
            | C::RuntimeNotConnected
            | C::SendFailed
            | C::EventUnsupported
            | C::OutputInvalid
            | C::SessionMismatch
            | C::SurfaceNotActive
            | C::StaleRevision
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
            | C::JobLimitReached
            | C::JobStateConflict
            | C::GoalNotFound
            | C::GoalActionNotFound
            | C::GoalStateConflict => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn a_needs_confirmation_answer_names_its_confirmation() {
        let pending = PendingConfirmation {
            confirmation_id: "c-1".into(),
            summary: "tap at (1, 2)".into(),
            timeout_ms: Some(30_000),
            expires_at_ms: Some(1_030_000),
        };
        let r = ToolResult::needs_confirmation("rt", "q", "waiting", &pending);
        assert!(r.check().is_ok());
        assert_eq!(
            serde_json::to_value(&r).unwrap()["result"],
            json!({"confirmation_id": "c-1", "summary": "tap at (1, 2)",
                   "timeout_ms": 30000, "expires_at_ms": 1030000})
        );
        assert_eq!(r.pending_confirmation(), Some(pending));
        // Any other answer waits on nothing, even with a look-alike body.
        let mut ok = ToolResult::ok("rt", "q", r.result.clone());
        assert_eq!(ok.pending_confirmation(), None);
        ok.status = ToolStatus::Denied;
        assert_eq!(ok.pending_confirmation(), None);
    }

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

    #[test]
    fn bridge_codes_carry_the_catalogue_status() {
        assert_eq!(
            ErrorCode::ToolNotGranted.tool_status(),
            Some(ToolStatus::Denied)
        );
        assert_eq!(ErrorCode::Timeout.tool_status(), Some(ToolStatus::Timeout));
        assert_eq!(
            ErrorCode::FrameworkConfirmationRequired.tool_status(),
            Some(ToolStatus::NeedsConfirmation)
        );
        assert_eq!(
            ErrorCode::DeviceUnauthorized.tool_status(),
            Some(ToolStatus::Error)
        );
        assert_eq!(
            ErrorCode::InvalidParams.tool_status(),
            Some(ToolStatus::Error)
        );
        assert_eq!(
            ErrorCode::MutatingToolRequiresConfirmation.tool_status(),
            Some(ToolStatus::NeedsConfirmation)
        );
        assert_eq!(
            ErrorCode::Cancelled.tool_status(),
            Some(ToolStatus::Cancelled)
        );
    }
}
