//! How a job and a ledger row are read back from PostgreSQL: the column lists, the decoding of
//! a row into [`StoredJob`] / [`JobRun`] (a JSON column that is not an object, or an unknown
//! enum string, is corruption, as on SQLite), and the small lookups and errors the writes share.

use openphone_store::{
    AgentJob, DeliveryState, JobPhase, JobRun, JobStatus, JobType, Result, RowHost, RunOutcome,
    StoreError, StoredJob,
};
use std::cell::RefCell;
use std::collections::HashMap;

use postgres::error::SqlState;
use postgres::types::{FromSql, ToSql};
use postgres::{Client, GenericClient, Row, Statement};
use serde_json::{Map, Value};

use crate::PgContext;

pub(super) const JOB_COLUMNS: &str = "id, type, title, prompt, payload_json, schedule_json, \
    session_target, delivery_json, status, created_at, updated_at, next_run_at, running_at, \
    last_run_at, last_result, failure_count, failure_alert_at, phase, progress_text, \
    progress_current, progress_total, checkpoint_json, pending_confirmation_id, \
    pending_tool_request_json, last_surface_id, resume_token, last_event_at, unread_result, \
    paused_at, version, current_attempt, owner, delivery_state, created_by, device_id, host_id, \
    lease_owner";

pub(super) const RUN_COLUMNS: &str = "job_id, attempt, intended_at, catch_up, owner, started_at, \
    finished_at, outcome, reason, output_ref";

pub(super) const TERMINAL_SQL: &str = "('completed', 'failed', 'stopped', 'dispatched')";

pub(super) const OP_READ: &str = "agent_jobs.read";

/// Parameters of one statement.
pub(super) type Params<'a> = [&'a (dyn ToSql + Sync)];

fn col<'a, T: FromSql<'a>>(row: &'a Row, name: &str, op: &'static str) -> Result<T> {
    row.try_get(name).ctx(op, name)
}

fn parse_enum<T>(parse: fn(&str) -> Option<T>, text: &str, what: &str, id: &str) -> Result<T> {
    parse(text).ok_or_else(|| StoreError::Corrupt {
        op: OP_READ,
        id: id.to_owned(),
        detail: format!("unknown {what} {text:?}"),
    })
}

pub(super) fn object(text: &str, column: &str, id: &str) -> Result<Map<String, Value>> {
    let corrupt = |detail: String| StoreError::Corrupt {
        op: OP_READ,
        id: id.to_owned(),
        detail,
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(corrupt(format!("{column} is not a JSON object"))),
        Err(e) => Err(corrupt(format!("{column}: {e}"))),
    }
}

pub(super) fn job_from_row(row: &Row) -> Result<StoredJob> {
    let id: i64 = col(row, "id", OP_READ)?;
    let key = id.to_string();
    let text = |name: &str| col::<String>(row, name, OP_READ);
    let int = |name: &str| col::<i64>(row, name, OP_READ);
    let delivery_state: Option<String> = col(row, "delivery_state", OP_READ)?;
    let job = AgentJob {
        id,
        job_type: parse_enum(JobType::parse, &text("type")?, "type", &key)?,
        title: text("title")?,
        prompt: text("prompt")?,
        payload_json: object(&text("payload_json")?, "payload_json", &key)?,
        schedule_json: object(&text("schedule_json")?, "schedule_json", &key)?,
        session_target: text("session_target")?,
        delivery_json: object(&text("delivery_json")?, "delivery_json", &key)?,
        status: parse_enum(JobStatus::parse, &text("status")?, "status", &key)?,
        created_at: int("created_at")?,
        updated_at: int("updated_at")?,
        next_run_at: int("next_run_at")?,
        running_at: int("running_at")?,
        last_run_at: int("last_run_at")?,
        last_result: text("last_result")?,
        failure_count: int("failure_count")?,
        failure_alert_at: int("failure_alert_at")?,
        phase: parse_enum(JobPhase::parse, &text("phase")?, "phase", &key)?,
        progress_text: text("progress_text")?,
        progress_current: int("progress_current")?,
        progress_total: int("progress_total")?,
        checkpoint_json: object(&text("checkpoint_json")?, "checkpoint_json", &key)?,
        pending_confirmation_id: text("pending_confirmation_id")?,
        pending_tool_request_json: object(
            &text("pending_tool_request_json")?,
            "pending_tool_request_json",
            &key,
        )?,
        last_surface_id: text("last_surface_id")?,
        resume_token: text("resume_token")?,
        last_event_at: int("last_event_at")?,
        unread_result: col::<bool>(row, "unread_result", OP_READ)?,
        paused_at: int("paused_at")?,
        device_id: col(row, "device_id", OP_READ)?,
    };
    Ok(StoredJob {
        job,
        version: int("version")?,
        attempt: int("current_attempt")?,
        owner: text("owner")?,
        delivery_state: delivery_state
            .map(|s| parse_enum(DeliveryState::parse, &s, "delivery_state", &key))
            .transpose()?,
        created_by: text("created_by")?,
        host: Some(RowHost {
            host_id: text("host_id")?,
            lease_owner: col(row, "lease_owner", OP_READ)?,
        }),
    })
}

pub(super) fn run_from_row(row: &Row) -> Result<JobRun> {
    const OP: &str = "agent_job_runs.read";
    let job_id: i64 = col(row, "job_id", OP)?;
    let outcome: String = col(row, "outcome", OP)?;
    Ok(JobRun {
        job_id,
        attempt: col(row, "attempt", OP)?,
        intended_at: col(row, "intended_at", OP)?,
        catch_up: col(row, "catch_up", OP)?,
        owner: col(row, "owner", OP)?,
        started_at: col(row, "started_at", OP)?,
        finished_at: col(row, "finished_at", OP)?,
        outcome: parse_enum(RunOutcome::parse, &outcome, "outcome", &job_id.to_string())?,
        reason: col(row, "reason", OP)?,
        output_ref: col(row, "output_ref", OP)?,
    })
}

/// Runs `sql` and decodes every row with `decode`.
pub(super) fn collect<C: GenericClient + ?Sized, T>(
    client: &mut C,
    op: &'static str,
    sql: &str,
    params: &Params<'_>,
    decode: fn(&Row) -> Result<T>,
) -> Result<Vec<T>> {
    client
        .query(sql, params)
        .ctx(op, "")?
        .iter()
        .map(decode)
        .collect()
}

pub(super) fn json_text(map: &Map<String, Value>) -> String {
    // Serialising a map with string keys cannot fail.
    Value::Object(map.clone()).to_string()
}

pub(super) fn get_in<C: GenericClient + ?Sized>(
    client: &mut C,
    op: &'static str,
    id: i64,
) -> Result<Option<StoredJob>> {
    Ok(collect(
        client,
        op,
        &format!("SELECT {JOB_COLUMNS} FROM agent_jobs WHERE id = $1"),
        &[&id],
        job_from_row,
    )?
    .into_iter()
    .next())
}

/// `limit` as a statement parameter.
pub(super) fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

pub(super) fn not_found(id: i64) -> StoreError {
    StoreError::NotFound {
        table: "agent_jobs",
        id: id.to_string(),
    }
}

pub(super) fn conflict(id: i64, detail: String) -> StoreError {
    StoreError::Conflict {
        table: "agent_jobs",
        id: id.to_string(),
        detail,
    }
}

thread_local! {
    /// The statements [`query_cached`] prepared on this reader thread's connection.
    static STATEMENTS: RefCell<HashMap<String, Statement>> = RefCell::new(HashMap::new());
}

/// Runs a read prepared once per reader connection: the scheduler's per-tick reads (the next
/// wake, "anything due?", "anything stale?") would otherwise be planned again at every call,
/// which costs more than running them. A statement the connection does not know (the reader
/// reconnected since) is prepared again. Reads only: outside a transaction such an error
/// leaves nothing behind.
pub(super) fn query_cached(
    client: &mut Client,
    op: &'static str,
    sql: &str,
    params: &Params<'_>,
) -> Result<Vec<Row>> {
    let cached = STATEMENTS.with(|s| s.borrow().get(sql).cloned());
    if let Some(statement) = cached {
        match client.query(&statement, params) {
            Err(e) if e.code() == Some(&SqlState::INVALID_SQL_STATEMENT_NAME) => {}
            done => return done.ctx(op, ""),
        }
    }
    let statement = client.prepare(sql).ctx(op, "")?;
    STATEMENTS.with(|s| s.borrow_mut().insert(sql.to_owned(), statement.clone()));
    client.query(&statement, params).ctx(op, "")
}
