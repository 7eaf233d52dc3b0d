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

#[test]
fn a_deadline_may_be_written_as_rfc3339_and_is_kept_as_unix_ms() {
    // Issue 31: goal deadlines had to be written in epoch milliseconds.
    let written = spec(json!({"objective": "o", "deadline_at": "2025-10-09T10:00:00+02:00"}));
    assert_eq!(written.deadline_at, Some(1_759_996_800_000));
    let z = spec(json!({"objective": "o", "deadline_at": "2025-10-09T08:00:00Z"}));
    assert_eq!(z.deadline_at, written.deadline_at);
    // The wire form stays milliseconds, and milliseconds are still read.
    assert_eq!(
        serde_json::to_value(&written).unwrap()["deadline_at"],
        json!(1_759_996_800_000_i64)
    );
    assert_eq!(
        spec(json!({"objective": "o", "deadline_at": 1_759_996_800_000_i64})).deadline_at,
        Some(1_759_996_800_000)
    );
    assert_eq!(
        spec(json!({"objective": "o", "deadline_at": null})).deadline_at,
        None
    );
    // A text that is not RFC 3339, or neither form, is refused saying what is expected.
    for bad in [
        json!("tomorrow 18:00"),
        json!("2025-10-09 10:00"),
        json!(1.5),
        json!(true),
    ] {
        let e = serde_json::from_value::<GoalSpec>(json!({"objective": "o", "deadline_at": bad}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("deadline_at") && e.contains("RFC 3339"),
            "{bad}: {e}"
        );
    }
    // Read into ms, it is checked like one: in the past is refused.
    let past = spec(json!({"objective": "o", "deadline_at": "2020-01-01T00:00:00Z"}));
    let e = new_goal(&past, "goal_x".to_owned(), Harness::owner(), NOW).unwrap_err();
    assert_eq!(e.field, "deadline_at", "{e}");
}
