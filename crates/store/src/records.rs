//! The record types several tables share, as plain data: a request's scope and identity key
//! (`runtime-protocol.md` §10.2), a recorded final result, a stored confirmation and its state.
//! A leaf below the tables and the error type that names them; no SQL here.

use openphone_protocol::Risk;
use openphone_protocol::wire_enum;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The runtime session of a request that has none.
pub const GLOBAL_SESSION: &str = "global";

/// A request scope: `<runtime>:<runtime_session_id | global>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    pub runtime: String,
    /// Never empty: an empty runtime session id is stored as `global`.
    pub runtime_session_id: String,
}

impl Scope {
    /// Builds a scope; an empty (or blank) runtime session id becomes `global`.
    pub fn new(runtime: impl Into<String>, runtime_session_id: &str) -> Scope {
        let session = runtime_session_id.trim();
        Scope {
            runtime: runtime.into(),
            runtime_session_id: if session.is_empty() {
                GLOBAL_SESSION.to_owned()
            } else {
                session.to_owned()
            },
        }
    }

    /// `<runtime>:<runtime_session_id>`.
    pub fn key(&self) -> String {
        format!("{}:{}", self.runtime, self.runtime_session_id)
    }
}

/// The confirmation / replay identity key (§10.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IdentityKey {
    pub runtime: String,
    /// Never empty: `global` when the request has no runtime session.
    pub runtime_session_id: String,
    /// Canonical command name.
    pub tool: String,
    /// 64 lowercase hex (the `params_hash` without its `sha256:` prefix).
    pub params_digest: String,
    /// The request's idempotency key, or its request id when it has none.
    pub idempotency_key: String,
}

impl IdentityKey {
    /// Builds a key; an empty runtime session id becomes `global`, an empty idempotency key
    /// becomes `request_id`.
    pub fn new(
        runtime: impl Into<String>,
        runtime_session_id: &str,
        tool: impl Into<String>,
        params_digest: impl Into<String>,
        idempotency_key: &str,
        request_id: &str,
    ) -> IdentityKey {
        let scope = Scope::new(runtime, runtime_session_id);
        let key = idempotency_key.trim();
        IdentityKey {
            runtime: scope.runtime,
            runtime_session_id: scope.runtime_session_id,
            tool: tool.into(),
            params_digest: params_digest.into(),
            idempotency_key: if key.is_empty() {
                request_id.to_owned()
            } else {
                key.to_owned()
            },
        }
    }

    /// The scope part of the key.
    pub fn scope(&self) -> Scope {
        Scope {
            runtime: self.runtime.clone(),
            runtime_session_id: self.runtime_session_id.clone(),
        }
    }

    /// A readable form for logs and error messages.
    pub fn describe(&self) -> String {
        format!(
            "{}:{} {} {} key={}",
            self.runtime,
            self.runtime_session_id,
            self.tool,
            self.params_digest,
            self.idempotency_key
        )
    }
}

/// A recorded final result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalResult {
    pub identity: IdentityKey,
    /// The request that produced it (a replay re-addresses the result to the new request id).
    pub request_id: String,
    /// The final tool result, wire shape.
    pub result: Value,
    pub recorded_at_ms: i64,
}

wire_enum!(
    /// Confirmation state.
    ConfirmationState {
        /// Waiting for the user.
        Pending = "pending",
        /// Approved; the stored request is executing.
        Approved = "approved",
        /// Approved and executed; the final result is recorded.
        Completed = "completed",
        /// Denied by the user.
        Denied = "denied",
        /// Expired while pending (or timed out by the caller).
        Timeout = "timeout",
        /// Was executing when the daemon stopped; never executed again.
        ResultUnknown = "result_unknown",
    }
);

impl ConfirmationState {
    /// No further transition is possible.
    pub fn is_terminal(self) -> bool {
        match self {
            ConfirmationState::Pending | ConfirmationState::Approved => false,
            ConfirmationState::Completed
            | ConfirmationState::Denied
            | ConfirmationState::Timeout
            | ConfirmationState::ResultUnknown => true,
        }
    }
}

/// A stored confirmation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmationRecord {
    /// `runtime-confirm-<uuid>`.
    pub confirmation_id: String,
    pub identity: IdentityKey,
    pub request_id: String,
    /// The full normalised request, including the exact params that were digested. On
    /// approval, this — never a re-sent body — is what executes.
    pub request: Value,
    pub phone_session_id: Option<String>,
    pub summary: String,
    pub risk: Risk,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub state: ConfirmationState,
    pub resolved_at_ms: Option<i64>,
    /// Operator principal (or [`RESOLVED_BY_EXPIRY`](crate::RESOLVED_BY_EXPIRY)).
    pub resolved_by: Option<String>,
    /// The final tool result, once recorded.
    pub final_result: Option<Value>,
    /// The daemon of a fleet sharing the store whose runtime asked (its `host_id`); `None`
    /// on a store that is not shared (SQLite). Read back only: writes take the writer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<openphone_protocol::endpoint::RowHost>,
}
