//! §13 item 1 (record part): the stored record is wire-exact with the upstream schema
//! (vendored in `schemas/agent-job.schema.json`).

use std::collections::BTreeSet;

use openphone_jobs::{DeliveryMode, JobPhase, JobStatus, JobType, JobView};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Harness, T0};

fn schema() -> Value {
    serde_json::from_str(include_str!("../../schemas/agent-job.schema.json")).unwrap()
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn field_names_and_enums_match_the_schema() {
    let schema = schema();
    let h = Harness::new();
    let job = h.create(json!({"title": "t", "prompt": "p"}));
    let wire = serde_json::to_value(&job.job).unwrap();
    let ours: BTreeSet<String> = wire.as_object().unwrap().keys().cloned().collect();
    assert_eq!(ours, strings(&schema["required"]));
    let props: BTreeSet<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(ours, props);
    assert_eq!(ours.len(), 29);
    assert_eq!(schema["additionalProperties"], false);

    let status: BTreeSet<String> = JobStatus::ALL
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    assert_eq!(status, strings(&schema["properties"]["status"]["enum"]));
    let types: BTreeSet<String> = JobType::ALL.iter().map(|t| t.as_str().to_owned()).collect();
    assert_eq!(types, strings(&schema["properties"]["type"]["enum"]));
    let modes: BTreeSet<String> = DeliveryMode::ALL
        .iter()
        .map(|m| m.as_str().to_owned())
        .collect();
    assert_eq!(
        modes,
        strings(&schema["properties"]["delivery_json"]["properties"]["mode"]["enum"])
    );
    let longest_phase = JobPhase::ALL
        .iter()
        .map(|p| p.as_str().len())
        .max()
        .unwrap();
    assert!(longest_phase as u64 <= schema["properties"]["phase"]["maxLength"].as_u64().unwrap());
}

#[test]
fn records_in_every_state_validate_and_extras_are_refused() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let h = Harness::new();
    let job = h.create(json!({"title": "t", "prompt": "p", "interval_ms": 60_000,
                              "delivery": {"mode": "none", "custom": {"a": 1}},
                              "payload": {"k": [1, 2]}}));
    h.sched.pause(job.job.id).unwrap();
    let paused = h.job(job.job.id);
    let stopped = h.sched.stop(job.job.id).unwrap().job;
    for record in [&job, &paused, &stopped] {
        let wire = serde_json::to_value(&record.job).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&wire)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
    let mut extra = serde_json::to_value(&job.job).unwrap();
    extra["version"] = json!(1);
    assert!(!validator.is_valid(&extra));
    let mut missing = serde_json::to_value(&job.job).unwrap();
    missing.as_object_mut().unwrap().remove("paused_at");
    assert!(!validator.is_valid(&missing));
}

#[test]
fn the_job_view_leaves_out_prompt_payload_result_and_review() {
    let h = Harness::new();
    let job = h.create(json!({"title": "Feed", "prompt": "secret instructions",
                              "payload": {"p": 1}, "interval_ms": 60_000}));
    let view = serde_json::to_value(JobView::from(&job.job)).unwrap();
    assert_eq!(
        view,
        json!({"id": 1, "type": "agent_turn", "title": "Feed", "status": "queued",
               "phase": "queued", "progress_text": "Queued", "next_run_at": T0,
               "last_run_at": 0, "interval_ms": 60_000, "session_target": "main",
               "delivery_mode": "notification", "failure_count": 0, "unread_result": false,
               "pending_confirmation_id": "", "created_at": T0, "updated_at": T0})
    );
}
