//! This daemon's place in the fleet: the host lock and the `fleet_hosts` row.
//!
//! A live daemon holds a session advisory lock keyed by its `host_id` (and the schema) on its
//! writer connection; the server releases it when that session ends, however the daemon ends.
//! A second daemon given the same `host_id` is refused while the first lives: two daemons
//! sharing one id would share one audit chain and one set of leases.

use std::time::Duration;

use openphone_store::{Result, StoreError};
use postgres::Client;

use crate::error::{PgContext, backend};

const TRY_LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended('openphone:host:' || current_schema() || ':' || $1, 0))";

/// How long `claim` waits for a predecessor's session to end (a daemon restarted at once).
const CLAIM_PATIENCE: Duration = Duration::from_secs(2);

fn try_lock(client: &mut Client, host_id: &str) -> Result<bool> {
    Ok(client
        .query_one(TRY_LOCK, &[&host_id])
        .ctx("fleet_hosts.lock", host_id)?
        .get(0))
}

/// Takes the host lock on `client` (waiting up to 2 s for a predecessor's session to end) and
/// records this daemon in `fleet_hosts`.
pub(crate) fn claim(client: &mut Client, host_id: &str, label: &str, now_ms: i64) -> Result<()> {
    let waited = openphone_clock::Stopwatch::start();
    while !try_lock(client, host_id)? {
        if waited.elapsed() >= CLAIM_PATIENCE {
            return Err(refusal(client, host_id));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = i64::from(std::process::id());
    client
        .execute(
            "INSERT INTO fleet_hosts (host_id, started_at_ms, last_seen_at_ms, pid, label)
             VALUES ($1, $2, $2, $3, $4)
             ON CONFLICT (host_id) DO UPDATE SET started_at_ms = EXCLUDED.started_at_ms,
                 last_seen_at_ms = EXCLUDED.last_seen_at_ms, pid = EXCLUDED.pid,
                 label = EXCLUDED.label",
            &[&host_id, &now_ms, &pid, &label],
        )
        .ctx("fleet_hosts.register", host_id)?;
    Ok(())
}

/// Takes the host lock again on a new writer connection (after a reconnect).
pub(crate) fn relock(client: &mut Client, host_id: &str) -> Result<()> {
    if try_lock(client, host_id)? {
        return Ok(());
    }
    Err(StoreError::Commit {
        op: "fleet_hosts.lock",
        id: host_id.to_owned(),
        detail: format!(
            "after reconnecting, host_id {host_id:?} is held by another live daemon; this \
             daemon no longer writes. Stop one of them: each daemon needs its own host_id"
        ),
    })
}

/// The refusal of a second live daemon, naming the host and what is known of the first.
fn refusal(client: &mut Client, host_id: &str) -> StoreError {
    let known = client
        .query_opt(
            "SELECT pid, label, started_at_ms FROM fleet_hosts WHERE host_id = $1",
            &[&host_id],
        )
        .ok()
        .flatten()
        .map(|row| {
            let pid: i64 = row.get(0);
            let label: String = row.get(1);
            let started: i64 = row.get(2);
            format!(" (pid {pid} on {label}, started at {started} ms)")
        })
        .unwrap_or_default();
    backend(
        "open",
        host_id,
        format!(
            "host_id {host_id:?} is already served by a live daemon{known}: two daemons may not \
             share a host_id. Give this one its own host_id, or stop the other"
        ),
    )
}

/// Marks this daemon seen now.
pub(crate) fn touch_tx(
    tx: &mut postgres::Transaction<'_>,
    host_id: &str,
    now_ms: i64,
) -> Result<()> {
    tx.execute(
        "UPDATE fleet_hosts SET last_seen_at_ms = $2 WHERE host_id = $1",
        &[&host_id, &now_ms],
    )
    .ctx("fleet_hosts.touch", host_id)?;
    Ok(())
}
