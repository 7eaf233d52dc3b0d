//! Executing an approved review (§9.7): the [`ReviewExecutor`] the scheduler hands a verified,
//! approved record to, and [`BridgeReviewExecutor`], which runs the **stored** request — the
//! stored tool and params, nothing the model says now — through the tool bridge.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_core::{ReviewedApproval, ToolBridge};
use openphone_policy::{Autonomy, Caller};
use openphone_protocol::{
    BUILTIN_RUNTIME_ID, ErrorCode, Registry, ToolRequest, ToolResult, ToolStatus,
    background_job_session,
};
use serde_json::Value;

use super::{ConfirmationRecord, Resolution};

/// `reason` when the approved command may no longer run in the background.
pub const NOT_ELIGIBLE: &str = "tool_not_eligible_for_background_approval";
/// `reason` when verification failed (§9.6) — also when the bridge finds the request is not
/// what the review holds.
pub const BINDING_INVALID: &str = "approval_binding_invalid_or_expired";
/// `reason` when there is no device backend or executor.
pub const FRAMEWORK_UNAVAILABLE: &str = "framework_unavailable";
/// `reason` when the approved call raised an OS dialog the bridge could not confirm once (§9.15).
pub const FRAMEWORK_CONFIRMATION_FAILED: &str = "framework_confirmation_failed";
/// `reason` when the approved call raised an OS dialog: never pressed on the review's approval
/// (the user approved the request, not the dialog), it waits in a confirmation of its own for
/// the user to decide later (the detail names it).
pub const FRAMEWORK_CONFIRMATION_REQUIRED: &str = "framework_confirmation_required";
/// `reason` when the tool's result could not be serialised.
pub const RESULT_ENCODING_FAILED: &str = "result_encoding_failed";

/// Why an approved call did not produce a result: a reason of §9.15
/// (`tool_not_eligible_for_background_approval`, `framework_unavailable`,
/// `execution_<Kind>`, …) and a detail for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct ExecutionFailure {
    /// The bound result's `reason`.
    pub reason: String,
    /// What happened (logged, never stored in the bound result).
    pub detail: String,
}

impl ExecutionFailure {
    /// A failure with `reason`.
    pub fn new(reason: impl Into<String>, detail: impl Into<String>) -> ExecutionFailure {
        ExecutionFailure {
            reason: reason.into(),
            detail: detail.into(),
        }
    }

    /// `execution_<kind>`, `kind` reduced to a `snake_case` token.
    pub fn execution(kind: &str, detail: impl Into<String>) -> ExecutionFailure {
        let kind: String = kind
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(80)
            .collect();
        ExecutionFailure::new(format!("execution_{kind}"), detail)
    }

    /// The resolution a review gets when its approved call failed this way: `not_eligible`,
    /// `binding_invalid` or (the user's approval was carried out, whatever came of it)
    /// `approved`.
    pub fn resolution(&self) -> Resolution {
        match self.reason.as_str() {
            NOT_ELIGIBLE => Resolution::NotEligible,
            BINDING_INVALID => Resolution::BindingInvalid,
            _ => Resolution::Approved,
        }
    }
}

/// Executes the stored call of a verified, approved review exactly once, and reports the
/// tool's result (a JSON value) or why there is none. Called by the scheduler after the claim
/// and the 16 checks of §9.6; never called for a denied, expired or unverified review.
#[async_trait]
pub trait ReviewExecutor: Send + Sync + 'static {
    /// Runs `record.tool` with `record.params`, bound to `record.confirmation_id`.
    async fn execute(&self, record: &ConfirmationRecord) -> Result<Value, ExecutionFailure>;
}

/// The [`ReviewExecutor`] over the tool bridge: the model-tool name is mapped to its command
/// through the manifest registry, and the request is sent with
/// [`ToolBridge::invoke_reviewed`] as runtime `builtin`, runtime session and phone session
/// `background-job:<job_id>`, `request_id` = the confirmation id, `idempotency_key` = the
/// record's key, autonomy `ask_before_action`. The bridge validates the request, decides it
/// again under the job's background context (a Deny still denies), checks it against the
/// job's claimed review in the store, replays a result recorded under the same identity, and
/// otherwise executes it once and records it.
pub struct BridgeReviewExecutor {
    bridge: Arc<ToolBridge>,
    registry: &'static Registry,
    caller: Caller,
}

impl std::fmt::Debug for BridgeReviewExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeReviewExecutor")
            .field("caller", &self.caller.principal)
            .finish_non_exhaustive()
    }
}

impl BridgeReviewExecutor {
    /// An executor over `bridge`, resolving tools in `registry`, calling as the built-in
    /// runtime (principal `background-review`).
    pub fn new(bridge: Arc<ToolBridge>, registry: &'static Registry) -> BridgeReviewExecutor {
        BridgeReviewExecutor::with_caller(bridge, registry, Caller::builtin("background-review"))
    }

    /// [`BridgeReviewExecutor::new`] with the built-in runtime's configured caller (its
    /// grants and ceiling as the daemon configured them).
    pub fn with_caller(
        bridge: Arc<ToolBridge>,
        registry: &'static Registry,
        caller: Caller,
    ) -> BridgeReviewExecutor {
        BridgeReviewExecutor {
            bridge,
            registry,
            caller,
        }
    }

    /// The request the bridge is sent for `record` (the stored tool and params only).
    pub fn request(&self, record: &ConfirmationRecord) -> Result<ToolRequest, ExecutionFailure> {
        let command = self
            .registry
            .resolve(&record.tool)
            .filter(|c| c.android_tool == record.tool && c.mutating)
            .ok_or_else(|| {
                ExecutionFailure::new(
                    NOT_ELIGIBLE,
                    format!(
                        "{} is not a state-changing command's model-tool name",
                        record.tool
                    ),
                )
            })?;
        let session = background_job_session(record.job_id);
        // The reason the model gave is part of the params (and so of the digest); only a
        // call without one gets a request-level reason naming the review.
        let has_reason = record
            .params
            .get("reason")
            .and_then(Value::as_str)
            .is_some_and(|r| !r.trim().is_empty());
        Ok(ToolRequest {
            request_id: record.confirmation_id.clone(),
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            runtime_session_id: session.clone(),
            phone_session_id: Some(session),
            tool: command.name.clone(),
            params: record.params.clone(),
            reason: (!has_reason).then(|| {
                format!(
                    "background job {}: approved by the user on review {}",
                    record.job_id, record.confirmation_id
                )
            }),
            autonomy: Some(Autonomy::AskBeforeAction.as_str().to_owned()),
            idempotency_key: Some(record.idempotency_key.clone()),
            timeout_ms: None,
        })
    }
}

#[async_trait]
impl ReviewExecutor for BridgeReviewExecutor {
    async fn execute(&self, record: &ConfirmationRecord) -> Result<Value, ExecutionFailure> {
        let request = self.request(record)?;
        let review = ReviewedApproval {
            confirmation_id: record.confirmation_id.clone(),
            job_id: record.job_id,
        };
        // The job's creator's authority (issue 28): a runtime's job's approved call runs as
        // `builtin` narrowed to that runtime's current grants, tool policy and ceiling, so an
        // approval never lets a job do what its creator may not (the bridge decides it again).
        let created_by = match self.bridge.job_creator(record.job_id) {
            Ok(Some(creator)) => creator,
            Ok(None) => {
                return Err(ExecutionFailure::new(
                    BINDING_INVALID,
                    format!("job {} is gone", record.job_id),
                ));
            }
            Err(e) => return Err(ExecutionFailure::new(FRAMEWORK_UNAVAILABLE, e.to_string())),
        };
        let authority = self.bridge.creator_authority(&self.caller, &created_by);
        let permitted = self
            .registry
            .resolve(&request.tool)
            .is_some_and(|command| authority.permits(command));
        if !permitted {
            return Err(ExecutionFailure::new(
                NOT_ELIGIBLE,
                format!(
                    "{} is not within the authority of `{created_by}`, whose job this is",
                    request.tool
                ),
            ));
        }
        let result = self
            .bridge
            .invoke_reviewed(authority.caller(), request, review)
            .await;
        outcome(result)
    }
}

/// Success is an executed result with no error, denial, failure or pending confirmation.
fn outcome(result: ToolResult) -> Result<Value, ExecutionFailure> {
    let detail = || {
        result
            .error
            .as_ref()
            .map_or_else(|| result.status.as_str().to_owned(), |e| e.message.clone())
    };
    let code = result.error.as_ref().map(|e| e.code);
    match (result.status, code) {
        (ToolStatus::Ok, None) => Ok(Value::Object(result.result)),
        (_, Some(ErrorCode::FrameworkUnavailable)) => {
            Err(ExecutionFailure::new(FRAMEWORK_UNAVAILABLE, detail()))
        }
        (_, Some(ErrorCode::BackgroundReviewError)) => {
            Err(ExecutionFailure::new(BINDING_INVALID, detail()))
        }
        (_, Some(ErrorCode::FrameworkConfirmationRequired)) => {
            let asked = result
                .pending_confirmation()
                .map(|p| format!(" (confirmation {}; not pressed)", p.confirmation_id))
                .unwrap_or_default();
            Err(ExecutionFailure::new(
                FRAMEWORK_CONFIRMATION_REQUIRED,
                format!("{}{asked}", detail()),
            ))
        }
        (_, Some(ErrorCode::FrameworkConfirmationFailed)) => Err(ExecutionFailure::new(
            FRAMEWORK_CONFIRMATION_FAILED,
            detail(),
        )),
        // A policy denial: the command is no longer allowed for `builtin` here.
        (ToolStatus::Denied, _) => Err(ExecutionFailure::new(NOT_ELIGIBLE, detail())),
        (_, Some(code)) => Err(ExecutionFailure::execution(code.as_str(), detail())),
        (status, None) => Err(ExecutionFailure::execution(status.as_str(), detail())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_reasons_and_resolutions() {
        let fail =
            |code: ErrorCode| outcome(ToolResult::failure("builtin", "r", code, "m")).unwrap_err();
        assert_eq!(fail(ErrorCode::ToolError).reason, "execution_tool_error");
        assert_eq!(
            fail(ErrorCode::ToolError).resolution(),
            Resolution::Approved
        );
        assert_eq!(
            fail(ErrorCode::ExecutionResultUnknown).reason,
            "execution_execution_result_unknown"
        );
        assert_eq!(
            fail(ErrorCode::FrameworkUnavailable).reason,
            FRAMEWORK_UNAVAILABLE
        );
        assert_eq!(
            fail(ErrorCode::BackgroundReviewError).resolution(),
            Resolution::BindingInvalid
        );
        assert_eq!(fail(ErrorCode::ToolNotGranted).reason, NOT_ELIGIBLE);
        assert_eq!(
            fail(ErrorCode::ToolNotGranted).resolution(),
            Resolution::NotEligible
        );
        let ok = ToolResult::ok("builtin", "r", serde_json::Map::new());
        assert_eq!(outcome(ok), Ok(Value::Object(serde_json::Map::new())));
    }

    /// Helper D2's finding (issue 30): the bridge's failed confirm-once of an approved review's OS
    /// dialog was reported as `execution_framework_confirmation_failed`; §9.15 names it
    /// `framework_confirmation_failed`, and the review stays approved (the call ran).
    #[test]
    fn a_failed_os_dialog_confirmation_was_reported_as_execution_framework_confirmation_failed() {
        let failed = outcome(ToolResult::failure(
            "builtin",
            "r",
            ErrorCode::FrameworkConfirmationFailed,
            "the phone's dialog (Share with) could not be confirmed",
        ))
        .unwrap_err();
        assert_eq!(failed.reason, "framework_confirmation_failed");
        assert_eq!(failed.reason, FRAMEWORK_CONFIRMATION_FAILED);
        assert_eq!(failed.resolution(), Resolution::Approved);
        assert!(failed.detail.contains("Share with"), "{failed:?}");
    }

    /// Review finding 4: an approved review's OS dialog is no longer pressed by the bridge; the
    /// review's outcome records that it waits for the user.
    #[test]
    fn an_approved_reviews_os_dialog_is_recorded_as_waiting_for_the_user() {
        let waiting = outcome(ToolResult::failure(
            "builtin",
            "r",
            ErrorCode::FrameworkConfirmationRequired,
            "Android asks: Share with Messages?",
        ))
        .unwrap_err();
        assert_eq!(waiting.reason, FRAMEWORK_CONFIRMATION_REQUIRED);
        assert_eq!(waiting.resolution(), Resolution::Approved);
        assert!(waiting.detail.contains("Share with"), "{waiting:?}");
    }
}
