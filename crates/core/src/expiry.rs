//! When the daemon's expiry timer must next run (issue 34: an idle daemon sleeps instead of
//! polling every second).
//!
//! [`ToolBridge::expire_due`] times out pending confirmations and ends elevations past their
//! time. Rather than calling it every second, the daemon sleeps until
//! [`ToolBridge::next_expiry_at`] (the first pending confirmation's expiry, the first
//! elevation's end), or until [`ToolBridge::expiry_scheduled`] resolves: a confirmation was
//! created or an elevation granted since, which may be due earlier. The wake is a stored
//! permit (`Notify::notify_one`), so one raised between reading the next time and waiting is
//! never lost.

use crate::ToolBridge;

impl ToolBridge {
    /// The first time (Unix ms) something expires: a pending confirmation or an elevation;
    /// `None` when nothing will. A store that cannot be read answers "now", so the caller
    /// runs the expiry (which logs the error) rather than sleeping past a due confirmation.
    pub fn next_expiry_at(&self) -> Option<i64> {
        let confirmation = match self.store().next_pending_expiry() {
            Ok(at) => at,
            Err(e) => {
                tracing::warn!(error = %e, "reading when the next confirmation expires");
                Some(self.now_ms())
            }
        };
        let elevation = self.elevations().iter().map(|g| g.expires_at_ms).min();
        match (confirmation, elevation) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Resolves once something that expires was scheduled since the last wake (a
    /// confirmation created, an elevation granted): read [`ToolBridge::next_expiry_at`] again.
    pub async fn expiry_scheduled(&self) {
        self.expiry_wake.notified().await;
    }

    /// Wakes the expiry timer: something new may expire before what it sleeps for.
    pub(crate) fn expiry_moved(&self) {
        self.expiry_wake.notify_one();
    }
}
