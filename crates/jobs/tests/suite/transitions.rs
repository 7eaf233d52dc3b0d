//! §13 item 2: every transition of §2.3, every pair outside the table refused, and the
//! effects of each edge.

use std::collections::HashSet;

use openphone_jobs::limits::{INTERVAL_FLOOR_MS, LAST_RESULT_MAX_CHARS};
use openphone_jobs::transition::{HEARTBEAT_RESULT, REVIEW_INTERRUPTED_RESULT};
use openphone_jobs::{
    Change, DeliveryState, FailureReason, IllegalTransition, JobEvent, JobPhase, JobStatus,
    StoredJob, apply, transition,
};
use openphone_store::{ClaimRequest, JobType, NewAgentJob, Store};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

use super::support::{MIN, T0};

use JobEvent as E;
use JobStatus as S;

/// The table of §2.3, written out edge by edge.
fn legal_edges() -> Vec<(JobStatus, JobEvent, JobStatus)> {
    let mut edges = vec![
        (S::Queued, E::Claim, S::Running),
        (S::Active, E::Claim, S::Running),
        (S::Running, E::Succeed { recurring: false }, S::Completed),
        (S::Running, E::Succeed { recurring: true }, S::Queued),
        (S::Running, E::Dispatch { recurring: false }, S::Dispatched),
        (S::Running, E::Dispatch { recurring: true }, S::Queued),
        (S::Running, E::Fail { terminal: false }, S::Queued),
        (S::Running, E::Fail { terminal: true }, S::Failed),
        (S::Running, E::Park, S::AwaitingReview),
        (S::AwaitingReview, E::ReviewClaimed, S::Waiting),
        (S::AwaitingReview, E::ReviewExpired, S::Queued),
        (S::Waiting, E::ResolutionCommitted, S::Queued),
        (S::Waiting, E::StaleResolutionDenied, S::Queued),
        (S::Waiting, E::StaleResolutionApproved, S::Failed),
        (S::Queued, E::Pause, S::Paused),
        (S::Active, E::Pause, S::Paused),
        (S::Paused, E::Resume, S::Queued),
        (S::Dispatched, E::RuntimeReplied, S::Completed),
        (S::Dispatched, E::Fail { terminal: false }, S::Failed),
        (S::Dispatched, E::Fail { terminal: true }, S::Failed),
        (S::Queued, E::RuntimeReplied, S::Queued),
        (S::Active, E::RuntimeReplied, S::Queued),
        (S::Paused, E::RuntimeReplied, S::Paused),
    ];
    for live in [
        S::Active,
        S::Queued,
        S::Running,
        S::Waiting,
        S::AwaitingReview,
        S::Paused,
    ] {
        edges.push((live, E::Stop, S::Stopped));
    }
    edges
}

#[test]
fn transition_table_every_legal_edge() {
    for (from, event, to) in legal_edges() {
        assert_eq!(transition(from, event), Ok(to), "{from} --{event}-->");
    }
}

#[test]
fn transition_table_every_other_pair_is_illegal() {
    let legal: HashSet<(JobStatus, JobEvent)> =
        legal_edges().into_iter().map(|(f, e, _)| (f, e)).collect();
    let mut illegal = 0;
    for from in JobStatus::ALL {
        for event in JobEvent::ALL {
            if legal.contains(&(from, event)) {
                continue;
            }
            assert_eq!(
                transition(from, event),
                Err(IllegalTransition { from, event }),
                "{from} --{event}--> must be refused"
            );
            illegal += 1;
        }
    }
    assert_eq!(illegal, 10 * 17 - legal.len());
    // The message names both ends.
    let err = transition(S::Running, E::Pause).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a job that is running cannot take the event pause"
    );
}

#[test]
fn nothing_leaves_a_terminal_status_but_a_dispatched_job_on_its_runtimes_reply() {
    for from in JobStatus::TERMINAL {
        for event in JobEvent::ALL {
            if (from, event) == (S::Dispatched, E::RuntimeReplied) {
                assert_eq!(transition(from, event), Ok(S::Completed));
                continue;
            }
            if from == S::Dispatched && matches!(event, E::Fail { .. }) {
                assert_eq!(transition(from, event), Ok(S::Failed));
                continue;
            }
            assert!(transition(from, event).is_err(), "{from} --{event}-->");
        }
    }
}

fn obj(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

fn row(status: JobStatus, interval_ms: i64, mode: &str) -> StoredJob {
    let new = NewAgentJob {
        job_type: JobType::AgentTurn,
        title: "t".to_owned(),
        prompt: "p".to_owned(),
        payload_json: Map::new(),
        schedule_json: obj(json!({"next_run_at": T0, "interval_ms": interval_ms})),
        session_target: "main".to_owned(),
        delivery_json: obj(json!({"mode": mode})),
        next_run_at: T0,
        created_by: "operator".to_owned(),
    };
    let mut job = openphone_jobs::AgentJob {
        id: 7,
        job_type: new.job_type,
        title: new.title,
        prompt: new.prompt,
        payload_json: new.payload_json,
        schedule_json: new.schedule_json,
        session_target: new.session_target,
        delivery_json: new.delivery_json,
        status,
        created_at: T0,
        updated_at: T0,
        next_run_at: T0,
        running_at: 0,
        last_run_at: 0,
        last_result: String::new(),
        failure_count: 0,
        failure_alert_at: 0,
        phase: JobPhase::for_status(status),
        progress_text: "Queued".to_owned(),
        progress_current: 0,
        progress_total: 0,
        checkpoint_json: Map::new(),
        pending_confirmation_id: String::new(),
        pending_tool_request_json: Map::new(),
        last_surface_id: String::new(),
        resume_token: String::new(),
        last_event_at: T0,
        unread_result: false,
        paused_at: 0,
        device_id: None,
    };
    if status == S::Running {
        job.running_at = T0;
    }
    StoredJob {
        job,
        version: 3,
        attempt: 1,
        owner: "sched".to_owned(),
        delivery_state: None,
        created_by: "operator".to_owned(),
        host: None,
    }
}

#[test]
fn completion_of_a_one_shot_and_of_a_recurring_job() {
    let now = T0 + MIN;
    let mut running = row(S::Running, 0, "notification");
    running.job.failure_count = 2;
    running.job.checkpoint_json = obj(json!({"resume_pending": true}));
    running.job.resume_token = "tok".to_owned();
    let long = "x".repeat(LAST_RESULT_MAX_CHARS + 10);
    let done = apply(
        &running,
        &Change::Complete {
            result: long.clone(),
        },
        now,
    )
    .unwrap();
    assert_eq!(done.version, 3, "the version it was computed from");
    let job = &done.job;
    assert_eq!((job.status, job.phase), (S::Completed, JobPhase::Completed));
    assert_eq!(
        (job.next_run_at, job.running_at, job.last_run_at),
        (0, 0, now)
    );
    assert_eq!(job.last_result.chars().count(), LAST_RESULT_MAX_CHARS);
    assert_eq!((job.failure_count, job.failure_alert_at), (0, 0));
    assert!(job.checkpoint_json.is_empty() && job.resume_token.is_empty());
    assert!(job.unread_result);
    assert_eq!((job.updated_at, job.last_event_at), (now, now));
    assert_eq!(done.delivery_state, Some(DeliveryState::Pending));

    // Recurring, with an interval under the floor, silent delivery.
    let recurring = row(S::Running, 1_000, "silent");
    let next = apply(
        &recurring,
        &Change::Complete {
            result: HEARTBEAT_RESULT.to_owned(),
        },
        now,
    )
    .unwrap();
    assert_eq!(
        (next.job.status, next.job.phase),
        (S::Queued, JobPhase::Queued)
    );
    assert_eq!(next.job.next_run_at, now + INTERVAL_FLOOR_MS);
    assert_eq!(next.delivery_state, Some(DeliveryState::Suppressed));
}

#[test]
fn failures_back_off_alert_from_the_third_and_give_up_at_the_sixth() {
    let mut current = row(S::Running, 0, "notification");
    let mut now = T0;
    let mut waits = Vec::new();
    for n in 1..=6 {
        now += MIN;
        let next = apply(
            &current,
            &Change::Fail {
                reason: FailureReason::job_error("model_http_503"),
                detail: "upstream busy".to_owned(),
            },
            now,
        )
        .unwrap();
        let job = &next.job;
        assert_eq!(job.failure_count, n);
        assert_eq!(job.last_result, "job_error:model_http_503: upstream busy");
        assert_eq!(job.failure_alert_at, if n >= 3 { now } else { 0 });
        assert_eq!(
            next.delivery_state,
            (n >= 3).then_some(DeliveryState::Pending)
        );
        if n < 6 {
            assert_eq!((job.status, job.phase), (S::Queued, JobPhase::Waiting));
            waits.push((job.next_run_at - now) / MIN);
            current = next.clone();
            current.job.status = S::Running; // claimed again
        } else {
            assert_eq!((job.status, job.phase), (S::Failed, JobPhase::Failed));
            assert_eq!(job.next_run_at, 0);
            assert!(job.unread_result);
        }
    }
    assert_eq!(waits, [1, 2, 4, 8, 16]);
}

#[test]
fn stop_pause_resume_and_review_edges_write_their_effects() {
    let now = T0 + 5 * MIN;
    let mut parked = row(S::AwaitingReview, 0, "none");
    parked.job.pending_confirmation_id = "job-confirm-1".to_owned();
    parked.job.pending_tool_request_json = obj(json!({"confirmation_id": "job-confirm-1"}));
    parked.job.checkpoint_json = obj(json!({"job_id": 7}));
    parked.job.resume_token = "r".to_owned();
    let stopped = apply(&parked, &Change::Stop, now).unwrap().job;
    assert_eq!(
        (stopped.status, stopped.phase),
        (S::Stopped, JobPhase::Stopped)
    );
    assert_eq!(stopped.progress_text, "Stopped");
    assert!(stopped.pending_confirmation_id.is_empty());
    assert!(stopped.pending_tool_request_json.is_empty());
    assert!(stopped.checkpoint_json.is_empty() && stopped.resume_token.is_empty());
    assert_eq!((stopped.next_run_at, stopped.running_at), (0, 0));
    assert!(stopped.unread_result);

    let paused = apply(&row(S::Queued, 0, "none"), &Change::Pause, now).unwrap();
    assert_eq!(
        (paused.job.status, paused.job.phase, paused.job.paused_at),
        (S::Paused, JobPhase::Paused, now)
    );
    let resumed = apply(&paused, &Change::Resume, now + MIN).unwrap().job;
    assert_eq!(
        (resumed.status, resumed.next_run_at, resumed.paused_at),
        (S::Queued, now + MIN, 0)
    );
    assert_eq!(
        apply(&row(S::Running, 0, "none"), &Change::Pause, now).unwrap_err(),
        IllegalTransition {
            from: S::Running,
            event: E::Pause
        }
    );

    let claimed = apply(
        &row(S::AwaitingReview, 0, "none"),
        &Change::ReviewClaimed { approved: true },
        now,
    )
    .unwrap()
    .job;
    assert_eq!(
        (claimed.status, claimed.phase),
        (S::Waiting, JobPhase::ApprovalExecuting)
    );
    let denied = apply(
        &row(S::AwaitingReview, 0, "none"),
        &Change::ReviewClaimed { approved: false },
        now,
    )
    .unwrap()
    .job;
    assert_eq!(denied.phase, JobPhase::DenialResolving);
    let resuming = apply(
        &row(S::Waiting, 0, "none"),
        &Change::ResolutionCommitted,
        now,
    )
    .unwrap()
    .job;
    assert_eq!(
        (resuming.status, resuming.phase, resuming.next_run_at),
        (S::Queued, JobPhase::Resuming, now)
    );
    let unknown = apply(
        &row(S::Waiting, 0, "none"),
        &Change::StaleResolutionApproved,
        now,
    )
    .unwrap();
    assert_eq!(
        (unknown.job.status, unknown.job.phase),
        (S::Failed, JobPhase::ReviewResolutionUnknown)
    );
    assert_eq!(unknown.job.last_result, REVIEW_INTERRUPTED_RESULT);
    // Told whatever the delivery mode.
    assert_eq!(unknown.delivery_state, Some(DeliveryState::Pending));
}

#[test]
fn the_store_claim_is_the_claim_edge_of_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("data")).unwrap();
    let new = NewAgentJob {
        job_type: JobType::Heartbeat,
        title: "h".to_owned(),
        prompt: String::new(),
        payload_json: Map::new(),
        schedule_json: obj(json!({"next_run_at": T0, "interval_ms": 0})),
        session_target: "main".to_owned(),
        delivery_json: obj(json!({"mode": "silent"})),
        next_run_at: T0,
        created_by: "operator".to_owned(),
    };
    let created = store.create_job(&new, T0, 200).unwrap();
    let now = T0 + 30_000;
    let by_table = apply(&created, &Change::Claim, now).unwrap();
    let claimed = store
        .claim_due_jobs(&ClaimRequest {
            now_ms: now,
            limit: 1,
            owner: "sched".to_owned(),
            started_at_ms: T0,
        })
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].job.job, by_table.job);
}
