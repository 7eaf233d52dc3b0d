//! Background agent jobs and their attempt ledger.

use std::collections::HashMap;
use std::sync::Arc;

use openphone_store::{
    AgentJob, AttemptFinish, ClaimRequest, DeliveryState, JobFilter, JobPhase, JobStatus, JobType,
    NewAgentJob, RunOutcome, StaleSelection, Store, StoreError, StoredJob,
};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

use super::support::{T0, open, temp};

const MIN: i64 = 60_000;

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn new_job(title: &str, next_run_at: i64) -> NewAgentJob {
    NewAgentJob {
        job_type: JobType::Heartbeat,
        title: title.to_owned(),
        prompt: format!("prompt of {title}"),
        payload_json: Map::new(),
        schedule_json: obj(json!({"next_run_at": next_run_at})),
        session_target: "main".to_owned(),
        delivery_json: obj(json!({"mode": "silent"})),
        next_run_at,
        created_by: "operator".to_owned(),
    }
}

fn claim(store: &Store, now: i64, limit: usize, owner: &str) -> Vec<i64> {
    store
        .claim_due_jobs(&ClaimRequest {
            now_ms: now,
            limit,
            owner: owner.to_owned(),
            started_at_ms: T0,
        })
        .unwrap()
        .into_iter()
        .map(|c| c.job.job.id)
        .collect()
}

fn finish(job: &StoredJob, outcome: RunOutcome, at: i64) -> AttemptFinish {
    AttemptFinish {
        attempt: job.attempt,
        owner: job.owner.clone(),
        outcome,
        reason: String::new(),
        output_ref: String::new(),
        finished_at: at,
    }
}

/// Moves a job to `status` through a plain update (the store does not judge transitions).
fn set_status(store: &Store, id: i64, status: JobStatus, now: i64) -> StoredJob {
    let mut row = store.get_job(id).unwrap().unwrap();
    row.job.status = status;
    row.job.phase = JobPhase::for_status(status);
    row.job.updated_at = now;
    row.job.running_at = 0;
    store.update_job(&row).unwrap()
}

#[test]
fn create_fills_every_field_of_the_record() {
    let dir = temp();
    let store = open(&dir);
    let created = store
        .create_job(&new_job("Check the feed", T0 + MIN), T0, 200)
        .unwrap();
    let expected = AgentJob {
        id: 1,
        job_type: JobType::Heartbeat,
        title: "Check the feed".to_owned(),
        prompt: "prompt of Check the feed".to_owned(),
        payload_json: Map::new(),
        schedule_json: obj(json!({"next_run_at": T0 + MIN})),
        session_target: "main".to_owned(),
        delivery_json: obj(json!({"mode": "silent"})),
        status: JobStatus::Queued,
        created_at: T0,
        updated_at: T0,
        next_run_at: T0 + MIN,
        running_at: 0,
        last_run_at: 0,
        last_result: String::new(),
        failure_count: 0,
        failure_alert_at: 0,
        phase: JobPhase::Queued,
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
    assert_eq!(created.job, expected);
    assert_eq!(
        (created.version, created.attempt, created.owner.as_str()),
        (1, 0, "")
    );
    assert_eq!(created.delivery_state, None);
    let wire = serde_json::to_value(&created.job).unwrap();
    assert_eq!(wire.as_object().unwrap().len(), 29);
    assert_eq!(wire["type"], "heartbeat");
    // The wire record reads back as it was written, and refuses a member it does not know.
    assert_eq!(
        serde_json::from_value::<AgentJob>(wire.clone()).unwrap(),
        expected
    );
    let mut extra = wire;
    extra["owner"] = json!("x");
    assert!(serde_json::from_value::<AgentJob>(extra).is_err());
    // It survives a restart.
    drop(store);
    let store = open(&dir);
    assert_eq!(store.get_job(1).unwrap().unwrap().job, expected);
    assert_eq!(store.get_job(2).unwrap(), None);
}

#[test]
fn ids_are_never_reused_and_the_cap_trims_the_oldest_terminal_jobs() {
    let dir = temp();
    let store = open(&dir);
    let created = store
        .create_jobs(
            (0..3).map(|i| new_job(&format!("j{i}"), T0)).collect(),
            T0,
            3,
        )
        .unwrap();
    assert_eq!(
        created.iter().map(|j| j.job.id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // All live: the fourth is refused and nothing is written.
    let err = store.create_job(&new_job("j3", T0), T0, 3).unwrap_err();
    assert!(
        matches!(err, StoreError::LimitReached { limit: 3, .. }),
        "{err}"
    );
    assert_eq!(store.count_jobs().unwrap(), 3);
    // Two terminal jobs: the older `updated_at` goes first.
    set_status(&store, 2, JobStatus::Completed, T0 + 5);
    set_status(&store, 3, JobStatus::Stopped, T0 + 1);
    let four = store.create_job(&new_job("j4", T0), T0 + 10, 3).unwrap();
    assert_eq!(four.job.id, 4);
    assert_eq!(store.get_job(3).unwrap(), None);
    assert!(store.get_job(2).unwrap().is_some());
    let five = store.create_job(&new_job("j5", T0), T0 + 11, 3).unwrap();
    assert_eq!(five.job.id, 5);
    assert_eq!(store.get_job(2).unwrap(), None);
    // Deleting the newest row does not free its id: the counter is persisted.
    set_status(&store, 5, JobStatus::Failed, T0 + 12);
    drop(store);
    let store = open(&dir);
    let six = store.create_job(&new_job("j6", T0), T0 + 13, 3).unwrap();
    assert_eq!(six.job.id, 6);
    assert_eq!(store.get_job(5).unwrap(), None);
}

#[test]
fn a_stale_version_is_a_conflict_not_an_overwrite() {
    let dir = temp();
    let store = open(&dir);
    let first = store.create_job(&new_job("a", T0), T0, 200).unwrap();
    let mut mine = first.clone();
    mine.job.title = "mine".to_owned();
    let mut theirs = first.clone();
    theirs.job.title = "theirs".to_owned();
    let written = store.update_job(&theirs).unwrap();
    assert_eq!(written.version, 2);
    let err = store.update_job(&mine).unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::Conflict {
                table: "agent_jobs",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.get_job(1).unwrap().unwrap().job.title, "theirs");
    // Unknown ids and immutable fields are refused too.
    let mut ghost = written.clone();
    ghost.job.id = 99;
    assert!(matches!(
        store.update_job(&ghost).unwrap_err(),
        StoreError::NotFound { .. }
    ));
    let mut moved = written.clone();
    moved.job.created_at = 1;
    assert!(matches!(
        store.update_job(&moved).unwrap_err(),
        StoreError::Invalid { .. }
    ));
    // The database refuses a record outside the wire limits.
    let mut bad = written;
    bad.job.title = String::new();
    assert!(store.update_job(&bad).is_err());
    assert_eq!(store.get_job(1).unwrap().unwrap().version, 2);
}

#[test]
fn claims_take_due_jobs_in_order_bounded_and_record_an_attempt() {
    let dir = temp();
    let store = open(&dir);
    // ids 1..=6: due at +3, +1, +1, in the future, paused, +2.
    for at in [T0 + 3, T0 + 1, T0 + 1, T0 + 60 * MIN, T0, T0 + 2] {
        store.create_job(&new_job("j", at), T0, 200).unwrap();
    }
    set_status(&store, 5, JobStatus::Paused, T0);
    // A legacy `active` row is due like a queued one (§2.1), as an old store wrote it; and the
    // store survives a reopen.
    let mut legacy = store.get_job(4).unwrap().unwrap();
    legacy.job.status = JobStatus::Active;
    legacy.job.next_run_at = 0;
    store.update_job(&legacy).unwrap();
    drop(store);
    let store = open(&dir);
    let now = T0 + 10;
    assert_eq!(claim(&store, now, 3, "sched-a"), [4, 2, 3]);
    assert_eq!(claim(&store, now, 3, "sched-a"), [6, 1]);
    assert!(claim(&store, now, 3, "sched-a").is_empty());
    let two = store.get_job(2).unwrap().unwrap();
    assert_eq!(two.job.status, JobStatus::Running);
    assert_eq!(two.job.phase, JobPhase::Running);
    assert_eq!(two.job.progress_text, "Working");
    assert_eq!(two.job.running_at, now);
    assert_eq!(
        two.job.next_run_at,
        T0 + 1,
        "a claim never moves next_run_at"
    );
    assert_eq!((two.attempt, two.owner.as_str()), (1, "sched-a"));
    let runs = store.job_runs(2).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].intended_at, T0 + 1);
    assert_eq!(runs[0].started_at, now);
    assert_eq!(runs[0].outcome, RunOutcome::Running);
    assert!(!runs[0].catch_up);
    assert_eq!(
        store.get_job(5).unwrap().unwrap().job.status,
        JobStatus::Paused
    );
}

#[test]
fn an_occurrence_due_before_the_scheduler_started_is_a_catch_up() {
    let dir = temp();
    let store = open(&dir);
    store
        .create_job(&new_job("late", T0 - MIN), T0 - 2 * MIN, 200)
        .unwrap();
    store
        .create_job(&new_job("on time", T0 + 5), T0, 200)
        .unwrap();
    let claimed = store
        .claim_due_jobs(&ClaimRequest {
            now_ms: T0 + 10,
            limit: 3,
            owner: "sched".to_owned(),
            started_at_ms: T0,
        })
        .unwrap();
    let flags: Vec<(i64, bool)> = claimed
        .iter()
        .map(|c| (c.job.job.id, c.run.catch_up))
        .collect();
    assert_eq!(flags, [(1, true), (2, false)]);
    assert!(store.job_run(1, 1).unwrap().unwrap().catch_up);
}

#[test]
fn concurrent_claimers_never_both_win_a_job() {
    let dir = temp();
    let store = Arc::new(open(&dir));
    store
        .create_jobs(
            (0..60).map(|i| new_job(&format!("j{i}"), T0 + i)).collect(),
            T0,
            200,
        )
        .unwrap();
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut won = Vec::new();
                loop {
                    let ids = claim(&store, T0 + 100, 2, &format!("sched-{t}"));
                    if ids.is_empty() {
                        return won;
                    }
                    won.extend(ids);
                }
            })
        })
        .collect();
    let mut wins: HashMap<i64, usize> = HashMap::new();
    for handle in handles {
        for id in handle.join().unwrap() {
            *wins.entry(id).or_default() += 1;
        }
    }
    assert_eq!(wins.len(), 60);
    assert!(wins.values().all(|&n| n == 1), "{wins:?}");
    for id in 1..=60 {
        assert_eq!(store.job_runs(id).unwrap().len(), 1);
    }
}

#[test]
fn finishing_an_attempt_is_fenced_by_attempt_and_owner() {
    let dir = temp();
    let store = open(&dir);
    store.create_job(&new_job("a", T0), T0, 200).unwrap();
    claim(&store, T0 + 1, 1, "sched-a");
    let running = store.get_job(1).unwrap().unwrap();
    let mut done = running.clone();
    done.job.status = JobStatus::Completed;
    done.job.phase = JobPhase::Completed;
    done.job.running_at = 0;
    done.job.last_run_at = T0 + 2;
    done.delivery_state = Some(DeliveryState::Suppressed);
    // Another owner's (or another attempt's) report is refused and changes nothing.
    let mut wrong_owner = finish(&running, RunOutcome::Succeeded, T0 + 2);
    wrong_owner.owner = "sched-b".to_owned();
    assert!(matches!(
        store.finish_job_attempt(&done, &wrong_owner).unwrap_err(),
        StoreError::Conflict { .. }
    ));
    let mut wrong_attempt = finish(&running, RunOutcome::Succeeded, T0 + 2);
    wrong_attempt.attempt = 7;
    assert!(store.finish_job_attempt(&done, &wrong_attempt).is_err());
    assert_eq!(store.get_job(1).unwrap().unwrap(), running);
    // The right one lands, with its ledger row.
    let written = store
        .finish_job_attempt(&done, &finish(&running, RunOutcome::Succeeded, T0 + 2))
        .unwrap();
    assert_eq!(written.job.status, JobStatus::Completed);
    assert_eq!(written.delivery_state, Some(DeliveryState::Suppressed));
    let run = store.job_run(1, 1).unwrap().unwrap();
    assert_eq!(
        (run.outcome, run.finished_at),
        (RunOutcome::Succeeded, Some(T0 + 2))
    );
    // A late second report for the same attempt finds the ledger row ended.
    assert!(
        !store
            .finish_job_run(1, &finish(&running, RunOutcome::Failed, T0 + 3))
            .unwrap()
    );
    assert_eq!(
        store.job_run(1, 1).unwrap().unwrap().outcome,
        RunOutcome::Succeeded
    );
}

#[test]
fn repair_selects_backdated_and_foreign_running_rows() {
    let dir = temp();
    let store = open(&dir);
    store
        .create_jobs((0..4).map(|_| new_job("j", T0)).collect(), T0, 200)
        .unwrap();
    let now = T0 + 60 * MIN;
    // Job 1: claimed 11 min ago; job 2: 9 min ago; job 3: 1 min ago by another instance.
    claim(&store, now - 11 * MIN, 1, "me");
    claim(&store, now - 9 * MIN, 1, "me");
    claim(&store, now - MIN, 1, "previous-process");
    let repair = |job: &StoredJob| {
        let mut next = job.clone();
        next.job.status = JobStatus::Queued;
        next.job.phase = JobPhase::Waiting;
        next.job.running_at = 0;
        next.job.failure_count += 1;
        let mut end = finish(job, RunOutcome::TimedOut, T0 + 60 * MIN);
        end.reason = "stuck_running_repaired".to_owned();
        Some((next, end))
    };
    let selection = StaleSelection {
        now_ms: now,
        stale_after_ms: 10 * MIN,
        foreign_to: None,
        limit: 100,
    };
    let repaired = store.repair_stale_jobs(&selection, repair).unwrap();
    assert_eq!(repaired.iter().map(|j| j.job.id).collect::<Vec<_>>(), [1]);
    let run = store.job_run(1, 1).unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::TimedOut);
    assert_eq!(run.reason, "stuck_running_repaired");
    // At start-up, rows of any other owner go at once, whatever their age.
    let at_start = StaleSelection {
        foreign_to: Some("me".to_owned()),
        ..selection
    };
    let repaired = store.repair_stale_jobs(&at_start, repair).unwrap();
    assert_eq!(repaired.iter().map(|j| j.job.id).collect::<Vec<_>>(), [3]);
    assert_eq!(
        store.get_job(2).unwrap().unwrap().job.status,
        JobStatus::Running
    );
    assert_eq!(store.get_job(3).unwrap().unwrap().job.failure_count, 1);
}

#[test]
fn the_next_wake_candidate_covers_queued_running_and_review_rows() {
    let dir = temp();
    let store = open(&dir);
    let stale = 10 * MIN;
    assert_eq!(store.next_job_wake(stale).unwrap(), None);
    store
        .create_job(&new_job("later", T0 + 30 * MIN), T0, 200)
        .unwrap();
    assert_eq!(store.next_job_wake(stale).unwrap(), Some(T0 + 30 * MIN));
    store.create_job(&new_job("soon", T0), T0, 200).unwrap();
    claim(&store, T0, 1, "me");
    // Job 2 runs since T0: its stale deadline is the earliest.
    assert_eq!(store.next_job_wake(stale).unwrap(), Some(T0 + stale));
    // A parked job's review deadline counts; a paused job never does.
    let mut parked = store.get_job(2).unwrap().unwrap();
    parked.job.status = JobStatus::AwaitingReview;
    parked.job.phase = JobPhase::AwaitingReview;
    parked.job.running_at = 0;
    parked.job.pending_tool_request_json = obj(json!({"expires_at": T0 + 5 * MIN}));
    store.update_job(&parked).unwrap();
    assert_eq!(store.next_job_wake(stale).unwrap(), Some(T0 + 5 * MIN));
    set_status(&store, 1, JobStatus::Paused, T0);
    set_status(&store, 2, JobStatus::Stopped, T0);
    assert_eq!(store.next_job_wake(stale).unwrap(), None);
}

#[test]
fn list_orders_live_first_filters_and_never_moves_due_times() {
    let dir = temp();
    let store = open(&dir);
    let mut agent = new_job("Release notes", T0 + 2 * MIN);
    agent.job_type = JobType::AgentTurn;
    agent.prompt = "Watch the CHANGELOG".to_owned();
    store.create_job(&agent, T0, 200).unwrap(); // 1
    store.create_job(&new_job("b", T0 + MIN), T0, 200).unwrap(); // 2
    store
        .create_job(&new_job("c", T0 + 3 * MIN), T0, 200)
        .unwrap(); // 3
    store.create_job(&new_job("d", T0), T0, 200).unwrap(); // 4
    set_status(&store, 3, JobStatus::Completed, T0 + 5);
    set_status(&store, 4, JobStatus::Stopped, T0 + 9);
    let ids = |filter: &JobFilter| -> Vec<i64> {
        store
            .list_jobs(filter)
            .unwrap()
            .into_iter()
            .map(|j| j.job.id)
            .collect()
    };
    let before: Vec<StoredJob> = store.list_jobs(&JobFilter::default()).unwrap();
    assert_eq!(ids(&JobFilter::default()), [2, 1, 4, 3]);
    assert_eq!(
        ids(&JobFilter {
            text: Some("changelog".to_owned()),
            ..Default::default()
        }),
        [1]
    );
    assert_eq!(
        ids(&JobFilter {
            statuses: vec![JobStatus::Completed, JobStatus::Stopped],
            ..Default::default()
        }),
        [4, 3]
    );
    assert_eq!(
        ids(&JobFilter {
            job_type: Some(JobType::Heartbeat),
            limit: Some(2),
            ..Default::default()
        }),
        [2, 4]
    );
    assert_eq!(store.list_jobs(&JobFilter::default()).unwrap(), before);
}

fn by(creator: &str, title: &str) -> NewAgentJob {
    NewAgentJob {
        created_by: creator.to_owned(),
        ..new_job(title, T0 + MIN)
    }
}

#[test]
fn a_job_records_its_creator_and_jobs_before_owners_were_the_users() {
    let dir = temp();
    let store = open(&dir);
    let mine = store.create_job(&new_job("mine", T0), T0, 10).unwrap();
    assert_eq!(mine.created_by, openphone_store::OPERATOR_CREATOR);
    let theirs = store.create_job(&by("hermes", "theirs"), T0, 10).unwrap();
    assert_eq!(
        store.get_job(theirs.job.id).unwrap().unwrap().created_by,
        "hermes"
    );
    let listed = store
        .list_jobs(&JobFilter {
            created_by: Some("hermes".to_owned()),
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].job.id, theirs.job.id);
}

#[test]
fn a_runtimes_live_jobs_never_take_the_users_reserve() {
    let dir = temp();
    let store = open(&dir);
    let quota = openphone_store::JobQuota {
        max_jobs: 8,
        per_runtime: 4,
        reserved_for_user: 3,
    };
    for i in 0..4 {
        store
            .create_job_limited(&by("hermes", &format!("h{i}")), T0, &quota)
            .unwrap();
    }
    let own = store
        .create_job_limited(&by("hermes", "h4"), T0, &quota)
        .unwrap_err();
    assert!(
        matches!(own, StoreError::LimitReached { limit: 4, .. }),
        "{own:?}"
    );
    store
        .create_job_limited(&by("openclaw", "o0"), T0, &quota)
        .unwrap();
    // Runtimes hold 5 = max_jobs - reserved_for_user: the rest is the user's.
    let share = store
        .create_job_limited(&by("openclaw", "o1"), T0, &quota)
        .unwrap_err();
    assert!(
        matches!(share, StoreError::LimitReached { limit: 5, .. }),
        "{share:?}"
    );
    for i in 0..3 {
        store
            .create_job_limited(&new_job(&format!("u{i}"), T0), T0, &quota)
            .unwrap();
    }
    assert_eq!(store.count_jobs().unwrap(), 8);
}

/// Regression (review finding 9): the heartbeat worked from a job list read earlier, so an
/// attempt claimed after that read was closed as `interrupted`, and the run's real end then
/// changed nothing in the ledger. The close now checks the job's current fence in the same
/// statement, and a fenced end that finds its ledger row ended early writes the real end.
#[test]
fn the_heartbeat_closed_a_run_claimed_after_it_read_the_jobs_as_interrupted() {
    let dir = temp();
    let store = open(&dir);
    store.create_job(&new_job("a", T0), T0, 200).unwrap();
    // The heartbeat read job 1 as queued; then a scheduler claimed it.
    assert_eq!(
        store.get_job(1).unwrap().unwrap().job.status,
        JobStatus::Queued
    );
    claim(&store, T0 + 1, 1, "sched-a");
    let running = store.get_job(1).unwrap().unwrap();
    let mut interrupted = finish(&running, RunOutcome::Interrupted, T0 + 2);
    interrupted.reason = "closed by the heartbeat".to_owned();
    // The job's fence says the attempt is live: nothing is closed.
    assert!(!store.close_stale_job_run(1, &interrupted).unwrap());
    assert_eq!(
        store.job_run(1, 1).unwrap().unwrap().outcome,
        RunOutcome::Running
    );
    let mut done = running.clone();
    done.job.status = JobStatus::Completed;
    done.job.phase = JobPhase::Completed;
    done.job.running_at = 0;
    let (_, corrected) = store
        .finish_job_attempt_checked(&done, &finish(&running, RunOutcome::Succeeded, T0 + 3))
        .unwrap();
    assert_eq!(corrected, None);
    assert_eq!(
        store.job_run(1, 1).unwrap().unwrap().outcome,
        RunOutcome::Succeeded
    );

    // An attempt its job no longer runs is closed.
    store.create_job(&new_job("b", T0), T0, 200).unwrap();
    claim(&store, T0 + 4, 1, "sched-a");
    let running = store.get_job(2).unwrap().unwrap();
    set_status(&store, 2, JobStatus::Stopped, T0 + 5);
    let stale = finish(&running, RunOutcome::Interrupted, T0 + 6);
    assert!(store.close_stale_job_run(2, &stale).unwrap());
    assert_eq!(
        store.job_run(2, 1).unwrap().unwrap().outcome,
        RunOutcome::Interrupted
    );

    // A ledger row ended early while its job still ran it: the fenced end corrects it and
    // says what it corrected.
    store.create_job(&new_job("c", T0), T0, 200).unwrap();
    claim(&store, T0 + 7, 1, "sched-a");
    let running = store.get_job(3).unwrap().unwrap();
    assert!(
        store
            .finish_job_run(3, &finish(&running, RunOutcome::Interrupted, T0 + 8))
            .unwrap()
    );
    let mut done = running.clone();
    done.job.status = JobStatus::Completed;
    done.job.phase = JobPhase::Completed;
    done.job.running_at = 0;
    let (_, corrected) = store
        .finish_job_attempt_checked(&done, &finish(&running, RunOutcome::Succeeded, T0 + 9))
        .unwrap();
    assert_eq!(corrected, Some(RunOutcome::Interrupted));
    let run = store.job_run(3, 1).unwrap().unwrap();
    assert_eq!(
        (run.outcome, run.finished_at),
        (RunOutcome::Succeeded, Some(T0 + 9))
    );
}
