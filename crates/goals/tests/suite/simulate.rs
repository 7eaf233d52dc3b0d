//! The simulator (§9): the dentist goal end to end in simulated time — same input, same
//! timeline (snapshot) — and a day of 300 actions, every one run in order (its time is the
//! `simulate` bench's).

use openphone_goals::model::GoalState;
use openphone_goals::sim::{Rules, SimInput, day_of_checks, simulate};
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
    // The approval text shows the new start time in the machine's local zone: the snapshot
    // holds a placeholder for it, so it reads the same in every zone.
    let start_at = openphone_clock::human::format_local_exact(1_773_410_400_000);
    let text =
        (first.timeline.join("\n") + "\n").replace(&start_at, "<Fri 13 Mar 2026 14:00 UTC, local>");
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
async fn a_simulated_day_of_three_hundred_actions_runs_every_action_in_order() {
    // 300 actions: waits spread over a day, each followed by a read of the calendar. Its
    // time is measured by the `simulate` bench (`docs/benchmarks.md`), not here.
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate(
        day_of_checks(300).unwrap(),
        None,
        &Rules::default(),
        &dir.path().join("data"),
    )
    .await
    .unwrap();
    assert_eq!(sim.state, GoalState::Done, "{}", sim.timeline.join("\n"));
    // Every action: PLANNED -> READY -> RUNNING -> VERIFYING -> DONE.
    assert_eq!(sim.transitions, 300 * 4);
    let done: Vec<&str> = sim
        .timeline
        .iter()
        .filter(|l| l.contains(" VERIFYING -> DONE "))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    let expected: Vec<String> = (0..150)
        .flat_map(|i| [format!("w{i}"), format!("r{i}")])
        .collect();
    assert_eq!(done, expected);
    // The first wait ends at the start: one tick per later wait (149), the first tick, and
    // the checkpoints T-120 and T-60 (the goal is done before T-15); each read ran once.
    assert_eq!(sim.ticks, 152, "{}", sim.timeline.join("\n"));
    for checkpoint in [
        "T-120 met: plan v1 accepted",
        "T-60 met: critical path needs",
    ] {
        assert!(
            sim.timeline.iter().any(|l| l.contains(checkpoint)),
            "{checkpoint}"
        );
    }
    assert_eq!(
        sim.timeline
            .iter()
            .filter(|l| l.contains("RUNNING -> VERIFYING (executor) the command returned ok"))
            .count(),
        150
    );
    let last = sim.timeline.last().unwrap();
    assert!(
        last.ends_with(&format!(
            "end: goal done after {} ticks, 1200 transitions",
            sim.ticks
        )),
        "{last}"
    );
}
