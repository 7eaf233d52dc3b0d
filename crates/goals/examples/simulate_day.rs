//! One simulation of a [`day_of_checks`] goal, with its figures printed: the workload of the
//! `simulate` bench, as a plain program for profilers (`valgrind --tool=callgrind`). With
//! `--json` it prints the goal file instead, for `openphone goals simulate`.
//!
//! Run: `cargo run --release -p openphone-goals --example simulate_day -- 300 [--json]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use openphone_clock::Stopwatch;
use openphone_goals::sim::{Rules, SimInput, day_of_checks, simulate};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let actions: usize = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or(300, |a| a.parse().expect("the number of actions"));
    let input = day_of_checks(actions).unwrap();
    if args.iter().any(|a| a == "--json") {
        let SimInput::Bare(spec) = &input else {
            unreachable!("day_of_checks makes a bare goal")
        };
        println!("{}", serde_json::to_string_pretty(spec).unwrap());
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let watch = Stopwatch::start();
    let sim = rt
        .block_on(simulate(
            input,
            None,
            &Rules::default(),
            &dir.path().join("data"),
        ))
        .unwrap();
    println!(
        "{actions} actions: {} ticks, {} transitions, goal {} in {:.2?}",
        sim.ticks,
        sim.transitions,
        sim.state,
        watch.elapsed()
    );
}
