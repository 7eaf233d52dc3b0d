//! The closed catalogue of stable error codes (`runtime-protocol.md` §13).
//!
//! Codes are strings on the wire (`error.code` of a tool result, `error.data.code` on the
//! endpoint); in code they are this enum, so adding a code makes the compiler list every
//! exhaustive match that must decide what it means.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident = $wire:literal ),* $(,)?) => {
        /// A stable error code from the catalogue.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorCode {
            /// Every code, in catalogue order.
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$variant, )* ];

            /// The wire string.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $wire, )*
                }
            }
        }

        impl FromStr for ErrorCode {
            type Err = UnknownErrorCode;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $( $wire => Ok(ErrorCode::$variant), )*
                    other => Err(UnknownErrorCode(other.to_owned())),
                }
            }
        }
    };
}

error_codes! {
    // §13.1 tool bridge
    /// Device backend / executor not available.
    FrameworkUnavailable = "framework_unavailable",
    /// A payload limit was exceeded.
    PayloadTooLarge = "payload_too_large",
    /// Message version outside the supported range.
    UnsupportedVersion = "unsupported_version",
    /// No `request_id`.
    MissingRequestId = "missing_request_id",
    /// Caller runtime, transport or principal missing.
    MissingRuntimeIdentity = "missing_runtime_identity",
    /// Payload runtime differs from the authenticated runtime (also a surface code).
    RuntimeMismatch = "runtime_mismatch",
    /// No `tool`.
    MissingTool = "missing_tool",
    /// No reason in the request or its params.
    MissingReason = "missing_reason",
    /// Manifests not loaded.
    ToolRegistryUnavailable = "tool_registry_unavailable",
    /// The tool name does not resolve.
    UnknownTool = "unknown_tool",
    /// Params not an object, schema violation, reserved `_` key, or unsafe number.
    InvalidParams = "invalid_params",
    /// Runtime authorisation or tool policy refused the command.
    ToolNotGranted = "tool_not_granted",
    /// The device backend lacks the command.
    ToolNotSupportedByPhonePlatform = "tool_not_supported_by_phone_platform",
    /// A mutating command under `observe_only`.
    ObserveOnlyMutationDenied = "observe_only_mutation_denied",
    /// A confirmation was created or is pending.
    MutatingToolRequiresConfirmation = "mutating_tool_requires_confirmation",
    /// The user denied the confirmation.
    UserDeniedConfirmation = "user_denied_confirmation",
    /// The confirmation expired.
    Timeout = "timeout",
    /// Resolve of an unknown, expired or already resolved confirmation.
    PendingConfirmationNotFound = "pending_confirmation_not_found",
    /// A request id reused for another tool or params.
    IdempotencyConflict = "idempotency_conflict",
    /// Too many pending confirmations, or an endpoint rate limit.
    RateLimited = "rate_limited",
    /// No execution context could be created.
    TaskUnavailable = "task_unavailable",
    /// The backend failed while executing.
    ToolError = "tool_error",
    /// A backend-level (OS or app) confirmation is pending.
    ConfirmationRequired = "confirmation_required",
    /// The backend refused.
    Denied = "denied",
    /// Confirming a backend-level action failed.
    FrameworkConfirmationFailed = "framework_confirmation_failed",
    /// The daemon stopped while an approved action ran; never replayed.
    ExecutionResultUnknown = "execution_result_unknown",
    /// The request was withdrawn before execution.
    Cancelled = "cancelled",
    /// The audit log (or the durable record of an execution) could not be written, so the
    /// request was refused: nothing ran, or its result is withheld.
    AuditUnavailable = "audit_unavailable",
    /// Tool result inside a background run: the action was parked for review.
    BackgroundConfirmationRequired = "background.confirmation_required",
    // §13.2 adapters and transports
    /// An invoke names a command the phone did not advertise.
    UnknownCommand = "unknown_command",
    /// `canvas.snapshot` produced no screenshot bytes.
    SnapshotUnavailable = "snapshot_unavailable",
    /// The target node is not an OpenPhone node.
    UnsupportedNode = "unsupported_node",
    /// A mutating command over ADB without the explicit opt-in.
    StatefulToolRefused = "stateful_tool_refused",
    /// Command not implemented over ADB.
    UnsupportedAdbTool = "unsupported_adb_tool",
    /// No UI element matches.
    ElementNotFound = "element_not_found",
    /// More than one UI element matches.
    AmbiguousElement = "ambiguous_element",
    /// The UI element is disabled.
    ElementDisabled = "element_disabled",
    /// The UI element has no usable bounds.
    ElementBoundsUnavailable = "element_bounds_unavailable",
    /// MCP front end: the daemon is not reachable (`mcp.md` §5.3).
    DaemonUnavailable = "daemon_unavailable",
    /// MCP: the user dismissed the host's confirmation prompt (`mcp.md` §5.3).
    ConfirmationCancelled = "confirmation_cancelled",
    /// MCP: a sealed `requestState` is invalid or does not match the call (`mcp.md` §7.4).
    ConfirmationInvalid = "confirmation_invalid",
    // §13.3 attention and sessions
    /// No runtime named or routed.
    MissingRuntime = "missing_runtime",
    /// Attention text empty after trimming.
    MissingText = "missing_text",
    /// No adapter for the runtime.
    RuntimeNotConfigured = "runtime_not_configured",
    /// The runtime's adapter is not connected.
    RuntimeNotConnected = "runtime_not_connected",
    /// Handing the request to the runtime failed.
    SendFailed = "send_failed",
    // §13.4 adaptive surfaces
    /// The event is not supported.
    EventUnsupported = "event_unsupported",
    /// The assistant output or surface is invalid.
    OutputInvalid = "output_invalid",
    /// The surface session does not match.
    SessionMismatch = "session_mismatch",
    /// The surface is not active.
    SurfaceNotActive = "surface_not_active",
    /// The revision is not the current one.
    StaleRevision = "stale_revision",
    // §13.6 background jobs
    /// The background confirmation expired.
    BackgroundConfirmationTimeout = "background.confirmation_timeout",
    /// The background action was denied.
    BackgroundActionDenied = "background.action_denied",
    /// Reviewing the background action failed.
    BackgroundReviewError = "background.review_error",
    /// The review needs the phone unlocked.
    BackgroundReviewUnlockRequired = "background.review_unlock_required",
    /// The review window passed.
    BackgroundReviewExpired = "background.review_expired",
    /// The review was already resolved.
    BackgroundReviewAlreadyResolved = "background.review_already_resolved",
    /// The review is resolved.
    BackgroundReviewResolved = "background.review_resolved",
    /// Committing the review failed.
    BackgroundReviewCommitFailed = "background.review_commit_failed",
    /// The daemon stopped during an approved review; never replayed.
    BackgroundReviewInterruptedResultUnknown = "background.review_interrupted_result_unknown",
    /// The bound result of a review is missing.
    BackgroundReviewResultMissing = "background.review_result_missing",
    // device backends (real phones, `docs/android.md`)
    /// **\[project\]** The device cannot do this command (the platform forbids it to the
    /// backend); the message names the reason and the workaround.
    UnsupportedOnDevice = "unsupported_on_device",
    /// **\[project\]** No such device is attached (unplugged, or no such serial).
    DeviceNotFound = "device_not_found",
    /// **\[project\]** The device has not authorised this computer (the USB debugging prompt).
    DeviceUnauthorized = "device_unauthorized",
    /// **\[project\]** The device is attached but offline.
    DeviceOffline = "device_offline",
    /// **\[project\]** The device did not answer a command in time.
    DeviceTimeout = "device_timeout",
    /// **\[project\]** The adb server is not running and could not be started.
    AdbServerUnavailable = "adb_server_unavailable",
    /// **\[project\]** The element changed since the screen the caller read.
    StaleElement = "stale_element",
    /// **\[project\]** The action raised an OS dialog (permission prompt, "open with", a
    /// payment sheet) that only the user may answer; the runtime never taps it.
    FrameworkConfirmationRequired = "framework_confirmation_required",
    /// **\[project\]** No background job has this id (`agent-jobs.md` §8, §10).
    JobNotFound = "job_not_found",
    /// **\[project\]** Every stored job is live and the store is full (§2.4).
    JobLimitReached = "job_limit_reached",
    /// **\[project\]** The job's status does not allow this (pausing a running job, resuming
    /// one that is not paused), or it kept changing under concurrent writes.
    JobStateConflict = "job_state_conflict",
    /// **\[project\]** No goal has this id (`goals.md` §10).
    GoalNotFound = "goal_not_found",
    /// **\[project\]** The goal has no action with this id.
    GoalActionNotFound = "goal_action_not_found",
    /// **\[project\]** The goal's or the action's state does not allow this (an edge the
    /// transition table refuses, resuming a goal that is not paused), or it changed under a
    /// concurrent write.
    GoalStateConflict = "goal_state_conflict",
}

/// A string that is not in the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error code {0:?}")]
pub struct UnknownErrorCode(pub String);

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl schemars::JsonSchema for ErrorCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("ErrorCode")
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::string_enum(ErrorCode::ALL.iter().map(|c| c.as_str()))
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn wire_strings_round_trip_and_are_unique() {
        let mut seen = HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {code}");
            assert_eq!(code.as_str().parse::<ErrorCode>().unwrap(), *code);
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), *code);
        }
    }

    #[test]
    fn unknown_code_is_refused() {
        assert!("no_such_code".parse::<ErrorCode>().is_err());
        assert!(serde_json::from_str::<ErrorCode>("\"no_such_code\"").is_err());
    }
}
