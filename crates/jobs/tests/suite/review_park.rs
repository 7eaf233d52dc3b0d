//! §13 item 8: background safety — a state-changing call in a background run is blocked with
//! `background.confirmation_required` and parks the job (§9.3) with the invariants of §2.4;
//! calls that may not be parked (blocked material, size, not a state-changing command) fail
//! the run and persist nothing.

use openphone_jobs::review::{self, ReviewProposal};
use openphone_jobs::{
    CheckedKind, Checkpoint, ConfirmationRecord, JobPhase, JobStatus, RunOutcome, SchedulerEvent,
    check_stored,
};
use openphone_protocol::{ErrorCode, ToolStatus, binding_digest, params_digest};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::review_support::{Plan, ReviewHarness, send_params};

#[tokio::test]
async fn a_state_changing_call_in_a_background_run_is_blocked_and_parks_the_job() {
    let h = ReviewHarness::new();
    let params = send_params("running late");
    let (id, confirmation_id) = h.parked("messages_send", params.clone()).await;
    let parked_at = h.now();

    // The bridge refused to run it: background.confirmation_required, nothing executed.
    let seen = h.runner.seen();
    let answer = seen[0].bridge.as_ref().unwrap();
    assert_eq!(answer.status, ToolStatus::NeedsConfirmation);
    assert_eq!(
        answer.error.as_ref().unwrap().code,
        ErrorCode::BackgroundConfirmationRequired
    );
    assert!(h.actions("openphone.messages.send").is_empty());

    // The invariants of an awaiting_review row (§2.4).
    let row = h.job(id);
    let job = &row.job;
    assert_eq!(job.status, JobStatus::AwaitingReview);
    assert_eq!(job.phase, JobPhase::AwaitingReview);
    assert_eq!(job.progress_text, "Approval needed: messages_send");
    assert_eq!(job.running_at, 0);
    let record = ConfirmationRecord::of(&job.pending_tool_request_json).unwrap();
    let checkpoint = Checkpoint::of(&job.checkpoint_json).unwrap();
    assert_eq!(job.pending_confirmation_id, record.confirmation_id);
    assert_eq!(record.review_state, "pending");
    assert!(!checkpoint.resume_pending);
    assert_eq!(checkpoint.resume_token, job.resume_token);
    assert_eq!(
        (
            checkpoint.job_id,
            &checkpoint.tool,
            &checkpoint.params_digest,
            &checkpoint.binding_digest,
            &checkpoint.idempotency_key
        ),
        (
            record.job_id,
            &record.tool,
            &record.params_digest,
            &record.binding_digest,
            &record.idempotency_key
        )
    );
    assert_eq!(record.job_id, id);
    assert_eq!(record.phone_session_id, format!("background-job:{id}"));

    // The record's values (§9.3): the exact params, the window, the ids, the digests.
    assert!(confirmation_id.starts_with("job-confirm-"));
    assert!(job.resume_token.starts_with("job-resume-"));
    assert!(record.idempotency_key.starts_with(&format!("job:{id}:")));
    assert_eq!(record.runtime, "builtin");
    assert_eq!(record.tool, "messages_send");
    assert_eq!(record.params, params);
    assert_eq!(record.created_at, parked_at);
    assert_eq!(record.expires_at, parked_at + 900_000);
    assert_eq!(
        record.summary,
        "messages send with {\"body\":\"running late\",\"reason\":\"tell Sam I am late\",\"to\":\"+15551234567\"}"
    );
    // The digests, recomputed here from the stored fields.
    let digest = params_digest("messages_send", &params).unwrap();
    assert_eq!(record.params_digest, digest);
    assert_eq!(
        record.binding_digest,
        binding_digest(&record.binding().unwrap())
    );
    // The checkpoint never holds the params.
    assert!(
        !Value::Object(job.checkpoint_json.clone())
            .to_string()
            .contains("running late")
    );

    // The offline verifier agrees, and the ledger says the attempt parked.
    let checked = check_stored(&serde_json::to_value(job).unwrap()).unwrap();
    assert_eq!(checked.kind, CheckedKind::Job);
    assert_eq!(checked.review_state, "pending");
    let runs = h.store.job_runs(id).unwrap();
    assert_eq!(runs.last().unwrap().outcome, RunOutcome::Parked);

    // The review is announced, and the single wake covers its expiry.
    let events = h.events();
    assert!(events.iter().any(|e| matches!(e,
        SchedulerEvent::ReviewRequired { job_id, confirmation_id: c, tool, expires_at, .. }
            if *job_id == id && *c == confirmation_id && tool == "messages_send"
               && *expires_at == parked_at + 900_000)));
    assert_eq!(h.sched.next_wake(), Some(parked_at + 900_000));
}

#[tokio::test]
async fn a_parked_job_survives_a_restart_unchanged() {
    let h = ReviewHarness::new();
    let (id, _) = h.parked("messages_send", send_params("x")).await;
    let before = h.job(id);
    let next = h.restart("sched-b");
    let report = next.start().await.unwrap();
    assert!(report.repaired.is_empty() && report.repaired_reviews.is_empty());
    assert!(report.expired_reviews.is_empty());
    assert_eq!(h.job(id), before);
}

async fn park_directly(h: &ReviewHarness, tool: &str, params: Value) -> i64 {
    h.runner.push(Plan::ParkDirectly(ReviewProposal {
        tool: tool.to_owned(),
        command: String::new(),
        params,
    }));
    let id = h.create("direct");
    h.run_next_wake().await;
    id
}

#[tokio::test]
async fn calls_that_may_not_be_parked_fail_the_run_and_persist_nothing() {
    let h = ReviewHarness::new();
    let cases = [
        (
            "messages_send",
            json!({"to": "+15551234567", "body": "hi", "api_key": "sk-1"}),
            "job_error:review_blocked_material",
        ),
        (
            "messages_send",
            json!({"to": "+15551234567", "body": "Basic dXNlcjpwYXNz"}),
            "job_error:review_blocked_material",
        ),
        (
            "messages_send",
            json!({"to": "+15551234567", "body": "hi, there! ".repeat(1_200)}),
            "job_error:review_too_large",
        ),
        (
            "messages_search",
            json!({"query": "Sam"}),
            "job_error:review_not_eligible",
        ),
        ("no_such_tool", json!({}), "job_error:review_not_eligible"),
        (
            "messages_send",
            json!(["not", "an", "object"]),
            "job_error:review_not_eligible",
        ),
    ];
    for (tool, params, reason) in cases {
        let id = park_directly(&h, tool, params).await;
        let job = h.job(id).job;
        assert_eq!(job.status, JobStatus::Queued, "{tool}");
        assert_eq!(job.phase, JobPhase::Waiting, "{tool}");
        assert_eq!(job.failure_count, 1);
        assert_eq!(job.last_result, reason);
        assert!(job.pending_confirmation_id.is_empty());
        assert!(job.pending_tool_request_json.is_empty());
        assert!(job.checkpoint_json.is_empty());
        assert!(job.resume_token.is_empty());
        let runs = h.store.job_runs(id).unwrap();
        assert_eq!(runs.last().unwrap().outcome, RunOutcome::Failed);
        // Out of the way of the next case (its retry would take that case's plan).
        h.sched.stop(id).unwrap();
    }
    assert!(h.phone.action_log().is_empty());
}

#[test]
fn prepared_records_pass_the_verifier_and_every_summary_is_bounded() {
    let proposal = ReviewProposal {
        tool: "calendar_create_event".to_owned(),
        command: "openphone.calendar.add".to_owned(),
        params: json!({"title": "é".repeat(3_000), "start_at": "2026-01-05T09:00:00Z",
                       "reason": "plan"}),
    };
    let prepared = review::prepare(3, &proposal, 1_760_000_000_000).unwrap();
    assert_eq!(prepared.record.summary.chars().count(), 1_000);
    let checked = check_stored(&Value::Object(prepared.record.to_map())).unwrap();
    assert_eq!(checked.kind, CheckedKind::Record);
    assert_eq!(checked.job_id, 3);
}
