//! [`GoalStore`] on PostgreSQL: the goal documents, the log of their action transitions and their
//! delta reports (`schema/goals.sql`), a port of `openphone-store`'s `goals.rs`.
//!
//! Goals are fleet-wide: every daemon reads every goal, and every write is a compare-and-set on
//! the goal's `version` (`UPDATE … WHERE version = $n`). Two daemons ticking one goal from the
//! same version: the second `UPDATE` waits for the first's row lock, then its SERIALIZABLE
//! transaction fails, is run again by the writer and finds the version moved on —
//! [`StoreError::Conflict`], nothing written. A goal remembers the daemon that created it
//! (`host_id`, the one whose phone it acts on); [`PgStore::goal_host`] reads it. Its delta
//! reports are delivered by that daemon: `pending_goal_reports` answers this daemon's goals'.
//!
//! The store never reads the clock: every time is a parameter.

use openphone_store::{
    GoalReport, GoalStore, GoalText, GoalTransition, NewGoalReport, NewGoalTransition,
    ReportDelivery, Result, StoreError, StoredGoal,
};
use postgres::types::FromSql;
use postgres::{GenericClient, Row};
use serde_json::Value;

use crate::PgStore;
use crate::error::PgContext;

const GOAL_COLUMNS: &str =
    "goal_id, state, version, deadline_at_ms, created_at_ms, updated_at_ms, goal_json, host_id";
const REPORT_COLUMNS: &str =
    "goal_id, seq, created_at_ms, channel, report_json, delivery_state, attempts, last_error";

/// One column of `row`, naming the operation and record on failure.
pub(crate) fn col<'a, T: FromSql<'a>>(
    row: &'a Row,
    name: &str,
    op: &'static str,
    id: &str,
) -> Result<T> {
    row.try_get(name).ctx(op, id)
}

/// Stored JSON text as a value; unreadable text is [`StoreError::Corrupt`].
pub(crate) fn parse_json(text: &str, op: &'static str, id: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| corrupt(op, id, e))
}

pub(crate) fn corrupt(op: &'static str, id: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        op,
        id: id.to_owned(),
        detail: detail.to_string(),
    }
}

/// A `usize` limit as SQL's `BIGINT`.
pub(crate) fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn goal_text_from_row(row: &Row) -> Result<GoalText> {
    const OP: &str = "goals.read";
    let goal_id: String = col(row, "goal_id", OP, "")?;
    Ok(GoalText {
        state: col(row, "state", OP, &goal_id)?,
        version: col(row, "version", OP, &goal_id)?,
        deadline_at_ms: col(row, "deadline_at_ms", OP, &goal_id)?,
        created_at_ms: col(row, "created_at_ms", OP, &goal_id)?,
        updated_at_ms: col(row, "updated_at_ms", OP, &goal_id)?,
        goal_json: col(row, "goal_json", OP, &goal_id)?,
        goal_id,
    })
}

fn goal_from_row(row: &Row) -> Result<StoredGoal> {
    let text = goal_text_from_row(row)?;
    let host: String = col(row, "host_id", "goals.read", &text.goal_id)?;
    Ok(StoredGoal {
        host: Some(openphone_store::RowHost::of(host)),
        goal: parse_json(&text.goal_json, "goals.read", &text.goal_id)?,
        goal_id: text.goal_id,
        state: text.state,
        version: text.version,
        deadline_at_ms: text.deadline_at_ms,
        created_at_ms: text.created_at_ms,
        updated_at_ms: text.updated_at_ms,
    })
}

fn transition_from_row(row: &Row) -> Result<GoalTransition> {
    const OP: &str = "goal_transitions.read";
    let goal_id: String = col(row, "goal_id", OP, "")?;
    Ok(GoalTransition {
        seq: col(row, "seq", OP, &goal_id)?,
        transition: NewGoalTransition {
            action_id: col(row, "action_id", OP, &goal_id)?,
            from_state: col(row, "from_state", OP, &goal_id)?,
            to_state: col(row, "to_state", OP, &goal_id)?,
            source: col(row, "source", OP, &goal_id)?,
            reason: col(row, "reason", OP, &goal_id)?,
            at_ms: col(row, "at_ms", OP, &goal_id)?,
        },
        goal_id,
    })
}

fn report_from_row(row: &Row) -> Result<GoalReport> {
    const OP: &str = "goal_reports.read";
    let goal_id: String = col(row, "goal_id", OP, "")?;
    let text: String = col(row, "report_json", OP, &goal_id)?;
    let state: String = col(row, "delivery_state", OP, &goal_id)?;
    Ok(GoalReport {
        report: parse_json(&text, OP, &goal_id)?,
        delivery: ReportDelivery::parse(&state)
            .ok_or_else(|| corrupt(OP, &goal_id, format!("unknown value {state:?}")))?,
        seq: col(row, "seq", OP, &goal_id)?,
        created_at_ms: col(row, "created_at_ms", OP, &goal_id)?,
        channel: col(row, "channel", OP, &goal_id)?,
        attempts: col(row, "attempts", OP, &goal_id)?,
        last_error: col(row, "last_error", OP, &goal_id)?,
        goal_id,
    })
}

fn get_text_in(conn: &mut impl GenericClient, goal_id: &str) -> Result<Option<GoalText>> {
    conn.query_opt(
        &format!("SELECT {GOAL_COLUMNS} FROM goals WHERE goal_id = $1"),
        &[&goal_id],
    )
    .ctx("goals.get", goal_id)?
    .as_ref()
    .map(goal_text_from_row)
    .transpose()
}

fn object_text(op: &'static str, id: &str, value: &Value) -> Result<String> {
    if value.is_object() {
        Ok(value.to_string())
    } else {
        Err(corrupt(op, id, "a goal document must be a JSON object"))
    }
}

fn next_seq(
    tx: &mut postgres::Transaction<'_>,
    table: &str,
    op: &'static str,
    goal_id: &str,
) -> Result<i64> {
    tx.query_one(
        &format!("SELECT COALESCE(MAX(seq), 0) + 1 FROM {table} WHERE goal_id = $1"),
        &[&goal_id],
    )
    .and_then(|row| row.try_get(0))
    .ctx(op, goal_id)
}

fn append_in(
    tx: &mut postgres::Transaction<'_>,
    goal_id: &str,
    transitions: &[NewGoalTransition],
    reports: &[NewGoalReport],
) -> Result<()> {
    const OP_T: &str = "goal_transitions.append";
    const OP_R: &str = "goal_reports.append";
    if !transitions.is_empty() {
        let first = next_seq(tx, "goal_transitions", OP_T, goal_id)?;
        let insert = tx
            .prepare(
                "INSERT INTO goal_transitions (goal_id, seq, action_id, from_state, to_state, \
                 source, reason, at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .ctx(OP_T, goal_id)?;
        for (seq, t) in (first..).zip(transitions) {
            tx.execute(
                &insert,
                &[
                    &goal_id,
                    &seq,
                    &t.action_id,
                    &t.from_state,
                    &t.to_state,
                    &t.source,
                    &t.reason,
                    &t.at_ms,
                ],
            )
            .ctx(OP_T, goal_id)?;
        }
    }
    if !reports.is_empty() {
        let first = next_seq(tx, "goal_reports", OP_R, goal_id)?;
        let insert = tx
            .prepare(
                "INSERT INTO goal_reports (goal_id, seq, created_at_ms, channel, report_json, \
                 delivery_state) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .ctx(OP_R, goal_id)?;
        for (seq, r) in (first..).zip(reports) {
            let text = object_text(OP_R, goal_id, &r.report)?;
            tx.execute(
                &insert,
                &[
                    &goal_id,
                    &seq,
                    &r.created_at_ms,
                    &r.channel,
                    &text,
                    &r.delivery.as_str(),
                ],
            )
            .ctx(OP_R, goal_id)?;
        }
    }
    Ok(())
}

impl PgStore {
    /// The daemon that created a goal (the one whose phone it acts on); `None`: no such goal.
    /// PostgreSQL only: the [`GoalStore`] trait has no host.
    pub fn goal_host(&self, goal_id: &str) -> Result<Option<String>> {
        let id = goal_id.to_owned();
        self.read("goals.host", goal_id, move |conn| {
            conn.query_opt("SELECT host_id FROM goals WHERE goal_id = $1", &[&id])
                .ctx("goals.host", &id)?
                .map(|row| col(&row, "host_id", "goals.host", &id))
                .transpose()
        })
    }
}

impl GoalStore for PgStore {
    fn create_goal(
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
        let host = self.host_id().to_owned();
        self.write(OP, &id, move |tx| {
            let inserted = tx
                .execute(
                    "INSERT INTO goals (goal_id, host_id, state, version, deadline_at_ms, \
                     created_at_ms, updated_at_ms, goal_json) \
                     VALUES ($1, $2, $3, 1, $4, $5, $6, $7) ON CONFLICT (goal_id) DO NOTHING",
                    &[
                        &goal.goal_id,
                        &host,
                        &goal.state,
                        &goal.deadline_at_ms,
                        &goal.created_at_ms,
                        &goal.updated_at_ms,
                        &text,
                    ],
                )
                .ctx(OP, &goal.goal_id)?;
            if inserted != 1 {
                return Err(StoreError::AlreadyExists {
                    table: "goals",
                    id: goal.goal_id.clone(),
                });
            }
            append_in(tx, &goal.goal_id, &transitions, &reports)?;
            Ok(goal.clone())
        })
    }

    fn update_goal_text(
        &self,
        next: GoalText,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<i64> {
        const OP: &str = "goals.update";
        let text = next.goal_json.trim();
        if !(text.starts_with('{') && text.ends_with('}')) {
            return Err(corrupt(
                OP,
                &next.goal_id,
                "a goal document must be a JSON object",
            ));
        }
        let id = next.goal_id.clone();
        self.write(OP, &id, move |tx| {
            let changed = tx
                .execute(
                    "UPDATE goals SET state = $2, deadline_at_ms = $3, updated_at_ms = $4, \
                     goal_json = $5, version = version + 1 WHERE goal_id = $1 AND version = $6",
                    &[
                        &next.goal_id,
                        &next.state,
                        &next.deadline_at_ms,
                        &next.updated_at_ms,
                        &next.goal_json,
                        &next.version,
                    ],
                )
                .ctx(OP, &next.goal_id)?;
            if changed != 1 {
                let stored = tx
                    .query_opt(
                        "SELECT version FROM goals WHERE goal_id = $1",
                        &[&next.goal_id],
                    )
                    .ctx(OP, &next.goal_id)?;
                return Err(match stored {
                    None => StoreError::NotFound {
                        table: "goals",
                        id: next.goal_id.clone(),
                    },
                    Some(row) => {
                        let version: i64 = col(&row, "version", OP, &next.goal_id)?;
                        StoreError::Conflict {
                            table: "goals",
                            id: next.goal_id.clone(),
                            detail: format!(
                                "written from version {}, stored version is {version}",
                                next.version
                            ),
                        }
                    }
                });
            }
            append_in(tx, &next.goal_id, &transitions, &reports)?;
            Ok(next.version + 1)
        })
    }

    fn goal_version(&self, goal_id: &str) -> Result<Option<i64>> {
        const OP: &str = "goals.version";
        let id = goal_id.to_owned();
        self.read(OP, goal_id, move |conn| {
            conn.query_opt("SELECT version FROM goals WHERE goal_id = $1", &[&id])
                .ctx(OP, &id)?
                .map(|row| col(&row, "version", OP, &id))
                .transpose()
        })
    }

    fn get_goal_text(&self, goal_id: &str) -> Result<Option<GoalText>> {
        let id = goal_id.to_owned();
        self.read("goals.get", goal_id, move |conn| get_text_in(conn, &id))
    }

    fn get_goal(&self, goal_id: &str) -> Result<Option<StoredGoal>> {
        const OP: &str = "goals.get";
        let id = goal_id.to_owned();
        self.read(OP, goal_id, move |conn| {
            conn.query_opt(
                &format!("SELECT {GOAL_COLUMNS} FROM goals WHERE goal_id = $1"),
                &[&id],
            )
            .ctx(OP, &id)?
            .as_ref()
            .map(goal_from_row)
            .transpose()
        })
    }

    fn list_goals(&self, states: &[&str], limit: Option<usize>) -> Result<Vec<StoredGoal>> {
        const OP: &str = "goals.list";
        let states: Option<Vec<String>> =
            (!states.is_empty()).then(|| states.iter().map(|s| (*s).to_owned()).collect());
        let limit = limit.map(sql_limit);
        self.read(OP, "", move |conn| {
            conn.query(
                &format!(
                    "SELECT {GOAL_COLUMNS} FROM goals \
                     WHERE ($1::text[] IS NULL OR state = ANY($1)) \
                     ORDER BY updated_at_ms DESC, goal_id LIMIT $2"
                ),
                &[&states, &limit],
            )
            .ctx(OP, "")?
            .iter()
            .map(goal_from_row)
            .collect()
        })
    }

    fn goal_transitions(&self, goal_id: &str) -> Result<Vec<GoalTransition>> {
        const OP: &str = "goal_transitions.list";
        let id = goal_id.to_owned();
        self.read(OP, goal_id, move |conn| {
            conn.query(
                "SELECT goal_id, seq, action_id, from_state, to_state, source, reason, at_ms \
                 FROM goal_transitions WHERE goal_id = $1 ORDER BY seq",
                &[&id],
            )
            .ctx(OP, &id)?
            .iter()
            .map(transition_from_row)
            .collect()
        })
    }

    fn goal_reports(&self, goal_id: &str) -> Result<Vec<GoalReport>> {
        const OP: &str = "goal_reports.list";
        let id = goal_id.to_owned();
        self.read(OP, goal_id, move |conn| {
            conn.query(
                &format!(
                    "SELECT {REPORT_COLUMNS} FROM goal_reports WHERE goal_id = $1 ORDER BY seq"
                ),
                &[&id],
            )
            .ctx(OP, &id)?
            .iter()
            .map(report_from_row)
            .collect()
        })
    }

    /// In a fleet, the pending reports of this daemon's goals: a goal's reports are delivered
    /// by the daemon that created it (the one whose phone it acts on), so two daemons never send
    /// one report; while that daemon is down its reports wait, stored.
    fn pending_goal_reports(&self, limit: usize) -> Result<Vec<GoalReport>> {
        const OP: &str = "goal_reports.pending";
        let limit = sql_limit(limit);
        let host = self.host_id().to_owned();
        self.read(OP, "", move |conn| {
            conn.query(
                &format!(
                    "SELECT {REPORT_COLUMNS} FROM goal_reports \
                     WHERE delivery_state = 'pending' \
                     AND goal_id IN (SELECT goal_id FROM goals WHERE host_id = $2) \
                     ORDER BY created_at_ms, goal_id, seq LIMIT $1"
                ),
                &[&limit, &host],
            )
            .ctx(OP, "")?
            .iter()
            .map(report_from_row)
            .collect()
        })
    }

    fn set_goal_report_delivery(
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
                .execute(
                    "UPDATE goal_reports SET delivery_state = $3, last_error = $4, \
                     attempts = attempts + 1 WHERE goal_id = $1 AND seq = $2",
                    &[&goal_id, &seq, &delivery.as_str(), &error],
                )
                .ctx(OP, &id)?;
            if changed == 1 {
                Ok(())
            } else {
                Err(StoreError::NotFound {
                    table: "goal_reports",
                    id: id.clone(),
                })
            }
        })
    }
}
