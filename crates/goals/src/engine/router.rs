//! Step 4 of the tick: the router of a started action to its executor — `tool` → the
//! ToolBridge, `agent_turn` and `job` → the attached backends, `wait` → a timer, `ask_user` →
//! a question blocker, `verify` → the success criteria. Every action kind is named here.

use openphone_core::Invocation;
use openphone_protocol::ToolStatus;

use super::{GoalEngine, Work, block, clip, failure_text, lost, retry_line};
use crate::error::GoalsError;
use crate::model::{ActionKind, ActionState, AttemptOutcome, Blocker, BlockerKind, EvidenceKind};
use crate::transition::Source;

impl GoalEngine {
    /// The side effect of an action that just became RUNNING or NEEDS_APPROVAL.
    pub(super) async fn execute(&self, work: &mut Work, id: &str) -> Result<(), GoalsError> {
        let now = self.now();
        let action = work.goal.action(id).cloned().ok_or_else(|| lost(id))?;
        let goal_id = work.goal.id.clone();
        let n = action.last_attempt().map_or(1, |a| a.n);
        match (&action.kind, action.state) {
            (ActionKind::Tool { command, params }, ActionState::NeedsApproval) => {
                // A durable confirmation bound to this exact request, in the interactive
                // context so the user can answer it.
                let mut request = Self::request(&work.goal, &action, command, params, n);
                request.timeout_ms = Some(openphone_protocol::MAX_TIMEOUT_MS);
                let result = self
                    .bridge
                    .call(
                        Invocation::goal_approval(&self.caller_for(&work.goal), request)
                            .on_device(work.goal.device_id.clone()),
                    )
                    .await;
                if let Some(pending) = result.pending_confirmation() {
                    let cid = pending.confirmation_id;
                    if let Some(att) = work.attempt_mut(id) {
                        att.confirmation_id = Some(cid.clone());
                        att.approval_expires_at = pending.expires_at_ms;
                    }
                    if let Some(a) = work.goal.action_mut(id) {
                        a.resume_token = Some(cid.clone());
                    }
                    let blk = format!("blk_{}", work.goal.next_seq());
                    work.goal.blockers.push(Blocker {
                        id: blk,
                        action_id: Some(id.to_owned()),
                        kind: BlockerKind::Approval,
                        reason: format!("approval needed: {}", pending.summary),
                        since: now,
                        resume_token: Some(cid.clone()),
                        how_to_resolve: format!("openphone confirmations approve {cid}"),
                    });
                } else if result.status == ToolStatus::Denied || result.status == ToolStatus::Error
                {
                    let why = failure_text(&result);
                    if let Some(att) = work.attempt_mut(id) {
                        att.outcome = AttemptOutcome::Failed;
                        att.finished_at = Some(now);
                        att.summary = why.clone();
                    }
                    work.mv(
                        id,
                        ActionState::Blocked,
                        Source::Policy,
                        &format!("the request for approval was refused: {why}"),
                        now,
                        block(
                            BlockerKind::Policy,
                            format!("policy:{id}"),
                            retry_line(&goal_id, id),
                        ),
                    )?;
                } else {
                    work.mv(
                        id,
                        ActionState::Running,
                        Source::Policy,
                        "allowed when asked",
                        now,
                        None,
                    )?;
                    self.tool_result(work, id, result, Source::Executor).await?;
                }
            }
            (ActionKind::Tool { command, params }, ActionState::Running) => {
                let request = Self::request(&work.goal, &action, command, params, n);
                let result = self
                    .bridge
                    .call(
                        Invocation::goal(&self.caller_for(&work.goal), &goal_id, request)
                            .on_device(work.goal.device_id.clone()),
                    )
                    .await;
                self.tool_result(work, id, result, Source::Executor).await?;
            }
            (ActionKind::Wait { until_ms, on }, _) => {
                let token = match on {
                    Some(on) => format!("event:{}", on.event),
                    None => format!("timer:{until_ms}"),
                };
                if let Some(a) = work.goal.action_mut(id) {
                    a.resume_token = Some(token);
                }
                if *until_ms <= now {
                    self.wait_over(work, id, now)?;
                }
            }
            (ActionKind::AskUser { question }, _) => {
                let token = format!("answer:{id}");
                if let Some(a) = work.goal.action_mut(id) {
                    a.resume_token = Some(token.clone());
                }
                let blk = format!("blk_{}", work.goal.next_seq());
                work.goal.blockers.push(Blocker {
                    id: blk,
                    action_id: Some(id.to_owned()),
                    kind: BlockerKind::Input,
                    reason: format!("question: {question}"),
                    since: now,
                    resume_token: Some(token),
                    how_to_resolve: format!(
                        "openphone goals answer {goal_id} {id} \"<your answer>\""
                    ),
                });
            }
            (ActionKind::Verify, _) => {
                let (ok, note) = self.criteria_hold(&work.goal).await;
                self.finish_other(work, id, ok, note, now)?;
            }
            (ActionKind::AgentTurn { prompt }, _) => match &self.backends.agent {
                Some(agent) => {
                    let session = action.session(&goal_id);
                    let device = work.goal.device_id.clone();
                    let outcome = agent
                        .agent_turn_on_device(&session, prompt, device.as_deref())
                        .await;
                    let now = self.now();
                    if let Ok(text) = &outcome {
                        work.evidence(
                            id,
                            EvidenceKind::Message,
                            format!("{session}: {}", clip(text)),
                            crate::ids::digest_text(text),
                            now,
                        );
                    }
                    let (ok, note) = match outcome {
                        Ok(text) => (true, clip(&text)),
                        Err(e) => (false, e),
                    };
                    self.finish_other(work, id, ok, note, now)?;
                }
                None => self.no_backend(work, id, "agent_turn", now)?,
            },
            (
                ActionKind::Job {
                    title,
                    prompt,
                    run_at,
                },
                _,
            ) => match &self.backends.jobs {
                Some(jobs) => {
                    let title = if title.is_empty() {
                        &action.title
                    } else {
                        title
                    };
                    // Keyed by the attempt: a job made before a crash is found again, never
                    // made twice (`events.rs`, `ingest_job`, adopts it on recovery).
                    let key = action
                        .last_attempt()
                        .map(|a| a.idempotency_key.clone())
                        .unwrap_or_else(|| format!("{goal_id}:{id}:{n}"));
                    let device = work.goal.device_id.clone();
                    let outcome = jobs
                        .create_job_on_device(&key, title, prompt, *run_at, device.as_deref())
                        .await;
                    let now = self.now();
                    match outcome {
                        // The action runs until the job's run finishes (`events.rs`,
                        // `ingest_job`): the goal is ticked when the job changes.
                        Ok(job) => {
                            work.evidence(
                                id,
                                EvidenceKind::Artifact,
                                format!("job {job}"),
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
                        Err(e) => self.finish_other(work, id, false, e, now)?,
                    }
                }
                None => self.no_backend(work, id, "job", now)?,
            },
            // A tool action starts only as RUNNING or NEEDS_APPROVAL: in any other state
            // there is nothing to execute.
            (
                ActionKind::Tool { .. },
                ActionState::Planned
                | ActionState::Ready
                | ActionState::Verifying
                | ActionState::Done
                | ActionState::Blocked
                | ActionState::Aborted,
            ) => {}
        }
        Ok(())
    }

    pub(super) fn no_backend(
        &self,
        work: &mut Work,
        id: &str,
        kind: &str,
        now: i64,
    ) -> Result<(), GoalsError> {
        if let Some(att) = work.attempt_mut(id) {
            att.outcome = AttemptOutcome::Failed;
            att.finished_at = Some(now);
            att.summary = format!("no {kind} backend is attached");
        }
        let goal_id = work.goal.id.clone();
        let missing = if kind == "agent_turn" {
            " (configure the built-in runtime's model: a [builtin] table)"
        } else {
            ""
        };
        work.mv(
            id,
            ActionState::Blocked,
            Source::Executor,
            &format!("no {kind} backend is attached to this daemon{missing}"),
            now,
            block(
                BlockerKind::External,
                format!("retry:{id}"),
                retry_line(&goal_id, id),
            ),
        )?;
        Ok(())
    }
}
