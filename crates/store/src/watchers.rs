//! Durable watcher records: what was asked for, whether it is active, and its firings. The
//! engine that evaluates watchers (`openphone-watchers`) keeps its cursor here and records
//! each firing with [`Store::fire_watcher`](crate::WatcherStore::fire_watcher): the firing row, the watcher's new state, the job
//! its reaction creates and its audit record commit together or not at all.

use rusqlite::{Connection, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::audit::{AuditEntry, AuditRecord};
use crate::error::{Result, SqlContext, StoreError};
use crate::jobs::{JobQuota, NewAgentJob, StoredJob};
use crate::rows::Cached;
use crate::wire::{col, parse_enum, parse_json, sql_limit, to_json, wire_enum};

wire_enum!(
    /// Watcher state.
    WatcherState {
        Active = "active",
        Stopped = "stopped",
    }
);

/// A stored watcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatcherRecord {
    pub watcher_id: i64,
    /// The runtime that created it.
    pub runtime: String,
    /// Shown to the user.
    pub title: String,
    /// Trigger source (`message`, `call`, `notification`, `web`, `screen`, `time`, …).
    pub source: String,
    /// The creation params as given (without `reason` and `_`-keys).
    pub params: Value,
    pub state: WatcherState,
    pub created_at_ms: i64,
    pub stopped_at_ms: Option<i64>,
    /// How often it fired.
    #[serde(default)]
    pub fire_count: i64,
    /// When it last fired.
    #[serde(default)]
    pub last_fired_at_ms: Option<i64>,
    /// The engine's cursor (its next check, the last page hash, …): `{}` until it has one.
    #[serde(default)]
    pub cursor: Value,
    /// Why it ended (`fired`, `stopped`, `deadline_passed`, `reply_received`, …); `None`
    /// while active.
    #[serde(default)]
    pub end_reason: Option<String>,
}

/// What the caller supplies to create a watcher: the `watchers.create` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewWatcher {
    pub runtime: String,
    pub params: Value,
}

/// Which watchers [`Store::stop_watchers`](crate::WatcherStore::stop_watchers) ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatcherSelector {
    Id(i64),
    /// Active watchers whose title, source or params contain the text (case-insensitive).
    Query(String),
    All,
}

const COLUMNS: &str = "watcher_id, runtime, title, source, params_json, state, created_at_ms, \
    stopped_at_ms, fire_count, last_fired_at_ms, cursor_json, end_reason";

fn from_row(row: &Row<'_>) -> Result<WatcherRecord> {
    const OP: &str = "watchers.read";
    let id: i64 = col(row, "watcher_id", OP)?;
    let params: String = col(row, "params_json", OP)?;
    let cursor: String = col(row, "cursor_json", OP)?;
    let state: String = col(row, "state", OP)?;
    Ok(WatcherRecord {
        watcher_id: id,
        runtime: col(row, "runtime", OP)?,
        title: col(row, "title", OP)?,
        source: col(row, "source", OP)?,
        params: parse_json(&params, OP, &id.to_string())?,
        state: parse_enum(WatcherState::parse, &state, OP, &id.to_string())?,
        created_at_ms: col(row, "created_at_ms", OP)?,
        stopped_at_ms: col(row, "stopped_at_ms", OP)?,
        fire_count: col(row, "fire_count", OP)?,
        last_fired_at_ms: col(row, "last_fired_at_ms", OP)?,
        cursor: parse_json(&cursor, OP, &id.to_string())?,
        end_reason: col(row, "end_reason", OP)?,
    })
}

fn query(
    conn: &Connection,
    op: &'static str,
    where_sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<WatcherRecord>> {
    let sql = format!("SELECT {COLUMNS} FROM watchers {where_sql}");
    crate::rows::collect(conn, op, &sql, args, from_row)
}

fn text_field<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The source of a watcher: `source`, else mapped from the legacy `type`, else `unknown`.
fn derive_source(params: &Value) -> String {
    if let Some(source) = text_field(params, "source") {
        return source.to_lowercase();
    }
    match text_field(params, "type") {
        Some("message_reply") => "message".to_owned(),
        Some("call_back") => "call".to_owned(),
        Some("web_change") => "web".to_owned(),
        Some(other) => other.to_lowercase(),
        None => "unknown".to_owned(),
    }
}

/// The title: `title`, else the query, else the url, else `<source> watcher`.
fn derive_title(params: &Value, source: &str) -> String {
    ["title", "query", "url", "address", "number"]
        .iter()
        .find_map(|key| text_field(params, key))
        .map_or_else(|| format!("{source} watcher"), str::to_owned)
}

/// Drops `reason` and phone-reserved `_`-keys from stored params.
fn clean_params(params: &Value) -> Value {
    match params {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "reason" && !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What `watchers.create` stores, worked out from its params (backend-neutral, shared with the
/// PostgreSQL store): the params checked (a JSON object) and cleaned (no `reason`, no `_`-keys),
/// and the `source` and `title` derived from them.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub struct WatcherDraft {
    pub params: Value,
    pub source: String,
    pub title: String,
}

impl WatcherDraft {
    /// The draft of `new`, or [`StoreError::Invalid`] when its params are not an object.
    pub fn of(new: &NewWatcher) -> Result<Self> {
        if !new.params.is_object() {
            return Err(StoreError::Invalid {
                what: "watcher params",
                detail: "must be a JSON object".to_owned(),
            });
        }
        let params = clean_params(&new.params);
        let source = derive_source(&params);
        let title = derive_title(&params, &source);
        Ok(Self {
            params,
            source,
            title,
        })
    }
}

/// The quota of [`Store::create_watcher_within`](crate::WatcherStore::create_watcher_within):
/// [`StoreError::LimitReached`] when `owner` already has `active` ≥ `max` active watchers.
#[doc(hidden)]
pub fn check_active_watchers(owner: &str, active: usize, max: usize) -> Result<()> {
    if active >= max {
        return Err(StoreError::LimitReached {
            what: "active watchers of one owner",
            limit: max,
            detail: format!("{owner:?} has {active} active watchers; stop one first"),
        });
    }
    Ok(())
}

impl WatcherSelector {
    /// Refuses an empty [`WatcherSelector::Query`] ([`WatcherSelector::All`] says "every one").
    #[doc(hidden)]
    pub fn check(&self) -> Result<()> {
        if let Self::Query(text) = self
            && text.trim().is_empty()
        {
            return Err(StoreError::Invalid {
                what: "watcher query",
                detail: "empty (use WatcherSelector::All to stop every watcher)".to_owned(),
            });
        }
        Ok(())
    }
}

impl WatcherRecord {
    /// The record as a stop at `now_ms` leaves it (`stopped`, end reason `stopped`).
    #[doc(hidden)]
    #[must_use]
    pub fn stopped_at(mut self, now_ms: i64) -> Self {
        self.state = WatcherState::Stopped;
        self.stopped_at_ms = Some(now_ms);
        self.end_reason = Some("stopped".to_owned());
        self
    }
}

/// How many active watchers `owner` has.
fn active_of(conn: &Connection, op: &'static str, owner: &str) -> Result<usize> {
    let n: i64 = conn
        .row_cached(
            "SELECT COUNT(*) FROM watchers WHERE state = 'active' AND runtime = ?1",
            [owner],
            |r| r.get(0),
        )
        .ctx(op, owner)?;
    Ok(usize::try_from(n).unwrap_or(0))
}

const MATCHES: &str = "(instr(lower(title), lower(?1)) > 0 OR instr(lower(source), lower(?1)) > 0 \
    OR instr(lower(params_json), lower(?1)) > 0)";

impl SqliteStore {
    /// Creates an active watcher from the `watchers.create` params (which must be an object);
    /// `title` and `source` are derived from them. No quota: see
    /// [`Store::create_watcher_within`](crate::WatcherStore::create_watcher_within).
    pub fn create_watcher(&self, new: &NewWatcher, now_ms: i64) -> Result<WatcherRecord> {
        self.create_watcher_within(new, now_ms, None)
    }

    /// [`Store::create_watcher`](crate::WatcherStore::create_watcher) within a quota: with `max_active`, refused with
    /// [`StoreError::LimitReached`] (`what` `"active watchers of one owner"`) when the owner
    /// (`new.runtime`) already has that many active watchers. The count and the insert are one
    /// transaction, so two creations at once cannot both take the last place.
    pub fn create_watcher_within(
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
        let runtime = new.runtime.clone();
        self.write(OP, &title.clone(), move |tx| {
            if let Some(max) = max_active {
                check_active_watchers(&runtime, active_of(tx, OP, &runtime)?, max)?;
            }
            tx.exec_cached(
                "INSERT INTO watchers (runtime, title, source, params_json, state, created_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, 'active', ?5)",
                params![runtime, title, source, to_json(&params), now_ms],
            )
            .ctx(OP, &title)?;
            let id = tx.last_insert_rowid();
            query(tx, OP, "WHERE watcher_id = ?1", [id])?
                .into_iter()
                .next()
                .ok_or_else(|| StoreError::NotFound {
                    table: "watchers",
                    id: id.to_string(),
                })
        })
    }

    /// How many active watchers `owner` (the runtime that created them) has.
    pub fn count_active_watchers(&self, owner: &str) -> Result<usize> {
        active_of(&self.conn(), "watchers.count", owner)
    }

    /// One watcher, active or stopped.
    pub fn get_watcher(&self, watcher_id: i64) -> Result<Option<WatcherRecord>> {
        Ok(query(
            &self.conn(),
            "watchers.get",
            "WHERE watcher_id = ?1",
            [watcher_id],
        )?
        .into_iter()
        .next())
    }

    /// Active watchers, newest first, optionally filtered by text (title, source or params,
    /// case-insensitive); at most `limit` (`None` = all).
    pub fn list_watchers(
        &self,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        self.list_watchers_of(None, text, limit)
    }

    /// [`Store::list_watchers`](crate::WatcherStore::list_watchers), only those of `owner` (the runtime that created them) when
    /// given.
    pub fn list_watchers_of(
        &self,
        owner: Option<&str>,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        let text = text.map(str::trim).filter(|t| !t.is_empty());
        query(
            &self.conn(),
            "watchers.list",
            &format!(
                "WHERE state = 'active' AND (?1 IS NULL OR {MATCHES}) \
                 AND (?3 IS NULL OR runtime = ?3) \
                 ORDER BY watcher_id DESC LIMIT ?2"
            ),
            params![text, limit.map_or(-1, sql_limit), owner],
        )
    }

    /// Stops the selected active watchers and returns them (now `stopped`); an empty list when
    /// nothing matched.
    pub fn stop_watchers(
        &self,
        selector: &WatcherSelector,
        now_ms: i64,
    ) -> Result<Vec<WatcherRecord>> {
        self.stop_watchers_of(None, selector, now_ms)
    }

    /// [`Store::stop_watchers`](crate::WatcherStore::stop_watchers) among the watchers of `owner` (the runtime that created them)
    /// when given: another owner's watcher is never selected, whatever the selector
    /// ([`WatcherSelector::All`] is all of the owner's).
    pub fn stop_watchers_of(
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
                    "WHERE state = 'active' AND watcher_id = ?1 \
                     AND (?2 IS NULL OR runtime = ?2)",
                    params![id, owner],
                )?,
                WatcherSelector::Query(text) => query(
                    tx,
                    OP,
                    &format!(
                        "WHERE state = 'active' AND {MATCHES} \
                         AND (?2 IS NULL OR runtime = ?2) ORDER BY watcher_id"
                    ),
                    params![text.trim(), owner],
                )?,
                WatcherSelector::All => query(
                    tx,
                    OP,
                    "WHERE state = 'active' AND (?1 IS NULL OR runtime = ?1) \
                     ORDER BY watcher_id",
                    params![owner],
                )?,
            };
            let mut out = Vec::with_capacity(targets.len());
            for watcher in targets {
                tx.exec_cached(
                    "UPDATE watchers SET state = 'stopped', stopped_at_ms = ?2, \
                     end_reason = 'stopped' WHERE watcher_id = ?1 AND state = 'active'",
                    params![watcher.watcher_id, now_ms],
                )
                .ctx(OP, &watcher.watcher_id.to_string())?;
                out.push(watcher.stopped_at(now_ms));
            }
            Ok(out)
        })
    }
}

/// Firings kept per watcher (the oldest settled ones are dropped; a pending one never is).
pub const FIRINGS_KEPT_PER_WATCHER: i64 = 200;

/// One firing of a watcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatcherFiring {
    pub watcher_id: i64,
    /// 1 for the watcher's first firing.
    pub firing: i64,
    /// What made it fire, unique per watcher (an event's identity, a due time, …).
    pub dedupe_key: String,
    pub fired_at_ms: i64,
    /// `event`, `deadline`, `time` or `poll`.
    pub trigger: String,
    /// The event the reaction is about (a JSON object).
    pub event: Value,
    /// `agent_job`, `tool_call` or `attention`.
    pub reaction: String,
    /// The job the reaction created, if any.
    pub job_id: Option<i64>,
    /// `pending` (the reaction has not run yet), `done` or `failed`.
    pub reaction_state: String,
    /// What became of the reaction (an error, a session id), or empty.
    pub reaction_note: String,
}

/// A firing to record ([`Store::fire_watcher`](crate::WatcherStore::fire_watcher)).
#[derive(Debug, Clone, PartialEq)]
pub struct NewFiring {
    pub watcher_id: i64,
    /// Unique per watcher: a second firing with the same key is refused
    /// ([`FireOutcome::Duplicate`]).
    pub dedupe_key: String,
    pub fired_at_ms: i64,
    pub trigger: String,
    /// A JSON object.
    pub event: Value,
    /// `agent_job`, `tool_call` or `attention`.
    pub reaction: String,
    /// End the watcher with this firing (`state` `stopped`, `end_reason` `fired`).
    pub end: bool,
    /// The watcher's new cursor, if it changes.
    pub cursor: Option<Value>,
    /// The job the reaction creates, created in the same transaction (its reaction is then
    /// `done` at once), and the job quota it is created within (the store's size, the
    /// per-runtime share of the job's creator, the user's reserve).
    pub job: Option<(NewAgentJob, JobQuota)>,
}

impl NewFiring {
    /// Refuses a firing whose event is not a JSON object.
    #[doc(hidden)]
    pub fn check(&self) -> Result<()> {
        if !self.event.is_object() {
            return Err(StoreError::Invalid {
                what: "watcher firing",
                detail: "the event must be a JSON object".to_owned(),
            });
        }
        Ok(())
    }

    /// The firing row this records as the watcher's firing `number`, with the reaction's job
    /// (the reaction is then `done`, else `pending`).
    #[doc(hidden)]
    #[must_use]
    pub fn firing(&self, number: i64, job_id: Option<i64>) -> WatcherFiring {
        WatcherFiring {
            watcher_id: self.watcher_id,
            firing: number,
            dedupe_key: self.dedupe_key.clone(),
            fired_at_ms: self.fired_at_ms,
            trigger: self.trigger.clone(),
            event: self.event.clone(),
            reaction: self.reaction.clone(),
            job_id,
            reaction_state: if job_id.is_some() { "done" } else { "pending" }.to_owned(),
            reaction_note: String::new(),
        }
    }
}

/// A firing as [`Store::fire_watcher`](crate::WatcherStore::fire_watcher) recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedFiring {
    pub firing: WatcherFiring,
    /// The watcher after the firing.
    pub watcher: WatcherRecord,
    /// The job the reaction created.
    pub job: Option<StoredJob>,
    /// The firing's audit record.
    pub audit: AuditRecord,
}

/// What [`Store::fire_watcher`](crate::WatcherStore::fire_watcher) did.
#[derive(Debug, Clone, PartialEq)]
pub enum FireOutcome {
    /// Recorded, with the job it created and its audit record.
    Fired(Box<RecordedFiring>),
    /// The watcher is not active (stopped, or ended by an earlier firing): nothing written.
    NotActive,
    /// This watcher already fired for this `dedupe_key`: nothing written.
    Duplicate,
}

/// The ids of a firing being recorded, for its audit record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiringIds {
    pub watcher_id: i64,
    pub firing: i64,
    pub job_id: Option<i64>,
}

const FIRING_COLUMNS: &str = "watcher_id, firing, dedupe_key, fired_at_ms, trigger, event_json, \
    reaction, job_id, reaction_state, reaction_note";

fn firing_from_row(row: &Row<'_>) -> Result<WatcherFiring> {
    const OP: &str = "watcher_firings.read";
    let watcher_id: i64 = col(row, "watcher_id", OP)?;
    let firing: i64 = col(row, "firing", OP)?;
    let event: String = col(row, "event_json", OP)?;
    Ok(WatcherFiring {
        watcher_id,
        firing,
        dedupe_key: col(row, "dedupe_key", OP)?,
        fired_at_ms: col(row, "fired_at_ms", OP)?,
        trigger: col(row, "trigger", OP)?,
        event: parse_json(&event, OP, &format!("{watcher_id}/{firing}"))?,
        reaction: col(row, "reaction", OP)?,
        job_id: col(row, "job_id", OP)?,
        reaction_state: col(row, "reaction_state", OP)?,
        reaction_note: col(row, "reaction_note", OP)?,
    })
}

fn firings(
    conn: &Connection,
    op: &'static str,
    where_sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<WatcherFiring>> {
    let sql = format!("SELECT {FIRING_COLUMNS} FROM watcher_firings {where_sql}");
    crate::rows::collect(conn, op, &sql, args, firing_from_row)
}

impl SqliteStore {
    /// Records one firing in one transaction: checks the watcher is active and has not fired
    /// for `dedupe_key`; inserts the firing; counts it on the watcher (ending it when
    /// `end`, moving its cursor when given); creates the reaction's job when given (the
    /// firing's reaction is then `done`, else `pending` until
    /// [`Store::finish_watcher_reaction`](crate::WatcherStore::finish_watcher_reaction)); appends the audit record `audit` builds from the
    /// ids. All of it commits, or none of it.
    pub fn fire_watcher(
        &self,
        new: NewFiring,
        audit: impl FnOnce(&FiringIds) -> AuditEntry + Send + 'static,
    ) -> Result<FireOutcome> {
        const OP: &str = "watchers.fire";
        new.check()?;
        let id = new.watcher_id.to_string();
        self.write(OP, &id.clone(), move |tx| {
            let Some(watcher) = query(tx, OP, "WHERE watcher_id = ?1", [new.watcher_id])?
                .into_iter()
                .next()
            else {
                return Err(StoreError::NotFound {
                    table: "watchers",
                    id,
                });
            };
            if watcher.state != WatcherState::Active {
                return Ok(FireOutcome::NotActive);
            }
            let seen: i64 = tx
                .row_cached(
                    "SELECT COUNT(*) FROM watcher_firings WHERE watcher_id = ?1 AND dedupe_key = ?2",
                    params![new.watcher_id, new.dedupe_key],
                    |r| r.get(0),
                )
                .ctx(OP, &id)?;
            if seen > 0 {
                return Ok(FireOutcome::Duplicate);
            }
            let number = watcher.fire_count + 1;
            let job = match &new.job {
                Some((job, quota)) => crate::jobs::create_limited_in(
                    tx,
                    std::slice::from_ref(job),
                    new.fired_at_ms,
                    quota,
                )?
                .pop(),
                None => None,
            };
            let job_id = job.as_ref().map(|j| j.job.id);
            let firing = new.firing(number, job_id);
            tx.exec_cached(
                &format!(
                    "INSERT INTO watcher_firings ({FIRING_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                ),
                params![
                    firing.watcher_id,
                    firing.firing,
                    firing.dedupe_key,
                    firing.fired_at_ms,
                    firing.trigger,
                    to_json(&firing.event),
                    firing.reaction,
                    firing.job_id,
                    firing.reaction_state,
                    firing.reaction_note,
                ],
            )
            .ctx(OP, &id)?;
            let cursor = new.cursor.as_ref().map(to_json);
            tx.exec_cached(
                "UPDATE watchers SET fire_count = ?2, last_fired_at_ms = ?3, \
                 cursor_json = COALESCE(?4, cursor_json), \
                 state = CASE WHEN ?5 THEN 'stopped' ELSE state END, \
                 stopped_at_ms = CASE WHEN ?5 THEN ?3 ELSE stopped_at_ms END, \
                 end_reason = CASE WHEN ?5 THEN 'fired' ELSE end_reason END \
                 WHERE watcher_id = ?1 AND state = 'active'",
                params![new.watcher_id, number, new.fired_at_ms, cursor, new.end],
            )
            .ctx(OP, &id)?;
            // Old settled firings go; the dedupe keys of the kept ones still hold.
            tx.exec_cached(
                "DELETE FROM watcher_firings WHERE watcher_id = ?1 AND firing <= ?2 \
                 AND reaction_state != 'pending'",
                params![new.watcher_id, number - FIRINGS_KEPT_PER_WATCHER],
            )
            .ctx(OP, &id)?;
            let entry = audit(&FiringIds {
                watcher_id: new.watcher_id,
                firing: number,
                job_id,
            });
            let audit = crate::audit::append_prepared_in(tx, crate::audit::prepare(entry)?)?;
            let watcher = query(tx, OP, "WHERE watcher_id = ?1", [new.watcher_id])?
                .into_iter()
                .next()
                .ok_or_else(|| StoreError::NotFound {
                    table: "watchers",
                    id: new.watcher_id.to_string(),
                })?;
            Ok(FireOutcome::Fired(Box::new(RecordedFiring {
                firing,
                watcher,
                job,
                audit,
            })))
        })
    }

    /// Settles a firing's reaction (`done` or `failed`, with a note); whether it was pending.
    pub fn finish_watcher_reaction(
        &self,
        watcher_id: i64,
        firing: i64,
        failed: bool,
        note: &str,
    ) -> Result<bool> {
        const OP: &str = "watchers.finish_reaction";
        let note = note.to_owned();
        self.write(OP, &watcher_id.to_string(), move |tx| {
            let changed = tx
                .exec_cached(
                    "UPDATE watcher_firings SET reaction_state = ?3, reaction_note = ?4 \
                     WHERE watcher_id = ?1 AND firing = ?2 AND reaction_state = 'pending'",
                    params![
                        watcher_id,
                        firing,
                        if failed { "failed" } else { "done" },
                        note
                    ],
                )
                .ctx(OP, &watcher_id.to_string())?;
            Ok(changed == 1)
        })
    }

    /// Firings whose reaction has not run (a restart came between the firing and its
    /// reaction), oldest first.
    pub fn pending_watcher_reactions(&self) -> Result<Vec<WatcherFiring>> {
        firings(
            &self.conn(),
            "watcher_firings.pending",
            "WHERE reaction_state = 'pending' ORDER BY fired_at_ms, watcher_id, firing",
            [],
        )
    }

    /// A watcher's firings, oldest first.
    pub fn watcher_firings(&self, watcher_id: i64) -> Result<Vec<WatcherFiring>> {
        firings(
            &self.conn(),
            "watcher_firings.list",
            "WHERE watcher_id = ?1 ORDER BY firing",
            [watcher_id],
        )
    }

    /// Moves an active watcher's cursor; whether it was active.
    pub fn set_watcher_cursor(&self, watcher_id: i64, cursor: &Value) -> Result<bool> {
        const OP: &str = "watchers.cursor";
        let cursor = to_json(cursor);
        self.write(OP, &watcher_id.to_string(), move |tx| {
            let changed = tx
                .exec_cached(
                    "UPDATE watchers SET cursor_json = ?2 WHERE watcher_id = ?1 \
                     AND state = 'active'",
                    params![watcher_id, cursor],
                )
                .ctx(OP, &watcher_id.to_string())?;
            Ok(changed == 1)
        })
    }

    /// Ends an active watcher without a firing (`end_reason`, e.g. `deadline_passed` or
    /// `reply_received`); the watcher as ended, or `None` when it was not active.
    pub fn end_watcher(
        &self,
        watcher_id: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<Option<WatcherRecord>> {
        const OP: &str = "watchers.end";
        let reason = reason.to_owned();
        self.write(OP, &watcher_id.to_string(), move |tx| {
            let changed = tx
                .exec_cached(
                    "UPDATE watchers SET state = 'stopped', stopped_at_ms = ?2, end_reason = ?3 \
                     WHERE watcher_id = ?1 AND state = 'active'",
                    params![watcher_id, now_ms, reason],
                )
                .ctx(OP, &watcher_id.to_string())?;
            if changed == 0 {
                return Ok(None);
            }
            Ok(query(tx, OP, "WHERE watcher_id = ?1", [watcher_id])?
                .into_iter()
                .next())
        })
    }
}
