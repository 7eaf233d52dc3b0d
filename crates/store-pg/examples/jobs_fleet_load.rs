//! Job claims across daemons on one PostgreSQL, and the wake query over 100 000 jobs (issue 35).
//! A load tool, not a test: it prints figures and asserts only that every job was claimed once.
//!
//! ```sh
//! bash tests/postgres/cluster.sh start
//! OPENPHONE_TEST_PG_URL=$(bash tests/postgres/cluster.sh url) \
//!     cargo run --release -p openphone-store-pg --example jobs_fleet_load [-- JOBS]
//! ```
//!
//! 1. **Claims with 1, 2 and 3 daemons**: `JOBS` (default 3000) jobs all due; each daemon (a
//!    `PgStore` with its own host id, one claiming thread, as a scheduler's tick is) claims
//!    until none is left, one job per claim and then ten. Prints jobs claimed per second over
//!    the fleet and each claim call's latency (median, p99, max).
//! 2. **The next wake over 100 000 jobs**: `next_job_wake` with 100 000 queued jobs due one
//!    second apart (nothing due), then with half of them naming a phone of another host; and
//!    a tick's store work (claim the 3 due + the next wake). The same on SQLite for comparison.
//! 3. **Claims while another daemon creates jobs**: one daemon claims `JOBS` due jobs one per
//!    claim while a second creates jobs one at a time (job creators queue on a table lock that
//!    the claims' row writes wait for); prints both sides' rates and latencies.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use openphone_clock::Stopwatch;

use openphone_store::{ClaimRequest, JobStore, JobType, NewAgentJob, Store};
use openphone_store_pg::testing::{connect, fresh_schema, test_url};
use openphone_store_pg::{PgConfig, PgStore};
use serde_json::{Map, json};

const T0: i64 = 1_760_000_000_000;
const SCHEDULED: i64 = 100_000;

fn job(i: i64, next_run_at: i64) -> NewAgentJob {
    let mut schedule = Map::new();
    schedule.insert("next_run_at".to_owned(), json!(next_run_at));
    schedule.insert("interval_ms".to_owned(), json!(0));
    let mut delivery = Map::new();
    delivery.insert("mode".to_owned(), json!("silent"));
    NewAgentJob {
        job_type: JobType::Heartbeat,
        title: format!("job {i}"),
        prompt: String::new(),
        payload_json: Map::new(),
        schedule_json: schedule,
        session_target: "main".to_owned(),
        delivery_json: delivery,
        next_run_at,
        created_by: "operator".to_owned(),
    }
}

fn fill<S: JobStore + ?Sized>(store: &S, count: i64, due: impl Fn(i64) -> i64) {
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
        "median {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} calls)",
        pick(0.5),
        pick(0.99),
        pick(1.0),
        samples.len()
    )
}

fn host(base: &PgConfig, name: &str) -> PgConfig {
    let mut config = base.clone();
    config.host_id = format!("{}-{name}", base.host_id);
    config.data_dir = base.data_dir.join(name);
    config
}

/// `daemons` stores claim `jobs` due jobs, `limit` per claim, one thread each.
fn claims(url: &str, daemons: usize, jobs: i64, limit: usize) {
    let (config, guard) = fresh_schema(url);
    let stores: Vec<Arc<PgStore>> = (0..daemons)
        .map(|d| Arc::new(PgStore::open(&host(&config, &format!("d{d}"))).unwrap()))
        .collect();
    fill(&*stores[0], jobs, |_| T0);
    let start = Arc::new(Barrier::new(daemons + 1));
    let threads: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(d, store)| {
            let (store, start) = (Arc::clone(store), Arc::clone(&start));
            std::thread::spawn(move || {
                let (mut won, mut latency) = (Vec::new(), Vec::new());
                start.wait();
                loop {
                    let began = Stopwatch::start();
                    let claimed = store
                        .claim_due_jobs(&ClaimRequest {
                            now_ms: T0 + 1,
                            limit,
                            owner: format!("sched-{d}"),
                            started_at_ms: T0,
                        })
                        .unwrap();
                    latency.push(began.elapsed());
                    if claimed.is_empty() {
                        return (won, latency);
                    }
                    won.extend(claimed.into_iter().map(|c| c.job.job.id));
                }
            })
        })
        .collect();
    start.wait();
    let began = Stopwatch::start();
    let mut all = Vec::new();
    let mut latency = Vec::new();
    let mut per_daemon = Vec::new();
    for thread in threads {
        let (won, lat) = thread.join().unwrap();
        per_daemon.push(won.len());
        all.extend(won);
        latency.extend(lat);
    }
    let elapsed = began.elapsed();
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a job was claimed twice");
    assert_eq!(i64::try_from(all.len()).unwrap(), jobs, "a job was left");
    #[allow(clippy::cast_precision_loss)]
    let rate = all.len() as f64 / elapsed.as_secs_f64();
    println!(
        "  {daemons} daemon(s), {limit} per claim: {rate:.0} jobs claimed/s ({} jobs in {:.2} s, \
         per daemon {per_daemon:?}); claim call {}",
        all.len(),
        elapsed.as_secs_f64(),
        summary(latency)
    );
    drop(stores);
    drop(guard);
}

/// One daemon claims `jobs` due jobs, one per claim, while another creates jobs (due later) one
/// at a time until the claims are done.
fn claims_beside_creations(url: &str, jobs: i64) {
    let (config, guard) = fresh_schema(url);
    let claimer = PgStore::open(&host(&config, "claims")).unwrap();
    let creator = Arc::new(PgStore::open(&host(&config, "creates")).unwrap());
    fill(&claimer, jobs, |_| T0);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let creating = {
        let (creator, done) = (Arc::clone(&creator), Arc::clone(&done));
        std::thread::spawn(move || {
            let (mut latency, mut failed) = (Vec::new(), 0usize);
            let mut i = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let began = Stopwatch::start();
                if creator
                    .create_job(&job(i, T0 + 3_600_000), T0, usize::MAX)
                    .is_err()
                {
                    failed += 1;
                }
                latency.push(began.elapsed());
                i += 1;
            }
            (latency, failed)
        })
    };
    let began = Stopwatch::start();
    let (mut claimed, mut latency, mut claims_failed) = (0usize, Vec::new(), 0usize);
    loop {
        let call = Stopwatch::start();
        let got = claimer.claim_due_jobs(&ClaimRequest {
            now_ms: T0 + 1,
            limit: 1,
            owner: "sched".to_owned(),
            started_at_ms: T0,
        });
        latency.push(call.elapsed());
        match got {
            Ok(got) if got.is_empty() => break,
            Ok(got) => claimed += got.len(),
            Err(_) => claims_failed += 1,
        }
    }
    let elapsed = began.elapsed().as_secs_f64();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (created, failed) = creating.join().unwrap();
    #[allow(clippy::cast_precision_loss)]
    let (claim_rate, create_rate) = (claimed as f64 / elapsed, created.len() as f64 / elapsed);
    println!(
        "  claims: {claim_rate:.0} jobs claimed/s, {claims_failed} failed, claim call {}",
        summary(latency)
    );
    println!(
        "  creations beside them: {create_rate:.0} jobs created/s, {failed} failed, create call {}",
        summary(created)
    );
    drop((claimer, creator));
    drop(guard);
}

fn wake_figures<S: JobStore + ?Sized>(label: &str, store: &S) {
    let mut idle = Vec::new();
    let mut wake = None;
    for _ in 0..50 {
        let began = Stopwatch::start();
        wake = store.next_job_wake(600_000).unwrap();
        idle.push(began.elapsed());
    }
    println!(
        "  {label}: next_job_wake {} -> {:?}",
        summary(idle),
        wake.map(|w| w - T0)
    );
}

fn tick_figures<S: JobStore + ?Sized>(label: &str, store: &S) {
    let mut ticks = Vec::new();
    for t in 0..50i64 {
        let now = T0 + 3_000 * (t + 1);
        let began = Stopwatch::start();
        let claimed = store
            .claim_due_jobs(&ClaimRequest {
                now_ms: now,
                limit: 10,
                owner: "sched".to_owned(),
                started_at_ms: T0,
            })
            .unwrap();
        store.next_job_wake(600_000).unwrap();
        ticks.push(began.elapsed());
        assert_eq!(claimed.len(), 3);
    }
    println!(
        "  {label}: a tick's store work (claim the 3 due + next wake) {}",
        summary(ticks)
    );
}

fn main() {
    let Some(url) = test_url() else { return };
    let jobs: i64 = std::env::args()
        .nth(1)
        .map_or(3000, |a| a.parse().expect("JOBS is a number"));
    println!("claims ({jobs} due jobs, one claiming thread per daemon):");
    for limit in [1, 10] {
        for daemons in 1..=3 {
            claims(&url, daemons, jobs, limit);
        }
    }

    println!("claims ({jobs} due jobs, one per claim) while another daemon creates jobs:");
    claims_beside_creations(&url, jobs);

    println!("next wake over {SCHEDULED} queued jobs due 1 s apart:");
    let (config, guard) = fresh_schema(&url);
    let pg = PgStore::open(&host(&config, "a")).unwrap();
    let began = Stopwatch::start();
    fill(&pg, SCHEDULED, |i| T0 + 1_000 * (i + 1));
    println!(
        "  (PostgreSQL filled in {:.1} s)",
        began.elapsed().as_secs_f64()
    );
    wake_figures("PostgreSQL", &pg);
    tick_figures("PostgreSQL", &pg);
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(dir.path().join("data")).unwrap();
    fill(&*sqlite, SCHEDULED, |i| T0 + 1_000 * (i + 1));
    wake_figures("SQLite", &*sqlite);
    tick_figures("SQLite", &*sqlite);
    drop(sqlite);

    println!("next wake, half of the {SCHEDULED} jobs naming a phone of another host:");
    let other = PgStore::open(&host(&config, "b")).unwrap();
    other.register_devices(&["pixel-b".to_owned()]).unwrap();
    pg.register_devices(&["pixel-a".to_owned()]).unwrap();
    let began = Stopwatch::start();
    let bound = connect(&config)
        .unwrap()
        .execute(
            "UPDATE agent_jobs SET device_id = 'pixel-b' WHERE id % 2 = 0",
            &[],
        )
        .unwrap();
    println!(
        "  ({bound} jobs bound to pixel-b in {:.1} s)",
        began.elapsed().as_secs_f64()
    );
    wake_figures("PostgreSQL, host a", &pg);
    wake_figures("PostgreSQL, host b", &other);
    drop((pg, other));
    drop(guard);
}
