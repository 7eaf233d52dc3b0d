#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The audit chains on PostgreSQL, measured: appends per second of one daemon (each append its
//! own SERIALIZABLE commit: head locked, record, head and anchor written), of two daemons
//! appending to their own chains at once (no cross-host contention expected), and a
//! fleet-wide verify of every record appended.
//!
//! `OPENPHONE_TEST_PG_URL=$(bash tests/postgres/cluster.sh url) cargo bench -p openphone-store-pg --bench audit`
//! Prints figures; asserts nothing about time.

use std::thread;

use openphone_clock::Stopwatch;
use openphone_protocol::ToolStatus;
use openphone_store::{AuditEntry, AuditStore, Caller};
use openphone_store_pg::testing::{fresh_schema, test_url};
use openphone_store_pg::{PgConfig, PgStore};

const APPENDS: i64 = 1000;

fn with_host(config: &PgConfig, host: &str) -> PgConfig {
    let mut config = config.clone();
    config.host_id = host.to_owned();
    config.data_dir = config.data_dir.join(host);
    config
}

fn entry(host: &str, i: i64) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:bench:{host}-{i}"),
        at_ms: 1_760_000_000_000 + i,
        runtime: "bench".to_owned(),
        caller: Caller {
            runtime: "bench".to_owned(),
            transport: "ws".to_owned(),
            principal: "token:bench".to_owned(),
        },
        request_id: format!("{host}-{i}"),
        tool: Some("openphone.screen.read".to_owned()),
        status: Some(ToolStatus::Ok),
        policy_proof: Some(serde_json::json!([{"layer": "tool_policy", "verdict": "allow"}])),
        ..AuditEntry::default()
    }
}

fn append_all(store: &PgStore, host: &str, from: i64) -> (f64, f64) {
    let mut latencies = Vec::with_capacity(APPENDS as usize);
    let total = Stopwatch::start();
    for i in from..from + APPENDS {
        let one = Stopwatch::start();
        store.append_audit(&entry(host, i)).unwrap();
        latencies.push(one.elapsed().as_secs_f64() * 1000.0);
    }
    let rate = APPENDS as f64 / total.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    (rate, latencies[latencies.len() * 99 / 100])
}

fn main() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    let a = PgStore::open(&with_host(&config, "bench-a")).unwrap();
    let b = PgStore::open(&with_host(&config, "bench-b")).unwrap();

    let (rate, p99) = append_all(&a, "bench-a", 1);
    println!("1 daemon:  {APPENDS} appends, {rate:.0}/s, p99 {p99:.2} ms");

    let results = thread::scope(|s| {
        let ha = s.spawn(|| append_all(&a, "bench-a", APPENDS + 1));
        let hb = s.spawn(|| append_all(&b, "bench-b", 1));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    let ((ra, pa), (rb, pb)) = results;
    println!(
        "2 daemons: {APPENDS} appends each at once, {ra:.0}/s + {rb:.0}/s = {:.0}/s, p99 {pa:.2} / {pb:.2} ms",
        ra + rb
    );

    let verify = Stopwatch::start();
    let chains = a.verify_audit_chains().unwrap();
    let checked: u64 = chains.iter().map(|c| c.report.checked).sum();
    assert!(chains.iter().all(|c| c.is_intact()));
    println!(
        "verify:    {} chains, {checked} records in {:?}",
        chains.len(),
        verify.elapsed()
    );
}
