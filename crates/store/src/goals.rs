//! Goals (`goals.md`): the goal documents, the log of their action transitions and their delta
//! reports.
//!
//! Three tables (migration 11):
//!
//! - `goals` holds one goal per row: its id, state, deadline and times as columns (for listing)
//!   and the whole document — plan graph, actions and their attempts, blockers, evidence,
//!   checkpoints — as JSON. The document's shape belongs to `openphone-goals`; the store keeps
//!   it opaque. Every write is a compare-and-set on `version` ([`StoreError::Conflict`] when
//!   another writer won; nothing is written).
//! - `goal_transitions` is append-only: one row per action transition (from, to, source, reason,
//!   time), numbered per goal. It is written in the same transaction as the document the
//!   transitions led to, so a transition is durable before the side effect of its new state.
//! - `goal_reports` keeps every delta report as rendered data with its own delivery state
//!   (`pending`, `sent`, `failed`, `suppressed`): a failed delivery is retried from the stored
//!   report, never by running the goal again.
//!
//! The store never reads the clock: every time is a parameter.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SqliteStore;
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::rows::collect;
use crate::wire::{col, parse_enum, parse_json, sql_limit, to_json, wire_enum};

wire_enum!(
    /// What became of one delta report's delivery (`goals.md` §7).
    ReportDelivery {
        /// To be delivered (or retried).
        Pending = "pending",
        /// The channel accepted it.
        Sent = "sent",
        /// Every try failed; the report stays stored and can be retried.
        Failed = "failed",
        /// The goal's delivery is `none`: nothing is pushed.
        Suppressed = "suppressed",
    }
);

/// One stored goal: the listed columns and the opaque document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredGoal {
    /// `goal_<ulid>`.
    pub goal_id: String,
    /// The goal's state (`draft`, `active`, `blocked`, …).
    pub state: String,
    /// Bumped by every write; a write names the version it was computed from.
    pub version: i64,
    /// The deadline, Unix ms.
    pub deadline_at_ms: Option<i64>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The goal document (a JSON object).
    pub goal: Value,
    /// The daemon of a fleet sharing the store that made the goal (its ticks run there);
    /// `None` on a store that is not shared (SQLite). Read back only: writes ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<openphone_protocol::endpoint::RowHost>,
}

/// A goal row with its document as JSON text (an object), neither parsed nor built as a
/// `Value`: a caller with its own document type reads and writes large documents without
/// the intermediate tree ([`Store::get_goal_text`](crate::GoalStore::get_goal_text), [`Store::update_goal_text`](crate::GoalStore::update_goal_text)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalText {
    /// `goal_<ulid>`.
    pub goal_id: String,
    /// The goal's state (`draft`, `active`, `blocked`, …).
    pub state: String,
    /// Bumped by every write; a write names the version it was computed from.
    pub version: i64,
    /// The deadline, Unix ms.
    pub deadline_at_ms: Option<i64>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The goal document, JSON text of an object.
    pub goal_json: String,
}

/// A transition to append with a goal write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewGoalTransition {
    pub action_id: String,
    pub from_state: String,
    pub to_state: String,
    /// Who or what caused it (`policy`, `user`, `clock`, `executor`, …).
    pub source: String,
    pub reason: String,
    pub at_ms: i64,
}

/// A stored transition: the new one with its goal and number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalTransition {
    pub goal_id: String,
    /// 1, 2, … per goal, in the order written.
    pub seq: i64,
    #[serde(flatten)]
    pub transition: NewGoalTransition,
}

/// A delta report to store with a goal write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewGoalReport {
    /// `notification`, `telegram`, `webhook` or `none`.
    pub channel: String,
    /// The report as data (a JSON object); renderers work from it.
    pub report: Value,
    pub delivery: ReportDelivery,
    pub created_at_ms: i64,
}

/// A stored delta report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalReport {
    pub goal_id: String,
    /// 1, 2, … per goal.
    pub seq: i64,
    pub created_at_ms: i64,
    pub channel: String,
    pub report: Value,
    pub delivery: ReportDelivery,
    /// Delivery tries so far.
    pub attempts: i64,
    /// The last delivery error, or empty.
    pub last_error: String,
}

const GOAL_COLUMNS: &str =
    "goal_id, state, version, deadline_at_ms, created_at_ms, updated_at_ms, goal_json";
const REPORT_COLUMNS: &str =
    "goal_id, seq, created_at_ms, channel, report_json, delivery_state, attempts, last_error";

fn goal_from_row(row: &Row<'_>) -> Result<StoredGoal> {
    const OP: &str = "goals.read";
    let goal_id: String = col(row, "goal_id", OP)?;
    let text: String = col(row, "goal_json", OP)?;
    Ok(StoredGoal {
        goal: parse_json(&text, OP, &goal_id)?,
        state: col(row, "state", OP)?,
        version: col(row, "version", OP)?,
        deadline_at_ms: col(row, "deadline_at_ms", OP)?,
        created_at_ms: col(row, "created_at_ms", OP)?,
        updated_at_ms: col(row, "updated_at_ms", OP)?,
        goal_id,
        host: None,
    })
}

fn transition_from_row(row: &Row<'_>) -> Result<GoalTransition> {
    const OP: &str = "goal_transitions.read";
    Ok(GoalTransition {
        goal_id: col(row, "goal_id", OP)?,
        seq: col(row, "seq", OP)?,
        transition: NewGoalTransition {
            action_id: col(row, "action_id", OP)?,
            from_state: col(row, "from_state", OP)?,
            to_state: col(row, "to_state", OP)?,
            source: col(row, "source", OP)?,
            reason: col(row, "reason", OP)?,
            at_ms: col(row, "at_ms", OP)?,
        },
    })
}

fn report_from_row(row: &Row<'_>) -> Result<GoalReport> {
    const OP: &str = "goal_reports.read";
    let goal_id: String = col(row, "goal_id", OP)?;
    let text: String = col(row, "report_json", OP)?;
    let state: String = col(row, "delivery_state", OP)?;
    Ok(GoalReport {
        report: parse_json(&text, OP, &goal_id)?,
        delivery: parse_enum(ReportDelivery::parse, &state, OP, &goal_id)?,
        seq: col(row, "seq", OP)?,
        created_at_ms: col(row, "created_at_ms", OP)?,
        channel: col(row, "channel", OP)?,
        attempts: col(row, "attempts", OP)?,
        last_error: col(row, "last_error", OP)?,
        goal_id,
    })
}

fn get_in(conn: &Connection, goal_id: &str) -> Result<Option<StoredGoal>> {
    Ok(collect(
        conn,
        "goals.get",
        &format!("SELECT {GOAL_COLUMNS} FROM goals WHERE goal_id = ?1"),
        [goal_id],
        goal_from_row,
    )?
    .into_iter()
    .next())
}

fn get_text_in(conn: &Connection, goal_id: &str) -> Result<Option<GoalText>> {
    const OP: &str = "goals.get";
    Ok(collect(
        conn,
        OP,
        &format!("SELECT {GOAL_COLUMNS} FROM goals WHERE goal_id = ?1"),
        [goal_id],
        |row| {
            Ok(GoalText {
                goal_id: col(row, "goal_id", OP)?,
                state: col(row, "state", OP)?,
                version: col(row, "version", OP)?,
                deadline_at_ms: col(row, "deadline_at_ms", OP)?,
                created_at_ms: col(row, "created_at_ms", OP)?,
                updated_at_ms: col(row, "updated_at_ms", OP)?,
                goal_json: col(row, "goal_json", OP)?,
            })
        },
    )?
    .into_iter()
    .next())
}

impl GoalText {
    /// The text form of `goal` (its document as JSON text, which must be an object's).
    #[doc(hidden)]
    pub fn of(goal: &StoredGoal, op: &'static str) -> Result<GoalText> {
        Ok(GoalText {
            goal_id: goal.goal_id.clone(),
            state: goal.state.clone(),
            version: goal.version,
            deadline_at_ms: goal.deadline_at_ms,
            created_at_ms: goal.created_at_ms,
            updated_at_ms: goal.updated_at_ms,
            goal_json: object_text(op, &goal.goal_id, &goal.goal)?,
        })
    }
}

fn object_text(op: &'static str, id: &str, value: &Value) -> Result<String> {
    if value.is_object() {
        Ok(to_json(value))
    } else {
        Err(StoreError::corrupt(
            op,
            id,
            "a goal document must be a JSON object",
        ))
    }
}

fn next_seq(tx: &Connection, table: &str, op: &'static str, goal_id: &str) -> Result<i64> {
    tx.row_cached(
        &format!("SELECT COALESCE(MAX(seq), 0) + 1 FROM {table} WHERE goal_id = ?1"),
        [goal_id],
        |r| r.get(0),
    )
    .ctx(op, goal_id)
}

fn append_in(
    tx: &Connection,
    goal_id: &str,
    transitions: &[NewGoalTransition],
    reports: &[NewGoalReport],
) -> Result<()> {
    const OP_T: &str = "goal_transitions.append";
    const OP_R: &str = "goal_reports.append";
    let first = next_seq(tx, "goal_transitions", OP_T, goal_id)?;
    for (seq, t) in (first..).zip(transitions) {
        tx.prepare_cached(
            "INSERT INTO goal_transitions (goal_id, seq, action_id, from_state, to_state, \
             source, reason, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut s| {
            s.execute(params![
                goal_id,
                seq,
                t.action_id,
                t.from_state,
                t.to_state,
                t.source,
                t.reason,
                t.at_ms
            ])
        })
        .ctx(OP_T, goal_id)?;
    }
    let first = next_seq(tx, "goal_reports", OP_R, goal_id)?;
    for (seq, r) in (first..).zip(reports) {
        let text = object_text(OP_R, goal_id, &r.report)?;
        tx.prepare_cached(
            "INSERT INTO goal_reports (goal_id, seq, created_at_ms, channel, report_json, \
             delivery_state) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![
                goal_id,
                seq,
                r.created_at_ms,
                r.channel,
                text,
                r.delivery.as_str()
            ])
        })
        .ctx(OP_R, goal_id)?;
    }
    Ok(())
}

impl SqliteStore {
    /// Stores a new goal at version 1 (the `version` given is ignored), with the transitions
    /// and reports of its creation. An existing id is [`StoreError::AlreadyExists`].
    pub fn create_goal(
        &self,
        goal: &StoredGoal,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<StoredGoal> {
        const OP: &str = "goals.create";
        let mut goal = goal.clone();
        goal.version = 1;
        let text = object_text(OP, &goal.goal_id, &goal.goal)?;
        let id = goal.goal_id.clone();
        self.write(OP, &id, move |tx| {
            let exists = tx
                .row_cached(
                    "SELECT 1 FROM goals WHERE goal_id = ?1",
                    [&goal.goal_id],
                    |_| Ok(()),
                )
                .optional()
                .ctx(OP, &goal.goal_id)?;
            if exists.is_some() {
                return Err(StoreError::AlreadyExists {
                    table: "goals",
                    id: goal.goal_id.clone(),
                });
            }
            tx.exec_cached(
                "INSERT INTO goals (goal_id, state, version, deadline_at_ms, created_at_ms, \
                 updated_at_ms, goal_json) VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6)",
                params![
                    goal.goal_id,
                    goal.state,
                    goal.deadline_at_ms,
                    goal.created_at_ms,
                    goal.updated_at_ms,
                    text
                ],
            )
            .ctx(OP, &goal.goal_id)?;
            append_in(tx, &goal.goal_id, &transitions, &reports)?;
            Ok(goal)
        })
    }

    /// [`Store::update_goal`](crate::GoalStore::update_goal) with the document as JSON text (it must be an object's):
    /// returns the version written.
    pub fn update_goal_text(
        &self,
        next: GoalText,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<i64> {
        const OP: &str = "goals.update";
        let text = next.goal_json.trim();
        if !(text.starts_with('{') && text.ends_with('}')) {
            return Err(StoreError::corrupt(
                OP,
                &next.goal_id,
                "a goal document must be a JSON object",
            ));
        }
        let id = next.goal_id.clone();
        self.write(OP, &id, move |tx| {
            let changed = tx
                .prepare_cached(
                    "UPDATE goals SET state = ?2, deadline_at_ms = ?3, updated_at_ms = ?4, \
                     goal_json = ?5, version = version + 1 WHERE goal_id = ?1 AND version = ?6",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        next.goal_id,
                        next.state,
                        next.deadline_at_ms,
                        next.updated_at_ms,
                        next.goal_json,
                        next.version
                    ])
                })
                .ctx(OP, &next.goal_id)?;
            if changed != 1 {
                return Err(match get_in(tx, &next.goal_id)? {
                    None => StoreError::NotFound {
                        table: "goals",
                        id: next.goal_id.clone(),
                    },
                    Some(found) => StoreError::Conflict {
                        table: "goals",
                        id: next.goal_id.clone(),
                        detail: format!(
                            "written from version {}, stored version is {}",
                            next.version, found.version
                        ),
                    },
                });
            }
            append_in(tx, &next.goal_id, &transitions, &reports)?;
            Ok(next.version + 1)
        })
    }

    /// A goal's stored version (`None`: no such goal) — enough for a reader that keeps the
    /// document it last read or wrote to tell whether that copy is still current.
    pub fn goal_version(&self, goal_id: &str) -> Result<Option<i64>> {
        self.conn()
            .prepare_cached("SELECT version FROM goals WHERE goal_id = ?1")
            .and_then(|mut s| s.query_row([goal_id], |r| r.get(0)).optional())
            .ctx("goals.version", goal_id)
    }

    /// One goal with its document as JSON text.
    pub fn get_goal_text(&self, goal_id: &str) -> Result<Option<GoalText>> {
        get_text_in(&self.conn(), goal_id)
    }

    /// One goal.
    pub fn get_goal(&self, goal_id: &str) -> Result<Option<StoredGoal>> {
        get_in(&self.conn(), goal_id)
    }

    /// Goals whose state is one of `states` (all when empty), most recently updated first, at
    /// most `limit` (all when `None`).
    pub fn list_goals(&self, states: &[&str], limit: Option<usize>) -> Result<Vec<StoredGoal>> {
        let states = (!states.is_empty()).then(|| Value::from(states.to_vec()).to_string());
        collect(
            &self.conn(),
            "goals.list",
            &format!(
                "SELECT {GOAL_COLUMNS} FROM goals \
                 WHERE (?1 IS NULL OR state IN (SELECT value FROM json_each(?1))) \
                 ORDER BY updated_at_ms DESC, goal_id LIMIT ?2"
            ),
            params![states, limit.map_or(-1, sql_limit)],
            goal_from_row,
        )
    }

    /// Every transition of a goal, in order.
    pub fn goal_transitions(&self, goal_id: &str) -> Result<Vec<GoalTransition>> {
        collect(
            &self.conn(),
            "goal_transitions.list",
            "SELECT goal_id, seq, action_id, from_state, to_state, source, reason, at_ms \
             FROM goal_transitions WHERE goal_id = ?1 ORDER BY seq",
            [goal_id],
            transition_from_row,
        )
    }

    /// Every delta report of a goal, in order.
    pub fn goal_reports(&self, goal_id: &str) -> Result<Vec<GoalReport>> {
        collect(
            &self.conn(),
            "goal_reports.list",
            &format!("SELECT {REPORT_COLUMNS} FROM goal_reports WHERE goal_id = ?1 ORDER BY seq"),
            [goal_id],
            report_from_row,
        )
    }

    /// Reports whose delivery is `pending`, oldest first, at most `limit`.
    pub fn pending_goal_reports(&self, limit: usize) -> Result<Vec<GoalReport>> {
        collect(
            &self.conn(),
            "goal_reports.pending",
            &format!(
                "SELECT {REPORT_COLUMNS} FROM goal_reports WHERE delivery_state = 'pending' \
                 ORDER BY created_at_ms, goal_id, seq LIMIT ?1"
            ),
            [sql_limit(limit)],
            report_from_row,
        )
    }

    /// Records one delivery try of a report: its new state and error (empty on success); the
    /// try count goes up by one. An unknown report is [`StoreError::NotFound`].
    pub fn set_goal_report_delivery(
        &self,
        goal_id: &str,
        seq: i64,
        delivery: ReportDelivery,
        error: &str,
    ) -> Result<()> {
        const OP: &str = "goal_reports.deliver";
        let (goal_id, error) = (goal_id.to_owned(), error.to_owned());
        let id = format!("{goal_id}#{seq}");
        self.write(OP, &id.clone(), move |tx| {
            let changed = tx
                .exec_cached(
                    "UPDATE goal_reports SET delivery_state = ?3, last_error = ?4, \
                     attempts = attempts + 1 WHERE goal_id = ?1 AND seq = ?2",
                    params![goal_id, seq, delivery.as_str(), error],
                )
                .ctx(OP, &id)?;
            if changed == 1 {
                Ok(())
            } else {
                Err(StoreError::NotFound {
                    table: "goal_reports",
                    id,
                })
            }
        })
    }
}
