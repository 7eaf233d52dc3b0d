//! The bridge's hot path on the PostgreSQL store, measured: a mutating request that runs
//! without a confirmation is `remember_request` + `begin_execution` (with the attempt's audit
//! record) + `finish_execution` (with the outcome's), three durable writes. Figures for one
//! daemon one request at a time, then two daemons with four callers each on one schema.
//!
//! `OPENPHONE_TEST_PG_URL=$(bash tests/postgres/cluster.sh start) cargo bench -p openphone-store-pg --bench replay`
//! Prints figures; asserts nothing about time.

use std::sync::Arc;

use openphone_clock::Stopwatch;
use openphone_protocol::digest::sha256_hex;
use openphone_store::{AuditEntry, Caller, Execution, IdentityKey, ReplayStore, Scope};
use openphone_store_pg::testing::{fresh_schema, test_url};
use openphone_store_pg::{PgConfig, PgStore};
use serde_json::json;

const REQUESTS: usize = 600;

fn with_host(config: &PgConfig, host: &str) -> PgConfig {
    let mut config = config.clone();
    config.host_id = host.to_owned();
    config
}

/// One mutating request through the store as the bridge makes it; its time in microseconds.
async fn request(store: &PgStore, name: &str) -> u128 {
    let clock = Stopwatch::start();
    let tool = "openphone.memory.save";
    let key = IdentityKey::new("openclaw", "s", tool, sha256_hex(name), "", name);
    let scope = Scope::new("openclaw", "s");
    let check = store
        .remember_request_async(&scope, name, tool, &key.params_digest, 1)
        .await;
    if let Err(e) = check {
        panic!("remember_request {name}: {e}");
    }
    let attempt = AuditEntry {
        audit_id: format!("runtime:openclaw:{name}"),
        runtime: "openclaw".to_owned(),
        caller: Caller::default(),
        request_id: name.to_owned(),
        tool: Some(tool.to_owned()),
        mutating: Some(true),
        ..AuditEntry::default()
    };
    let execution = Execution {
        identity: key.clone(),
        request_id: name.to_owned(),
        attempt: attempt.clone(),
        started_at_ms: 1,
    };
    if let Err(e) = store.begin_execution_async(execution).await {
        panic!("begin_execution {name}: {e}");
    }
    let result = json!({"status": "ok", "request_id": name});
    let finished = store
        .finish_execution_async(key, name.to_owned(), result, attempt, 2)
        .await;
    if let Err(e) = finished {
        panic!("finish_execution {name}: {e}");
    }
    clock.elapsed().as_micros()
}

fn report(what: &str, mut micros: Vec<u128>, took: std::time::Duration) {
    micros.sort_unstable();
    let at = |q: usize| micros.get(micros.len() * q / 100).copied().unwrap_or(0);
    println!(
        "{what}: {} requests in {took:?}: {:.0} requests/s, p50 {} us, p99 {} us",
        micros.len(),
        micros.len() as f64 / took.as_secs_f64(),
        at(50),
        at(99)
    );
}

fn main() {
    let Some(url) = test_url() else {
        return;
    };
    let (config, _schema) = fresh_schema(&url);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    let open = |host: &str| match PgStore::open(&with_host(&config, host)) {
        Ok(store) => Arc::new(store),
        Err(e) => panic!("open {host}: {e}"),
    };
    let (a, b) = (open("bench-a"), open("bench-b"));
    runtime.block_on(async {
        let clock = Stopwatch::start();
        let mut micros = Vec::with_capacity(REQUESTS);
        for i in 0..REQUESTS {
            micros.push(request(&a, &format!("one-{i}")).await);
        }
        report("one daemon, one caller", micros, clock.elapsed());

        let clock = Stopwatch::start();
        let callers: Vec<_> = (0..8)
            .map(|c| {
                let store = Arc::clone(if c % 2 == 0 { &a } else { &b });
                tokio::spawn(async move {
                    let mut micros = Vec::new();
                    for i in 0..REQUESTS / 8 {
                        micros.push(request(&store, &format!("two-{c}-{i}")).await);
                    }
                    micros
                })
            })
            .collect();
        let mut micros = Vec::with_capacity(REQUESTS);
        for caller in callers {
            match caller.await {
                Ok(m) => micros.extend(m),
                Err(e) => panic!("caller: {e}"),
            }
        }
        report("two daemons, eight callers", micros, clock.elapsed());
    });
}
