//! What reaches a goal from outside its own executions (§3, "a tick runs when something
//! happens"): events on the daemon's bus — a message, call or notification on the phone, a
//! watcher firing, a runtime's final message — that end `wait` actions waiting `on` them, and
//! the runs of the agent jobs that `job` actions wait for.
//!
//! An event is ingested into every open goal with a RUNNING `wait` whose `on` it matches (the
//! wait's attempt started before the event): the wait becomes DONE with the event as `message`
//! evidence, stored under the goal's lock before anything else happens, and the caller ticks
//! those goals. A `wait` whose `until_ms` passes first is BLOCKED (external), naming what did
//! not arrive; a plain `wait` (no `on`) is DONE at its time, as before. A phone event whose
//! sender the `[wake]` allowlists refuse is ingested nowhere (audited as `wake.dropped`).

use openphone_protocol::endpoint::GoalWaitOn;
use serde_json::Value;

use super::{GoalEngine, JobProgress, Work, block, clip, retry_line};
use crate::error::GoalsError;
use crate::model::{
    Action, ActionKind, ActionState, AttemptOutcome, BlockerKind, EvidenceKind, Goal, GoalState,
};
use crate::predicate::Predicate;
use crate::transition::Source;

/// One event of the daemon's bus, as a goal may wait for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Happening {
    /// The manifest event name (`phone.message.received`, `watcher.fired`, …).
    pub event: String,
    /// Its payload.
    pub payload: Value,
    /// When it was seen (Unix ms).
    pub at: i64,
    /// The runtime the event concerns (the bus audience: the runtime whose session ended
    /// with a `runtime.message.final`, whose watcher fired); `None`: every runtime's.
    pub audience: Option<String>,
}

/// The runtime a goal belongs to when a runtime (not the operator) made it: such a goal sees
/// only events meant for that runtime, and keeps no event text as evidence.
fn runtime_owner(goal: &Goal) -> Option<&str> {
    if goal.owner.surface == "runtime" {
        goal.owner.runtime.as_deref()
    } else {
        None
    }
}

/// Whether `goal` may see `happening` at all: a runtime's goal sees events meant for every
/// runtime or for its owner, and a runtime's final message or a watcher's firing only when
/// they are its owner's own (another runtime's replies are not its to read).
fn visible_to(goal: &Goal, happening: &Happening) -> bool {
    let Some(owner) = runtime_owner(goal) else {
        return true;
    };
    match happening.audience.as_deref() {
        Some(runtime) => runtime == owner,
        None => !matches!(
            happening.event.as_str(),
            "runtime.message.final" | "watcher.fired"
        ),
    }
}

/// The predicates of `on`, or why one of them is not a predicate (`where[i]` named).
pub fn wait_predicates(on: &GoalWaitOn) -> Result<Vec<Predicate>, (usize, String)> {
    on.conditions
        .iter()
        .enumerate()
        .map(|(i, v)| serde_json::from_value(v.clone()).map_err(|e| (i, e.to_string())))
        .collect()
}

/// Whether `happening` ends a wait `on` it.
fn matches(on: &GoalWaitOn, happening: &Happening) -> bool {
    on.event == happening.event
        && wait_predicates(on).is_ok_and(|ps| ps.iter().all(|p| p.check(&happening.payload).0))
}

/// The RUNNING waits of `goal` that `happening` ends.
fn waits_ended(goal: &Goal, happening: &Happening) -> Vec<String> {
    goal.actions
        .iter()
        .filter(|a| a.state == ActionState::Running)
        .filter(|a| match &a.kind {
            ActionKind::Wait { on: Some(on), .. } => {
                visible_to(goal, happening)
                    && matches(on, happening)
                    && a.last_attempt()
                        .is_none_or(|t| t.started_at <= happening.at)
            }
            ActionKind::Wait { on: None, .. }
            | ActionKind::Tool { .. }
            | ActionKind::AgentTurn { .. }
            | ActionKind::Job { .. }
            | ActionKind::AskUser { .. }
            | ActionKind::Verify => false,
        })
        .map(|a| a.id.clone())
        .collect()
}

/// The agent jobs the RUNNING `job` actions of `goal` wait for.
pub fn waiting_jobs(goal: &Goal) -> Vec<i64> {
    goal.actions
        .iter()
        .filter(|a| a.state == ActionState::Running && matches!(a.kind, ActionKind::Job { .. }))
        .filter_map(|a| a.last_attempt().and_then(|t| t.job_id))
        .collect()
}

/// A goal blocked only because its criteria do not hold yet: something that happened may
/// make them hold.
fn waits_on_criteria(goal: &Goal) -> bool {
    goal.state == GoalState::Blocked
        && goal
            .blockers
            .iter()
            .any(|b| b.action_id.is_none() && b.kind == BlockerKind::External)
}

impl GoalEngine {
    /// Ingests `happening` into every open goal it concerns: RUNNING waits `on` it become DONE
    /// (stored at once, with the event as evidence). The ids of the goals to tick now: those
    /// whose waits it ended, and the goals blocked only on their success criteria.
    ///
    /// A phone event from a sender the `[wake]` allowlists refuse (`docs/security.md`) ends no
    /// wait and wakes no goal: the goals it would have woken are named in a `wake.dropped`
    /// audit record (never the message's text), and none is returned.
    pub async fn observe(&self, happening: &Happening) -> Result<Vec<String>, GoalsError> {
        let open = self.list(
            &[GoalState::Active, GoalState::Blocked, GoalState::Paused],
            None,
        )?;
        if let Some((source, sender)) =
            openphone_core::wake::event_sender(&happening.event, &happening.payload)
            && !self.bridge.wake_admits(&sender)
        {
            let would: Vec<String> = open
                .iter()
                .filter(|g| !waits_ended(g, happening).is_empty() || waits_on_criteria(g))
                .map(|g| g.id.clone())
                .collect();
            if !would.is_empty() {
                self.bridge
                    .record_goal_wake_dropped(source, &sender, &would);
            }
            return Ok(Vec::new());
        }
        let mut wake = Vec::new();
        for goal in open {
            if !waits_ended(&goal, happening).is_empty() {
                self.update(&goal.id, |work, now| {
                    // Read again under the lock: a tick may have moved them meanwhile.
                    for id in waits_ended(&work.goal, happening) {
                        end_wait(work, &id, happening, now)?;
                    }
                    Ok(())
                })
                .await?;
                wake.push(goal.id);
            } else if waits_on_criteria(&goal) {
                wake.push(goal.id);
            }
        }
        Ok(wake)
    }

    /// A wait whose time came: a plain wait is over (DONE); a wait `on` an event that did not
    /// come is BLOCKED (external), naming it.
    pub(super) fn wait_over(&self, work: &mut Work, id: &str, now: i64) -> Result<(), GoalsError> {
        let on = match work.goal.action(id).map(|a| &a.kind) {
            Some(ActionKind::Wait { on, until_ms }) => on.clone().map(|on| (on, *until_ms)),
            _ => None,
        };
        let Some((on, until)) = on else {
            if let Some(att) = work.attempt_mut(id) {
                att.outcome = AttemptOutcome::Ok;
                att.finished_at = Some(now);
            }
            work.mv(
                id,
                ActionState::Verifying,
                Source::Executor,
                "the wait is over",
                now,
                None,
            )?;
            return work.mv(
                id,
                ActionState::Done,
                Source::Verifier,
                "nothing to check",
                now,
                None,
            );
        };
        let what = describe(&on);
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = AttemptOutcome::Failed;
            att.finished_at = Some(now);
            att.summary = format!("no {what} by {until}");
        }
        let goal_id = work.goal.id.clone();
        work.mv(
            id,
            ActionState::Blocked,
            Source::Executor,
            &format!("waited until {until}: no {what} arrived"),
            now,
            block(
                BlockerKind::External,
                format!("event:{id}"),
                format!(
                    "openphone goals plan {goal_id} <plan.json> (a later wait or another step), \
                     or openphone goals abort {goal_id} {id} (its alternatives then run)"
                ),
            ),
        )
    }

    /// A RUNNING `job` action: its job's run decides (§3, the router: `job` → the job
    /// service). Still running → nothing; succeeded → VERIFYING → DONE; failed → the action's
    /// failure path (a new attempt, a new job, while budget remains; the failed job is stopped
    /// so it does not retry beside it); stopped → BLOCKED. Without a recorded job (the daemon
    /// stopped between creating it and recording it) the outcome is unknown.
    pub(super) async fn ingest_job(
        &self,
        work: &mut Work,
        action: &Action,
        now: i64,
    ) -> Result<(), GoalsError> {
        let id = action.id.as_str();
        let Some(backend) = self.backends.jobs.clone() else {
            return self.unknown(work, id, now, "no job backend is attached to read its job");
        };
        let recorded = action.last_attempt().and_then(|a| a.job_id);
        let job = match recorded {
            Some(job) => Some(job),
            // The daemon stopped between creating the job and recording it: the job made
            // for this attempt's key is adopted (it runs; a second one is never made).
            None => match action.last_attempt() {
                Some(att) => backend.job_by_key(&att.idempotency_key).await,
                None => None,
            },
        };
        let Some(job) = job else {
            return self.unknown(work, id, now, "the daemon stopped while it created its job");
        };
        if recorded.is_none() {
            work.evidence(
                id,
                EvidenceKind::Artifact,
                format!("job {job} (adopted after a restart)"),
                crate::ids::digest_text(&job.to_string()),
                now,
            );
            if let Some(att) = work.attempt_mut(id) {
                att.job_id = Some(job);
                att.summary = format!("job {job} scheduled");
            }
            if let Some(a) = work.goal.action_mut(id) {
                a.resume_token = Some(format!("job:{job}"));
            }
        }
        match backend.progress(job).await {
            JobProgress::Pending(note) => {
                if let Some(att) = work.attempt_mut(id) {
                    att.summary = format!("job {job}: {note}");
                }
                Ok(())
            }
            JobProgress::Succeeded(result) => {
                work.evidence(
                    id,
                    EvidenceKind::Message,
                    format!("job {job}: {}", clip(&result)),
                    crate::ids::digest_text(&result),
                    now,
                );
                self.finish_other(work, id, true, format!("job {job} finished"), now)
            }
            JobProgress::Failed { reason, live } => {
                if live && let Err(e) = backend.stop_job(job).await {
                    tracing::warn!(job, error = %e, "goals: stopping a failed job failed");
                }
                self.finish_other(work, id, false, format!("job {job} failed: {reason}"), now)
            }
            JobProgress::Stopped => {
                if let Some(att) = work.attempt_mut(id) {
                    att.outcome = AttemptOutcome::Failed;
                    att.finished_at = Some(now);
                    att.summary = format!("job {job} was stopped");
                }
                let goal_id = work.goal.id.clone();
                work.mv(
                    id,
                    ActionState::Blocked,
                    Source::Executor,
                    &format!("job {job} was stopped before its run finished"),
                    now,
                    block(
                        BlockerKind::External,
                        format!("retry:{id}"),
                        retry_line(&goal_id, id),
                    ),
                )
            }
            JobProgress::Gone(why) => {
                self.unknown(work, id, now, &format!("job {job} cannot be read: {why}"))
            }
        }
    }
}

/// What a wait `on` waits for, for a person.
fn describe(on: &GoalWaitOn) -> String {
    if on.conditions.is_empty() {
        return on.event.clone();
    }
    let conditions: Vec<String> = on.conditions.iter().map(Value::to_string).collect();
    format!("{} where {}", on.event, conditions.join(" and "))
}

/// A RUNNING wait that `happening` ends: the event is evidence, the wait is DONE.
fn end_wait(work: &mut Work, id: &str, happening: &Happening, now: i64) -> Result<(), GoalsError> {
    // A runtime's goal keeps the event's kind and digest only: its owner reads the goal, and
    // the payload (a message's text and sender) is not its owner's to read through it.
    let summary = if runtime_owner(&work.goal).is_some() {
        format!("{} (payload kept as its digest only)", happening.event)
    } else {
        format!(
            "{}: {}",
            happening.event,
            clip(&happening.payload.to_string())
        )
    };
    work.evidence(
        id,
        EvidenceKind::Message,
        summary,
        crate::ids::digest(&happening.payload),
        now,
    );
    if let Some(att) = work.attempt_mut(id) {
        att.outcome = AttemptOutcome::Ok;
        att.finished_at = Some(now);
        att.summary = format!("{} arrived", happening.event);
    }
    work.goal
        .blockers
        .retain(|b| b.action_id.as_deref() != Some(id));
    work.mv(
        id,
        ActionState::Verifying,
        Source::Executor,
        &format!("{} arrived", happening.event),
        now,
        None,
    )?;
    work.mv(
        id,
        ActionState::Done,
        Source::Verifier,
        "the event it waited for came",
        now,
        None,
    )
}
