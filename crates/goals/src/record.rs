//! The goal's wire record: the [`GoalRecord`] the endpoint and the CLI show for a goal, built
//! from the goal layer's document member by member (its bookkeeping, `seq` and `reported`,
//! stays behind; the store's `version` comes along); and the records of its stored
//! transitions and reports.

use openphone_protocol::endpoint::{
    GoalActionRecord, GoalAttemptRecord, GoalBlockerRecord, GoalCheckpointRecord,
    GoalCriterionRecord, GoalEvidenceRecord, GoalReadCheckRecord, GoalRecord, GoalReportInfo,
    GoalTransitionInfo,
};
use openphone_store::{GoalReport, GoalTransition};
use serde::Serialize;
use serde_json::Value;

use crate::model::{Action, Attempt, Blocker, Checkpoint, Criterion, Evidence, Goal, ReadCheck};
use crate::report::render_plain;

/// The wire name of a serialisable enum value (its JSON string).
fn name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The record of `goal`.
pub fn goal_record(goal: &Goal) -> GoalRecord {
    GoalRecord {
        id: goal.id.clone(),
        objective: goal.objective.clone(),
        success_criteria: goal.success_criteria.iter().map(criterion_record).collect(),
        deadline_at: goal.deadline_at,
        risk_level: name(&goal.risk_level),
        autonomy: goal.autonomy.clone(),
        device_id: goal.device_id.clone(),
        owner: goal.owner.clone(),
        planner: goal.planner.clone(),
        state: goal.state.as_str().to_owned(),
        plan_version: goal.plan_version,
        actions: goal.actions.iter().map(action_record).collect(),
        blockers: goal.blockers.iter().map(blocker_record).collect(),
        evidence: goal.evidence.iter().map(evidence_record).collect(),
        retry_budget: goal.retry_budget,
        checkpoints: goal.checkpoints.iter().map(checkpoint_record).collect(),
        delivery: goal.delivery.as_str().to_owned(),
        max_parallel: goal.max_parallel,
        created_at: goal.created_at,
        updated_at: goal.updated_at,
        version: goal.version,
    }
}

/// The record of one action.
pub fn action_record(action: &Action) -> GoalActionRecord {
    GoalActionRecord {
        id: action.id.clone(),
        title: action.title.clone(),
        kind: Some(action.kind.clone()),
        state: action.state.as_str().to_owned(),
        depends_on: action.depends_on.clone(),
        alternatives: action.alternatives.clone(),
        optional: action.optional,
        expect: action.expect.as_ref().map(read_check_record),
        estimate_ms: action.estimate_ms,
        attempts: action.attempts.iter().map(attempt_record).collect(),
        resume_token: action.resume_token.clone(),
        session_target: action.session_target.clone(),
        not_before: action.not_before,
        decision: action.decision.clone(),
        plan_version: action.plan_version,
        proposal: action.proposal.clone(),
    }
}

fn read_check_record(check: &ReadCheck) -> GoalReadCheckRecord {
    GoalReadCheckRecord {
        command: check.command.clone(),
        params: check.params.clone(),
        predicate: serde_json::to_value(&check.predicate).unwrap_or(Value::Null),
    }
}

fn attempt_record(attempt: &Attempt) -> GoalAttemptRecord {
    GoalAttemptRecord {
        n: attempt.n,
        idempotency_key: attempt.idempotency_key.clone(),
        started_at: attempt.started_at,
        finished_at: attempt.finished_at,
        outcome: name(&attempt.outcome),
        decision_proof_digest: attempt.decision_proof_digest.clone(),
        result_digest: attempt.result_digest.clone(),
        summary: attempt.summary.clone(),
        confirmation_id: attempt.confirmation_id.clone(),
        approval_expires_at: attempt.approval_expires_at,
        job_id: attempt.job_id,
    }
}

fn blocker_record(blocker: &Blocker) -> GoalBlockerRecord {
    GoalBlockerRecord {
        id: blocker.id.clone(),
        action_id: blocker.action_id.clone(),
        kind: blocker.kind.as_str().to_owned(),
        reason: blocker.reason.clone(),
        since: blocker.since,
        resume_token: blocker.resume_token.clone(),
        how_to_resolve: blocker.how_to_resolve.clone(),
    }
}

fn evidence_record(evidence: &Evidence) -> GoalEvidenceRecord {
    GoalEvidenceRecord {
        id: evidence.id.clone(),
        action_id: evidence.action_id.clone(),
        kind: name(&evidence.kind),
        reference: evidence.reference.clone(),
        digest: evidence.digest.clone(),
        at: evidence.at,
    }
}

fn criterion_record(criterion: &Criterion) -> GoalCriterionRecord {
    GoalCriterionRecord {
        id: criterion.id.clone(),
        description: criterion.description.clone(),
        check: serde_json::to_value(&criterion.check).unwrap_or(Value::Null),
    }
}

fn checkpoint_record(checkpoint: &Checkpoint) -> GoalCheckpointRecord {
    GoalCheckpointRecord {
        label: checkpoint.label.clone(),
        minutes_before: checkpoint.minutes_before,
        at: checkpoint.at,
        contract: checkpoint.contract.clone(),
        outcome: name(&checkpoint.outcome),
        evaluated_at: checkpoint.evaluated_at,
        late: checkpoint.late,
        note: checkpoint.note.clone(),
    }
}

/// The record of one stored transition.
pub fn transition_info(t: &GoalTransition) -> GoalTransitionInfo {
    GoalTransitionInfo {
        seq: t.seq,
        action_id: t.transition.action_id.clone(),
        from_state: t.transition.from_state.clone(),
        to_state: t.transition.to_state.clone(),
        source: t.transition.source.clone(),
        reason: t.transition.reason.clone(),
        at_ms: t.transition.at_ms,
    }
}

/// The record of one stored report, with its plain text.
pub fn report_info(r: &GoalReport) -> GoalReportInfo {
    let text = serde_json::from_value(r.report.clone())
        .map(|report| render_plain(&report))
        .unwrap_or_default();
    GoalReportInfo {
        seq: r.seq,
        created_at_ms: r.created_at_ms,
        channel: r.channel.clone(),
        delivery: r.delivery.as_str().to_owned(),
        attempts: r.attempts,
        last_error: r.last_error.clone(),
        text,
        report: r.report.clone(),
    }
}
