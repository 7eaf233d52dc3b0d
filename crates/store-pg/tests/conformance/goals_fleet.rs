//! What only a fleet has, for goals and watchers (issue 35): daemons (`PgStore`s with their own
//! host ids) on one schema. Two daemons ticking one goal from the same version: exactly one write
//! wins, the other is a conflict that writes nothing. One trigger fired at one watcher by two
//! daemons: recorded once, with one job and one audit record. A firing whose transaction is run
//! again (another daemon wrote the jobs it counted) keeps the job its audit record names.
//! Each goal and watcher names its daemon; a daemon's watcher engine sees only its own watchers,
//! and a goal's reports are delivered by its own daemon alone.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use openphone_store::{
    AuditStore, FireOutcome, GoalStore, JobQuota, JobStore, JobType, NewAgentJob, NewFiring,
    NewGoalReport, NewGoalTransition, NewWatcher, ReportDelivery, StoreError, StoredGoal,
    WatcherStore,
};
use openphone_store_pg::PgStore;
use openphone_store_pg::testing::{SchemaGuard, connect, ctx, fresh_schema, read, test_url};
use postgres::IsolationLevel;
use pretty_assertions::assert_eq;
use serde_json::{Map, json};

use super::fleet_support::{host_config, hosts, race};
use super::support::T0;
use super::watchers::audit_of;

/// Daemons `a` and `b` on one fresh schema (drop the stores before the guard).
fn two_hosts() -> (Arc<PgStore>, Arc<PgStore>, SchemaGuard) {
    let (stores, _config, guard) = hosts(&["a", "b"]);
    let mut stores = stores.into_iter().map(Arc::new);
    (stores.next().unwrap(), stores.next().unwrap(), guard)
}

fn goal(id: &str) -> StoredGoal {
    StoredGoal {
        goal_id: id.to_owned(),
        state: "active".to_owned(),
        version: 0,
        deadline_at_ms: None,
        created_at_ms: T0,
        updated_at_ms: T0,
        goal: json!({"id": id, "ticks": 0}),
        host: None,
    }
}

#[test]
fn two_daemons_writing_one_goal_from_the_same_version_one_wins_the_other_conflicts() {
    let (a, b, _guard) = two_hosts();
    a.create_goal(&goal("goal_F"), vec![], vec![]).unwrap();
    const ROUNDS: i64 = 12;
    for round in 1..=ROUNDS {
        let read_by_both = a.get_goal("goal_F").unwrap().unwrap();
        assert_eq!(read_by_both.version, round);
        let results = race(&[Arc::clone(&a), Arc::clone(&b)], 1, move |store, i| {
            let mut next = read_by_both.clone();
            next.goal = json!({"id": "goal_F", "ticks": round, "by": i});
            next.updated_at_ms = T0 + round;
            let tick = NewGoalTransition {
                action_id: format!("round{round}-host{i}"),
                from_state: "READY".to_owned(),
                to_state: "RUNNING".to_owned(),
                source: "clock".to_owned(),
                reason: "tick".to_owned(),
                at_ms: T0 + round,
            };
            store.update_goal(&next, vec![tick], vec![])
        });
        let winners: Vec<usize> = (0..2).filter(|i| results[*i].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0];
        let loser = &results[1 - winner];
        assert!(
            matches!(loser, Err(StoreError::Conflict { table: "goals", .. })),
            "round {round}: {loser:?}"
        );
        let stored = b.get_goal("goal_F").unwrap().unwrap();
        assert_eq!(stored.version, round + 1);
        assert_eq!(stored.goal["by"], json!(winner));
        let log = b.goal_transitions("goal_F").unwrap();
        assert_eq!(log.len(), usize::try_from(round).unwrap());
        assert_eq!(
            log.last().unwrap().transition.action_id,
            format!("round{round}-host{winner}"),
            "only the winner's transition is logged"
        );
    }
    // A goal names the daemon that created it; every daemon reads it.
    assert_eq!(a.goal_host("goal_F").unwrap().as_deref(), Some(a.host_id()));
    assert_eq!(b.goal_host("goal_F").unwrap().as_deref(), Some(a.host_id()));
    assert_eq!(b.goal_host("goal_none").unwrap(), None);
    // One id created on two daemons at once: one goal.
    let created = race(&[Arc::clone(&a), Arc::clone(&b)], 1, |store, _| {
        store.create_goal(&goal("goal_twice"), vec![], vec![])
    });
    assert_eq!(
        created.iter().filter(|r| r.is_ok()).count(),
        1,
        "{created:?}"
    );
    assert!(
        created
            .iter()
            .any(|r| matches!(r, Err(StoreError::AlreadyExists { table: "goals", .. }))),
        "{created:?}"
    );
}

fn reaction_job(title: String) -> NewAgentJob {
    NewAgentJob {
        job_type: JobType::AgentTurn,
        title,
        prompt: "Look into it".to_owned(),
        payload_json: Map::new(),
        schedule_json: Map::new(),
        session_target: "isolated".to_owned(),
        delivery_json: json!({"mode": "notification"}).as_object().unwrap().clone(),
        next_run_at: T0,
        created_by: "operator".to_owned(),
    }
}

fn firing(watcher_id: i64, key: &str, job: bool) -> NewFiring {
    NewFiring {
        watcher_id,
        dedupe_key: key.to_owned(),
        fired_at_ms: T0 + 1,
        trigger: "event".to_owned(),
        event: json!({"kind": "message_received", "key": key}),
        reaction: if job { "agent_job" } else { "attention" }.to_owned(),
        end: false,
        cursor: Some(json!({"seen": key})),
        job: job.then(|| {
            (
                reaction_job(format!("reaction to {key}")),
                JobQuota::for_max(10_000),
            )
        }),
    }
}

fn count(store: &PgStore, sql: &'static str) -> i64 {
    read(store, "test.count", "", move |conn| {
        ctx(conn.query_one(sql, &[]), "test.count", "").map(|row| row.get(0))
    })
    .unwrap()
}

#[test]
fn one_trigger_fired_at_one_watcher_by_two_daemons_is_recorded_once() {
    let (a, b, _guard) = two_hosts();
    let w = a
        .create_watcher(
            &NewWatcher {
                runtime: "openclaw".to_owned(),
                params: json!({"source": "message", "title": "any sms"}),
            },
            T0,
        )
        .unwrap();
    const KEYS: usize = 10;
    for k in 0..KEYS {
        let key = format!("msg:{k}");
        let outcomes = race(&[Arc::clone(&a), Arc::clone(&b)], 1, move |store, _| {
            store.fire_watcher(firing(w.watcher_id, &key, true), Box::new(audit_of))
        });
        let fired = outcomes
            .iter()
            .filter(|o| matches!(o, Ok(FireOutcome::Fired(_))))
            .count();
        let duplicate = outcomes
            .iter()
            .filter(|o| matches!(o, Ok(FireOutcome::Duplicate)))
            .count();
        assert_eq!((fired, duplicate), (1, 1), "key {k}: {outcomes:?}");
    }
    let firings = b.watcher_firings(w.watcher_id).unwrap();
    assert_eq!(
        firings.iter().map(|f| f.firing).collect::<Vec<_>>(),
        (1..=i64::try_from(KEYS).unwrap()).collect::<Vec<_>>()
    );
    let after = b.get_watcher(w.watcher_id).unwrap().unwrap();
    assert_eq!(after.fire_count, i64::try_from(KEYS).unwrap());
    // One job and one audit record per trigger, each naming the firing's job.
    assert_eq!(
        count(&a, "SELECT COUNT(*) FROM agent_jobs"),
        i64::try_from(KEYS).unwrap()
    );
    for f in &firings {
        let job_id = f.job_id.expect("the reaction's job");
        assert!(a.get_job(job_id).unwrap().is_some());
        let audit_id = format!("watcher:{}:{}", w.watcher_id, f.firing);
        // The audit is searched fleet-wide (every daemon's chain).
        let records = b.find_audit(&audit_id).unwrap();
        assert_eq!(records.len(), 1, "{audit_id}: {records:?}");
        assert_eq!(
            records[0].entry.policy_proof,
            Some(json!({"watcher_id": w.watcher_id, "job_id": job_id}))
        );
    }
}

/// A regression test: a firing with a job whose transaction the writer ran again got a new job
/// id from the sequence while its audit record (built once, on the first try) named the first
/// one. Another daemon's transaction that counts and writes the jobs table commits while the
/// firing waits for its audit chain's head (held here on purpose), so the firing runs again (its
/// write of the jobs table waits for the firing's creators' lock: a deadlock PostgreSQL breaks by
/// aborting the firing, which waited first; before that lock, a serialization failure at commit).
#[test]
fn a_firing_run_again_keeps_the_job_id_its_audit_record_names() {
    let url = test_url().expect("OPENPHONE_TEST_PG_URL");
    let (base, _guard) = fresh_schema(&url);
    let config = host_config(&base, "a");
    let a = Arc::new(PgStore::open(&config).unwrap());
    let w = a
        .create_watcher(
            &NewWatcher {
                runtime: "openclaw".to_owned(),
                params: json!({"source": "message", "title": "bank"}),
            },
            T0,
        )
        .unwrap();
    // A first firing makes the chain's head row and a job for the other writer to touch.
    let first = a
        .fire_watcher(firing(w.watcher_id, "k0", true), Box::new(audit_of))
        .unwrap();
    let FireOutcome::Fired(first) = first else {
        panic!("not fired: {first:?}");
    };
    let other_job = first.job.unwrap().job.id;

    let mut other = connect(&config).unwrap();
    let mut tx = other
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .start()
        .unwrap();
    tx.query_one(
        "SELECT seq FROM audit_heads WHERE chain = $1 FOR UPDATE",
        &[&a.host_id()],
    )
    .unwrap();
    let firing_thread = {
        let a = Arc::clone(&a);
        thread::spawn(move || a.fire_watcher(firing(w.watcher_id, "k1", true), Box::new(audit_of)))
    };
    // Wait until the firing waits for the head: its snapshot is taken, its job inserted.
    let mut watcher = connect(&config).unwrap();
    let mut waited = 0;
    while watcher
        .query_one(
            "SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity s USING (pid) \
             WHERE NOT l.granted AND s.query LIKE '%audit_heads%'",
            &[],
        )
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        waited += 1;
        assert!(waited < 1_000, "the firing never waited for the audit head");
        thread::sleep(Duration::from_millis(10));
    }
    // What another daemon creating a job does: count the jobs, write one.
    tx.query_one("SELECT COUNT(*) FROM agent_jobs", &[])
        .unwrap();
    tx.execute(
        "UPDATE agent_jobs SET updated_at = updated_at + 1 WHERE id = $1",
        &[&other_job],
    )
    .unwrap();
    tx.commit().unwrap();

    let outcome = firing_thread.join().unwrap().unwrap();
    let FireOutcome::Fired(recorded) = outcome else {
        panic!("not fired: {outcome:?}");
    };
    let job_id = recorded.job.as_ref().unwrap().job.id;
    assert_eq!(recorded.firing.job_id, Some(job_id));
    assert_eq!(
        recorded.audit.entry.policy_proof,
        Some(json!({"watcher_id": w.watcher_id, "job_id": job_id}))
    );
    // The transaction ran again: the sequence gave out an id more than the jobs hold, and the
    // job kept the first try's (lower) id.
    let last_given = count(&a, "SELECT last_value FROM agent_jobs_id_seq");
    assert_eq!(count(&a, "SELECT COUNT(*) FROM agent_jobs"), 2);
    assert!(
        job_id < last_given,
        "job {job_id}, last id given {last_given}"
    );
    let stored = a
        .get_job(job_id)
        .unwrap()
        .expect("the job the firing names");
    assert_eq!(stored.job.title, "reaction to k1");
    assert!(a.get_job(last_given).unwrap().is_none());
    let records = a
        .find_audit(&format!("watcher:{}:2", w.watcher_id))
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].entry.policy_proof,
        recorded.audit.entry.policy_proof
    );
    assert!(a.verify_audit().unwrap().is_intact());
}

#[test]
fn watchers_belong_to_their_daemon_and_its_engine_sees_only_its_own() {
    let (a, b, _guard) = two_hosts();
    let new = |title: &str| NewWatcher {
        runtime: "openclaw".to_owned(),
        params: json!({"source": "message", "title": title}),
    };
    let a1 = a.create_watcher(&new("a one"), T0).unwrap();
    let b1 = b.create_watcher(&new("b one"), T0 + 1).unwrap();
    let a2 = a.create_watcher(&new("a two"), T0 + 2).unwrap();
    let ids = |list: Vec<openphone_store::WatcherRecord>| -> Vec<i64> {
        list.into_iter().map(|w| w.watcher_id).collect()
    };
    // The operator's view is the fleet's, on every daemon.
    assert_eq!(
        ids(b.list_watchers(None, None).unwrap()),
        [a2.watcher_id, b1.watcher_id, a1.watcher_id]
    );
    // Each engine runs its own host's.
    assert_eq!(
        ids(a
            .list_watchers_of_host(a.host_id(), None, None, None)
            .unwrap()),
        [a2.watcher_id, a1.watcher_id]
    );
    assert_eq!(
        ids(b
            .list_watchers_of_host(b.host_id(), None, None, None)
            .unwrap()),
        [b1.watcher_id]
    );
    assert_eq!(
        ids(a
            .list_watchers_of_host(a.host_id(), Some("openclaw"), Some("TWO"), Some(5))
            .unwrap()),
        [a2.watcher_id]
    );
    assert!(
        a.list_watchers_of_host(a.host_id(), Some("hermes"), None, None)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        a.watcher_host(b1.watcher_id).unwrap().as_deref(),
        Some(b.host_id())
    );
    assert_eq!(
        b.watcher_host(a1.watcher_id).unwrap().as_deref(),
        Some(a.host_id())
    );
    assert_eq!(a.watcher_host(9_999).unwrap(), None);

    // Pending reactions: each daemon runs its own watchers' after a restart.
    for (store, w, key) in [(&a, &a1, "x"), (&b, &b1, "y"), (&a, &a2, "z")] {
        assert!(matches!(
            store.fire_watcher(firing(w.watcher_id, key, false), Box::new(audit_of)),
            Ok(FireOutcome::Fired(_))
        ));
    }
    let pending = |store: &PgStore, host: &str| -> Vec<(i64, String)> {
        store
            .pending_watcher_reactions_of_host(host)
            .unwrap()
            .into_iter()
            .map(|f| (f.watcher_id, f.dedupe_key))
            .collect()
    };
    assert_eq!(
        pending(&b, a.host_id()),
        [
            (a1.watcher_id, "x".to_owned()),
            (a2.watcher_id, "z".to_owned())
        ]
    );
    assert_eq!(pending(&a, b.host_id()), [(b1.watcher_id, "y".to_owned())]);
    // The trait's read (what a restarted engine runs) is the daemon's own.
    assert_eq!(
        pending(&a, a.host_id()),
        a.pending_watcher_reactions()
            .unwrap()
            .into_iter()
            .map(|f| (f.watcher_id, f.dedupe_key))
            .collect::<Vec<_>>()
    );
    assert_eq!(b.pending_watcher_reactions().unwrap().len(), 1);
    // A stopped watcher's host is still named.
    b.stop_watchers(&openphone_store::WatcherSelector::Id(a1.watcher_id), T0 + 9)
        .unwrap();
    assert_eq!(
        b.watcher_host(a1.watcher_id).unwrap().as_deref(),
        Some(a.host_id())
    );
    assert!(
        a.list_watchers_of_host(a.host_id(), None, Some("a one"), None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_goals_reports_are_delivered_by_its_own_daemon_alone() {
    let (a, b, _guard) = two_hosts();
    let report = |n: i64| NewGoalReport {
        channel: "webhook".to_owned(),
        report: json!({"n": n}),
        delivery: ReportDelivery::Pending,
        created_at_ms: T0 + n,
    };
    a.create_goal(&goal("goal_of_a"), vec![], vec![report(1)])
        .unwrap();
    let of_b = b
        .create_goal(&goal("goal_of_b"), vec![], vec![report(2)])
        .unwrap();
    // Daemon a ticks b's goal (goals are fleet-wide): its report is still b's to deliver.
    a.update_goal(&of_b, vec![], vec![report(3)]).unwrap();
    let pending = |store: &PgStore| -> Vec<(String, i64)> {
        store
            .pending_goal_reports(10)
            .unwrap()
            .into_iter()
            .map(|r| (r.goal_id, r.seq))
            .collect()
    };
    assert_eq!(pending(&a), [("goal_of_a".to_owned(), 1)]);
    assert_eq!(
        pending(&b),
        [("goal_of_b".to_owned(), 1), ("goal_of_b".to_owned(), 2)]
    );
    // Every daemon reads every goal's reports, and records a delivery of any.
    assert_eq!(a.goal_reports("goal_of_b").unwrap().len(), 2);
    b.set_goal_report_delivery("goal_of_b", 1, ReportDelivery::Sent, "")
        .unwrap();
    assert_eq!(pending(&b), [("goal_of_b".to_owned(), 2)]);
    assert_eq!(pending(&a), [("goal_of_a".to_owned(), 1)]);
}

#[test]
fn the_fleet_view_says_whose_goals_watchers_and_phones_each_daemon_has() {
    use openphone_store::Fleet;
    let (a, b, _guard) = two_hosts();
    a.create_goal(&goal("goal_here_a"), vec![], vec![]).unwrap();
    b.create_goal(&goal("goal_here_b"), vec![], vec![]).unwrap();
    // The goal engine of each daemon works on the goals made on it, and on no unknown one.
    assert!(Fleet::goal_is_here(&*a, "goal_here_a").unwrap());
    assert!(!Fleet::goal_is_here(&*a, "goal_here_b").unwrap());
    assert!(Fleet::goal_is_here(&*b, "goal_here_b").unwrap());
    assert!(!Fleet::goal_is_here(&*b, "goal_nobody").unwrap());
    // The watcher engine of each daemon runs the watchers made on it.
    let new = NewWatcher {
        runtime: "openclaw".to_owned(),
        params: json!({"source": "message", "title": "mine"}),
    };
    let wa = a.create_watcher(&new, T0).unwrap();
    let wb = b.create_watcher(&new, T0 + 1).unwrap();
    assert_eq!(Fleet::watchers_here(&*a).unwrap(), [wa.watcher_id]);
    assert_eq!(Fleet::watchers_here(&*b).unwrap(), [wb.watcher_id]);
    // Phones: each daemon's, found from the other; the daemons, both live.
    Fleet::register_devices(&*a, &["phone-a".to_owned()]).unwrap();
    Fleet::register_devices(&*b, &["phone-b".to_owned()]).unwrap();
    assert_eq!(
        Fleet::host_of_device(&*a, "phone-b").unwrap().as_deref(),
        Some(b.host_id())
    );
    assert_eq!(Fleet::host_of_device(&*b, "phone-z").unwrap(), None);
    let hosts = Fleet::hosts(&*a).unwrap();
    let seen: Vec<(String, bool, Vec<String>)> = hosts
        .iter()
        .map(|h| (h.host_id.clone(), h.live, h.device_ids.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (a.host_id().to_owned(), true, vec!["phone-a".to_owned()]),
            (b.host_id().to_owned(), true, vec!["phone-b".to_owned()]),
        ]
    );
    // A daemon that stopped is no longer live; its phone is still known to be its.
    let b_id = b.host_id().to_owned();
    drop(b);
    let hosts = Fleet::hosts(&*a).unwrap();
    let b_row = hosts.iter().find(|h| h.host_id == b_id).unwrap();
    assert!(!b_row.live, "{hosts:?}");
}
