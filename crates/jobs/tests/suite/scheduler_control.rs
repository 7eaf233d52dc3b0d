//! §13 items 5 and 6 and the concurrency of claims: stale-run repair (backdated rows, rows of
//! a previous process), the run budget, pause and resume, stop in every status and during a
//! run with no resurrection, and two schedulers on one store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_clock::ManualClock;
use openphone_jobs::limits::{RUN_BUDGET_MS, STALE_RUN_MS};
use openphone_jobs::{
    FailureReason, JobPhase, JobRunner, JobStatus, JobType, JobsError, RunContext, RunOutcome,
    RunResult, Runners, Scheduler, SchedulerConfig, SchedulerEvent,
};
use openphone_store::{ClaimRequest, Store};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{HOUR, Harness, MIN, SEC, Step, T0};

/// Claims job `id` directly in the store at `at` as `owner`, as a scheduler that then went
/// away would have.
fn backdated_claim(h: &Harness, at: i64, owner: &str) -> Vec<i64> {
    h.store
        .claim_due_jobs(&ClaimRequest {
            now_ms: at,
            limit: 1,
            owner: owner.to_owned(),
            started_at_ms: T0,
        })
        .unwrap()
        .into_iter()
        .map(|c| c.job.job.id)
        .collect()
}

#[tokio::test]
async fn stale_run_repair_of_a_backdated_running_row() {
    let h = Harness::new();
    let stuck = h.create(json!({"title": "stuck", "prompt": "p", "next_run_at": T0 - HOUR}));
    let young = h.create(json!({"title": "young", "prompt": "p", "next_run_at": T0 - HOUR + 1}));
    h.clock.set(T0 + HOUR);
    let now = h.now();
    // Claimed by this very scheduler's owner 11 and 9 minutes ago (its runner is gone).
    assert_eq!(
        backdated_claim(&h, now - 11 * MIN, "sched-a"),
        [stuck.job.id]
    );
    assert_eq!(
        backdated_claim(&h, now - 9 * MIN, "sched-a"),
        [young.job.id]
    );
    let mut events = h.sched.subscribe();
    let report = h.tick().await;
    assert_eq!(report.repaired, [stuck.job.id]);
    let repaired = h.job(stuck.job.id).job;
    assert_eq!(
        (repaired.status, repaired.phase),
        (JobStatus::Queued, JobPhase::Waiting)
    );
    assert_eq!(repaired.failure_count, 1);
    assert_eq!(repaired.last_result, "stuck_running_repaired");
    assert_eq!((repaired.running_at, repaired.last_run_at), (0, now));
    assert_eq!(repaired.next_run_at, now + MIN);
    let run = h.store.job_run(stuck.job.id, 1).unwrap().unwrap();
    assert_eq!(
        (run.outcome, run.reason.as_str(), run.finished_at),
        (RunOutcome::TimedOut, "stuck_running_repaired", Some(now))
    );
    assert!(matches!(
        events.try_recv().unwrap(),
        SchedulerEvent::Repaired { attempt: 1, .. }
    ));
    // The younger run is left alone; the wake covers its stale deadline.
    assert_eq!(h.job(young.job.id).job.status, JobStatus::Running);
    assert_eq!(report.next_wake, Some(now + MIN));
    h.clock.set(now + MIN);
    h.tick().await; // the repaired job runs again (attempt 2) and completes
    assert_eq!(h.job(stuck.job.id).job.status, JobStatus::Completed);
    // The young run's stale deadline (now + 1 min) has come; the minimum delay still applies.
    assert_eq!(now - 9 * MIN + STALE_RUN_MS, now + MIN);
    assert_eq!(h.sched.next_wake(), Some(now + MIN + 15 * SEC));
    h.clock.set(now + MIN + 15 * SEC);
    let later = h.tick().await;
    assert_eq!(later.repaired, [young.job.id]);
}

#[tokio::test]
async fn rows_left_running_by_a_previous_process_are_repaired_at_start() {
    let h = Harness::new();
    let left = h.create(json!({"title": "left", "prompt": "p"}));
    // The previous daemon claimed it a minute ago and died.
    h.clock.set(T0 + MIN);
    assert_eq!(
        backdated_claim(&h, T0 + MIN, "previous-daemon"),
        [left.job.id]
    );
    h.clock.set(T0 + 2 * MIN);
    let next = h.scheduler("next-daemon");
    // An ordinary tick does not touch a young row, whoever owns it...
    assert!(next.tick().await.unwrap().repaired.is_empty());
    // ...the start does, at once.
    let report = next.start().await.unwrap();
    assert_eq!(report.repaired, [left.job.id]);
    let job = h.job(left.job.id).job;
    assert_eq!((job.status, job.failure_count), (JobStatus::Queued, 1));
    let run = h.store.job_run(left.job.id, 1).unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::Interrupted);
    assert_eq!(run.owner, "previous-daemon");
}

#[tokio::test]
async fn the_run_budget_is_below_the_stale_threshold_and_ends_slow_runs() {
    const { assert!(RUN_BUDGET_MS < STALE_RUN_MS) };
    // A run that reports after its deadline (on the injected clock) is a budget failure.
    let h = Harness::new();
    h.script.push(Step::Advance(RUN_BUDGET_MS + SEC));
    let job = h.create(json!({"title": "slow", "prompt": "p"}));
    h.clock.set(T0 + MIN);
    h.tick().await;
    let stored = h.job(job.job.id).job;
    assert_eq!(stored.last_result, "job_error:run_budget_exceeded");
    assert_eq!(stored.failure_count, 1);
    let run = h.store.job_run(job.job.id, 1).unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::TimedOut);
}

#[tokio::test(start_paused = true)]
async fn a_run_that_never_returns_is_ended_by_its_budget() {
    let h = Harness::with_default(Step::Hang);
    let job = h.create(json!({"title": "hangs", "prompt": "p"}));
    h.clock.set(T0 + MIN);
    h.sched.tick().await.unwrap();
    h.script.wait_started().await;
    // tokio's paused timer runs the 8-minute budget out while the test waits.
    h.sched.wait_idle().await;
    let stored = h.job(job.job.id).job;
    assert_eq!(stored.status, JobStatus::Queued);
    assert_eq!(stored.last_result, "job_error:run_budget_exceeded");
}

#[tokio::test]
async fn a_panicking_runner_and_a_missing_runner_fail_the_run() {
    let h = Harness::with_default(Step::Panic);
    let job = h.create(json!({"title": "panics", "prompt": "p"}));
    h.clock.set(T0 + MIN);
    h.tick().await;
    assert_eq!(
        h.job(job.job.id).job.last_result,
        "job_error:runner_panicked"
    );

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
    let clock = ManualClock::new(T0);
    let sched = Scheduler::new(
        Arc::clone(&store),
        Arc::new(clock.clone()),
        SchedulerConfig::new("no-agent"),
        Runners::builtin(),
    );
    let job = sched
        .create(
            &openphone_jobs::JobRequest::from_json(&json!({"title": "t", "prompt": "p"})).unwrap(),
            None,
        )
        .unwrap();
    clock.set(T0 + MIN);
    sched.tick().await.unwrap();
    sched.wait_idle().await;
    let stored = store.get_job(job.job.id).unwrap().unwrap().job;
    assert_eq!(stored.last_result, "model_unconfigured");
    assert_eq!(
        FailureReason::parse(&stored.last_result),
        Some(FailureReason::ModelUnconfigured)
    );
}

#[tokio::test]
async fn pause_and_resume() {
    let h = Harness::new();
    let job = h.create(json!({"title": "p", "prompt": "p", "interval_ms": HOUR}));
    let id = job.job.id;
    let paused = h.sched.pause(id).unwrap().job;
    assert_eq!((paused.status, paused.paused_at), (JobStatus::Paused, T0));
    assert_eq!(h.sched.next_wake(), None);
    // Never claimed while paused, however long.
    h.clock.set(T0 + 3 * HOUR);
    assert!(h.tick().await.claimed.is_empty());
    // Only a queued job pauses; only a paused one resumes.
    assert!(matches!(h.sched.pause(id), Err(JobsError::Illegal(_))));
    let resumed = h.sched.resume(id).unwrap().job;
    assert_eq!(
        (resumed.status, resumed.next_run_at, resumed.paused_at),
        (JobStatus::Queued, T0 + 3 * HOUR, 0)
    );
    assert!(matches!(h.sched.resume(id), Err(JobsError::Illegal(_))));
    // It runs once promptly: at the next wake, the minimum delay away.
    assert_eq!(h.sched.next_wake(), Some(T0 + 3 * HOUR + 15 * SEC));
    h.run_until(T0 + 3 * HOUR + MIN).await;
    assert_eq!(h.store.job_runs(id).unwrap().len(), 1);
    assert_eq!(h.job(id).job.next_run_at, T0 + 4 * HOUR + 15 * SEC);
    // A running job cannot be paused.
    h.script.push(Step::Gate);
    h.clock.set(T0 + 5 * HOUR);
    h.sched.tick().await.unwrap();
    h.script.wait_started().await;
    let err = h.sched.pause(id).unwrap_err();
    assert_eq!(err.code(), "job_state_conflict");
    h.script.release();
    h.sched.wait_idle().await;
}

#[tokio::test]
async fn stop_during_a_run_discards_the_late_completion() {
    let h = Harness::with_default(Step::UntilStopped);
    let job = h.create(json!({"title": "long", "prompt": "p", "interval_ms": HOUR}));
    let id = job.job.id;
    let mut events = h.sched.subscribe();
    h.clock.set(T0 + MIN);
    h.sched.tick().await.unwrap();
    h.script.wait_started().await;
    let outcome = h.sched.stop(id).unwrap();
    assert!(outcome.stopped);
    assert_eq!(outcome.job.job.status, JobStatus::Stopped);
    // The runner notices, reports a completion; it is discarded.
    h.sched.wait_idle().await;
    let stored = h.job(id).job;
    assert_eq!(
        (stored.status, stored.phase),
        (JobStatus::Stopped, JobPhase::Stopped)
    );
    assert_eq!(
        stored.last_result, "",
        "the late completion left no trace in the record"
    );
    assert_eq!(stored.next_run_at, 0);
    let run = h.store.job_run(id, 1).unwrap().unwrap();
    assert_eq!(
        (run.outcome, run.reason.as_str()),
        (RunOutcome::Cancelled, "stopped")
    );
    let mut discarded = false;
    while let Ok(event) = events.try_recv() {
        match event {
            SchedulerEvent::Discarded { job_id, status, .. } => {
                assert_eq!((job_id, status), (id, Some(JobStatus::Stopped)));
                discarded = true;
            }
            SchedulerEvent::Finished { .. } => panic!("a stopped job's run was persisted"),
            _ => {}
        }
    }
    assert!(discarded);
    // No resurrection by the interval, a tick, a repair, pause or resume.
    assert_eq!(h.sched.next_wake(), None);
    h.clock.set(T0 + 5 * HOUR);
    let report = h.tick().await;
    assert!(report.claimed.is_empty() && report.repaired.is_empty());
    assert!(h.sched.pause(id).is_err() && h.sched.resume(id).is_err());
    assert_eq!(h.job(id).job.status, JobStatus::Stopped);
}

#[tokio::test]
async fn stop_in_every_status() {
    let h = Harness::new();
    let queued = h.create(json!({"title": "q", "prompt": "p", "next_run_at": T0 + HOUR}));
    let paused = h.create(json!({"title": "pa", "prompt": "p", "next_run_at": T0 + HOUR}));
    h.sched.pause(paused.job.id).unwrap();
    let completed = h.create(json!({"title": "c", "type": "heartbeat"}));
    h.clock.set(T0 + MIN);
    h.tick().await;
    assert_eq!(h.job(completed.job.id).job.status, JobStatus::Completed);
    let running = h.create(json!({"title": "r", "prompt": "p"}));
    assert_eq!(backdated_claim(&h, T0 + MIN, "elsewhere"), [running.job.id]);

    let out = h.sched.stop(queued.job.id).unwrap();
    assert!(out.stopped);
    for id in [paused.job.id, running.job.id] {
        let out = h.sched.stop(id).unwrap();
        assert!(out.stopped, "job {id}");
        let job = out.job.job;
        assert_eq!(
            (job.status, job.running_at, job.paused_at),
            (JobStatus::Stopped, 0, 0)
        );
        assert!(job.unread_result);
    }
    // The running one's attempt is closed as cancelled even though its runner is elsewhere.
    assert_eq!(
        h.store.job_run(running.job.id, 1).unwrap().unwrap().outcome,
        RunOutcome::Cancelled
    );
    // Terminal jobs are left as they are.
    for id in [queued.job.id, completed.job.id, running.job.id] {
        let before = h.job(id);
        let out = h.sched.stop(id).unwrap();
        assert!(!out.stopped);
        assert_eq!(out.job, before);
    }
    assert!(matches!(h.sched.stop(999), Err(JobsError::NotFound(999))));
    assert_eq!(h.sched.stop(999).unwrap_err().code(), "job_not_found");
}

/// Counts every run of every job.
#[derive(Debug, Default)]
struct Counting {
    runs: Mutex<HashMap<i64, usize>>,
}

#[async_trait]
impl JobRunner for Counting {
    async fn run(&self, ctx: RunContext) -> RunResult {
        *self.runs.lock().unwrap().entry(ctx.job.id).or_default() += 1;
        tokio::task::yield_now().await;
        RunResult::completed("counted")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_on_one_store_never_run_an_occurrence_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
    let clock = ManualClock::new(T0);
    let counting = Arc::new(Counting::default());
    let make = |owner: &str| {
        let runner: Arc<dyn JobRunner> = counting.clone();
        Scheduler::new(
            Arc::clone(&store),
            Arc::new(clock.clone()),
            SchedulerConfig::new(owner),
            Runners::none().with(JobType::Heartbeat, runner),
        )
    };
    let (a, b) = (make("sched-a"), make("sched-b"));
    for i in 0..30 {
        a.create(
            &openphone_jobs::JobRequest::from_json(
                &json!({"title": format!("j{i}"), "type": "heartbeat", "next_run_at": T0 + i}),
            )
            .unwrap(),
            None,
        )
        .unwrap();
    }
    clock.set(T0 + MIN);
    let drive = |s: Scheduler| {
        tokio::spawn(async move {
            let mut claimed = Vec::new();
            for _ in 0..40 {
                let report = s.tick().await.unwrap();
                claimed.extend(report.claimed.iter().map(|c| c.0));
                s.wait_idle().await;
            }
            claimed
        })
    };
    let (from_a, from_b) = tokio::join!(drive(a), drive(b));
    let (from_a, from_b) = (from_a.unwrap(), from_b.unwrap());
    assert_eq!(from_a.len() + from_b.len(), 30);
    assert!(!from_a.is_empty() || !from_b.is_empty());
    let runs = counting.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 30);
    assert!(runs.values().all(|&n| n == 1), "{runs:?}");
    for id in 1..=30 {
        let ledger = store.job_runs(id).unwrap();
        assert_eq!(ledger.len(), 1, "job {id}");
        assert_eq!(ledger[0].outcome, RunOutcome::Succeeded);
        assert_eq!(
            store.get_job(id).unwrap().unwrap().job.status,
            JobStatus::Completed
        );
    }
}

#[tokio::test]
async fn list_limits_and_the_job_cap() {
    let h = Harness::new();
    for i in 0..60 {
        h.create(json!({"title": format!("job {i}"), "prompt": if i == 7 { "Watch the FEED" } else { "p" }}));
    }
    assert_eq!(h.sched.list(None, None).unwrap().len(), 20);
    assert_eq!(h.sched.list(None, Some(500)).unwrap().len(), 50);
    let found = h.sched.list(Some("feed"), None).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].job.title, "job 7");

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
    let mut config = SchedulerConfig::new("small");
    config.max_jobs = 2;
    let sched = Scheduler::new(
        store,
        Arc::new(ManualClock::new(T0)),
        config,
        Runners::builtin(),
    );
    let request =
        openphone_jobs::JobRequest::from_json(&json!({"title": "t", "prompt": "p"})).unwrap();
    let first = sched.create(&request, None).unwrap();
    sched.create(&request, None).unwrap();
    let err = sched.create(&request, None).unwrap_err();
    assert_eq!(err.code(), "job_limit_reached");
    // A terminal job makes room.
    sched.stop(first.job.id).unwrap();
    assert_eq!(sched.create(&request, None).unwrap().job.id, 3);
    assert!(matches!(
        sched.get(first.job.id),
        Err(JobsError::NotFound(1))
    ));
}
