//! `dashboard.login` (operator): a one-time code for the web dashboard's login page.

use openphone_protocol::endpoint::{DashboardLoginResult, EndpointErrorCode, ErrorObject};

use crate::state::AppState;

/// `dashboard.login`: a one-time code for the login page.
pub(super) fn login_code(state: &AppState) -> Result<DashboardLoginResult, ErrorObject> {
    let Some(dashboard) = &state.dashboard else {
        return Err(ErrorObject::new(
            EndpointErrorCode::Forbidden,
            "the dashboard is served only when the daemon listens on a loopback address",
        ));
    };
    let (code, expires_at_ms) =
        dashboard
            .logins
            .issue_code(state.bridge.now_ms())
            .map_err(|e| {
                tracing::error!(error = %e, "minting a dashboard login code");
                ErrorObject::new(openphone_protocol::ErrorCode::ToolError, e.to_string())
            })?;
    Ok(DashboardLoginResult {
        login_path: format!("/ui/login#code={code}"),
        code,
        expires_at_ms,
    })
}
