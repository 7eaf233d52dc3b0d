//! Watcher firings on PostgreSQL: one transaction records the firing, counts it on the watcher
//! (ending it, moving its cursor), creates its reaction's job in `agent_jobs` (the jobs domain's
//! `create_limited_in`, under the job quota) and appends its audit record to this daemon's chain
//! — all of it commits, or none of it.
//!
//! The transaction first locks the watcher's row (`FOR UPDATE`): a second daemon firing the same
//! watcher waits, then its SERIALIZABLE transaction fails and is run again, and finds the trigger's
//! `dedupe_key` taken ([`FireOutcome::Duplicate`]) or the watcher ended
//! ([`FireOutcome::NotActive`]). So one trigger is recorded once across the fleet.
//!
//! The audit record is built once, by the caller's `FnOnce` ([`FiringAudit`]), from the firing's
//! ids; the writer may run the transaction again (a serialization failure, e.g. against another
//! daemon creating jobs under the same quota), so the record built on the first try is kept and
//! used again, and the firing must keep its ids: the retry's job, which the identity sequence gave
//! a new id, is moved to the id the first try's job had (rolled back with it, never reissued), so
//! the record names the job that exists. Should a retry give the firing another number (another
//! daemon fired the watcher in between), the record no longer describes it: nothing is written and
//! the caller gets [`StoreError::Conflict`].

use std::sync::{Mutex, PoisonError};

use openphone_store::{
    AuditEntry, FIRINGS_KEPT_PER_WATCHER, FireOutcome, FiringAudit, FiringIds, NewFiring,
    RecordedFiring, Result, StoreError, WatcherFiring, WatcherState,
};
use postgres::{GenericClient, Row};

use super::{COLUMNS, from_row, one};
use crate::PgStore;
use crate::error::PgContext;
use crate::goals::{col, parse_json};

const FIRING_COLUMNS: &str = "watcher_id, firing, dedupe_key, fired_at_ms, trigger, event_json, \
    reaction, job_id, reaction_state, reaction_note";

fn firing_from_row(row: &Row) -> Result<WatcherFiring> {
    const OP: &str = "watcher_firings.read";
    let watcher_id: i64 = col(row, "watcher_id", OP, "")?;
    let firing: i64 = col(row, "firing", OP, &watcher_id.to_string())?;
    let name = format!("{watcher_id}/{firing}");
    let event: String = col(row, "event_json", OP, &name)?;
    Ok(WatcherFiring {
        watcher_id,
        firing,
        dedupe_key: col(row, "dedupe_key", OP, &name)?,
        fired_at_ms: col(row, "fired_at_ms", OP, &name)?,
        trigger: col(row, "trigger", OP, &name)?,
        event: parse_json(&event, OP, &name)?,
        reaction: col(row, "reaction", OP, &name)?,
        job_id: col(row, "job_id", OP, &name)?,
        reaction_state: col(row, "reaction_state", OP, &name)?,
        reaction_note: col(row, "reaction_note", OP, &name)?,
    })
}

/// Firings of the watchers of `host` whose reaction has not run, oldest first.
pub(super) fn pending(conn: &mut impl GenericClient, host: &str) -> Result<Vec<WatcherFiring>> {
    const OP: &str = "watcher_firings.pending";
    let columns = FIRING_COLUMNS
        .split(", ")
        .map(|c| format!("f.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    conn.query(
        &format!(
            "SELECT {columns} FROM watcher_firings f JOIN watchers w USING (watcher_id) \
             WHERE f.reaction_state = 'pending' AND w.host_id = $1 \
             ORDER BY f.fired_at_ms, f.watcher_id, f.firing"
        ),
        &[&host],
    )
    .ctx(OP, host)?
    .iter()
    .map(firing_from_row)
    .collect()
}

/// A watcher's firings, oldest first.
pub(super) fn firings_of(
    conn: &mut impl GenericClient,
    watcher_id: i64,
) -> Result<Vec<WatcherFiring>> {
    conn.query(
        &format!(
            "SELECT {FIRING_COLUMNS} FROM watcher_firings WHERE watcher_id = $1 ORDER BY firing"
        ),
        &[&watcher_id],
    )
    .ctx("watcher_firings.list", &watcher_id.to_string())?
    .iter()
    .map(firing_from_row)
    .collect()
}

/// The caller's audit builder, called at most once, and what it built for which ids.
struct AuditOnce {
    build: Option<FiringAudit>,
    built: Option<(FiringIds, AuditEntry)>,
}

impl AuditOnce {
    /// The ids the entry was built for, on a retry.
    fn built_for(&self) -> Option<FiringIds> {
        self.built.as_ref().map(|(ids, _)| *ids)
    }

    /// The entry for `ids`: built on the first try, the same one on a retry with the same ids.
    fn entry(&mut self, ids: FiringIds, id: &str) -> Result<AuditEntry> {
        if let Some((built_for, entry)) = &self.built {
            if *built_for == ids {
                return Ok(entry.clone());
            }
            return Err(StoreError::Conflict {
                table: "watcher_firings",
                id: id.to_owned(),
                detail: format!(
                    "the firing's transaction was run again and its ids changed ({built_for:?} \
                     became {ids:?}); its audit record describes the first: nothing was \
                     recorded, fire again"
                ),
            });
        }
        let build = self.build.take().ok_or_else(|| StoreError::Conflict {
            table: "watcher_firings",
            id: id.to_owned(),
            detail: "the firing's audit record was already built".to_owned(),
        })?;
        let entry = build(&ids);
        self.built = Some((ids, entry.clone()));
        Ok(entry)
    }
}

/// Moves the job just created as `from` to the id `to` (a retried firing's job to the id its
/// first try's job had, rolled back with it): the row is copied whole under the new id, then the
/// old row goes. Nothing else names the job yet.
fn move_job(tx: &mut postgres::Transaction<'_>, from: i64, to: i64, id: &str) -> Result<()> {
    const OP: &str = "watchers.fire.job_id";
    tx.execute(
        "INSERT INTO agent_jobs OVERRIDING SYSTEM VALUE \
         SELECT (jsonb_populate_record(NULL::agent_jobs, \
         to_jsonb(j) || jsonb_build_object('id', $2::bigint))).* \
         FROM agent_jobs j WHERE j.id = $1",
        &[&from, &to],
    )
    .ctx(OP, id)?;
    tx.execute("DELETE FROM agent_jobs WHERE id = $1", &[&from])
        .ctx(OP, id)?;
    Ok(())
}

/// [`openphone_store::WatcherStore::fire_watcher`] on PostgreSQL.
pub(super) fn fire(store: &PgStore, new: NewFiring, audit: FiringAudit) -> Result<FireOutcome> {
    const OP: &str = "watchers.fire";
    new.check()?;
    let id = new.watcher_id.to_string();
    let chain = store.host_id().to_owned();
    let audit = Mutex::new(AuditOnce {
        build: Some(audit),
        built: None,
    });
    store.write(OP, &id.clone(), move |tx| {
        if new.job.is_some() {
            // Before the watcher's row: the creators' lock must be the first statement.
            crate::jobs::lock_for_create(tx)?;
        }
        let locked = tx
            .query_opt(
                &format!("SELECT {COLUMNS} FROM watchers WHERE watcher_id = $1 FOR UPDATE"),
                &[&new.watcher_id],
            )
            .ctx(OP, &id)?;
        let Some(watcher) = locked.as_ref().map(from_row).transpose()? else {
            return Err(StoreError::NotFound {
                table: "watchers",
                id: id.clone(),
            });
        };
        if watcher.state != WatcherState::Active {
            return Ok(FireOutcome::NotActive);
        }
        let seen = tx
            .query_opt(
                "SELECT 1 FROM watcher_firings WHERE watcher_id = $1 AND dedupe_key = $2",
                &[&new.watcher_id, &new.dedupe_key],
            )
            .ctx(OP, &id)?;
        if seen.is_some() {
            return Ok(FireOutcome::Duplicate);
        }
        let number = watcher.fire_count + 1;
        let mut job = match &new.job {
            Some((job, quota)) => crate::jobs::create_limited_in(
                tx,
                std::slice::from_ref(job),
                new.fired_at_ms,
                quota,
                &chain,
            )?
            .pop(),
            None => None,
        };
        let first_try = audit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .built_for();
        if let Some(first) = first_try
            && first.firing == number
            && let (Some(first_job), Some(job)) = (first.job_id, job.as_mut())
            && first_job != job.job.id
        {
            move_job(tx, job.job.id, first_job, &id)?;
            job.job.id = first_job;
        }
        let job_id = job.as_ref().map(|j| j.job.id);
        let firing = new.firing(number, job_id);
        tx.execute(
            &format!(
                "INSERT INTO watcher_firings ({FIRING_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
            ),
            &[
                &firing.watcher_id,
                &firing.firing,
                &firing.dedupe_key,
                &firing.fired_at_ms,
                &firing.trigger,
                &firing.event.to_string(),
                &firing.reaction,
                &firing.job_id,
                &firing.reaction_state,
                &firing.reaction_note,
            ],
        )
        .ctx(OP, &id)?;
        let cursor = new.cursor.as_ref().map(ToString::to_string);
        tx.execute(
            "UPDATE watchers SET fire_count = $2, last_fired_at_ms = $3, \
             cursor_json = COALESCE($4, cursor_json), \
             state = CASE WHEN $5 THEN 'stopped' ELSE state END, \
             stopped_at_ms = CASE WHEN $5 THEN $3 ELSE stopped_at_ms END, \
             end_reason = CASE WHEN $5 THEN 'fired' ELSE end_reason END \
             WHERE watcher_id = $1 AND state = 'active'",
            &[
                &new.watcher_id,
                &number,
                &new.fired_at_ms,
                &cursor,
                &new.end,
            ],
        )
        .ctx(OP, &id)?;
        // Old settled firings go; the dedupe keys of the kept ones still hold.
        tx.execute(
            "DELETE FROM watcher_firings WHERE watcher_id = $1 AND firing <= $2 \
             AND reaction_state <> 'pending'",
            &[&new.watcher_id, &(number - FIRINGS_KEPT_PER_WATCHER)],
        )
        .ctx(OP, &id)?;
        let ids = FiringIds {
            watcher_id: new.watcher_id,
            firing: number,
            job_id,
        };
        let entry = audit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(ids, &id)?;
        let audit = crate::audit::append_in(tx, &chain, &entry)?;
        let watcher = one(tx, OP, new.watcher_id)?.ok_or_else(|| StoreError::NotFound {
            table: "watchers",
            id: id.clone(),
        })?;
        Ok(FireOutcome::Fired(Box::new(RecordedFiring {
            firing,
            watcher,
            job,
            audit,
        })))
    })
}
