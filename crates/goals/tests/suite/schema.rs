//! Issue 32 item 10: `schemas/goal.schema.json` (the goal spec a user or a runtime writes) and
//! `schemas/goal-record.schema.json` (the goal record the daemon keeps and shows) agree with
//! the goal layer's own parsers — every valid example is accepted by both, every invalid one
//! refused by both — and the example of `docs/goals.md` is a valid goal as written.

use std::path::PathBuf;

use openphone_clock::Clock as _;
use openphone_goals::spec::{GoalSpec, new_goal, parse_goal_file};
use openphone_goals::{Goal, goal_json};
use serde_json::{Value, json};

use super::support::{Harness, dentist_json};

const SPEC_ID: &str = "https://openphone.dev/schemas/goal.schema.json";
const NOW: i64 = 1_800_000_000_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_json(rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join(rel)).unwrap()).unwrap()
}

/// The validator of `rel`, with the spec schema registered for the record's references.
fn validator(rel: &str) -> jsonschema::Validator {
    let registry = jsonschema::Registry::new()
        .add(SPEC_ID, read_json("schemas/goal.schema.json"))
        .unwrap()
        .prepare()
        .unwrap();
    jsonschema::options()
        .with_registry(&registry)
        .build(&read_json(rel))
        .unwrap()
}

/// The parser's verdict on a goal spec: read, then made into a goal (the checks that name the
/// field).
fn parser_accepts_spec(spec: &Value) -> Result<(), String> {
    let spec: GoalSpec = serde_json::from_value(spec.clone()).map_err(|e| e.to_string())?;
    new_goal(&spec, "goal_x".to_owned(), Harness::owner(), NOW)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn schema_errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc).map(|e| e.to_string()).collect()
}

fn valid_specs() -> Vec<Value> {
    vec![
        // The deadline as an RFC 3339 time with its offset (issue 31).
        json!({"objective": "o", "deadline_at": "2030-01-01T09:00:00+01:00"}),
        json!({"objective": "o", "deadline_at": "2030-01-01T08:00:00.5Z"}),
        json!({"objective": "pay the electricity bill"}),
        dentist_json(NOW, NOW + 86_400_000),
        json!({"objective": "remind me", "deadline_in": "90m", "checkpoints": [60, 0],
               "plan": [{"id": "later", "title": "Remind me", "kind": "job",
                         "prompt": "Remind me", "run_at": NOW + 60_000, "job_title": "Reminder"}]}),
        json!({"objective": "wait for Bob", "autonomy": "observe_only", "max_parallel": 2,
        "retry_budget": {"per_action": 2, "per_goal": 4}, "delivery": "none",
        "plan": [
            {"id": "reply", "title": "Wait for Bob", "kind": "wait", "until_ms": NOW + 1,
             "on": {"event": "phone.message.received",
                    "where": [{"pointer": "/address", "op": "equals", "value": "+1"}]}},
            {"id": "ask", "title": "Ask me", "kind": "ask_user", "question": "Did he?",
             "depends_on": ["reply"], "optional": true, "session_target": "main"},
            {"id": "think", "title": "Think", "kind": "agent_turn", "prompt": "Sum up"},
            {"id": "check", "title": "Check", "kind": "verify", "estimate_ms": 0}
        ],
        "success_criteria": [
            {"id": "ok", "description": "he said yes", "check": {"kind": "user_confirms"}},
            {"id": "judge", "description": "judged", "check": {"kind": "runtime_judge", "question": "Done?"}}
        ]}),
    ]
}

/// Each refused by the schema and by the parser: what is wrong, in a comment.
fn invalid_specs() -> Vec<Value> {
    vec![
        // No objective; an empty one.
        json!({"plan": []}),
        json!({"objective": ""}),
        // Unknown members: of the goal, of an action (the parser used to ignore these).
        json!({"objective": "o", "deadline": 5}),
        json!({"objective": "o", "plan": [{"id": "a", "title": "t", "kind": "tool",
                                           "command": "openphone.screen.get", "dependson": ["b"]}]}),
        json!({"objective": "o", "plan": [{"id": "a", "title": "t", "kind": "tool",
                                           "command": "openphone.screen.get", "prompt": "x"}]}),
        // Enumerations.
        json!({"objective": "o", "risk_level": "extreme"}),
        json!({"objective": "o", "autonomy": "yolo_mode"}),
        json!({"objective": "o", "delivery": "pigeon"}),
        json!({"objective": "o", "plan": [{"id": "a", "title": "t", "kind": "dance"}]}),
        // Ranges.
        json!({"objective": "o", "max_parallel": 17}),
        json!({"objective": "o", "checkpoints": [-5]}),
        json!({"objective": "o", "retry_budget": {"per_action": 0, "per_goal": 3}}),
        // A deadline in words, or local time without its offset (issue 31: RFC 3339 only).
        json!({"objective": "o", "deadline_at": "tomorrow 18:00"}),
        json!({"objective": "o", "deadline_at": "2030-01-01 09:00"}),
        // Both deadlines; a relative one that is not a duration.
        json!({"objective": "o", "deadline_at": NOW + 1, "deadline_in": "1h"}),
        json!({"objective": "o", "deadline_in": "soon"}),
        // An action id out of [a-z0-9_-]; a missing title; a kind's missing member.
        json!({"objective": "o", "plan": [{"id": "Find", "title": "t", "kind": "verify"}]}),
        json!({"objective": "o", "plan": [{"id": "a", "kind": "verify"}]}),
        json!({"objective": "o", "plan": [{"id": "a", "title": "t", "kind": "ask_user"}]}),
        // A wait on an event nobody publishes; a condition that is not a predicate.
        json!({"objective": "o", "plan": [{"id": "a", "title": "t", "kind": "wait", "until_ms": 1,
                                           "on": {"event": "phone.exploded"}}]}),
        json!({"objective": "o", "plan": [{"id": "a", "title": "t", "kind": "wait", "until_ms": 1,
                                           "on": {"event": "watcher.fired", "where": [{"op": "near"}]}}]}),
        // A criterion of an unknown kind; a predicate with an unknown op.
        json!({"objective": "o", "success_criteria": [{"id": "c", "description": "d",
                                                       "check": {"kind": "vibes"}}]}),
        json!({"objective": "o", "success_criteria": [{"id": "c", "description": "d",
               "check": {"kind": "tool_predicate", "command": "openphone.screen.get",
                         "predicate": {"op": "maybe"}}}]}),
    ]
}

#[test]
fn the_goal_spec_schema_and_the_parser_agree() {
    let v = validator("schemas/goal.schema.json");
    for spec in valid_specs() {
        assert_eq!(schema_errors(&v, &spec), Vec::<String>::new(), "{spec}");
        parser_accepts_spec(&spec).unwrap_or_else(|e| panic!("{e}: {spec}"));
    }
    for spec in invalid_specs() {
        assert!(!v.is_valid(&spec), "the schema accepts {spec}");
        assert!(
            parser_accepts_spec(&spec).is_err(),
            "the parser accepts {spec}"
        );
    }
}

#[tokio::test]
async fn the_goal_record_schema_and_the_reader_agree() {
    let h = Harness::new();
    let v = validator("schemas/goal-record.schema.json");
    // Real records: the dentist goal before and after it ran, a goal waiting on an event.
    let goal = h
        .engine
        .create(
            &super::support::dentist_spec(h.clock.now_ms()),
            Harness::owner(),
        )
        .unwrap();
    let mut records = vec![goal_json(&goal)];
    h.engine.tick(&goal.id).await.unwrap();
    records.push(goal_json(&h.engine.get(&goal.id).unwrap()));
    let waiting: GoalSpec = serde_json::from_value(json!({
        "objective": "wait for Bob",
        "plan": [{"id": "reply", "title": "Wait", "kind": "wait", "until_ms": h.clock.now_ms() + 60_000,
                  "on": {"event": "phone.message.received"}}]
    }))
    .unwrap();
    let waiting = h.engine.create(&waiting, Harness::owner()).unwrap();
    h.engine.tick(&waiting.id).await.unwrap();
    records.push(goal_json(&h.engine.get(&waiting.id).unwrap()));
    for record in &records {
        assert_eq!(
            schema_errors(&v, record),
            Vec::<String>::new(),
            "{record:#}"
        );
        serde_json::from_value::<Goal>(record.clone()).unwrap();
    }
    // Broken records: each refused by both.
    let base = records[1].clone();
    let broken = |f: &dyn Fn(&mut Value)| {
        let mut r = base.clone();
        f(&mut r);
        r
    };
    for bad in [
        broken(&|r| r["state"] = json!("sleeping")),
        broken(&|r| {
            r.as_object_mut().unwrap().remove("objective");
        }),
        broken(&|r| r["actions"][0]["state"] = json!("DONEISH")),
        broken(&|r| r["actions"][0]["kind"] = json!("teleport")),
        broken(&|r| r["risk_level"] = json!(3)),
        broken(&|r| r["delivery"] = json!("pigeon")),
        broken(&|r| {
            r["blockers"] = json!([{"id": "blk_1", "kind": "mood", "reason": "r",
                                             "since": 1, "how_to_resolve": "x"}])
        }),
        broken(&|r| {
            r["evidence"] = json!([{"id": "ev_1", "kind": "rumour", "ref": "r",
                                             "digest": "d", "at": 1}])
        }),
    ] {
        assert!(!v.is_valid(&bad), "the schema accepts {bad:#}");
        assert!(
            serde_json::from_value::<Goal>(bad.clone()).is_err(),
            "the reader accepts {bad:#}"
        );
    }
}

/// The first ```json block after `heading` in `docs/goals.md`.
fn docs_example(heading: &str) -> String {
    let text = std::fs::read_to_string(root().join("docs/goals.md")).unwrap();
    let after = &text[text.find(heading).unwrap()..];
    let start = after.find("```json\n").unwrap() + "```json\n".len();
    after[start..start + after[start..].find("```").unwrap()].to_owned()
}

#[test]
fn the_goal_of_docs_goals_md_is_valid_as_written() {
    // Its deadline was an absolute time that has passed (`deadline_at: 1773334800000`):
    // refused with "must be in the future". Now relative (`deadline_in`).
    let example = docs_example("## A goal");
    let file = parse_goal_file(&example).unwrap();
    assert_eq!(
        schema_errors(&validator("schemas/goal.schema.json"), &file),
        Vec::<String>::new()
    );
    let spec: GoalSpec = serde_json::from_value(file).unwrap();
    let now = openphone_clock::SystemClock.now_ms();
    let goal = new_goal(&spec, "goal_docs".to_owned(), Harness::owner(), now).unwrap();
    assert_eq!(goal.deadline_at, Some(now + 6 * 3_600_000));
    assert_eq!(goal.actions.len(), 2);
}
