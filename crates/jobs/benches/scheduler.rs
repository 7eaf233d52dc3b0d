//! Scheduler figures (not a test: nothing is asserted). Run with
//! `cargo bench -p openphone-jobs --bench scheduler`.
//!
//! 1. **A wake tick over 100 000 scheduled jobs**: the store holds 100 000 queued jobs due one
//!    second apart; each measured tick finds 3 of them due (the clock moves 3 s between ticks),
//!    repairs nothing, claims the 3, starts their runners and computes the next wake. The time
//!    of `Scheduler::tick` is measured (the runners finish outside it). Also an idle tick:
//!    nothing due, 100 000 queued. Target: ≤ 5 ms.
//! 2. **Repairing 10 000 stale rows**: 10 000 jobs left `running` by a scheduler that went
//!    away 11 minutes ago; one tick repairs them all. Target: ≤ 1 s.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use openphone_clock::{ManualClock, Stopwatch};
use openphone_jobs::limits::STALE_RUN_MS;
use openphone_jobs::{JobType, Runners, Scheduler, SchedulerConfig};
use openphone_store::{ClaimRequest, NewAgentJob, Store};
use serde_json::{Map, Value, json};

const T0: i64 = 1_760_000_000_000;
const SCHEDULED: i64 = 100_000;
const STALE: usize = 10_000;
const TICKS: usize = 50;

fn job(i: i64, next_run_at: i64) -> NewAgentJob {
    let schedule = json!({"next_run_at": next_run_at, "interval_ms": 0});
    NewAgentJob {
        job_type: JobType::Heartbeat,
        title: format!("job {i}"),
        prompt: String::new(),
        payload_json: Map::new(),
        schedule_json: schedule.as_object().cloned().unwrap_or_default(),
        session_target: "main".to_owned(),
        delivery_json: json!({"mode": "silent"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        next_run_at,
        created_by: "operator".to_owned(),
    }
}

fn fill(store: &Store, count: i64, due: impl Fn(i64) -> i64) {
    let batch = 10_000;
    let mut start = 0;
    while start < count {
        let end = (start + batch).min(count);
        let jobs = (start..end).map(|i| job(i, due(i))).collect();
        store.create_jobs(jobs, T0, usize::MAX).unwrap();
        start = end;
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let pick = |q: f64| {
        let last = samples.len() - 1;
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let at = ((last as f64) * q).round() as usize;
        ms(samples[at])
    };
    format!(
        "median {:.2} ms, p95 {:.2} ms, max {:.2} ms ({} runs)",
        pick(0.5),
        pick(0.95),
        pick(1.0),
        samples.len()
    )
}

fn scheduler(store: &Arc<Store>, clock: &ManualClock, owner: &str) -> Scheduler {
    Scheduler::new(
        Arc::clone(store),
        Arc::new(clock.clone()),
        SchedulerConfig::new(owner),
        Runners::builtin(),
    )
}

async fn wake_tick() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
    let first_due = T0 + 60_000;
    let filling = Stopwatch::start();
    fill(&store, SCHEDULED, |i| first_due + i * 1_000);
    println!(
        "filled {SCHEDULED} scheduled jobs in {:.0} ms",
        ms(filling.elapsed())
    );
    let clock = ManualClock::new(first_due + 2_000);
    let sched = scheduler(&store, &clock, "bench");
    let mut busy = Vec::with_capacity(TICKS);
    for _ in 0..TICKS {
        let watch = Stopwatch::start();
        let report = sched.tick().await.unwrap();
        busy.push(watch.elapsed());
        assert_eq!(report.claimed.len(), 3);
        sched.wait_idle().await;
        clock.advance(3_000);
    }
    // Nothing due: move the clock back before the next due job.
    clock.set(first_due + 3 * 1_000 * i64::try_from(TICKS).unwrap() - 500);
    let mut idle = Vec::with_capacity(TICKS);
    for _ in 0..TICKS {
        let watch = Stopwatch::start();
        let report = sched.tick().await.unwrap();
        idle.push(watch.elapsed());
        assert!(report.claimed.is_empty());
    }
    // For comparison: one durable write of this store on this disk (the claim is one).
    let mut writes = Vec::with_capacity(TICKS);
    let mut row = store.get_job(SCHEDULED).unwrap().unwrap();
    for _ in 0..TICKS {
        row.job.progress_current += 1;
        let watch = Stopwatch::start();
        row = store.update_job(&row).unwrap();
        writes.push(watch.elapsed());
    }
    println!(
        "one durable store write (baseline):     {}",
        summary(writes)
    );
    println!(
        "wake tick, {SCHEDULED} scheduled, 3 claimed: {}",
        summary(busy)
    );
    println!(
        "wake tick, {SCHEDULED} scheduled, idle:      {}",
        summary(idle)
    );
}

async fn repair() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
    fill(&store, i64::try_from(STALE).unwrap(), |_| T0);
    let claimed = store
        .claim_due_jobs(&ClaimRequest {
            now_ms: T0,
            limit: STALE,
            owner: "gone".to_owned(),
            started_at_ms: T0,
        })
        .unwrap();
    assert_eq!(claimed.len(), STALE);
    let clock = ManualClock::new(T0 + STALE_RUN_MS + 60_000);
    let sched = scheduler(&store, &clock, "bench");
    let watch = Stopwatch::start();
    let report = sched.tick().await.unwrap();
    let took = watch.elapsed();
    assert_eq!(report.repaired.len(), STALE);
    let sample: Value = serde_json::to_value(store.get_job(1).unwrap().unwrap().job).unwrap();
    assert_eq!(sample["last_result"], "stuck_running_repaired");
    println!(
        "repair of {STALE} stale running rows (one tick): {:.0} ms",
        ms(took)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run either way.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        wake_tick().await;
        repair().await;
    });
}
