//! §13 item 10 (creation part): the normalisation of §5, and errors that name the field.

use openphone_jobs::limits::create::{MAX_TIME_MS, TITLE_MAX_CHARS};
use openphone_jobs::{CreateContext, InvalidJob, JobRequest, JobType, NewAgentJob, normalise};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{HOUR, T0};

fn ctx() -> CreateContext {
    CreateContext {
        now_ms: T0,
        phone_session_id: Some("phone-sess-9".to_owned()),
    }
}

fn create(args: Value) -> Result<NewAgentJob, InvalidJob> {
    normalise(&JobRequest::from_json(&args)?, &ctx())
}

fn refused(args: Value) -> (String, String) {
    let err = create(args).unwrap_err();
    assert_eq!(err.code(), "invalid_params");
    (err.field, err.problem)
}

#[test]
fn defaults_of_a_minimal_job() {
    let job =
        create(json!({"title": "  Check mail ", "prompt": " look ", "reason": "asked"})).unwrap();
    assert_eq!(
        job,
        NewAgentJob {
            job_type: JobType::AgentTurn,
            title: "Check mail".to_owned(),
            prompt: "look".to_owned(),
            payload_json: serde_json::Map::new(),
            schedule_json: json!({"next_run_at": T0, "interval_ms": 0})
                .as_object()
                .cloned()
                .unwrap(),
            session_target: "main".to_owned(),
            delivery_json: json!({"mode": "notification"})
                .as_object()
                .cloned()
                .unwrap(),
            next_run_at: T0,
            created_by: "operator".to_owned(),
        }
    );
}

#[test]
fn type_is_trimmed_lower_cased_and_sets_the_default_delivery() {
    let job = create(json!({"title": "hb", "type": " HEARTBEAT "})).unwrap();
    assert_eq!(job.job_type, JobType::Heartbeat);
    assert_eq!(job.delivery_json["mode"], "silent");
    assert_eq!(job.prompt, "", "a heartbeat needs no prompt");
    let job = create(json!({"title": "ev", "type": "system_event"})).unwrap();
    assert_eq!(job.delivery_json["mode"], "notification");
    let (field, problem) = refused(json!({"title": "x", "prompt": "p", "type": "cron"}));
    assert_eq!(field, "type");
    assert!(problem.contains("cron"), "{problem}");
}

#[test]
fn title_and_prompt_rules() {
    assert_eq!(refused(json!({"prompt": "p"})).0, "title");
    assert_eq!(refused(json!({"title": "   ", "prompt": "p"})).0, "title");
    assert_eq!(refused(json!({"title": "t"})).0, "prompt");
    assert_eq!(refused(json!({"title": "t", "prompt": "  "})).0, "prompt");
    let long = "t".repeat(TITLE_MAX_CHARS + 1);
    assert_eq!(refused(json!({"title": long, "prompt": "p"})).0, "title");
}

#[test]
fn the_first_due_time_is_the_first_non_zero_of_three() {
    let due = |args: Value| create(args).unwrap().next_run_at;
    let base = json!({"title": "t", "prompt": "p"});
    let with = |extra: Value| {
        let mut args = base.clone();
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap());
        args
    };
    assert_eq!(due(with(json!({}))), T0);
    assert_eq!(
        due(with(
            json!({"next_run_at": 0, "run_at": T0 + 5, "schedule": {"next_run_at": T0 + 9}})
        )),
        T0 + 5
    );
    assert_eq!(
        due(with(json!({"next_run_at": T0 + 1, "run_at": T0 + 5}))),
        T0 + 1
    );
    assert_eq!(
        due(with(json!({"schedule": {"next_run_at": T0 + 9}}))),
        T0 + 9
    );
    // A time in the past is kept: the job is due at the next tick.
    assert_eq!(due(with(json!({"run_at": 5}))), 5);
    // A whole number written as a float is accepted.
    assert_eq!(due(with(json!({"run_at": 1_000.0}))), 1_000);
    for (args, field) in [
        (with(json!({"next_run_at": -1})), "next_run_at"),
        (with(json!({"run_at": -5})), "run_at"),
        (
            with(json!({"schedule": {"next_run_at": -2}})),
            "schedule.next_run_at",
        ),
        (with(json!({"run_at": MAX_TIME_MS + 1})), "run_at"),
        (with(json!({"run_at": 1.5})), "run_at"),
        (with(json!({"run_at": "soon"})), "run_at"),
        (
            with(json!({"schedule": {"next_run_at": "x"}})),
            "schedule.next_run_at",
        ),
    ] {
        assert_eq!(refused(args).0, field);
    }
}

#[test]
fn the_interval_is_the_first_positive_and_is_written_into_the_schedule() {
    let job = create(json!({"title": "t", "prompt": "p", "interval_ms": 0,
                            "schedule": {"interval_ms": HOUR, "note": "kept"}}))
    .unwrap();
    assert_eq!(
        Value::Object(job.schedule_json),
        json!({"interval_ms": HOUR, "next_run_at": T0, "note": "kept"})
    );
    let job = create(json!({"title": "t", "prompt": "p", "interval_ms": 15_000})).unwrap();
    assert_eq!(job.schedule_json["interval_ms"], 15_000);
    assert_eq!(
        refused(json!({"title": "t", "prompt": "p", "interval_ms": -1})).0,
        "interval_ms"
    );
    assert_eq!(
        refused(json!({"title": "t", "prompt": "p", "schedule": {"interval_ms": -1}})).0,
        "schedule.interval_ms"
    );
    assert_eq!(
        refused(json!({"title": "t", "prompt": "p", "schedule": "hourly"})).0,
        "schedule"
    );
}

#[test]
fn session_targets() {
    let target = |t: Value| create(json!({"title": "t", "prompt": "p", "session_target": t}));
    assert_eq!(target(json!("main")).unwrap().session_target, "main");
    assert_eq!(
        target(json!("isolated")).unwrap().session_target,
        "isolated"
    );
    assert_eq!(
        target(json!("current")).unwrap().session_target,
        "session:phone-sess-9"
    );
    assert_eq!(
        target(json!("session:abc")).unwrap().session_target,
        "session:abc"
    );
    // `current` without a known session is `main`.
    let job = normalise(
        &JobRequest::from_json(&json!({"title": "t", "prompt": "p", "session_target": "current"}))
            .unwrap(),
        &CreateContext {
            now_ms: T0,
            phone_session_id: None,
        },
    )
    .unwrap();
    assert_eq!(job.session_target, "main");
    for bad in ["session:", "session:a b", "elsewhere", "MAIN"] {
        assert_eq!(
            target(json!(bad)).unwrap_err().field,
            "session_target",
            "{bad}"
        );
    }
}

#[test]
fn delivery_modes_and_the_notification_text() {
    let job = create(json!({"title": "t", "prompt": "p",
                            "delivery": {"mode": "silent", "notification_text": "inner", "x": 1},
                            "notification_text": "Release notes changed"}))
    .unwrap();
    assert_eq!(
        Value::Object(job.delivery_json),
        json!({"mode": "silent", "notification_text": "Release notes changed", "x": 1})
    );
    let job = create(json!({"title": "t", "prompt": "p", "delivery": {}})).unwrap();
    assert_eq!(job.delivery_json["mode"], "notification");
    for (args, field) in [
        (
            json!({"title": "t", "prompt": "p", "delivery": {"mode": "email"}}),
            "delivery.mode",
        ),
        (
            json!({"title": "t", "prompt": "p", "delivery": {"mode": 3}}),
            "delivery.mode",
        ),
        (
            json!({"title": "t", "prompt": "p", "delivery": {"notification_text": 5}}),
            "delivery.notification_text",
        ),
        (
            json!({"title": "t", "prompt": "p", "delivery": "loud"}),
            "delivery",
        ),
        (
            json!({"title": "t", "prompt": "p", "notification_text": false}),
            "notification_text",
        ),
    ] {
        assert_eq!(refused(args).0, field);
    }
}

#[test]
fn payload_arguments_and_limits() {
    let job =
        create(json!({"title": "t", "prompt": "p", "payload": {"url": "https://x"}})).unwrap();
    assert_eq!(job.payload_json["url"], "https://x");
    assert_eq!(
        refused(json!({"title": "t", "prompt": "p", "payload": [1]})).0,
        "payload"
    );
    let big = "x".repeat(13_000);
    assert_eq!(
        refused(json!({"title": "t", "prompt": "p", "payload": {"blob": big}})).0,
        "payload"
    );
    assert_eq!(
        refused(json!({"title": "t", "prompt": "p", "owner": "me"})).0,
        "owner"
    );
    assert_eq!(refused(json!(["title"])).0, "arguments");
    // `null` counts as absent.
    let job = create(json!({"title": "t", "prompt": "p", "payload": null, "type": null})).unwrap();
    assert_eq!(job.job_type, JobType::AgentTurn);
    assert_eq!(
        create(json!({"title": 5})).unwrap_err().to_string(),
        "invalid_params: title must be a string (got a number)"
    );
}

#[test]
fn an_interval_below_the_15_s_floor_is_refused_not_silently_raised() {
    // Issue 28: `jobs create --every 1s` was accepted and ran every 15 s instead.
    for (args, field) in [
        (
            json!({"title": "t", "prompt": "p", "interval_ms": 1_000}),
            "interval_ms",
        ),
        (
            json!({"title": "t", "prompt": "p", "interval_ms": 14_999}),
            "interval_ms",
        ),
        (
            json!({"title": "t", "prompt": "p", "schedule": {"interval_ms": 1}}),
            "schedule.interval_ms",
        ),
    ] {
        let (got, message) = refused(args);
        assert_eq!(got, field);
        assert!(message.contains("15000 ms"), "{message}");
    }
    // 0 is a one-shot job; the floor itself is accepted.
    assert!(create(json!({"title": "t", "prompt": "p", "interval_ms": 0})).is_ok());
    assert!(create(json!({"title": "t", "prompt": "p", "interval_ms": 15_000})).is_ok());
}
