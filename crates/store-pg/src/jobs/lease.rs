//! Leases across daemons (issue 35): who may write a claimed run, and whose runs are dead.
//!
//! A claim records on the job (and its ledger row) `lease_owner` = the claiming daemon's
//! `host_id` and `lease_epoch` = that daemon's incarnation, its `fleet_hosts.started_at_ms`
//! (written by `PgStore::open`, new at every start). Every write of a claimed run names the
//! lease it holds in its `WHERE` (fencing): a daemon whose run was taken over writes nothing and
//! gets `Conflict`.
//!
//! A lease is dead when its daemon
//! - restarted: its `fleet_hosts.started_at_ms` is no longer the lease's epoch. Immediate: a
//!   daemon killed and started again repairs its predecessor's runs at once; or
//! - holds no host lock (the session advisory lock of `host.rs`, held by the daemon's writer
//!   connection and released by the server however the session ends) **and** was last seen
//!   (`fleet_hosts.last_seen_at_ms`, refreshed every 30 s by `Fleet::touch`) more than
//!   [`LEASE_GRACE_MS`] ago. A lost lock alone is not death: a PostgreSQL restart,
//!   `pg_terminate_backend` or a network reset ends the writer session of a live daemon, which
//!   takes its lock back only at its next write; its runs are not repaired while its runner may
//!   still act. A daemon that ended (crash, `kill -9`, clean stop) is repaired once its last
//!   touch is older than the grace.
//!
//! The lock is read from `pg_locks`, so no daemon ever takes another's lock to ask.
//!
//! Clock: `last_seen_at_ms` is written from the daemons' own ms clock (`SystemClock`), so it is
//! compared with the caller's `now_ms` from that same clock (`StaleSelection.now_ms` for the
//! repair, `AttemptFinish.finished_at` for closing a stale ledger row), never with the
//! server's `clock_timestamp()`: one kind of clock on both sides of the comparison, and a
//! scheduler under a test clock sees a consistent picture. The next wake needs no now: it is the
//! instant the grace ends (`last_seen_at_ms + LEASE_GRACE_MS`).

use openphone_store::{Result, StoreError};
use postgres::Transaction;

use crate::PgContext;

/// How long a daemon that holds no host lock is still taken for live after it was last seen
/// (`fleet_hosts.last_seen_at_ms`): three of its 30 s touches. Its runs are repaired only after.
pub(crate) const LEASE_GRACE_MS: i64 = 90_000;

/// The `(host_id, started_at_ms)` pairs of daemons holding their host lock now.
pub(super) const LOCKED_LEASES: &str = "(SELECT h.host_id, h.started_at_ms FROM fleet_hosts h \
    WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted \
    AND l.objsubid = 1 \
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
    AND ((l.classid::bigint << 32) | l.objid::bigint) \
        = hashtextextended('openphone:host:' || current_schema() || ':' || h.host_id, 0)))";

/// The `(host_id, started_at_ms)` pairs of live leases at now = `now_param` (a `$n`
/// placeholder, Unix ms of the daemons' clock): daemons holding their host lock, or seen within
/// [`LEASE_GRACE_MS`]. A lease whose epoch is not its daemon's `started_at_ms` (a restart) is
/// never in it.
pub(super) fn live_leases(now_param: &str) -> String {
    format!(
        "(SELECT host_id, started_at_ms FROM fleet_hosts \
          WHERE last_seen_at_ms >= {now_param}::bigint - {LEASE_GRACE_MS} \
          UNION ALL {LOCKED_LEASES})"
    )
}

/// This daemon's lease `(host_id, started_at_ms)` as a one-row subquery, `param` being the
/// placeholder (`$n`) of its host id.
pub(super) fn mine(param: &str) -> String {
    format!("(SELECT host_id, started_at_ms FROM fleet_hosts WHERE host_id = {param}::text)")
}

/// This daemon's epoch: its `fleet_hosts.started_at_ms`.
pub(super) fn epoch_in(tx: &mut Transaction<'_>, op: &'static str, me: &str) -> Result<i64> {
    let row = tx
        .query_opt(
            "SELECT started_at_ms FROM fleet_hosts WHERE host_id = $1",
            &[&me],
        )
        .ctx(op, me)?;
    row.map(|r| r.get::<_, i64>(0))
        .ok_or_else(|| StoreError::Backend {
            op,
            id: me.to_owned(),
            detail: format!("this daemon ({me}) is missing from fleet_hosts"),
        })
}

/// Which lease a write of a job must find.
#[derive(Debug, Clone)]
pub(super) enum Fence {
    /// A write of a job that may be running (`update_job`): when the stored row is `running`
    /// and the write keeps it `running` (the run's own progress), the lease must be this
    /// daemon's (`me`). Writes that move a job out of `running` (stop, pause) are decided by
    /// the version alone, from any daemon.
    Progress(String),
    /// The end of this daemon's attempt: the lease must be this daemon's.
    Finish(String),
    /// A repair of a dead daemon's run: the lease must still be the one the repair read.
    Repair(Option<String>, Option<i64>),
}

impl Fence {
    /// The condition on `agent_jobs`, its parameters starting at `$first`; `status_param` is the
    /// placeholder of the status being written.
    pub(super) fn job_sql(&self, first: usize, status_param: &str) -> String {
        let me = format!("${first}");
        match self {
            Fence::Progress(_) => format!(
                "(status <> 'running' OR {status_param} <> 'running' OR lease_owner IS NULL \
                 OR (lease_owner, lease_epoch) IN {})",
                mine(&me)
            ),
            Fence::Finish(_) => format!(
                "(lease_owner IS NULL OR (lease_owner, lease_epoch) IN {})",
                mine(&me)
            ),
            Fence::Repair(..) => format!(
                "(lease_owner IS NOT DISTINCT FROM ${first}::text \
                 AND lease_epoch IS NOT DISTINCT FROM ${}::bigint)",
                first + 1
            ),
        }
    }

    /// Appends the parameters of [`Fence::job_sql`].
    pub(super) fn push_params<'a>(
        &'a self,
        params: &mut Vec<&'a (dyn postgres::types::ToSql + Sync)>,
    ) {
        match self {
            Fence::Progress(me) | Fence::Finish(me) => params.push(me),
            Fence::Repair(owner, epoch) => {
                params.push(owner);
                params.push(epoch);
            }
        }
    }
}
