//! The daemon's shutdown signal as every task waits for it (the floor below the tasks that
//! stop with the daemon: background jobs, goals, the world, the front door, `events.*`).

use tokio::sync::watch;

/// Resolves once the shutdown flag is set (or its sender is gone).
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}
