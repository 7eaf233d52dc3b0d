//! The goal simulator over a simulated day (issue 18: "a goal of hundreds of actions over a
//! simulated day runs in seconds"): [`day_of_checks`] goals of 100 and 300 actions — waits
//! spread over the day, each followed by a calendar read — run by `sim::simulate` through the
//! real store (a SQLite file in a temporary directory), the real ToolBridge and the simulated
//! phone. Criterion measures the mean of one whole simulation; before that, one run of each
//! prints its ticks, transitions and wall time. Nothing is asserted (the behaviour of the
//! 300-action run is tested in `tests/suite/simulate.rs`).
//!
//! Run: `cargo bench -p openphone-goals --bench simulate`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use openphone_clock::Stopwatch;
use openphone_goals::sim::{Rules, Simulation, day_of_checks, simulate};

fn run(rt: &tokio::runtime::Runtime, actions: usize) -> Simulation {
    let dir = tempfile::tempdir().unwrap();
    let input = day_of_checks(actions).unwrap();
    rt.block_on(simulate(
        input,
        None,
        &Rules::default(),
        &dir.path().join("data"),
    ))
    .unwrap()
}

fn simulate_day(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for actions in [100, 300] {
        let watch = Stopwatch::start();
        let sim = run(&rt, actions);
        println!(
            "simulate_day_{actions}: {} ticks, {} transitions, goal {} in {:.2?}",
            sim.ticks,
            sim.transitions,
            sim.state,
            watch.elapsed()
        );
    }
    let mut group = c.benchmark_group("goals");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("simulate_day_100", |b| b.iter(|| run(&rt, 100)));
    group.bench_function("simulate_day_300", |b| b.iter(|| run(&rt, 300)));
    group.finish();
}

criterion_group!(benches, simulate_day);
criterion_main!(benches);
