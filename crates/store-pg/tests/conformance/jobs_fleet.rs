//! What only a fleet has, for jobs (issue 35, "Claim and lease across daemons"): daemons (`PgStore`s
//! with their own host ids) on one schema claim due jobs concurrently and each job is claimed
//! once; a dead daemon's run is repaired by another; a daemon whose run was taken over writes
//! nothing (fencing); a job naming a phone of one host is never claimed by another; the next
//! wake of a daemon counts only what that daemon has to do; creators on several daemons (and a
//! watcher's firing) never abort each other, and the job quota is one limit for the fleet.

use std::collections::HashMap;
use std::sync::Arc;

use openphone_store::{
    AttemptFinish, ClaimRequest, DeliveryState, JobPhase, JobStatus, JobStore, JobType,
    NewAgentJob, RunOutcome, StaleSelection, StoreError, StoredJob,
};
use openphone_store_pg::testing::connect;
use openphone_store_pg::{PgConfig, PgStore};
use pretty_assertions::assert_eq;
use serde_json::{Map, json};

use super::fleet_support::{host_config, hosts};
use super::support::T0;

const MIN: i64 = 60_000;

fn new_job(title: &str, next_run_at: i64) -> NewAgentJob {
    let mut schedule = Map::new();
    schedule.insert("next_run_at".to_owned(), json!(next_run_at));
    let mut delivery = Map::new();
    delivery.insert("mode".to_owned(), json!("silent"));
    NewAgentJob {
        job_type: JobType::Heartbeat,
        title: title.to_owned(),
        prompt: format!("prompt of {title}"),
        payload_json: Map::new(),
        schedule_json: schedule,
        session_target: "main".to_owned(),
        delivery_json: delivery,
        next_run_at,
        created_by: "operator".to_owned(),
    }
}

fn claim(store: &PgStore, now: i64, limit: usize, owner: &str) -> Vec<StoredJob> {
    store
        .claim_due_jobs(&ClaimRequest {
            now_ms: now,
            limit,
            owner: owner.to_owned(),
            started_at_ms: T0,
        })
        .unwrap()
        .into_iter()
        .map(|c| c.job)
        .collect()
}

fn ids(jobs: &[StoredJob]) -> Vec<i64> {
    jobs.iter().map(|j| j.job.id).collect()
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

/// Today's repair: the run fails back to `queued`, due again now.
fn requeue(job: &StoredJob) -> Option<(StoredJob, AttemptFinish)> {
    let mut next = job.clone();
    next.job.status = JobStatus::Queued;
    next.job.phase = JobPhase::Queued;
    next.job.running_at = 0;
    next.job.failure_count += 1;
    let mut end = finish(job, RunOutcome::Interrupted, T0 + MIN);
    end.reason = "stuck_running_repaired".to_owned();
    Some((next, end))
}

fn repair(store: &PgStore, now: i64) -> Vec<i64> {
    let selection = StaleSelection {
        now_ms: now,
        stale_after_ms: 60 * MIN,
        foreign_to: None,
        limit: 100,
    };
    ids(&store
        .repair_stale_jobs(&selection, Box::new(requeue))
        .unwrap())
}

/// Ends the writer session of daemon `config` (the one holding its host lock), as a crash or
/// a network cut would: its host lock is released by the server.
fn kill_writer_session(admin: &PgConfig, config: &PgConfig) {
    let mut client = connect(admin).unwrap();
    let key = format!(
        "openphone:host:{}:{}",
        config.schema.as_deref().unwrap(),
        config.host_id
    );
    let killed: Vec<bool> = client
        .query(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l \
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
             AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)",
            &[&key],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(killed, [true], "the writer session of {}", config.host_id);
    // The server releases the lock as the backend exits.
    for _ in 0..100 {
        let held: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' \
                 AND l.granted AND l.objsubid = 1 \
                 AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0))",
                &[&key],
            )
            .unwrap()
            .get(0);
        if !held {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the host lock of {} outlived its session", config.host_id);
}

/// Sets daemon `config`'s `fleet_hosts.last_seen_at_ms` (its last touch) to `at`.
fn last_seen(admin: &PgConfig, config: &PgConfig, at: i64) {
    let mut client = connect(admin).unwrap();
    let changed = client
        .execute(
            "UPDATE fleet_hosts SET last_seen_at_ms = $2 WHERE host_id = $1",
            &[&config.host_id, &at],
        )
        .unwrap();
    assert_eq!(changed, 1, "the fleet_hosts row of {}", config.host_id);
}

#[test]
fn two_daemons_claiming_200_due_jobs_at_once_claim_each_exactly_once() {
    let (stores, _config, _guard) = hosts(&["a", "b"]);
    let stores: Vec<Arc<PgStore>> = stores.into_iter().map(Arc::new).collect();
    stores[0]
        .create_jobs(
            (0..200)
                .map(|i| new_job(&format!("j{i}"), T0 + i))
                .collect(),
            T0,
            1000,
        )
        .unwrap();
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let store = Arc::clone(&stores[t % 2]);
            std::thread::spawn(move || {
                let mut won = Vec::new();
                loop {
                    let jobs = claim(&store, T0 + 1000, 3, &format!("sched-{t}"));
                    if jobs.is_empty() {
                        return won;
                    }
                    won.extend(jobs.into_iter().map(|j| (j.job.id, t % 2)));
                }
            })
        })
        .collect();
    let mut wins: HashMap<i64, usize> = HashMap::new();
    let mut per_host = [0usize; 2];
    for handle in handles {
        for (id, host) in handle.join().unwrap() {
            *wins.entry(id).or_default() += 1;
            per_host[host] += 1;
        }
    }
    assert_eq!(wins.len(), 200);
    assert!(wins.values().all(|&n| n == 1), "{wins:?}");
    assert_eq!(per_host[0] + per_host[1], 200);
    println!("claims per host: a {}, b {}", per_host[0], per_host[1]);
    for id in 1..=200 {
        let runs = stores[0].job_runs(id).unwrap();
        assert_eq!(runs.len(), 1, "job {id}");
    }
}

/// Daemons `a` and `b` on one fresh schema, with the schema's base configuration (drop the
/// stores before the guard).
fn a_and_b() -> (
    PgStore,
    PgStore,
    PgConfig,
    openphone_store_pg::testing::SchemaGuard,
) {
    let (mut stores, config, guard) = hosts(&["a", "b"]);
    let b = stores.pop().unwrap();
    let a = stores.pop().unwrap();
    (a, b, config, guard)
}

/// Job 1, due now, made and claimed by `a`: running under `a`'s lease.
fn a_runs_one_job(a: &PgStore) {
    a.create_job(&new_job("j", T0), T0, 10).unwrap();
    assert_eq!(ids(&claim(a, T0, 1, "sched-a")), [1]);
}

#[test]
fn a_run_of_a_daemon_that_ended_is_repaired_by_another_and_a_live_ones_never_is() {
    let (a, b, config, guard) = a_and_b();
    a.create_jobs(vec![new_job("a's", T0), new_job("b's", T0)], T0, 10)
        .unwrap();
    assert_eq!(ids(&claim(&a, T0, 1, "sched-a")), [1]);
    assert_eq!(ids(&claim(&b, T0, 1, "sched-b")), [2]);
    // Both live: neither's run is the other's to repair, even at start-up (`foreign_to`), and
    // neither wakes the other.
    let at_start = StaleSelection {
        now_ms: T0 + MIN,
        stale_after_ms: 60 * MIN,
        foreign_to: Some("sched-b".to_owned()),
        limit: 100,
    };
    assert!(
        b.repair_stale_jobs(&at_start, Box::new(requeue))
            .unwrap()
            .is_empty()
    );
    assert_eq!(b.next_job_wake(60 * MIN).unwrap(), Some(T0 + 60 * MIN));
    // Daemon a ends (its store dropped: its session and host lock go) and its last touch is
    // older than the grace: b repairs its run, as today's stale-run repair does, and wakes for
    // it now.
    drop(a);
    last_seen(&config, &host_config(&config, "a"), T0 - 2 * MIN);
    assert_eq!(b.next_job_wake(60 * MIN).unwrap(), Some(T0));
    assert_eq!(repair(&b, T0 + MIN), [1]);
    let one = b.get_job(1).unwrap().unwrap();
    assert_eq!(one.job.status, JobStatus::Queued);
    assert_eq!(one.job.failure_count, 1);
    let run = b.job_run(1, 1).unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::Interrupted);
    assert_eq!(run.reason, "stuck_running_repaired");
    assert_eq!(
        b.get_job(2).unwrap().unwrap().job.status,
        JobStatus::Running
    );
    // A daemon that restarted is a new incarnation: the runs its predecessor claimed are dead
    // too, though its host lock is held again.
    assert_eq!(ids(&claim(&b, T0 + MIN, 1, "sched-b")), [1]);
    drop(b);
    let b = PgStore::open(&host_config(&config, "b")).unwrap();
    let c = PgStore::open(&host_config(&config, "c")).unwrap();
    assert_eq!(repair(&c, T0 + 2 * MIN), [2, 1]);
    drop((b, c));
    drop(guard);
}

#[test]
fn a_daemon_whose_run_was_taken_over_writes_nothing() {
    let (a, b, config, guard) = a_and_b();
    a.create_job(&new_job("j", T0), T0, 10).unwrap();
    let mine = claim(&a, T0, 1, "sched-a").pop().unwrap();
    // a loses its session (a crash of its connection, a network cut): b repairs the run and
    // claims the job again under its own lease.
    kill_writer_session(&config, &host_config(&config, "a"));
    last_seen(&config, &host_config(&config, "a"), T0 - 2 * MIN);
    assert_eq!(repair(&b, T0 + MIN), [1]);
    let theirs = claim(&b, T0 + MIN, 1, "sched-b").pop().unwrap();
    assert_eq!(theirs.attempt, 2);
    assert_eq!(
        b.job_hosts(1).unwrap(),
        Some((a.host_id().to_owned(), Some(b.host_id().to_owned())))
    );
    assert_eq!(b.job_hosts(9).unwrap(), None);
    // a comes back (its writer reconnects and takes its host lock again): every write of its
    // run is refused, nothing written.
    let mut progress = mine.clone();
    progress.job.progress_text = "still going".to_owned();
    let err = a.update_job(&progress).unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    let mut done = mine.clone();
    done.job.status = JobStatus::Completed;
    done.job.phase = JobPhase::Completed;
    let err = a
        .finish_job_attempt(&done, &finish(&mine, RunOutcome::Succeeded, T0 + 2 * MIN))
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert_eq!(b.get_job(1).unwrap().unwrap(), theirs);
    // Fenced on the lease, not only the version: a's writes of b's current attempt, at its
    // current version, are refused too.
    let mut forged = theirs.clone();
    forged.job.progress_text = "a writes b's run".to_owned();
    let err = a.update_job(&forged).unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("lease"), "{err}");
    let err = a
        .finish_job_run(1, &finish(&theirs, RunOutcome::Succeeded, T0 + 2 * MIN))
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert_eq!(b.get_job(1).unwrap().unwrap(), theirs);
    assert_eq!(
        b.job_run(1, 2).unwrap().unwrap().outcome,
        RunOutcome::Running
    );
    // b's own finish goes through; a stop from a (the operator on another host) is decided by
    // the version alone.
    let mut end = theirs.clone();
    end.job.status = JobStatus::Queued;
    end.job.phase = JobPhase::Queued;
    let ended = b
        .finish_job_attempt(&end, &finish(&theirs, RunOutcome::Succeeded, T0 + 2 * MIN))
        .unwrap();
    let mut stop = ended.clone();
    stop.job.status = JobStatus::Stopped;
    stop.job.phase = JobPhase::Stopped;
    a.update_job(&stop).unwrap();
    drop((a, b));
    drop(guard);
}

#[test]
fn a_daemon_whose_connection_dropped_keeps_its_runs_for_the_grace_and_is_repaired_after() {
    let (a, b, config, guard) = a_and_b();
    let a_config = host_config(&config, "a");
    a_runs_one_job(&a);
    // a's writer session ends under it (a server restart, pg_terminate_backend, a network
    // reset) while a lives and was seen just now: its run stays its own.
    let now = T0 + MIN;
    last_seen(&config, &a_config, now - 10_000);
    kill_writer_session(&config, &a_config);
    assert_eq!(repair(&b, now), Vec::<i64>::new());
    assert_eq!(
        b.get_job(1).unwrap().unwrap().job.status,
        JobStatus::Running
    );
    // b wakes when the grace ends, not before.
    assert_eq!(
        b.next_job_wake(60 * MIN).unwrap(),
        Some(now - 10_000 + 90_000)
    );
    // Two minutes without a touch: a is dead, b repairs its run.
    last_seen(&config, &a_config, now - 2 * MIN);
    assert_eq!(
        b.next_job_wake(60 * MIN).unwrap(),
        Some(now - 2 * MIN + 90_000)
    );
    assert_eq!(repair(&b, now), [1]);
    let run = b.job_run(1, 1).unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::Interrupted);
    drop((a, b));
    drop(guard);
}

#[test]
fn a_restarted_daemons_runs_are_repaired_at_once_though_it_was_seen_just_now() {
    let (a, b, config, guard) = a_and_b();
    let a_config = host_config(&config, "a");
    a_runs_one_job(&a);
    // a is killed and started again: a new incarnation (started_at), seen now, lock held.
    drop(a);
    let a = PgStore::open(&a_config).unwrap();
    let now = T0 + MIN;
    last_seen(&config, &a_config, now);
    assert_eq!(repair(&b, now), [1]);
    assert_eq!(b.get_job(1).unwrap().unwrap().job.status, JobStatus::Queued);
    drop((a, b));
    drop(guard);
}

#[test]
fn a_job_for_a_phone_of_one_host_is_never_claimed_by_another() {
    let (mut stores, _config, guard) = hosts(&["a", "b"]);
    let b = stores.pop().unwrap();
    let a = stores.pop().unwrap();
    a.register_devices(&["pixel-a".to_owned(), "spare-a".to_owned()])
        .unwrap();
    b.register_devices(&["pixel-b".to_owned()]).unwrap();
    assert_eq!(a.registered_devices().unwrap(), ["pixel-a", "spare-a"]);
    // Registering again replaces the set.
    a.register_devices(&["pixel-a".to_owned()]).unwrap();
    assert_eq!(a.registered_devices().unwrap(), ["pixel-a"]);
    assert!(matches!(
        a.register_devices(&[" ".to_owned()]).unwrap_err(),
        StoreError::Invalid { .. }
    ));
    // Job 1 acts on a's phone (due first), 2 on b's, 3 on none, 4 on a phone nobody serves.
    for title in ["on a", "on b", "anywhere", "nowhere"] {
        a.create_job(&new_job(title, T0), T0, 10).unwrap();
    }
    for (id, device) in [(1, "pixel-a"), (2, "pixel-b"), (4, "spare-a")] {
        a.set_job_device(id, Some(device)).unwrap();
    }
    // b wakes for and claims its phone's job and the one naming none, never a's.
    assert_eq!(b.next_job_wake(MIN).unwrap(), Some(T0));
    assert_eq!(ids(&claim(&b, T0, 10, "sched-b")), [2, 3]);
    assert_eq!(b.next_job_wake(MIN).unwrap(), Some(T0 + MIN));
    assert!(claim(&b, T0 + 5 * MIN, 10, "sched-b").is_empty());
    assert_eq!(ids(&claim(&a, T0, 10, "sched-a")), [1]);
    assert_eq!(a.next_job_wake(MIN).unwrap(), Some(T0 + MIN));
    assert_eq!(a.get_job(4).unwrap().unwrap().job.status, JobStatus::Queued);
    drop((a, b));
    drop(guard);
}

#[test]
fn a_stale_ledger_row_of_a_live_daemon_is_that_daemons_to_close() {
    let (mut stores, _config, guard) = hosts(&["a", "b"]);
    let b = stores.pop().unwrap();
    let a = stores.pop().unwrap();
    a.create_job(&new_job("j", T0), T0, 10).unwrap();
    let run = claim(&a, T0, 1, "sched-a").pop().unwrap();
    // The job leaves `running` without its attempt being ended (a stop raced the runner): the
    // ledger row still says `running`.
    let mut stopped = run.clone();
    stopped.job.status = JobStatus::Stopped;
    stopped.job.phase = JobPhase::Stopped;
    b.update_job(&stopped).unwrap();
    let end = finish(&run, RunOutcome::Interrupted, T0 + MIN);
    // b's heartbeat may not close a live daemon's row; a's may.
    let err = b.close_stale_job_run(1, &end).unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert_eq!(
        b.job_run(1, 1).unwrap().unwrap().outcome,
        RunOutcome::Running
    );
    assert!(a.close_stale_job_run(1, &end).unwrap());
    assert_eq!(
        b.job_run(1, 1).unwrap().unwrap().outcome,
        RunOutcome::Interrupted
    );
    assert!(!a.close_stale_job_run(1, &end).unwrap());
    drop((a, b));
    drop(guard);
}

#[test]
fn a_jobs_outcome_is_delivered_by_the_daemon_that_ran_it_alone() {
    let (stores, _config, _guard) = hosts(&["a", "b"]);
    let (a, b) = (&stores[0], &stores[1]);
    // Made on a, run on b: b's phone shows the outcome, so b delivers it (and a never does).
    a.create_job(&new_job("ran on b", T0), T0, 100).unwrap();
    let running = claim(b, T0 + 1, 1, "sched-b");
    assert_eq!(running.len(), 1);
    let mut done = running[0].clone();
    done.job.status = JobStatus::Completed;
    done.job.phase = JobPhase::Completed;
    done.job.last_run_at = T0 + 2;
    done.delivery_state = Some(DeliveryState::Pending);
    b.finish_job_attempt(&done, &finish(&running[0], RunOutcome::Succeeded, T0 + 2))
        .unwrap();
    // Made on a and never run: a delivers whatever is owed.
    let mut kept = a
        .create_job(&new_job("never ran", T0 + 60 * MIN), T0, 100)
        .unwrap();
    kept.job.status = JobStatus::Failed;
    kept.job.phase = JobPhase::Failed;
    kept.job.last_run_at = T0 + 3;
    kept.delivery_state = Some(DeliveryState::Failed);
    a.update_job(&kept).unwrap();
    assert_eq!(
        ids(&b.undelivered_jobs(T0, 10).unwrap()),
        [running[0].job.id]
    );
    assert_eq!(ids(&a.undelivered_jobs(T0, 10).unwrap()), [kept.job.id]);
}

/// A job of runtime `runtime` (quota counted), due an hour after `T0`.
fn runtime_job(title: &str, runtime: &str) -> NewAgentJob {
    NewAgentJob {
        created_by: runtime.to_owned(),
        ..new_job(title, T0 + 60 * MIN)
    }
}

/// Runs `per_thread` calls of `create` on each of `threads` threads of every daemon of
/// `stores` at once; returns every call's result.
fn create_concurrently<T: Send + 'static>(
    stores: &[Arc<PgStore>],
    threads: usize,
    per_thread: usize,
    create: impl Fn(&PgStore, String) -> Result<T, StoreError> + Send + Sync + 'static,
) -> Vec<Result<T, StoreError>> {
    let create = Arc::new(create);
    let start = Arc::new(std::sync::Barrier::new(stores.len() * threads));
    let mut handles = Vec::new();
    for (d, store) in stores.iter().enumerate() {
        for t in 0..threads {
            let (store, create, start) =
                (Arc::clone(store), Arc::clone(&create), Arc::clone(&start));
            handles.push(std::thread::spawn(move || {
                start.wait();
                (0..per_thread)
                    .map(|i| create(&store, format!("d{d} t{t} #{i}")))
                    .collect::<Vec<_>>()
            }));
        }
    }
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

/// A regression test: a job creation counts the jobs table (`COUNT(*)` for the quota) under
/// SERIALIZABLE, so two daemons creating jobs at once aborted each other, and a watcher's firing
/// (which creates its reaction job) lost ten tries in a row beside a daemon creating a job every
/// few milliseconds. Creators now queue on a table lock taken before their snapshot.
#[test]
fn job_creations_on_two_daemons_and_a_third_firing_watchers_all_succeed() {
    use openphone_store::{
        AuditEntry, AuditKind, FireOutcome, JobQuota, NewFiring, NewWatcher, WatcherStore,
    };
    const THREADS: usize = 4;
    const EACH: usize = 50;
    const FIRINGS: usize = 40;
    let (stores, _config, guard) = hosts(&["a", "b", "c"]);
    let stores: Vec<Arc<PgStore>> = stores.into_iter().map(Arc::new).collect();
    let watcher = stores[2]
        .create_watcher(
            &NewWatcher {
                runtime: "openclaw".to_owned(),
                params: json!({"source": "message", "title": "any sms"}),
            },
            T0,
        )
        .unwrap();
    let firing = {
        let c = Arc::clone(&stores[2]);
        std::thread::spawn(move || {
            (0..FIRINGS)
                .map(|k| {
                    let key = format!("msg:{k}");
                    let new = NewFiring {
                        watcher_id: watcher.watcher_id,
                        dedupe_key: key.clone(),
                        fired_at_ms: T0 + 1,
                        trigger: "event".to_owned(),
                        event: json!({"kind": "message_received", "key": key}),
                        reaction: "agent_job".to_owned(),
                        end: false,
                        cursor: Some(json!({"seen": key})),
                        job: Some((
                            new_job(&format!("reaction to {key}"), T0 + 60 * MIN),
                            JobQuota::for_max(10_000),
                        )),
                    };
                    c.fire_watcher(
                        new,
                        Box::new(|ids| AuditEntry {
                            audit_id: format!("watcher:{}:{}", ids.watcher_id, ids.firing),
                            kind: AuditKind::BackgroundEvent,
                            at_ms: T0,
                            runtime: "builtin".to_owned(),
                            request_id: format!("watcher-{}", ids.firing),
                            tool: Some("watcher.fired".to_owned()),
                            ..AuditEntry::default()
                        }),
                    )
                })
                .collect::<Vec<_>>()
        })
    };
    let created = create_concurrently(&stores[..2], THREADS, EACH, |store, title| {
        store.create_job(&new_job(&title, T0 + 60 * MIN), T0, 10_000)
    });
    let fired = firing.join().unwrap();

    let failed: Vec<_> = created.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} creations failed: {failed:?}",
        failed.len()
    );
    let mut ids: Vec<i64> = created.iter().flatten().map(|j| j.job.id).collect();
    let not_fired: Vec<_> = fired
        .iter()
        .filter(|o| !matches!(o, Ok(FireOutcome::Fired(f)) if f.job.is_some()))
        .collect();
    assert!(not_fired.is_empty(), "firings without a job: {not_fired:?}");
    ids.extend(fired.iter().flatten().filter_map(|o| match o {
        FireOutcome::Fired(f) => f.job.as_ref().map(|j| j.job.id),
        FireOutcome::Duplicate | FireOutcome::NotActive => None,
    }));
    let expected = 2 * THREADS * EACH + FIRINGS;
    assert_eq!(ids.len(), expected);
    let unique: std::collections::HashSet<i64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), expected, "a job id was given twice");
    let listed = stores[0]
        .list_jobs(&openphone_store::JobFilter::default())
        .unwrap();
    assert_eq!(listed.len(), expected);
    drop(stores);
    drop(guard);
}

/// The quota is still one fleet-wide limit when creators on two daemons race for its last places:
/// exactly the cap is created, the rest refused with `LimitReached` (of a runtime's own quota,
/// and of `max_jobs`).
#[test]
fn the_job_quota_refuses_at_the_cap_across_two_daemons() {
    use openphone_store::JobQuota;
    let (stores, _config, guard) = hosts(&["a", "b"]);
    let stores: Vec<Arc<PgStore>> = stores.into_iter().map(Arc::new).collect();
    // A runtime's own quota: 2 daemons x 4 threads x 10 tries for 25 places.
    let quota = JobQuota {
        per_runtime: 25,
        ..JobQuota::for_max(1_000)
    };
    let results = create_concurrently(&stores, 4, 10, move |store, title| {
        store.create_job_limited(&runtime_job(&title, "openclaw"), T0, &quota)
    });
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(StoreError::LimitReached { limit: 25, .. })))
        .count();
    assert_eq!((results.len() - refused, refused), (25, 55), "{results:?}");
    // Every job's max: 25 stored already, 40 tries for the 15 places left.
    let results = create_concurrently(&stores, 4, 5, |store, title| {
        store.create_job(&new_job(&title, T0 + 60 * MIN), T0, 40)
    });
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(StoreError::LimitReached { limit: 40, .. })))
        .count();
    assert_eq!((results.len() - refused, refused), (15, 25), "{results:?}");
    assert_eq!(
        stores[1]
            .list_jobs(&openphone_store::JobFilter::default())
            .unwrap()
            .len(),
        40
    );
    drop(stores);
    drop(guard);
}
