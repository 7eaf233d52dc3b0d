//! How a job and a ledger row are read back from SQLite: the column lists, the decoding of a
//! row into [`StoredJob`] / [`JobRun`] (a JSON column that is not an object, or an unknown enum
//! string, is corruption), and the small lookups and errors the writes share.

use rusqlite::{Connection, Row};
use serde_json::{Map, Value};

use super::{AgentJob, DeliveryState, JobPhase, JobRun, JobStatus, JobType, RunOutcome, StoredJob};
use crate::error::{Result, StoreError};
use crate::rows::collect;
use crate::wire::{col, parse_enum};

pub(super) const JOB_COLUMNS: &str = "id, type, title, prompt, payload_json, schedule_json, session_target, \
    delivery_json, status, created_at, updated_at, next_run_at, running_at, last_run_at, \
    last_result, failure_count, failure_alert_at, phase, progress_text, progress_current, \
    progress_total, checkpoint_json, pending_confirmation_id, pending_tool_request_json, \
    last_surface_id, resume_token, last_event_at, unread_result, paused_at, version, \
    current_attempt, owner, delivery_state, created_by, device_id";

pub(super) const RUN_COLUMNS: &str = "job_id, attempt, intended_at, catch_up, owner, started_at, \
    finished_at, outcome, reason, output_ref";

pub(super) const TERMINAL_SQL: &str = "('completed', 'failed', 'stopped', 'dispatched')";

pub(super) const OP_READ: &str = "agent_jobs.read";

pub(super) fn object(text: &str, column: &str, id: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(StoreError::corrupt(
            OP_READ,
            id,
            format!("{column} is not a JSON object"),
        )),
        Err(e) => Err(StoreError::corrupt(OP_READ, id, format!("{column}: {e}"))),
    }
}

pub(super) fn job_from_row(row: &Row<'_>) -> Result<StoredJob> {
    let id: i64 = col(row, "id", OP_READ)?;
    let key = id.to_string();
    let text = |name: &str| col::<String>(row, name, OP_READ);
    let int = |name: &str| col::<i64>(row, name, OP_READ);
    let delivery_state: Option<String> = col(row, "delivery_state", OP_READ)?;
    let job = AgentJob {
        id,
        job_type: parse_enum(JobType::parse, &text("type")?, OP_READ, &key)?,
        title: text("title")?,
        prompt: text("prompt")?,
        payload_json: object(&text("payload_json")?, "payload_json", &key)?,
        schedule_json: object(&text("schedule_json")?, "schedule_json", &key)?,
        session_target: text("session_target")?,
        delivery_json: object(&text("delivery_json")?, "delivery_json", &key)?,
        status: parse_enum(JobStatus::parse, &text("status")?, OP_READ, &key)?,
        created_at: int("created_at")?,
        updated_at: int("updated_at")?,
        next_run_at: int("next_run_at")?,
        running_at: int("running_at")?,
        last_run_at: int("last_run_at")?,
        last_result: text("last_result")?,
        failure_count: int("failure_count")?,
        failure_alert_at: int("failure_alert_at")?,
        phase: parse_enum(JobPhase::parse, &text("phase")?, OP_READ, &key)?,
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
        unread_result: int("unread_result")? != 0,
        paused_at: int("paused_at")?,
        device_id: col(row, "device_id", OP_READ)?,
    };
    Ok(StoredJob {
        job,
        version: int("version")?,
        attempt: int("current_attempt")?,
        owner: text("owner")?,
        delivery_state: delivery_state
            .map(|s| parse_enum(DeliveryState::parse, &s, OP_READ, &key))
            .transpose()?,
        created_by: text("created_by")?,
        host: None,
    })
}

pub(super) fn run_from_row(row: &Row<'_>) -> Result<JobRun> {
    const OP: &str = "agent_job_runs.read";
    let job_id: i64 = col(row, "job_id", OP)?;
    let outcome: String = col(row, "outcome", OP)?;
    Ok(JobRun {
        job_id,
        attempt: col(row, "attempt", OP)?,
        intended_at: col(row, "intended_at", OP)?,
        catch_up: col::<i64>(row, "catch_up", OP)? != 0,
        owner: col(row, "owner", OP)?,
        started_at: col(row, "started_at", OP)?,
        finished_at: col(row, "finished_at", OP)?,
        outcome: parse_enum(RunOutcome::parse, &outcome, OP, &job_id.to_string())?,
        reason: col(row, "reason", OP)?,
        output_ref: col(row, "output_ref", OP)?,
    })
}

pub(super) fn json_text(map: &Map<String, Value>) -> String {
    // Serialising a map with string keys cannot fail.
    Value::Object(map.clone()).to_string()
}

pub(super) fn get_in(conn: &Connection, op: &'static str, id: i64) -> Result<Option<StoredJob>> {
    Ok(collect(
        conn,
        op,
        &format!("SELECT {JOB_COLUMNS} FROM agent_jobs WHERE id = ?1"),
        [id],
        job_from_row,
    )?
    .into_iter()
    .next())
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
