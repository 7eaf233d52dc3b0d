//! §13 items 3 and 4 in simulated time: due selection and ordering, 3 per tick, the minimum
//! delay, the single wake, wake triggers, catch-up after downtime, the backoff ladder, the
//! alert, the recurring floor.

use std::sync::Arc;
use std::time::Duration;

use openphone_clock::Clock;
use openphone_jobs::limits::{INTERVAL_FLOOR_MS, MIN_WAKE_DELAY_MS, STALE_RUN_MS};
use openphone_jobs::{
    DeliveryState, FailureReason, JobPhase, JobStatus, RunOutcome, Runners, Scheduler,
    SchedulerConfig, SchedulerEvent,
};
use openphone_store::Store;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{DAY, HOUR, Harness, MIN, SEC, Step, T0};

fn heartbeat(title: &str, at: i64) -> serde_json::Value {
    json!({"title": title, "type": "heartbeat", "next_run_at": at})
}

#[tokio::test]
async fn due_selection_and_ordering_three_per_tick() {
    let h = Harness::new();
    // ids 1..=7: due at +30 s, +10 s, +10 s, +20 s, +5 s, in an hour, and a paused one.
    for (i, at) in [30, 10, 10, 20, 5].iter().enumerate() {
        h.create(heartbeat(&format!("j{i}"), T0 + at * SEC));
    }
    h.create(heartbeat("later", T0 + HOUR));
    let paused = h.create(heartbeat("paused", T0));
    h.sched.pause(paused.job.id).unwrap();

    h.clock.set(T0 + MIN);
    let first = h.tick().await;
    let ids: Vec<i64> = first.claimed.iter().map(|c| c.0).collect();
    assert_eq!(ids, [5, 2, 3], "ascending next_run_at, then id; 3 at most");
    // Due jobs left over stay queued and the next wake is the minimum delay away.
    assert_eq!(h.job(4).job.status, JobStatus::Queued);
    assert_eq!(first.next_wake, Some(T0 + MIN + MIN_WAKE_DELAY_MS));
    h.clock.set(T0 + MIN + MIN_WAKE_DELAY_MS);
    let second = h.tick().await;
    assert_eq!(
        second.claimed.iter().map(|c| c.0).collect::<Vec<_>>(),
        [4, 1]
    );
    let third = h.tick().await;
    assert!(third.claimed.is_empty());
    for id in 1..=5 {
        let job = h.job(id).job;
        assert_eq!(
            (job.status, job.last_result.as_str()),
            (JobStatus::Completed, "heartbeat")
        );
    }
    assert_eq!(h.job(6).job.status, JobStatus::Queued);
    assert_eq!(h.job(7).job.status, JobStatus::Paused);
    assert_eq!(third.next_wake, Some(T0 + HOUR));
}

#[tokio::test]
async fn no_claims_while_three_runners_are_active() {
    let h = Harness::with_default(Step::Gate);
    for i in 0..4 {
        h.create(json!({"title": format!("a{i}"), "prompt": "p"}));
    }
    h.clock.set(T0 + MIN);
    let report = h.sched.tick().await.unwrap();
    assert_eq!(report.claimed.len(), 3);
    for _ in 0..3 {
        h.script.wait_started().await;
    }
    assert_eq!(h.sched.active_runs(), 3);
    let busy = h.sched.tick().await.unwrap();
    assert!(
        busy.claimed.is_empty(),
        "no claim while 3 runners are active"
    );
    assert_eq!(h.job(4).job.status, JobStatus::Queued);
    h.script.release();
    h.sched.wait_idle().await;
    h.script.push(Step::Succeed("done"));
    let after = h.tick().await;
    assert_eq!(after.claimed.iter().map(|c| c.0).collect::<Vec<_>>(), [4]);
}

#[tokio::test]
async fn single_wake_computation() {
    let h = Harness::new();
    assert_eq!(h.sched.reschedule().unwrap(), None);
    // A job due in an hour: the wake is its due time.
    let later = h.create(heartbeat("later", T0 + HOUR));
    assert_eq!(h.sched.next_wake(), Some(T0 + HOUR));
    // A job due now: never sooner than now + 15 s.
    let now_job = h.create(heartbeat("now", 0));
    assert_eq!(h.sched.next_wake(), Some(T0 + MIN_WAKE_DELAY_MS));
    // Paused jobs produce no wake.
    h.sched.pause(now_job.job.id).unwrap();
    assert_eq!(h.sched.next_wake(), Some(T0 + HOUR));
    // A running job produces running_at + 10 min, so a stuck run is repaired on time.
    let run = h.create(json!({"title": "run", "prompt": "p", "next_run_at": T0 + 20 * MIN}));
    h.clock.set(T0 + 20 * MIN);
    h.script.push(Step::Hang);
    h.sched.tick().await.unwrap();
    h.script.wait_started().await;
    assert_eq!(h.job(run.job.id).job.status, JobStatus::Running);
    assert_eq!(h.sched.next_wake(), Some(T0 + 20 * MIN + STALE_RUN_MS));
    h.sched.stop(run.job.id).unwrap();
    h.sched.stop(later.job.id).unwrap();
    assert_eq!(
        h.sched.next_wake(),
        None,
        "paused and terminal jobs never wake"
    );
    // Reading and listing never move a due time.
    let before = h.job(now_job.job.id);
    h.sched.list(None, None).unwrap();
    h.sched.get(now_job.job.id).unwrap();
    assert_eq!(h.job(now_job.job.id), before);
}

#[tokio::test]
async fn wake_triggers_start_explicit_wake_and_job_operations() {
    let h = Harness::new();
    h.create(heartbeat("due", T0 - MIN));
    // Daemon start: a tick at once.
    let started = h.sched.start().await.unwrap();
    h.sched.wait_idle().await;
    assert_eq!(started.claimed.len(), 1);
    // Create reschedules without running the job before the minimum delay.
    let job = h.create(heartbeat("soon", 0));
    assert_eq!(h.sched.next_wake(), Some(T0 + MIN_WAKE_DELAY_MS));
    assert_eq!(h.job(job.job.id).job.status, JobStatus::Queued);
    // An explicit wake ticks now.
    h.clock.set(T0 + SEC);
    let woken = h.sched.wake().await.unwrap();
    h.sched.wait_idle().await;
    assert_eq!(woken.claimed, [(job.job.id, 1)]);
    assert_eq!(h.sched.last_tick_at(), Some(T0 + SEC));
}

/// A clock that follows tokio's (paused, auto-advancing) timer, so the driver's real sleeps
/// and the scheduler's "now" agree.
#[derive(Debug)]
struct TokioClock {
    base_ms: i64,
    origin: tokio::time::Instant,
}

impl Clock for TokioClock {
    #[allow(clippy::disallowed_methods)] // reason: the test clock is tokio's virtual time
    fn now_ms(&self) -> i64 {
        let elapsed = tokio::time::Instant::now().duration_since(self.origin);
        self.base_ms + i64::try_from(elapsed.as_millis()).unwrap()
    }
}

#[tokio::test(start_paused = true)]
async fn the_driver_wakes_at_the_scheduled_time() {
    #[allow(clippy::disallowed_methods)] // reason: the origin of the virtual test clock
    let origin = tokio::time::Instant::now();
    let clock = Arc::new(TokioClock {
        base_ms: T0,
        origin,
    });
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
    let sched = Scheduler::new(
        Arc::clone(&store),
        clock.clone(),
        SchedulerConfig::new("driver"),
        Runners::builtin(),
    );
    let mut events = sched.subscribe();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let driver = {
        let sched = sched.clone();
        tokio::spawn(async move {
            sched
                .run(async {
                    let _ = stop_rx.await;
                })
                .await;
        })
    };
    let job = sched
        .create(
            &openphone_jobs::JobRequest::from_json(&json!({
                "title": "in two hours", "type": "system_event", "next_run_at": T0 + 2 * HOUR
            }))
            .unwrap(),
            None,
        )
        .unwrap();
    let finished = loop {
        match tokio::time::timeout(Duration::from_secs(4 * 3600), events.recv())
            .await
            .unwrap()
            .unwrap()
        {
            SchedulerEvent::Finished { job, .. } => break job,
            _ => continue,
        }
    };
    assert_eq!(finished.id, job.job.id);
    assert_eq!(finished.status, JobStatus::Completed);
    assert_eq!(finished.last_result, "system_event_recorded");
    assert!(finished.last_run_at >= T0 + 2 * HOUR, "never early");
    assert!(finished.last_run_at < T0 + 2 * HOUR + 2 * SEC, "on time");
    stop_tx.send(()).unwrap();
    driver.await.unwrap();
}

#[tokio::test]
async fn recurring_interval_floor_15s() {
    let h = Harness::new();
    // Creation refuses an interval below the floor (issue 28); a row stored before that rule
    // (or written by hand) still never runs more often than every 15 s.
    let mut job = h.create(json!({"title": "fast", "type": "heartbeat", "interval_ms": 60_000}));
    job.job
        .schedule_json
        .insert("interval_ms".into(), json!(1_000));
    let job = h.store.update_job(&job).unwrap();
    h.run_until(T0 + 2 * MIN).await;
    let runs = h.store.job_runs(job.job.id).unwrap();
    let starts: Vec<i64> = runs.iter().map(|r| r.started_at - T0).collect();
    // First run at the minimum delay, then every 15 s (the floor), never every second.
    assert_eq!(
        starts,
        (1..=8).map(|i| i * INTERVAL_FLOOR_MS).collect::<Vec<_>>()
    );
    let stored = h.job(job.job.id).job;
    assert_eq!(stored.status, JobStatus::Queued);
    assert_eq!(stored.next_run_at, stored.last_run_at + INTERVAL_FLOOR_MS);
}

#[tokio::test]
async fn recurring_hourly_job_over_a_day() {
    let h = Harness::new();
    let job = h.create(
        json!({"title": "hourly", "prompt": "p", "interval_ms": HOUR,
                              "next_run_at": T0 + HOUR}),
    );
    h.run_until(T0 + DAY).await;
    let runs = h.store.job_runs(job.job.id).unwrap();
    assert_eq!(runs.len(), 24);
    assert!(
        runs.iter()
            .all(|r| r.outcome == RunOutcome::Succeeded && !r.catch_up)
    );
    let stored = h.job(job.job.id);
    assert_eq!(stored.job.next_run_at, T0 + 25 * HOUR);
    assert_eq!(stored.delivery_state, Some(DeliveryState::Pending));
    assert!(stored.job.unread_result);
}

#[tokio::test]
async fn backoff_ladder_alert_from_the_third_failure_and_terminal_at_the_sixth() {
    let h = Harness::with_default(Step::Fail(FailureReason::job_error("model_http_503")));
    let mut events = h.sched.subscribe();
    let job = h.create(json!({"title": "flaky", "prompt": "p"}));
    let id = job.job.id;
    let mut gaps = Vec::new();
    let mut alerts = Vec::new();
    for n in 1..=6 {
        let wake = h.sched.next_wake().unwrap();
        h.clock.set(wake);
        h.tick().await;
        let stored = h.job(id).job;
        assert_eq!(stored.failure_count, n);
        assert_eq!(stored.last_result, "job_error:model_http_503");
        if n < 6 {
            assert_eq!(
                (stored.status, stored.phase),
                (JobStatus::Queued, JobPhase::Waiting)
            );
            gaps.push((stored.next_run_at - stored.last_run_at) / MIN);
        } else {
            assert_eq!(
                (stored.status, stored.phase),
                (JobStatus::Failed, JobPhase::Failed)
            );
        }
        assert_eq!(stored.failure_alert_at != 0, n >= 3);
        while let Ok(event) = events.try_recv() {
            if let SchedulerEvent::FailureAlert {
                failures,
                gave_up,
                notify,
                ..
            } = event
            {
                alerts.push((failures, gave_up, notify));
            }
        }
    }
    assert_eq!(gaps, [1, 2, 4, 8, 16]);
    assert_eq!(
        alerts,
        [
            (3, false, true),
            (4, false, true),
            (5, false, true),
            (6, true, true)
        ]
    );
    assert_eq!(h.sched.next_wake(), None, "a failed job never wakes again");
    let outcomes: Vec<RunOutcome> = h
        .store
        .job_runs(id)
        .unwrap()
        .iter()
        .map(|r| r.outcome)
        .collect();
    assert_eq!(outcomes, [RunOutcome::Failed; 6]);
}

#[tokio::test]
async fn a_success_resets_the_failure_count() {
    let h = Harness::new();
    for _ in 0..4 {
        h.script.push(Step::Fail(FailureReason::TaskStartFailed));
    }
    let job = h.create(json!({"title": "recovers", "prompt": "p", "delivery": {"mode": "silent"}}));
    h.run_until(T0 + HOUR).await;
    let stored = h.job(job.job.id);
    assert_eq!(stored.job.status, JobStatus::Completed);
    assert_eq!(
        (stored.job.failure_count, stored.job.failure_alert_at),
        (0, 0)
    );
    assert_eq!(stored.job.last_result, "done");
    // Silent: the alert and the result are not pushed.
    assert_eq!(stored.delivery_state, Some(DeliveryState::Suppressed));
    assert_eq!(h.store.job_runs(job.job.id).unwrap().len(), 5);
}

#[tokio::test]
async fn missed_runs_after_downtime_run_once() {
    let h = Harness::new();
    let one_shot = h.create(json!({"title": "once", "prompt": "p", "next_run_at": T0 + HOUR}));
    let hourly = h.create(
        json!({"title": "hourly", "prompt": "p", "interval_ms": HOUR,
                                 "next_run_at": T0 + HOUR}),
    );
    // The daemon goes down before anything ran and comes back a day and a half later.
    drop(h.sched.clone());
    h.clock.set(T0 + DAY + 12 * HOUR);
    let back = h.scheduler("sched-b");
    let mut events = back.subscribe();
    let report = back.start().await.unwrap();
    back.wait_idle().await;
    assert_eq!(report.claimed.len(), 2);
    let restart = T0 + DAY + 12 * HOUR;
    for id in [one_shot.job.id, hourly.job.id] {
        let runs = h.store.job_runs(id).unwrap();
        assert_eq!(runs.len(), 1, "once, not once per missed interval");
        assert!(runs[0].catch_up);
        assert_eq!(
            (runs[0].intended_at, runs[0].started_at),
            (T0 + HOUR, restart)
        );
    }
    let mut catch_ups = 0;
    while let Ok(event) = events.try_recv() {
        if let SchedulerEvent::Claimed {
            catch_up: true,
            intended_at,
            ..
        } = event
        {
            assert_eq!(intended_at, T0 + HOUR);
            catch_ups += 1;
        }
    }
    assert_eq!(catch_ups, 2);
    assert_eq!(h.job(one_shot.job.id).job.status, JobStatus::Completed);
    // The recurring job's next run counts from the actual finish: no burst.
    let next = h.job(hourly.job.id).job;
    assert_eq!(next.next_run_at, restart + HOUR);
    assert_eq!(back.next_wake(), Some(restart + HOUR));
    back.wait_idle().await;
    assert_eq!(h.script.runs_of(hourly.job.id), 1);
}

#[tokio::test]
async fn a_fleet_scheduler_looks_again_within_its_poll_interval_for_jobs_others_made() {
    let h = Harness::new();
    let runner: Arc<dyn openphone_jobs::JobRunner> = h.script.clone();
    let poll = MIN_WAKE_DELAY_MS + SEC;
    let fleet = Scheduler::new(
        Arc::clone(&h.store),
        Arc::new(h.clock.clone()),
        SchedulerConfig {
            poll_ms: Some(poll),
            ..SchedulerConfig::new("sched-b")
        },
        Runners::builtin().with(openphone_jobs::JobType::AgentTurn, runner),
    );
    // Nothing due: a lone scheduler sleeps until told; one sharing its store looks again.
    assert_eq!(h.sched.tick().await.unwrap().next_wake, None);
    assert_eq!(fleet.tick().await.unwrap().next_wake, Some(T0 + poll));
    // A job another daemon made, due in an hour: the lone scheduler wakes then, the fleet
    // one still within its poll interval.
    h.create(heartbeat("theirs", T0 + HOUR));
    assert_eq!(h.sched.reschedule().unwrap(), Some(T0 + HOUR));
    assert_eq!(fleet.reschedule().unwrap(), Some(T0 + poll));
    // A poll interval under the minimum delay never makes it wake sooner than that.
    h.clock.set(T0 + 2 * SEC);
    let eager = Scheduler::new(
        Arc::clone(&h.store),
        Arc::new(h.clock.clone()),
        SchedulerConfig {
            poll_ms: Some(SEC),
            ..SchedulerConfig::new("sched-c")
        },
        Runners::builtin(),
    );
    assert_eq!(
        eager.reschedule().unwrap(),
        Some(T0 + 2 * SEC + MIN_WAKE_DELAY_MS)
    );
}

/// Issue 34: the daemon's event loop took the scheduler's events from the 1,024-event
/// broadcast; 10,000 jobs created in six seconds left it 5,913 events behind, and those were
/// dropped with a warning — with them, job artifacts, audit records and (for reviews) the
/// notification that asks the user. `subscribe_all` queues every event, however far behind.
#[tokio::test]
async fn a_burst_of_more_events_than_the_broadcast_holds_still_reaches_subscribe_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
    let mut config = SchedulerConfig::new("burst");
    config.max_jobs = 2_000;
    let sched = Scheduler::new(
        Arc::clone(&store),
        Arc::new(openphone_clock::ManualClock::new(T0)),
        config,
        Runners::builtin(),
    );
    let mut watched = sched.subscribe();
    let mut all = sched.subscribe_all();
    let mut created = Vec::new();
    for n in 0..1_100 {
        let request = openphone_jobs::JobRequest::from_json(&json!({
            "title": format!("job {n}"), "type": "system_event", "next_run_at": T0 + DAY
        }))
        .unwrap();
        created.push(sched.create(&request, None).unwrap().job.id);
    }
    // The broadcast kept only the newest 1,024: its receiver learns it missed the rest.
    assert!(matches!(
        watched.try_recv(),
        Err(tokio::sync::broadcast::error::TryRecvError::Lagged(76))
    ));
    // The lossless receiver has every one, in order.
    let mut seen = Vec::new();
    while let Ok(event) = all.try_recv() {
        match event {
            SchedulerEvent::Created { job } => seen.push(job.id),
            other => panic!("only creations happened, got {other:?}"),
        }
    }
    assert_eq!(seen, created);
    // A receiver dropped does not stop the scheduler, and one subscribed later gets the
    // events from then on.
    drop(all);
    let mut later = sched.subscribe_all();
    let request = openphone_jobs::JobRequest::from_json(&json!({
        "title": "after", "type": "system_event", "next_run_at": T0 + DAY
    }))
    .unwrap();
    let after = sched.create(&request, None).unwrap().job.id;
    assert!(matches!(
        later.try_recv(),
        Ok(SchedulerEvent::Created { job }) if job.id == after
    ));
    assert!(
        later.try_recv().is_err(),
        "nothing from before it subscribed"
    );
}
