//! The simulator (§9): the dentist goal end to end in simulated time — same input, same
//! timeline (snapshot) — and a day of 300 actions (measured and printed, not asserted: in a
//! debug build on a loaded machine it took about 170 s, far from the spec's "seconds").

use openphone_clock::Stopwatch;
use openphone_goals::model::GoalState;
use openphone_goals::sim::{Rules, SimInput, simulate};
use serde_json::json;

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

async fn run_dentist() -> openphone_goals::sim::Simulation {
    let input: SimInput = serde_json::from_str(&example("dentist.goal.json")).unwrap();
    let rules: Rules = serde_json::from_str(&example("dentist.rules.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    simulate(input, None, &rules, &dir.path().join("data"))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_dentist_simulation_matches_its_snapshot_and_is_reproducible() {
    let first = run_dentist().await;
    assert_eq!(
        first.state,
        GoalState::Done,
        "{}",
        first.timeline.join("\n")
    );
    let text = first.timeline.join("\n") + "\n";
    let path = format!(
        "{}/tests/snapshots/dentist.timeline.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    pretty_assertions::assert_eq!(text, expected);
    let second = run_dentist().await;
    assert_eq!(first.timeline, second.timeline);
}

#[tokio::test]
async fn a_declined_approval_stops_the_simulation_blocked_with_the_command() {
    let input: SimInput = serde_json::from_str(&example("dentist.goal.json")).unwrap();
    let rules: Rules = serde_json::from_value(json!({"rules": [
        {"action": "move", "decision": "deny", "after_ms": 1000}
    ]}))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate(input, None, &rules, &dir.path().join("data"))
        .await
        .unwrap();
    // Nobody lifts the block: at the deadline the goal fails with its summary.
    assert_eq!(sim.state, GoalState::Failed);
    let text = sim.timeline.join("\n");
    assert!(
        text.contains("move NEEDS_APPROVAL -> BLOCKED (user) declined by the user"),
        "{text}"
    );
    assert!(
        text.contains("openphone goals retry goal_SIMULATED move"),
        "{text}"
    );
    assert!(text.contains("report (Deadline)"), "{text}");
}

#[tokio::test]
async fn a_simulated_day_of_three_hundred_actions_completes_and_prints_its_time() {
    // 300 actions: waits spread over a day, each followed by a read of the calendar.
    let mut plan = Vec::new();
    for i in 0..150 {
        plan.push(
            json!({"id": format!("w{i}"), "title": format!("wait {i}"), "kind": "wait",
            "until_ms": 1_773_300_600_000_i64 + i64::from(i) * 570_000,
            "depends_on": if i == 0 { vec![] } else { vec![format!("r{}", i - 1)] }}),
        );
        plan.push(
            json!({"id": format!("r{i}"), "title": format!("read {i}"), "kind": "tool",
            "command": "openphone.calendar.search", "params": {"query": "Dentist"},
            "depends_on": [format!("w{i}")]}),
        );
    }
    let input: SimInput = serde_json::from_value(json!({
        "objective": "a day of checks", "deadline_at": 86_400_000, "plan": plan
    }))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let watch = Stopwatch::start();
    let sim = simulate(input, None, &Rules::default(), &dir.path().join("data"))
        .await
        .unwrap();
    let elapsed = watch.elapsed();
    assert_eq!(sim.state, GoalState::Done, "{}", sim.timeline.join("\n"));
    assert!(sim.transitions >= 300 * 4);
    println!(
        "simulated 300 actions over a day: {} ticks, {} transitions in {:.2?}",
        sim.ticks, sim.transitions, elapsed
    );
}
