//! `dashboard.login` (operator only): a one-time login code for the daemon's web dashboard
//! (`docs/dashboard.md`). The code is exchanged once, within its lifetime, for an HttpOnly,
//! SameSite=Strict session cookie; the operator token never travels in a URL.

use serde::{Deserialize, Serialize};

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
