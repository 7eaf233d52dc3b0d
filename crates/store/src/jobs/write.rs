//! The transactional writes of jobs: creation under the quota (trimming terminal jobs to make
//! room, §2.4), the compare-and-set write of a record on its `version` (and the attempt's
//! fence), the reason a conditional write changed nothing, and the fenced end of a ledger row.

use openphone_protocol::BUILTIN_RUNTIME_ID;
use rusqlite::{Connection, OptionalExtension, params};

use super::rows::{TERMINAL_SQL, conflict, get_in, json_text, not_found};
use super::{
    AttemptFinish, DeliveryState, JobQuota, NewAgentJob, OPERATOR_CREATOR, RunOutcome, StoredJob,
    is_user_creator,
};
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::wire::sql_limit;

/// [`create_limited_in`] under the default quota for `max_jobs` ([`JobQuota::for_max`]).
pub(crate) fn create_in(
    tx: &Connection,
    news: &[NewAgentJob],
    now_ms: i64,
    max_jobs: usize,
) -> Result<Vec<StoredJob>> {
    create_limited_in(tx, news, now_ms, &JobQuota::for_max(max_jobs))
}

/// Live jobs of `created_by` (`None`: of every creator that is not the user).
pub(super) fn live_count(tx: &Connection, created_by: Option<&str>) -> Result<i64> {
    let sql = format!(
        "SELECT COUNT(*) FROM agent_jobs WHERE status NOT IN {TERMINAL_SQL} AND          CASE WHEN ?1 IS NULL THEN created_by NOT IN ('{OPERATOR_CREATOR}', '{BUILTIN_RUNTIME_ID}')          ELSE created_by = ?1 END"
    );
    tx.prepare_cached(&sql)
        .and_then(|mut s| s.query_row([created_by], |r| r.get(0)))
        .ctx("agent_jobs.create", "quota")
}

// The backend-neutral rules of creation and of the conditional write, shared with the
// PostgreSQL store (which counts and reads its own rows).
impl JobQuota {
    /// Refuses `news` when a runtime among their creators would hold more live jobs than this
    /// quota lets it (its own `per_runtime`, or the runtimes' share together); `live(Some(c))`
    /// counts the live jobs of creator `c`, `live(None)` those of every creator not the user.
    #[doc(hidden)]
    pub fn check_news(
        &self,
        news: &[NewAgentJob],
        mut live: impl FnMut(Option<&str>) -> Result<i64>,
    ) -> Result<()> {
        let mut by_creator: std::collections::BTreeMap<&str, i64> = Default::default();
        for new in news.iter().filter(|n| !is_user_creator(&n.created_by)) {
            *by_creator.entry(new.created_by.as_str()).or_default() += 1;
        }
        if by_creator.is_empty() {
            return Ok(());
        }
        for (creator, adding) in &by_creator {
            let live = live(Some(creator))?;
            if live.saturating_add(*adding) > sql_limit(self.per_runtime) {
                return Err(StoreError::LimitReached {
                    what: "live agent jobs of one runtime",
                    limit: self.per_runtime,
                    detail: format!(
                        "runtime `{creator}` already has {live} live jobs; stop or finish one first"
                    ),
                });
            }
        }
        let adding: i64 = by_creator.values().sum();
        let live = live(None)?;
        if live.saturating_add(adding) > sql_limit(self.runtime_share()) {
            return Err(StoreError::LimitReached {
                what: "live agent jobs of runtimes",
                limit: self.runtime_share(),
                detail: format!(
                    "runtimes hold {live} live jobs together; the rest of the {} is the user's",
                    self.max_jobs
                ),
            });
        }
        Ok(())
    }

    /// The refusal when deleting terminal jobs did not make room for new ones.
    #[doc(hidden)]
    #[must_use]
    pub fn no_room(&self) -> StoreError {
        StoreError::LimitReached {
            what: "agent jobs",
            limit: self.max_jobs,
            detail: "every stored job is live; stop or finish one first".to_owned(),
        }
    }
}

impl StoredJob {
    /// Refuses a write of `self` carrying the report `finish` of another attempt.
    #[doc(hidden)]
    pub fn check_finish(&self, finish: Option<&AttemptFinish>) -> Result<()> {
        if let Some(finish) = finish
            && (finish.attempt != self.attempt || finish.owner != self.owner)
        {
            return Err(conflict(
                self.job.id,
                format!(
                    "the report of attempt {} of {:?} does not belong to attempt {} of {:?}",
                    finish.attempt, finish.owner, self.attempt, self.owner
                ),
            ));
        }
        Ok(())
    }

    /// Why a conditional write of `self` changed no row, the stored row being `current`: its
    /// version moved on or `created_at` was changed; `None` when neither.
    #[doc(hidden)]
    #[must_use]
    pub fn stale_against(&self, current: &StoredJob) -> Option<StoreError> {
        let id = self.job.id;
        if current.version != self.version {
            Some(conflict(
                id,
                format!(
                    "version {} was expected, the stored row is at {}",
                    self.version, current.version
                ),
            ))
        } else if current.job.created_at != self.job.created_at {
            Some(StoreError::Invalid {
                what: "agent job update",
                detail: format!("created_at of job {id} cannot change"),
            })
        } else {
            None
        }
    }

    /// The refusal of a write of `self` by another attempt than the stored row's `current`.
    #[doc(hidden)]
    #[must_use]
    pub fn attempt_conflict(&self, current: &StoredJob) -> StoreError {
        conflict(
            self.job.id,
            format!(
                "attempt {} of {:?} is not the stored attempt {} of {:?}",
                self.attempt, self.owner, current.attempt, current.owner
            ),
        )
    }
}

/// Inserts `new` jobs after making room for them (§2.4): terminal jobs are deleted, oldest
/// `updated_at` first; when that is not enough nothing is written. A runtime's jobs must also
/// fit its own quota and the runtimes' share (`quota`); the user's only `max_jobs`.
pub(crate) fn create_limited_in(
    tx: &Connection,
    news: &[NewAgentJob],
    now_ms: i64,
    quota: &JobQuota,
) -> Result<Vec<StoredJob>> {
    const OP: &str = "agent_jobs.create";
    let max_jobs = quota.max_jobs;
    quota.check_news(news, |creator| live_count(tx, creator))?;
    let count: i64 = tx
        .row_cached("SELECT COUNT(*) FROM agent_jobs", [], |r| r.get(0))
        .ctx(OP, "")?;
    let wanted = count.saturating_add(sql_limit(news.len()));
    let excess = wanted.saturating_sub(sql_limit(max_jobs));
    if excess > 0 {
        let deleted = tx
            .prepare_cached(&format!(
                "DELETE FROM agent_jobs WHERE id IN (SELECT id FROM agent_jobs \
                 WHERE status IN {TERMINAL_SQL} ORDER BY updated_at, id LIMIT ?1)"
            ))
            .and_then(|mut s| s.execute([excess]))
            .ctx(OP, "trim")?;
        if sql_limit(deleted) < excess {
            return Err(quota.no_room());
        }
    }
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO agent_jobs (type, title, prompt, payload_json, schedule_json, \
             session_target, delivery_json, status, created_at, updated_at, next_run_at, \
             running_at, last_run_at, last_result, failure_count, failure_alert_at, phase, \
             progress_text, progress_current, progress_total, checkpoint_json, \
             pending_confirmation_id, pending_tool_request_json, last_surface_id, resume_token, \
             last_event_at, unread_result, paused_at, version, current_attempt, owner, \
             delivery_state, created_by) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?8, ?9, 0, 0, '', 0, 0, 'queued', \
             'Queued', 0, 0, '{}', '', '{}', '', '', ?8, 0, 0, 1, 0, '', NULL, ?10)",
        )
        .ctx(OP, "")?;
    let mut ids = Vec::with_capacity(news.len());
    for new in news {
        insert
            .execute(params![
                new.job_type.as_str(),
                new.title,
                new.prompt,
                json_text(&new.payload_json),
                json_text(&new.schedule_json),
                new.session_target,
                json_text(&new.delivery_json),
                now_ms,
                new.next_run_at,
                new.created_by,
            ])
            .ctx(OP, &new.title)?;
        ids.push(tx.last_insert_rowid());
    }
    ids.into_iter()
        .map(|id| get_in(tx, OP, id)?.ok_or_else(|| not_found(id)))
        .collect()
}

/// Writes `next` over the row if the row is still at `next.version` (and, with `fence`, still
/// owned by that attempt, whose ledger row is ended in the same transaction); returns the row
/// as written and, when the attempt's ledger row had already been ended by someone else, what
/// it said before the fenced end corrected it.
pub(super) fn write_in(
    tx: &Connection,
    op: &'static str,
    next: &StoredJob,
    fence: Option<&AttemptFinish>,
) -> Result<(StoredJob, Option<RunOutcome>)> {
    let job = &next.job;
    next.check_finish(fence)?;
    // One conditional statement; the reasons for a refusal are looked up only when it is one.
    let changed = tx
        .prepare_cached(
            "UPDATE agent_jobs SET type = ?2, title = ?3, prompt = ?4, payload_json = ?5, \
             schedule_json = ?6, session_target = ?7, delivery_json = ?8, status = ?9, \
             updated_at = ?10, next_run_at = ?11, running_at = ?12, last_run_at = ?13, \
             last_result = ?14, failure_count = ?15, failure_alert_at = ?16, phase = ?17, \
             progress_text = ?18, progress_current = ?19, progress_total = ?20, \
             checkpoint_json = ?21, pending_confirmation_id = ?22, \
             pending_tool_request_json = ?23, last_surface_id = ?24, resume_token = ?25, \
             last_event_at = ?26, unread_result = ?27, paused_at = ?28, delivery_state = ?29, \
             version = version + 1 \
             WHERE id = ?1 AND version = ?30 AND created_at = ?31 AND current_attempt = ?32 \
             AND owner = ?33",
        )
        .and_then(|mut s| {
            s.execute(params![
                job.id,
                job.job_type.as_str(),
                job.title,
                job.prompt,
                json_text(&job.payload_json),
                json_text(&job.schedule_json),
                job.session_target,
                json_text(&job.delivery_json),
                job.status.as_str(),
                job.updated_at,
                job.next_run_at,
                job.running_at,
                job.last_run_at,
                job.last_result,
                job.failure_count,
                job.failure_alert_at,
                job.phase.as_str(),
                job.progress_text,
                job.progress_current,
                job.progress_total,
                json_text(&job.checkpoint_json),
                job.pending_confirmation_id,
                json_text(&job.pending_tool_request_json),
                job.last_surface_id,
                job.resume_token,
                job.last_event_at,
                job.unread_result,
                job.paused_at,
                next.delivery_state.map(DeliveryState::as_str),
                next.version,
                job.created_at,
                next.attempt,
                next.owner,
            ])
        })
        .ctx(op, &job.id.to_string())?;
    if changed == 0 {
        return Err(refusal(tx, op, next)?);
    }
    let mut written = next.clone();
    written.version += 1;
    let corrected = match fence {
        Some(finish) if !finish_run_in(tx, op, job.id, finish)? => {
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
    tx: &Connection,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
) -> Result<Option<RunOutcome>> {
    let before: Option<String> = tx
        .prepare_cached(
            "SELECT outcome FROM agent_job_runs WHERE job_id = ?1 AND attempt = ?2 AND owner = ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![job_id, finish.attempt, finish.owner], |r| r.get(0))
                .optional()
        })
        .ctx(op, &job_id.to_string())?;
    let Some(before) = before else {
        return Ok(None);
    };
    tx.prepare_cached(
        "UPDATE agent_job_runs SET finished_at = ?4, outcome = ?5, reason = ?6, output_ref = ?7 \
         WHERE job_id = ?1 AND attempt = ?2 AND owner = ?3",
    )
    .and_then(|mut s| {
        s.execute(params![
            job_id,
            finish.attempt,
            finish.owner,
            finish.finished_at,
            finish.outcome.as_str(),
            finish.reason,
            finish.output_ref,
        ])
    })
    .ctx(op, &job_id.to_string())?;
    Ok(Some(
        RunOutcome::parse(&before).unwrap_or(RunOutcome::Interrupted),
    ))
}

/// Ends the ledger row of an attempt that is still `running` only when its job no longer runs
/// that attempt (status not `running`, or another attempt or owner in the job's fence): the
/// check and the close are one statement, so an attempt claimed after the caller looked is
/// never closed (the heartbeat's repair). Returns whether a row was closed.
pub(super) fn close_stale_run_in(
    tx: &Connection,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
) -> Result<bool> {
    let changed = tx
        .prepare_cached(
            "UPDATE agent_job_runs SET finished_at = ?4, outcome = ?5, reason = ?6, \
             output_ref = ?7 WHERE job_id = ?1 AND attempt = ?2 AND owner = ?3 \
             AND outcome = 'running' AND NOT EXISTS (SELECT 1 FROM agent_jobs \
             WHERE id = ?1 AND status = 'running' AND current_attempt = ?2 AND owner = ?3)",
        )
        .and_then(|mut s| {
            s.execute(params![
                job_id,
                finish.attempt,
                finish.owner,
                finish.finished_at,
                finish.outcome.as_str(),
                finish.reason,
                finish.output_ref,
            ])
        })
        .ctx(op, &job_id.to_string())?;
    Ok(changed == 1)
}

/// Why the conditional write of `next` changed no row.
pub(super) fn refusal(tx: &Connection, op: &'static str, next: &StoredJob) -> Result<StoreError> {
    let id = next.job.id;
    let Some(current) = get_in(tx, op, id)? else {
        return Ok(not_found(id));
    };
    Ok(next
        .stale_against(&current)
        .unwrap_or_else(|| next.attempt_conflict(&current)))
}

/// Ends the ledger row of an attempt that is still `running`; an attempt already ended (or
/// trimmed) is left alone.
pub(super) fn finish_run_in(
    tx: &Connection,
    op: &'static str,
    job_id: i64,
    finish: &AttemptFinish,
) -> Result<bool> {
    let changed = tx
        .prepare_cached(
            "UPDATE agent_job_runs SET finished_at = ?4, outcome = ?5, reason = ?6, \
             output_ref = ?7 WHERE job_id = ?1 AND attempt = ?2 AND owner = ?3 \
             AND outcome = 'running'",
        )
        .and_then(|mut s| {
            s.execute(params![
                job_id,
                finish.attempt,
                finish.owner,
                finish.finished_at,
                finish.outcome.as_str(),
                finish.reason,
                finish.output_ref,
            ])
        })
        .ctx(op, &job_id.to_string())?;
    Ok(changed == 1)
}
