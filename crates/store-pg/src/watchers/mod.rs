//! [`WatcherStore`] on PostgreSQL: durable watcher records and their firings
//! (`schema/watchers.sql`), a port of `openphone-store`'s `watchers.rs`.
//!
//! A watcher observes one phone, so it belongs to the daemon serving that phone: creation records
//! this daemon's `host_id`. The trait's reads are fleet-wide (the operator's views show every
//! host's watchers); a daemon's watcher engine must run only its own host's, which the trait
//! cannot say, so PostgreSQL adds [`PgStore::list_watchers_of_host`],
//! [`PgStore::pending_watcher_reactions_of_host`] and [`PgStore::watcher_host`]. The one trait
//! read only an engine makes, `pending_watcher_reactions` (the reactions a restart left to run),
//! answers this daemon's watchers' alone, so two daemons never run one reaction.
//!
//! Firings ([`fire`]) lock the watcher's row first, so two daemons firing one watcher for one
//! trigger record it once (the second finds the key taken: [`FireOutcome::Duplicate`]).

mod fire;

use openphone_store::{
    FireOutcome, FiringAudit, NewFiring, NewWatcher, Result, WatcherDraft, WatcherFiring,
    WatcherRecord, WatcherSelector, WatcherState, WatcherStore, check_active_watchers,
};
use postgres::types::ToSql;
use postgres::{GenericClient, Row};
use serde_json::Value;

use crate::PgStore;
use crate::error::PgContext;
use crate::goals::{col, corrupt, parse_json, sql_limit};

const COLUMNS: &str = "watcher_id, runtime, title, source, params_json, state, created_at_ms, \
    stopped_at_ms, fire_count, last_fired_at_ms, cursor_json, end_reason";

/// Case-insensitive text match on title, source or params (`$1` is the text).
const MATCHES: &str = "(position(lower($1::text) in lower(title)) > 0 \
    OR position(lower($1::text) in lower(source)) > 0 \
    OR position(lower($1::text) in lower(params_json)) > 0)";

fn from_row(row: &Row) -> Result<WatcherRecord> {
    const OP: &str = "watchers.read";
    let id: i64 = col(row, "watcher_id", OP, "")?;
    let name = id.to_string();
    let params: String = col(row, "params_json", OP, &name)?;
    let cursor: String = col(row, "cursor_json", OP, &name)?;
    let state: String = col(row, "state", OP, &name)?;
    Ok(WatcherRecord {
        watcher_id: id,
        runtime: col(row, "runtime", OP, &name)?,
        title: col(row, "title", OP, &name)?,
        source: col(row, "source", OP, &name)?,
        params: parse_json(&params, OP, &name)?,
        state: WatcherState::parse(&state)
            .ok_or_else(|| corrupt(OP, &name, format!("unknown value {state:?}")))?,
        created_at_ms: col(row, "created_at_ms", OP, &name)?,
        stopped_at_ms: col(row, "stopped_at_ms", OP, &name)?,
        fire_count: col(row, "fire_count", OP, &name)?,
        last_fired_at_ms: col(row, "last_fired_at_ms", OP, &name)?,
        cursor: parse_json(&cursor, OP, &name)?,
        end_reason: col(row, "end_reason", OP, &name)?,
    })
}

fn query(
    conn: &mut impl GenericClient,
    op: &'static str,
    where_sql: &str,
    args: &[&(dyn ToSql + Sync)],
) -> Result<Vec<WatcherRecord>> {
    conn.query(&format!("SELECT {COLUMNS} FROM watchers {where_sql}"), args)
        .ctx(op, "")?
        .iter()
        .map(from_row)
        .collect()
}

fn one(conn: &mut impl GenericClient, op: &'static str, id: i64) -> Result<Option<WatcherRecord>> {
    Ok(query(conn, op, "WHERE watcher_id = $1", &[&id])?
        .into_iter()
        .next())
}

/// How many active watchers `owner` has.
fn active_of(conn: &mut impl GenericClient, op: &'static str, owner: &str) -> Result<usize> {
    let n: i64 = conn
        .query_one(
            "SELECT COUNT(*) FROM watchers WHERE state = 'active' AND runtime = $1",
            &[&owner],
        )
        .and_then(|row| row.try_get(0))
        .ctx(op, owner)?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Active watchers, newest first, of `host` and `owner` when given, matching `text` when given.
fn list(
    conn: &mut impl GenericClient,
    host: Option<&str>,
    owner: Option<&str>,
    text: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<WatcherRecord>> {
    let text = text.map(str::trim).filter(|t| !t.is_empty());
    let limit = limit.map(sql_limit);
    query(
        conn,
        "watchers.list",
        &format!(
            "WHERE state = 'active' AND ($1::text IS NULL OR {MATCHES}) \
             AND ($3::text IS NULL OR runtime = $3) AND ($4::text IS NULL OR host_id = $4) \
             ORDER BY watcher_id DESC LIMIT $2"
        ),
        &[&text, &limit, &owner, &host],
    )
}

impl PgStore {
    /// [`WatcherStore::list_watchers_of`] among the watchers of the daemon `host_id` (the one
    /// serving the phone they observe): what a daemon's watcher engine runs. PostgreSQL only: the
    /// trait has no host.
    pub fn list_watchers_of_host(
        &self,
        host_id: &str,
        owner: Option<&str>,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        let (host, owner, text) = (
            host_id.to_owned(),
            owner.map(str::to_owned),
            text.map(str::to_owned),
        );
        self.read("watchers.list", host_id, move |conn| {
            list(conn, Some(&host), owner.as_deref(), text.as_deref(), limit)
        })
    }

    /// The daemon a watcher belongs to; `None`: no such watcher.
    pub fn watcher_host(&self, watcher_id: i64) -> Result<Option<String>> {
        const OP: &str = "watchers.host";
        let name = watcher_id.to_string();
        self.read(OP, &name.clone(), move |conn| {
            conn.query_opt(
                "SELECT host_id FROM watchers WHERE watcher_id = $1",
                &[&watcher_id],
            )
            .ctx(OP, &name)?
            .map(|row| col(&row, "host_id", OP, &name))
            .transpose()
        })
    }

    /// [`WatcherStore::pending_watcher_reactions`] of the watchers of the daemon `host_id`: the
    /// reactions a restarted daemon runs (another host's are its own to run).
    pub fn pending_watcher_reactions_of_host(&self, host_id: &str) -> Result<Vec<WatcherFiring>> {
        let host = host_id.to_owned();
        self.read("watcher_firings.pending", host_id, move |conn| {
            fire::pending(conn, &host)
        })
    }
}

impl WatcherStore for PgStore {
    fn create_watcher(&self, new: &NewWatcher, now_ms: i64) -> Result<WatcherRecord> {
        self.create_watcher_within(new, now_ms, None)
    }

    fn create_watcher_within(
        &self,
        new: &NewWatcher,
        now_ms: i64,
        max_active: Option<usize>,
    ) -> Result<WatcherRecord> {
        const OP: &str = "watchers.create";
        let WatcherDraft {
            params,
            source,
            title,
        } = WatcherDraft::of(new)?;
        let params = params.to_string();
        let runtime = new.runtime.clone();
        let host = self.host_id().to_owned();
        self.write(OP, &title.clone(), move |tx| {
            if let Some(max) = max_active {
                check_active_watchers(&runtime, active_of(tx, OP, &runtime)?, max)?;
            }
            let row = tx
                .query_one(
                    &format!(
                        "INSERT INTO watchers (host_id, runtime, title, source, params_json, \
                         state, created_at_ms) VALUES ($1, $2, $3, $4, $5, 'active', $6) \
                         RETURNING {COLUMNS}"
                    ),
                    &[&host, &runtime, &title, &source, &params, &now_ms],
                )
                .ctx(OP, &title)?;
            from_row(&row)
        })
    }

    fn count_active_watchers(&self, owner: &str) -> Result<usize> {
        let owner_text = owner.to_owned();
        self.read("watchers.count", owner, move |conn| {
            active_of(conn, "watchers.count", &owner_text)
        })
    }

    fn get_watcher(&self, watcher_id: i64) -> Result<Option<WatcherRecord>> {
        self.read("watchers.get", &watcher_id.to_string(), move |conn| {
            one(conn, "watchers.get", watcher_id)
        })
    }

    fn list_watchers(
        &self,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        self.list_watchers_of(None, text, limit)
    }

    fn list_watchers_of(
        &self,
        owner: Option<&str>,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        let (owner, text) = (owner.map(str::to_owned), text.map(str::to_owned));
        self.read("watchers.list", "", move |conn| {
            list(conn, None, owner.as_deref(), text.as_deref(), limit)
        })
    }

    fn stop_watchers(&self, selector: &WatcherSelector, now_ms: i64) -> Result<Vec<WatcherRecord>> {
        self.stop_watchers_of(None, selector, now_ms)
    }

    fn stop_watchers_of(
        &self,
        owner: Option<&str>,
        selector: &WatcherSelector,
        now_ms: i64,
    ) -> Result<Vec<WatcherRecord>> {
        const OP: &str = "watchers.stop";
        let owner = owner.map(str::to_owned);
        selector.check()?;
        let selector = selector.clone();
        self.write(OP, "", move |tx| {
            let owner = owner.as_deref();
            let targets = match &selector {
                WatcherSelector::Id(id) => query(
                    tx,
                    OP,
                    "WHERE state = 'active' AND watcher_id = $1 \
                     AND ($2::text IS NULL OR runtime = $2) FOR UPDATE",
                    &[id, &owner],
                )?,
                WatcherSelector::Query(text) => query(
                    tx,
                    OP,
                    &format!(
                        "WHERE state = 'active' AND {MATCHES} \
                         AND ($2::text IS NULL OR runtime = $2) ORDER BY watcher_id FOR UPDATE"
                    ),
                    &[&text.trim(), &owner],
                )?,
                WatcherSelector::All => query(
                    tx,
                    OP,
                    "WHERE state = 'active' AND ($1::text IS NULL OR runtime = $1) \
                     ORDER BY watcher_id FOR UPDATE",
                    &[&owner],
                )?,
            };
            let mut out = Vec::with_capacity(targets.len());
            for watcher in targets {
                tx.execute(
                    "UPDATE watchers SET state = 'stopped', stopped_at_ms = $2, \
                     end_reason = 'stopped' WHERE watcher_id = $1 AND state = 'active'",
                    &[&watcher.watcher_id, &now_ms],
                )
                .ctx(OP, &watcher.watcher_id.to_string())?;
                out.push(watcher.stopped_at(now_ms));
            }
            Ok(out)
        })
    }

    fn fire_watcher(&self, new: NewFiring, audit: FiringAudit) -> Result<FireOutcome> {
        fire::fire(self, new, audit)
    }

    fn finish_watcher_reaction(
        &self,
        watcher_id: i64,
        firing: i64,
        failed: bool,
        note: &str,
    ) -> Result<bool> {
        const OP: &str = "watchers.finish_reaction";
        let note = note.to_owned();
        let name = watcher_id.to_string();
        self.write(OP, &name.clone(), move |tx| {
            let changed = tx
                .execute(
                    "UPDATE watcher_firings SET reaction_state = $3, reaction_note = $4 \
                     WHERE watcher_id = $1 AND firing = $2 AND reaction_state = 'pending'",
                    &[
                        &watcher_id,
                        &firing,
                        &if failed { "failed" } else { "done" },
                        &note,
                    ],
                )
                .ctx(OP, &name)?;
            Ok(changed == 1)
        })
    }

    /// In a fleet, the pending reactions of this daemon's watchers: a restarted daemon runs its
    /// own, never another host's (which that host runs, once).
    fn pending_watcher_reactions(&self) -> Result<Vec<WatcherFiring>> {
        self.pending_watcher_reactions_of_host(self.host_id())
    }

    fn watcher_firings(&self, watcher_id: i64) -> Result<Vec<WatcherFiring>> {
        self.read(
            "watcher_firings.list",
            &watcher_id.to_string(),
            move |conn| fire::firings_of(conn, watcher_id),
        )
    }

    fn set_watcher_cursor(&self, watcher_id: i64, cursor: &Value) -> Result<bool> {
        const OP: &str = "watchers.cursor";
        let cursor = cursor.to_string();
        let name = watcher_id.to_string();
        self.write(OP, &name.clone(), move |tx| {
            let changed = tx
                .execute(
                    "UPDATE watchers SET cursor_json = $2 WHERE watcher_id = $1 \
                     AND state = 'active'",
                    &[&watcher_id, &cursor],
                )
                .ctx(OP, &name)?;
            Ok(changed == 1)
        })
    }

    fn end_watcher(
        &self,
        watcher_id: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<Option<WatcherRecord>> {
        const OP: &str = "watchers.end";
        let reason = reason.to_owned();
        let name = watcher_id.to_string();
        self.write(OP, &name.clone(), move |tx| {
            let changed = tx
                .execute(
                    "UPDATE watchers SET state = 'stopped', stopped_at_ms = $2, end_reason = $3 \
                     WHERE watcher_id = $1 AND state = 'active'",
                    &[&watcher_id, &now_ms, &reason],
                )
                .ctx(OP, &name)?;
            if changed == 0 {
                return Ok(None);
            }
            one(tx, OP, watcher_id)
        })
    }
}
