//! The transactional writes of jobs on PostgreSQL: creation under the quota (trimming terminal
//! jobs to make room, §2.4), the compare-and-set write of a record on its `version` (and the
//! attempt's fence, and the lease of the daemon running it), the reason a conditional write
//! changed nothing, and the fenced end of a ledger row. The same rules as SQLite's `write.rs`.

use openphone_protocol::BUILTIN_RUNTIME_ID;
use openphone_store::{
    AttemptFinish, DeliveryState, JobQuota, NewAgentJob, OPERATOR_CREATOR, Result, RunOutcome,
    StoreError, StoredJob,
};
use postgres::Transaction;
use postgres::types::ToSql;

use super::lease::{Fence, epoch_in, live_leases, mine};
use super::rows::{
    JOB_COLUMNS, TERMINAL_SQL, conflict, get_in, job_from_row, json_text, not_found, sql_limit,
};
use crate::PgContext;

/// Live jobs of `created_by` (`None`: of every creator that is not the user).
fn live_count(tx: &mut Transaction<'_>, created_by: Option<&str>) -> Result<i64> {
    let sql = format!(
        "SELECT COUNT(*) FROM agent_jobs WHERE status NOT IN {TERMINAL_SQL} AND \
         CASE WHEN $1::text IS NULL \
         THEN created_by NOT IN ('{OPERATOR_CREATOR}', '{BUILTIN_RUNTIME_ID}') \
         ELSE created_by = $1 END"
    );
    Ok(tx
        .query_one(&sql, &[&created_by])
        .ctx("agent_jobs.create", "quota")?
        .get(0))
}

/// Takes the job creators' lock: creators of every daemon queue on it, one at a time, and only
/// then read the counts the quota needs. It must be the FIRST statement of the transaction: a
/// `LOCK` takes no snapshot, so the transaction's snapshot is taken after the wait and sees the
/// jobs the creator before it committed. Without it two daemons creating jobs at once each
/// count the table (`COUNT(*)` reads every row) while the other inserts into it, and
/// SERIALIZABLE aborts one of them — every time, under a steady load (a watcher's firing lost
/// ten tries in a row beside a daemon creating a job every 3–40 ms).
///
/// `SHARE ROW EXCLUSIVE` conflicts with itself and with the row writes of other transactions
/// (claims, updates), which wait for the creation to commit (a few statements) instead of
/// aborting it later; plain reads are never blocked. Taking it again in the same transaction
/// is free.
pub(crate) fn lock_for_create(tx: &mut Transaction<'_>) -> Result<()> {
    tx.batch_execute("LOCK TABLE agent_jobs IN SHARE ROW EXCLUSIVE MODE")
        .ctx("agent_jobs.create", "lock")
}

/// Inserts `news` (created by daemon `host_id`) after making room for them (§2.4): terminal
/// jobs are deleted, oldest `updated_at` first; when that is not enough nothing is written. A
/// runtime's jobs must also fit its own quota and the runtimes' share (`quota`); the user's
/// only `max_jobs`. For the watchers' firings too (a reaction job is created in the firing's
/// transaction).
///
/// Takes the creators' lock ([`lock_for_create`]) first; a transaction that runs any
/// statement before this call must take that lock as its own first statement, or it conflicts
/// with the other daemons' creators again.
pub(crate) fn create_limited_in(
    tx: &mut Transaction<'_>,
    news: &[NewAgentJob],
    now_ms: i64,
    quota: &JobQuota,
    host_id: &str,
) -> Result<Vec<StoredJob>> {
    const OP: &str = "agent_jobs.create";
    let max_jobs = quota.max_jobs;
    lock_for_create(tx)?;
    quota.check_news(news, |creator| live_count(tx, creator))?;
    let count: i64 = tx
        .query_one("SELECT COUNT(*) FROM agent_jobs", &[])
        .ctx(OP, "")?
        .get(0);
    let wanted = count.saturating_add(sql_limit(news.len()));
    let excess = wanted.saturating_sub(sql_limit(max_jobs));
    if excess > 0 {
        let deleted = tx
            .execute(
                &format!(
                    "DELETE FROM agent_jobs WHERE id IN (SELECT id FROM agent_jobs \
                     WHERE status IN {TERMINAL_SQL} ORDER BY updated_at, id LIMIT $1)"
                ),
                &[&excess],
            )
            .ctx(OP, "trim")?;
        if i64::try_from(deleted).unwrap_or(i64::MAX) < excess {
            return Err(quota.no_room());
        }
    }
    let insert = tx
        .prepare(&format!(
            "INSERT INTO agent_jobs (type, title, prompt, payload_json, schedule_json, \
             session_target, delivery_json, status, created_at, updated_at, next_run_at, \
             running_at, last_run_at, last_result, failure_count, failure_alert_at, phase, \
             progress_text, progress_current, progress_total, checkpoint_json, \
             pending_confirmation_id, pending_tool_request_json, last_surface_id, resume_token, \
             last_event_at, unread_result, paused_at, version, current_attempt, owner, \
             delivery_state, created_by, host_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $8, $9, 0, 0, '', 0, 0, 'queued', \
             'Queued', 0, 0, '{{}}', '', '{{}}', '', '', $8, FALSE, 0, 1, 0, '', NULL, $10, $11) \
             RETURNING {JOB_COLUMNS}"
        ))
        .ctx(OP, "")?;
    let mut created = Vec::with_capacity(news.len());
    for new in news {
        let row = tx
            .query_one(
                &insert,
                &[
                    &new.job_type.as_str(),
                    &new.title,
                    &new.prompt,
                    &json_text(&new.payload_json),
                    &json_text(&new.schedule_json),
                    &new.session_target,
                    &json_text(&new.delivery_json),
                    &now_ms,
                    &new.next_run_at,
                    &new.created_by,
                    &host_id,
                ],
            )
            .ctx(OP, &new.title)?;
        created.push(job_from_row(&row)?);
    }
    Ok(created)
}

/// Writes `next` over the row if the row is still at `next.version` and the lease is as
/// `lease` wants (with `finish`, also still owned by that attempt, whose ledger row is ended in
/// the same transaction); returns the row as written and, when the attempt's ledger row had
/// already been ended by someone else, what it said before the fenced end corrected it.
pub(super) fn write_in(
    tx: &mut Transaction<'_>,
    op: &'static str,
    next: &StoredJob,
    finish: Option<&AttemptFinish>,
    lease: &Fence,
) -> Result<(StoredJob, Option<RunOutcome>)> {
    let job = &next.job;
    next.check_finish(finish)?;
    let sql = format!(
        "UPDATE agent_jobs SET type = $2, title = $3, prompt = $4, payload_json = $5, \
         schedule_json = $6, session_target = $7, delivery_json = $8, status = $9, \
         updated_at = $10, next_run_at = $11, running_at = $12, last_run_at = $13, \
         last_result = $14, failure_count = $15, failure_alert_at = $16, phase = $17, \
         progress_text = $18, progress_current = $19, progress_total = $20, \
         checkpoint_json = $21, pending_confirmation_id = $22, \
         pending_tool_request_json = $23, last_surface_id = $24, resume_token = $25, \
         last_event_at = $26, unread_result = $27, paused_at = $28, delivery_state = $29, \
         version = version + 1 \
         WHERE id = $1 AND version = $30 AND created_at = $31 AND current_attempt = $32 \
         AND owner = $33 AND {}",
        lease.job_sql(34, "$9::text")
    );
    let texts = [
        json_text(&job.payload_json),
        json_text(&job.schedule_json),
        json_text(&job.delivery_json),
        json_text(&job.checkpoint_json),
        json_text(&job.pending_tool_request_json),
    ];
    let (job_type, status, phase) = (
        job.job_type.as_str(),
        job.status.as_str(),
        job.phase.as_str(),
    );
    let delivery = next.delivery_state.map(DeliveryState::as_str);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &job.id,
        &job_type,
        &job.title,
        &job.prompt,
        &texts[0],
        &texts[1],
        &job.session_target,
        &texts[2],
        &status,
        &job.updated_at,
        &job.next_run_at,
        &job.running_at,
        &job.last_run_at,
        &job.last_result,
        &job.failure_count,
        &job.failure_alert_at,
        &phase,
        &job.progress_text,
        &job.progress_current,
        &job.progress_total,
        &texts[3],
        &job.pending_confirmation_id,
        &texts[4],
        &job.last_surface_id,
        &job.resume_token,
        &job.last_event_at,
        &job.unread_result,
        &job.paused_at,
        &delivery,
        &next.version,
        &job.created_at,
        &next.attempt,
        &next.owner,
    ];
    lease.push_params(&mut params);
    let changed = tx.execute(&sql, &params).ctx(op, &job.id.to_string())?;
    if changed == 0 {
        return Err(refusal(tx, op, next, lease)?);
    }
    let mut written = next.clone();
    written.version += 1;
    let corrected = match finish {
        Some(finish) if !finish_run_in(tx, op, job.id, finish, lease)? => {
            correct_run_in(tx, op, job.id, finish)?
        }
        Some(_) | None => None,
    };
    Ok((written, corrected))
}

/// The fenced finish of `finish.attempt` found its ledger row already ended (something closed
/// the current attempt early, e.g. as `interrupted`): the fenced report is the authority on the
/// attempt its job row still names, so the row is written with the real end. Returns what the
/// row said before (`None`: there was no row to correct — trimmed).
fn correct_run_in(
    tx: &mut Transaction<'_>,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
) -> Result<Option<RunOutcome>> {
    let before = tx
        .query_opt(
            "SELECT outcome FROM agent_job_runs WHERE job_id = $1 AND attempt = $2 AND owner = $3",
            &[&job_id, &finish.attempt, &finish.owner],
        )
        .ctx(op, &job_id.to_string())?;
    let Some(before) = before else {
        return Ok(None);
    };
    let before: String = before.get(0);
    tx.execute(
        "UPDATE agent_job_runs SET finished_at = $4, outcome = $5, reason = $6, output_ref = $7 \
         WHERE job_id = $1 AND attempt = $2 AND owner = $3",
        &[
            &job_id,
            &finish.attempt,
            &finish.owner,
            &finish.finished_at,
            &finish.outcome.as_str(),
            &finish.reason,
            &finish.output_ref,
        ],
    )
    .ctx(op, &job_id.to_string())?;
    Ok(Some(
        RunOutcome::parse(&before).unwrap_or(RunOutcome::Interrupted),
    ))
}

/// Ends the ledger row of an attempt that is still `running` only when its job no longer runs
/// that attempt (status not `running`, or another attempt or owner in the job's fence): the
/// check and the close are one statement, so an attempt claimed after the caller looked is
/// never closed (the heartbeat's repair). A row of this daemon's lease, or of a dead lease
/// (`lease.rs`, judged at now = `finish.finished_at`), is closed; a row a live other daemon ran is that daemon's to close: `Conflict`, nothing
/// written. Returns whether a row was closed.
pub(super) fn close_stale_run_in(
    tx: &mut Transaction<'_>,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
    me: &str,
) -> Result<bool> {
    const STALE: &str = "job_id = $1 AND attempt = $2 AND owner = $3 AND outcome = 'running' \
        AND NOT EXISTS (SELECT 1 FROM agent_jobs WHERE id = $1 AND status = 'running' \
        AND current_attempt = $2 AND owner = $3)";
    let changed = tx
        .execute(
            &format!(
                "UPDATE agent_job_runs SET finished_at = $4, outcome = $5, reason = $6, \
                 output_ref = $7 WHERE {STALE} AND (lease_owner IS NULL \
                 OR (lease_owner, lease_epoch) IN {} \
                 OR (lease_owner, lease_epoch) NOT IN {})",
                mine("$8"),
                live_leases("$4")
            ),
            &[
                &job_id,
                &finish.attempt,
                &finish.owner,
                &finish.finished_at,
                &finish.outcome.as_str(),
                &finish.reason,
                &finish.output_ref,
                &me,
            ],
        )
        .ctx(op, &job_id.to_string())?;
    if changed == 1 {
        return Ok(true);
    }
    let held = tx
        .query_opt(
            &format!("SELECT lease_owner FROM agent_job_runs WHERE {STALE}"),
            &[&job_id, &finish.attempt, &finish.owner],
        )
        .ctx(op, &job_id.to_string())?;
    match held.and_then(|row| row.get::<_, Option<String>>(0)) {
        Some(host) => Err(StoreError::Conflict {
            table: "agent_job_runs",
            id: job_id.to_string(),
            detail: format!(
                "attempt {} runs under the lease of live daemon {host:?}: it is that daemon's \
                 to close",
                finish.attempt
            ),
        }),
        None => Ok(false),
    }
}

/// Why the conditional write of `next` changed no row.
fn refusal(
    tx: &mut Transaction<'_>,
    op: &'static str,
    next: &StoredJob,
    lease: &Fence,
) -> Result<StoreError> {
    let id = next.job.id;
    let Some(current) = get_in(tx, op, id)? else {
        return Ok(not_found(id));
    };
    Ok(if let Some(stale) = next.stale_against(&current) {
        stale
    } else if current.attempt != next.attempt || current.owner != next.owner {
        next.attempt_conflict(&current)
    } else {
        let row = tx
            .query_one(
                "SELECT lease_owner, lease_epoch FROM agent_jobs WHERE id = $1",
                &[&id],
            )
            .ctx(op, &id.to_string())?;
        let (holder, epoch): (Option<String>, Option<i64>) = (row.get(0), row.get(1));
        let me = match lease {
            Fence::Progress(me) | Fence::Finish(me) => {
                format!("{me:?} (epoch {})", epoch_in(tx, op, me)?)
            }
            Fence::Repair(owner, epoch) => format!("the repair of {owner:?} (epoch {epoch:?})"),
        };
        conflict(
            id,
            format!(
                "the lease of attempt {} is held by daemon {holder:?} (epoch {epoch:?}), not \
                 {me}: the run was taken over, nothing was written",
                next.attempt
            ),
        )
    })
}

/// Ends the ledger row of an attempt that is still `running`; an attempt already ended (or
/// trimmed) is left alone. With a daemon's own fence the row must run under its lease; a
/// repair's was checked on the job row in the same transaction.
pub(super) fn finish_run_in(
    tx: &mut Transaction<'_>,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
    lease: &Fence,
) -> Result<bool> {
    let outcome = finish.outcome.as_str();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &job_id,
        &finish.attempt,
        &finish.owner,
        &finish.finished_at,
        &outcome,
        &finish.reason,
        &finish.output_ref,
    ];
    let held = match lease {
        Fence::Progress(me) | Fence::Finish(me) => {
            params.push(me);
            format!(
                "(lease_owner IS NULL OR (lease_owner, lease_epoch) IN {})",
                mine("$8")
            )
        }
        Fence::Repair(..) => "TRUE".to_owned(),
    };
    let sql = format!(
        "UPDATE agent_job_runs SET finished_at = $4, outcome = $5, reason = $6, \
         output_ref = $7 WHERE job_id = $1 AND attempt = $2 AND owner = $3 \
         AND outcome = 'running' AND {held}"
    );
    let changed = tx.execute(&sql, &params).ctx(op, &job_id.to_string())?;
    Ok(changed == 1)
}

/// Why [`finish_run_in`] with this daemon's fence closed nothing: `Conflict` when the attempt
/// is still running under another daemon's lease (taken over), else `Ok(())` (already ended
/// or unknown).
pub(super) fn run_lease_refusal(
    tx: &mut Transaction<'_>,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
    me: &str,
) -> Result<()> {
    let row = tx
        .query_opt(
            "SELECT lease_owner, lease_epoch FROM agent_job_runs WHERE job_id = $1 \
             AND attempt = $2 AND owner = $3 AND outcome = 'running' AND lease_owner IS NOT NULL",
            &[&job_id, &finish.attempt, &finish.owner],
        )
        .ctx(op, &job_id.to_string())?;
    let Some(row) = row else {
        return Ok(());
    };
    let (holder, epoch): (String, i64) = (row.get(0), row.get(1));
    let mine = epoch_in(tx, op, me)?;
    Err(StoreError::Conflict {
        table: "agent_job_runs",
        id: job_id.to_string(),
        detail: format!(
            "attempt {} runs under the lease of daemon {holder:?} (epoch {epoch}), not {me:?} \
             (epoch {mine}): the run was taken over, nothing was written",
            finish.attempt
        ),
    })
}
