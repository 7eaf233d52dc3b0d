//! Issue 28, low items: a goal spec's input is refused with an error naming what is wrong —
//! a key given twice in a goal file, a negative checkpoint.

use openphone_goals::spec::{GoalSpec, MAX_CHECKPOINT_MINUTES, new_goal, parse_goal_file};
use serde_json::{Value, json};

use super::support::Harness;

const NOW: i64 = 1_760_000_000_000;

fn spec(value: Value) -> GoalSpec {
    serde_json::from_value(value).unwrap()
}

#[test]
fn a_goal_file_with_a_duplicate_key_is_refused_naming_the_key() {
    // A lenient parse kept the last `deadline_at` silently.
    let e = parse_goal_file(
        r#"{"objective": "pay the bill", "deadline_at": 1, "deadline_at": 9999999999999}"#,
    )
    .unwrap_err();
    assert_eq!(e.field, "deadline_at", "{e}");
    assert!(e.message.contains("twice"), "{e}");
    // At any depth: an action of the plan naming its command twice.
    let e = parse_goal_file(
        r#"{"objective": "o", "plan": [{"id": "a", "title": "t", "kind": "tool",
            "command": "openphone.screen.get", "command": "openphone.messages.send"}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.field, "command", "{e}");
    // Not JSON at all: named as the file.
    assert_eq!(parse_goal_file("{").unwrap_err().field, "file");
    // One key once each: read as it is.
    let ok = parse_goal_file(r#"{"objective": "o", "plan": [{"id": "a"}]}"#).unwrap();
    assert_eq!(ok, json!({"objective": "o", "plan": [{"id": "a"}]}));
}

#[test]
fn negative_checkpoints_are_refused_naming_the_field() {
    // Without a deadline they were not checked at all.
    for (checkpoints, deadline, index) in [
        (json!([-5]), None, 0),
        (json!([60, -1]), None, 1),
        (json!([120, -30, 0]), Some(NOW + 3_600_000), 1),
        (json!([MAX_CHECKPOINT_MINUTES + 1]), None, 0),
    ] {
        let goal = spec(json!({"objective": "o", "checkpoints": checkpoints,
                               "deadline_at": deadline}));
        let e = new_goal(&goal, "goal_x".to_owned(), Harness::owner(), NOW).unwrap_err();
        assert_eq!(e.field, format!("checkpoints[{index}]"), "{e}");
        assert!(e.message.contains("between 0 and"), "{e}");
    }
    let goal = spec(json!({"objective": "o", "checkpoints": [120, 0],
                           "deadline_at": NOW + 3_600_000}));
    let made = new_goal(&goal, "goal_x".to_owned(), Harness::owner(), NOW).unwrap();
    assert_eq!(made.checkpoints.len(), 2);
}
