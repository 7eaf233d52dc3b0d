//! Phone sessions (`runtime-protocol.md` §2.2): `sessions.list`, `sessions.get` and
//! `sessions.cancel`.
//!
//! [`PhoneSession`] is also the store's record (`openphone_store::PhoneSession`): the session
//! is sent exactly as it is stored.

use serde::{Deserialize, Serialize};

use crate::autonomy::Autonomy;

crate::wire_enum!(
    /// Phone session status.
    SessionStatus {
        Created = "created",
        WaitingForRuntime = "waiting_for_runtime",
        Running = "running",
        WaitingForConfirmation = "waiting_for_confirmation",
        Completed = "completed",
        Failed = "failed",
    }
);

impl SessionStatus {
    /// Not yet `completed` or `failed`.
    pub fn is_active(self) -> bool {
        match self {
            SessionStatus::Created
            | SessionStatus::WaitingForRuntime
            | SessionStatus::Running
            | SessionStatus::WaitingForConfirmation => true,
            SessionStatus::Completed | SessionStatus::Failed => false,
        }
    }
}

/// A phone session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhoneSession {
    /// `phone-sess-<uuid>`.
    pub phone_session_id: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Normalised runtime id.
    pub runtime_kind: String,
    /// As returned by the adapter; empty until known.
    pub runtime_session_id: String,
    /// `attn-<uuid>`.
    pub attention_id: String,
    /// Normalised entry point (`chat`, `volume_voice`, …).
    pub source: String,
    pub autonomy: Autonomy,
    pub summary: String,
    pub status: SessionStatus,
    /// `phone-session:<phone_session_id>`.
    pub audit_log_id: String,
    /// Why the session failed (e.g. the runtime disconnected), when it did.
    pub failure_reason: Option<String>,
    /// The phone the session acts on (`[[devices]] id`), bound when it was created: its
    /// calls that name no `device_id` go to it. Absent on a daemon with one phone (and for
    /// sessions made before several phones existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// `sessions.list` params: filters, newest first. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsListParams {
    /// Only this runtime's sessions (a runtime may name only itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SessionStatus>,
    /// Default 50, at most 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `sessions.list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionsListResult {
    pub sessions: Vec<PhoneSession>,
}

/// `sessions.get` params. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsGetParams {
    pub phone_session_id: String,
}

/// `sessions.get` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionsGetResult {
    pub session: PhoneSession,
}

/// `sessions.cancel` params. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsCancelParams {
    pub phone_session_id: String,
}

/// `sessions.cancel` result: the session after the cancellation (`failed`, reason
/// `cancelled`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionsCancelResult {
    /// Whether a running built-in loop was told to stop (false for a remote runtime, or when
    /// no loop was running).
    pub stopped_loop: bool,
    pub session: PhoneSession,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_params_refuse_unknown_fields_and_statuses() {
        let p: SessionsListParams =
            serde_json::from_value(json!({"status": "running", "limit": 20})).unwrap();
        assert_eq!(p.status, Some(SessionStatus::Running));
        for bad in [
            json!({"status": "sleeping"}),
            json!({"limit": -1}),
            json!({"runtimes": "hermes"}),
        ] {
            assert!(serde_json::from_value::<SessionsListParams>(bad).is_err());
        }
    }

    #[test]
    fn active_is_everything_before_the_end() {
        let active: Vec<SessionStatus> = SessionStatus::ALL
            .into_iter()
            .filter(|s| s.is_active())
            .collect();
        assert_eq!(active.len(), 4);
        assert!(!SessionStatus::Failed.is_active());
    }
}
