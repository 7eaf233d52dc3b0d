//! The daemon's expiry timer: times out pending confirmations, ends elevations past their
//! time, and drops stored results past their retention — sleeping until the next of those is
//! due instead of ticking every second (issue 34: an idle daemon wakes at most once a
//! minute here).
//!
//! It wakes when the first pending confirmation or elevation is due
//! (`ToolBridge::next_expiry_at`), when a new one was scheduled (`ToolBridge::expiry_scheduled`:
//! it may be due earlier, so the time is read again), at the next retention round (at start,
//! then every 10 minutes), and at least every [`MAX_SLEEP`] (a wall clock that jumped, a
//! timed-out confirmation whose result could not be recorded yet).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use openphone_core::ToolBridge;
use openphone_store::{Retention, Store};

/// How often the daemon drops stored results past their retention (`[store]`), in ms.
pub const PRUNE_EVERY_MS: i64 = 600_000;
/// The longest the timer sleeps with nothing due.
pub const MAX_SLEEP: Duration = Duration::from_secs(60);
/// The pause before trying again when an expiry left something due (the store failed).
const RETRY: Duration = Duration::from_secs(1);

/// Runs until `shutdown` resolves.
pub async fn run(
    bridge: Arc<ToolBridge>,
    store: Arc<Store>,
    retention: Retention,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut next_prune = bridge.now_ms();
    // Whether this round expires what is due (at start and after every sleep), or only reads
    // the next time again (woken by a newly scheduled expiry).
    let mut expire = true;
    loop {
        if expire {
            let n = bridge.expire_due().await;
            if n > 0 {
                tracing::info!(expired = n, "confirmations timed out");
            }
        }
        let now = bridge.now_ms();
        if now >= next_prune {
            crate::daemon::prune_results(&store, now, retention).await;
            next_prune = now + PRUNE_EVERY_MS;
        }
        let now = bridge.now_ms();
        let until_prune = u64::try_from(next_prune - now).unwrap_or(0);
        let wait = sleep_for(bridge.next_expiry_at(), now, expire)
            .min(Duration::from_millis(until_prune).max(RETRY));
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(wait) => expire = true,
            () = bridge.expiry_scheduled() => expire = false,
        }
    }
}

/// How long to sleep when the next expiry is `next` (Unix ms) and it is `now`: until then,
/// at most [`MAX_SLEEP`]; something already due is expired at once, unless this round just
/// tried (then [`RETRY`] later, never a busy loop).
pub fn sleep_for(next: Option<i64>, now: i64, just_expired: bool) -> Duration {
    match next {
        None => MAX_SLEEP,
        Some(at) if at <= now => {
            if just_expired {
                RETRY
            } else {
                Duration::ZERO
            }
        }
        Some(at) => Duration::from_millis(u64::try_from(at - now).unwrap_or(0)).min(MAX_SLEEP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_until_the_next_expiry_and_never_busy_loops() {
        assert_eq!(sleep_for(None, 1_000, true), MAX_SLEEP);
        assert_eq!(
            sleep_for(Some(1_250), 1_000, true),
            Duration::from_millis(250)
        );
        assert_eq!(sleep_for(Some(10_000_000), 1_000, false), MAX_SLEEP);
        assert_eq!(sleep_for(Some(900), 1_000, false), Duration::ZERO);
        assert_eq!(sleep_for(Some(900), 1_000, true), RETRY);
    }
}
