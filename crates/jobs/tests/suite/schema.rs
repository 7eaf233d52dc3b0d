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

/// Seed 001's own example record (vendored: tests never read the seeds).
fn seed_record() -> Value {
    serde_json::from_str(include_str!("../fixtures/seed-001-agent-job.json")).unwrap()
}

fn accepted_schema() -> Value {
    serde_json::from_str(include_str!(
        "../../../../schemas/agent-job-accepted.schema.json"
    ))
    .unwrap()
}

/// Issue 32 item 10: the seed's example `agent_job` failed our schema (it lacks the 12 members
/// this project added). It is read now, the additions taking their defaults.
#[test]
fn the_seeds_own_agent_job_example_parses_with_defaults_for_our_additions() {
    let seed = seed_record();
    assert_eq!(seed.as_object().unwrap().len(), 17);
    let job: openphone_jobs::AgentJob = serde_json::from_value(seed.clone()).unwrap();
    assert_eq!(job.id, 42);
    assert_eq!(job.title, "Check launch notes");
    assert_eq!(job.status, JobStatus::Active);
    assert_eq!(job.phase, JobPhase::Queued, "the phase its status implies");
    assert_eq!(
        job.delivery_json["notification_text"],
        "Release notes changed"
    );
    assert_eq!(job.schedule_json["interval_ms"], 3_600_000);
    assert_eq!(
        (
            job.progress_text.as_str(),
            job.progress_current,
            job.progress_total
        ),
        ("", 0, 0)
    );
    assert!(job.checkpoint_json.is_empty() && job.pending_tool_request_json.is_empty());
    assert_eq!(
        (
            job.pending_confirmation_id.as_str(),
            job.last_surface_id.as_str(),
            job.resume_token.as_str()
        ),
        ("", "", "")
    );
    assert_eq!(
        (job.last_event_at, job.unread_result, job.paused_at),
        (0, false, 0)
    );
    // Written back, it is the full 29-member record, which the upstream schema accepts.
    let written = serde_json::to_value(&job).unwrap();
    assert_eq!(written.as_object().unwrap().len(), 29);
    assert!(
        jsonschema::validator_for(&schema())
            .unwrap()
            .is_valid(&written)
    );
    // The seed's record itself fails the upstream (written) schema, and passes the accepted one.
    assert!(
        !jsonschema::validator_for(&schema())
            .unwrap()
            .is_valid(&seed)
    );
    let accepted = jsonschema::validator_for(&accepted_schema()).unwrap();
    let errors: Vec<String> = accepted.iter_errors(&seed).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // A finished seed record gets the phase of its status.
    let mut done = seed.clone();
    done["status"] = json!("completed");
    let job: openphone_jobs::AgentJob = serde_json::from_value(done).unwrap();
    assert_eq!(job.phase, JobPhase::Completed);
}

/// The accepted schema and the parser agree member by member: dropping one of the seed's 17 is
/// refused by both, dropping one of our 12 accepted by both; an unknown member is refused by
/// both; and the accepted schema constrains each member exactly as the written one does.
#[test]
fn the_accepted_schema_and_the_parser_agree() {
    let written = schema();
    let accepted = accepted_schema();
    let validator = jsonschema::validator_for(&accepted).unwrap();
    let seed_fields = strings(&accepted["required"]);
    assert_eq!(
        seed_fields,
        seed_record().as_object().unwrap().keys().cloned().collect()
    );
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("description");
            map.remove("default");
        }
        v
    };
    for (name, constraint) in written["properties"].as_object().unwrap() {
        assert_eq!(
            strip(constraint),
            strip(&accepted["properties"][name]),
            "{name} is constrained alike"
        );
    }
    let h = Harness::new();
    let full = serde_json::to_value(&h.create(json!({"title": "t", "prompt": "p"})).job).unwrap();
    for name in full.as_object().unwrap().keys() {
        let mut without = full.clone();
        without.as_object_mut().unwrap().remove(name);
        let parsed = serde_json::from_value::<openphone_jobs::AgentJob>(without.clone()).is_ok();
        assert_eq!(parsed, validator.is_valid(&without), "without {name}");
        assert_eq!(parsed, !seed_fields.contains(name), "without {name}");
    }
    let mut extra = full;
    extra["version"] = json!(1);
    assert!(serde_json::from_value::<openphone_jobs::AgentJob>(extra.clone()).is_err());
    assert!(!validator.is_valid(&extra));
}
