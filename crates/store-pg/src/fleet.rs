//! [`Fleet`] on PostgreSQL: this daemon's host id, the phones each host serves
//! (`fleet_devices`, written by [`PgStore::register_devices`]) and the fleet's daemons
//! (`fleet_hosts`), each live while it holds its host lock (`host.rs`).

use openphone_store::{Fleet, FleetHost, Result};

use crate::{PgContext, PgStore};

/// Whether host `h` holds its host lock now (read from `pg_locks`: nobody takes another
/// daemon's lock to ask).
const LIVE: &str = "EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted \
    AND l.objsubid = 1 \
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
    AND ((l.classid::bigint << 32) | l.objid::bigint) \
        = hashtextextended('openphone:host:' || current_schema() || ':' || h.host_id, 0))";

impl Fleet for PgStore {
    fn host_id(&self) -> &str {
        PgStore::host_id(self)
    }

    fn register_devices(&self, device_ids: &[String]) -> Result<()> {
        PgStore::register_devices(self, device_ids)
    }

    fn host_of_device(&self, device_id: &str) -> Result<Option<String>> {
        const OP: &str = "fleet_devices.host_of";
        let device = device_id.to_owned();
        self.read(OP, device_id, move |client| {
            // The newest registration wins; a live daemon before a dead one.
            let sql = format!(
                "SELECT d.host_id FROM fleet_devices d JOIN fleet_hosts h USING (host_id) \
                 WHERE d.device_id = $1 \
                 ORDER BY {LIVE} DESC, d.registered_at_ms DESC, d.host_id LIMIT 1"
            );
            let row = client.query_opt(&sql, &[&device]).ctx(OP, &device)?;
            Ok(row.map(|r| r.get::<_, String>(0)))
        })
    }

    fn touch(&self) -> Result<()> {
        PgStore::touch_host(self)
    }

    fn confirmation_host(&self, confirmation_id: &str) -> Result<Option<String>> {
        PgStore::confirmation_host(self, confirmation_id)
    }

    fn job_host(&self, job_id: i64) -> Result<Option<String>> {
        Ok(self
            .job_hosts(job_id)?
            .map(|(made_by, runs_on)| runs_on.unwrap_or(made_by)))
    }

    fn goal_is_here(&self, goal_id: &str) -> Result<bool> {
        Ok(self.goal_host(goal_id)?.as_deref() == Some(PgStore::host_id(self)))
    }

    fn watchers_here(&self) -> Result<Vec<i64>> {
        Ok(self
            .list_watchers_of_host(PgStore::host_id(self), None, None, None)?
            .into_iter()
            .map(|w| w.watcher_id)
            .collect())
    }

    fn hosts(&self) -> Result<Vec<FleetHost>> {
        const OP: &str = "fleet_hosts.list";
        self.read(OP, "", move |client| {
            let sql = format!(
                "SELECT h.host_id, h.label, h.started_at_ms, h.last_seen_at_ms, {LIVE}, \
                    COALESCE((SELECT array_agg(d.device_id ORDER BY d.device_id) \
                              FROM fleet_devices d WHERE d.host_id = h.host_id), '{{}}') \
                 FROM fleet_hosts h ORDER BY h.host_id"
            );
            let rows = client.query(&sql, &[]).ctx(OP, "")?;
            Ok(rows
                .iter()
                .map(|r| FleetHost {
                    host_id: r.get(0),
                    label: r.get(1),
                    started_at_ms: r.get(2),
                    last_seen_at_ms: r.get(3),
                    live: r.get(4),
                    device_ids: r.get(5),
                })
                .collect())
        })
    }
}
