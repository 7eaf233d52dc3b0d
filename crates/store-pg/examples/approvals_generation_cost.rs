//! What the approvals' generation costs per tool call on PostgreSQL (the bridge reads it before
//! every policy check), beside SQLite's in-process counter, and what a cache miss costs (the
//! bridge's `list_approvals` of one runtime).
//!
//! `OPENPHONE_TEST_PG_URL=$(bash tests/postgres/cluster.sh url) cargo run --release -p openphone-store-pg --example approvals_generation_cost`
//! Prints figures; asserts nothing about time.

use std::time::Duration;

use openphone_clock::Stopwatch;
use openphone_store::{NewStandingApproval, Store};
use openphone_store_pg::PgStore;
use openphone_store_pg::testing::{self, fresh_schema, test_url};

type Error = Box<dyn std::error::Error>;

const CALLS: usize = 5_000;
const APPROVALS: usize = 20;

/// Runs `f` `n` times and prints the mean, p50 and p99 of one run.
fn measure(label: &str, n: usize, mut f: impl FnMut() -> Result<(), Error>) -> Result<(), Error> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let watch = Stopwatch::start();
        f()?;
        times.push(watch.elapsed());
    }
    times.sort();
    let total: Duration = times.iter().sum();
    let at = |q: f64| {
        let i = ((times.len() as f64) * q) as usize;
        times[i.min(times.len() - 1)]
    };
    println!(
        "{label:<58} n={n:<6} mean {:>8.1} µs  p50 {:>8.1} µs  p99 {:>8.1} µs",
        total.as_secs_f64() * 1e6 / n as f64,
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
    );
    Ok(())
}

fn fill(store: &Store) -> Result<(), Error> {
    for i in 0..APPROVALS {
        store.create_approval(
            &NewStandingApproval {
                runtime: "hermes".to_owned(),
                tool: format!("openphone.tool_{i}"),
                constraints: serde_json::json!({"url": {"prefix": "https://example.org/"}}),
                ..NewStandingApproval::default()
            },
            1,
        )?;
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let Some(url) = test_url() else {
        return Ok(());
    };
    let (config, _schema) = fresh_schema(&url);
    let pg = PgStore::open(&config)?;
    // The generation's read exactly as approvals.rs runs it, on this store's reader.
    let raw = |store: &PgStore| -> Result<(), Error> {
        testing::read(store, "bench.approvals_version", "", |client| {
            testing::ctx(
                client.simple_query("SELECT version FROM approvals_version"),
                "bench.approvals_version",
                "",
            )
        })?;
        Ok(())
    };
    measure(
        "PostgreSQL: SELECT version FROM approvals_version (reader)",
        CALLS,
        || raw(&pg),
    )?;
    let pg = pg.into_store();
    fill(&pg)?;
    let before = pg.approvals_generation();
    pg.set_approval_enabled(1, false, 2)?;
    if pg.approvals_generation() == before {
        println!("(note: StoreInfo::approvals_generation is not wired to approvals.rs yet)");
    }
    measure("PostgreSQL: Store::approvals_generation", CALLS, || {
        pg.approvals_generation();
        Ok(())
    })?;
    measure(
        &format!("PostgreSQL: Store::list_approvals (cache miss, {APPROVALS} rows)"),
        CALLS / 5,
        || {
            pg.list_approvals(Some("hermes"))?;
            Ok(())
        },
    )?;

    let dir = tempfile::tempdir()?;
    let sqlite = Store::open(dir.path().join("data"))?;
    fill(&sqlite)?;
    measure("SQLite: Store::approvals_generation", CALLS, || {
        sqlite.approvals_generation();
        Ok(())
    })?;
    measure(
        &format!("SQLite: Store::list_approvals (cache miss, {APPROVALS} rows)"),
        CALLS / 5,
        || {
            sqlite.list_approvals(Some("hermes"))?;
            Ok(())
        },
    )?;
    Ok(())
}
