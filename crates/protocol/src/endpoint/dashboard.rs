//! `dashboard.login` (operator only): a one-time login code for the daemon's web dashboard
//! (`docs/dashboard.md`). The code is exchanged once, within its lifetime, for an HttpOnly,
//! SameSite=Strict session cookie; the operator token never travels in a URL.
//!
//! Also the JSON the dashboard's own HTTP routes (`/ui/login`, `/ui/logout`, `/ui/api/…`)
//! read and answer. Their members are declared in key order: the bytes the routes answered
//! when they built maps.

use serde::{Deserialize, Serialize};

use super::audit::BrokenRecord;
use super::key_order::in_key_order;

/// `dashboard.login` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DashboardLoginResult {
    /// The one-time code (64 hex characters).
    pub code: String,
    /// The path to open on the daemon's own HTTP address, the code in its fragment
    /// (`/ui/login#code=<code>`): a fragment is never sent to a server or kept in a log, and
    /// the login page replaces its history entry after the exchange.
    pub login_path: String,
    /// When the code stops working (daemon clock, ms since the epoch).
    pub expires_at_ms: i64,
}

/// The body of `POST /ui/login`: `{"code": "…"}`. A missing or non-string `code` is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DashboardLoginBody {
    /// The one-time code of `dashboard.login`.
    #[serde(default)]
    pub code: Option<String>,
}

/// The answer of `POST /ui/login`: the session's CSRF token (`token`, the only time it is ever
/// sent) and the session's expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DashboardLoginReply {
    /// When the session ends (daemon clock, ms since the epoch).
    pub expires_at_ms: i64,
    /// Always `true`.
    pub ok: bool,
    /// The session's CSRF token.
    pub token: String,
}

/// The answer of `POST /ui/logout`: `{"ok": true}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DashboardOk {
    /// Always `true`.
    pub ok: bool,
}

/// The answer of `GET /ui/api/session`: the session is alive, until `expires_at_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DashboardSessionReply {
    /// When the session ends (daemon clock, ms since the epoch).
    pub expires_at_ms: i64,
    /// Always `true`.
    pub ok: bool,
}

/// The answer of `GET /ui/api/methods`: the endpoint methods the daemon answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DashboardMethodsReply {
    /// Method names (`jobs.list`, …), in the method table's order.
    pub methods: Vec<String>,
}

/// The answer of `POST /ui/api/audit/verify`: a walk of the audit hash chain (as
/// `openphone audit verify`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DashboardAuditVerifyReply {
    /// Records checked (up to and including the first broken one).
    pub checked: u64,
    /// The first broken record, `null` when the chain is intact (its members in key order).
    #[serde(serialize_with = "in_key_order")]
    pub first_broken: Option<BrokenRecord>,
    /// No broken record and the head checks out.
    pub intact: bool,
    /// The last record's hash.
    pub last_hash: String,
    /// The last record's seq (0 when the log is empty).
    pub last_seq: i64,
    /// What is wrong, in a sentence (`null` when intact).
    pub problem: Option<String>,
}
