//! Leases across daemons (issue 35): who may write a claimed run, and whose runs are dead.
//!
//! A claim records on the job (and its ledger row) `lease_owner` = the claiming daemon's
//! `host_id` and `lease_epoch` = that daemon's incarnation, its `fleet_hosts.started_at_ms`
//! (written by `PgStore::open`, new at every start). Every write of a claimed run names the
//! lease it holds in its `WHERE` (fencing): a daemon whose run was taken over writes nothing and
//! gets `Conflict`.
//!
//! A lease is live while its daemon holds its host lock (the session advisory lock of
//! `host.rs`, held by the daemon's writer connection and released by the server however the
//! daemon ends) and has not restarted since (its `started_at_ms` is still the epoch). Read from
//! `pg_locks`, so no daemon ever takes another's lock to ask: a dead daemon's runs are repaired
//! at once by any other daemon, without waiting for a timeout.

use openphone_store::{Result, StoreError};
use postgres::Transaction;

use crate::PgContext;

/// The `(host_id, started_at_ms)` pairs of live daemons: those whose host lock is held.
pub(super) const LIVE_LEASES: &str = "(SELECT h.host_id, h.started_at_ms FROM fleet_hosts h \
    WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted \
    AND l.objsubid = 1 \
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
    AND ((l.classid::bigint << 32) | l.objid::bigint) \
        = hashtextextended('openphone:host:' || current_schema() || ':' || h.host_id, 0)))";

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
