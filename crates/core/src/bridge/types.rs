//! The bridge's shared types: who may resolve a confirmation ([`Operator`], [`ConfirmingHost`]),
//! the request as stored with its confirmation ([`StoredRequest`]), why a resolve call did
//! nothing ([`BridgeError`]) and what startup recovery found ([`RecoveryReport`]). A leaf of
//! the bridge: it imports nothing from its sibling files, so `audit.rs`, `authority.rs`,
//! `grants.rs`, `retry.rs` and `confirm.rs` all read these without an import circle.

use openphone_policy::{Caller, Context, Role};
use openphone_protocol::ErrorCode;
pub use openphone_protocol::endpoint::ConfirmDecision;
use openphone_store::StoreError;
use serde::{Deserialize, Serialize};

use crate::request::NormalizedRequest;

/// An operator principal: the only kind of caller that can resolve a confirmation. It can be
/// made only from a caller whose credential has the operator role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    principal: String,
    surface: String,
}

impl Operator {
    /// The operator behind `caller`, or `None` for a runtime credential.
    pub fn from_caller(caller: &Caller) -> Option<Operator> {
        match caller.role {
            Role::Operator => Some(Operator {
                principal: caller.principal.clone(),
                surface: caller.transport.as_str().to_owned(),
            }),
            Role::Runtime => None,
        }
    }

    /// `<surface>:<principal>`, recorded as `resolved_by`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.surface, self.principal)
    }
}

/// A host the user designated as a confirming host for one runtime (`mcp.md` §7.1, config
/// `trust_client_confirmation`): its own confirmation dialog may approve that runtime's
/// requests below the risk floor. Made by the daemon from its configuration only; the label
/// (`<source>:<runtime>`) is recorded as `resolved_by`, so audit tells these resolutions apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmingHost {
    pub(super) runtime: String,
    source: String,
}

impl ConfirmingHost {
    /// `runtime`'s host, resolving through `source` (`mcp_elicitation`, `mcp_input_response`).
    pub fn new(runtime: &str, source: &str) -> ConfirmingHost {
        ConfirmingHost {
            runtime: runtime.to_owned(),
            source: source.to_owned(),
        }
    }

    /// `<source>:<runtime>`, recorded as `resolved_by`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.source, self.runtime)
    }
}

/// Why a resolve call did nothing.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// Unknown, expired or already resolved (`pending_confirmation_not_found`).
    #[error("no pending confirmation {0:?} (unknown, expired or already resolved)")]
    PendingConfirmationNotFound(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A confirming host tried to resolve a confirmation of the risk floor.
    #[error("confirmation {0:?} needs the user's approval on the phone (confirmation: always)")]
    RiskFloor(String),
    /// A stored confirmation could not be read back.
    #[error("unreadable stored request: {0}")]
    CorruptRecord(String),
    /// In a fleet: the confirmation would act on a phone another daemon serves; only that
    /// daemon resolves it (requests are not proxied between hosts).
    #[error(
        "confirmation {confirmation_id:?} acts on a phone of host {host:?}, not of this daemon \
         (host {here:?}): decide it on the daemon of {host} (its inbox or dashboard); nothing \
         was decided"
    )]
    OnAnotherHost {
        confirmation_id: String,
        host: String,
        here: String,
    },
}

impl BridgeError {
    /// The catalogue code of the error.
    pub fn code(&self) -> ErrorCode {
        match self {
            BridgeError::PendingConfirmationNotFound(_) => ErrorCode::PendingConfirmationNotFound,
            BridgeError::RiskFloor(_) => ErrorCode::ConfirmationRequired,
            BridgeError::Store(_) | BridgeError::CorruptRecord(_) => ErrorCode::ToolError,
            BridgeError::OnAnotherHost { .. } => ErrorCode::DeviceNotFound,
        }
    }
}

/// What startup recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Approved confirmations whose execution outcome is unknown (never re-run).
    pub result_unknown: Vec<String>,
    /// Pending confirmations whose time passed while the daemon was down.
    pub timed_out: Vec<String>,
    /// Pending confirmations still in time, resolvable again.
    pub still_pending: Vec<String>,
    /// Direct executions (state-changing requests that ran without a confirmation) the daemon
    /// stopped during, by audit id: their final result is `execution_result_unknown`, never
    /// re-run.
    pub executions_unknown: Vec<String>,
}

/// The request as stored with its confirmation: everything needed to re-check and execute it
/// after approval, possibly after a restart. Executed params always come from here.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct StoredRequest {
    pub(super) caller: Caller,
    pub(super) request: NormalizedRequest,
    pub(super) context: Context,
    /// Whether the request carried an idempotency key of its own (a retry without one may
    /// join it only if it did not, `retry.rs`); absent in records stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) keyed: Option<bool>,
    /// The OS dialog this confirmation asks the user about (`os_dialogs.rs`): the request ran
    /// and the phone put the dialog up; approval answers the dialog, it does not run the
    /// request again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) dialog: Option<openphone_device::PendingDialog>,
}
