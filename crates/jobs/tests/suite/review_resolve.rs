//! §13 item 9: the review flow (§9.5–§9.10) on simulated time, with the real store, the real
//! bridge and the simulated phone: approve runs the persisted request once and the job resumes
//! with the bound result; deny; the first tap wins under concurrency; later taps; expiry
//! before and during the claim; a tampered record; crashes while resolving; stop.

use std::sync::Arc;

use openphone_jobs::review::{self, STALE_RESOLUTION_MS};
use openphone_jobs::{
    Change, Checkpoint, ConfirmationRecord, JobPhase, JobStatus, Resolution, ReviewAnswer,
    SchedulerEvent, apply, check_stored,
};
use openphone_protocol::ErrorCode;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::review_support::{Plan, ReviewHarness, parse, send_params, wait_started};

const SEND: &str = "openphone.messages.send";

fn resolved(answer: &ReviewAnswer, resolution: Resolution, status: &str) {
    assert_eq!(
        answer.code,
        ErrorCode::BackgroundReviewResolved,
        "{answer:?}"
    );
    assert_eq!(answer.resolution, Some(resolution), "{answer:?}");
    assert_eq!(answer.result_status.as_deref(), Some(status), "{answer:?}");
}

fn already_resolved(answer: &ReviewAnswer) {
    assert_eq!(
        answer.code,
        ErrorCode::BackgroundReviewAlreadyResolved,
        "{answer:?}"
    );
    assert_eq!(answer.reason.as_deref(), Some("claim_unavailable"));
    assert_eq!(answer.resolution, None);
}

fn checkpoint(h: &ReviewHarness, id: i64) -> Checkpoint {
    Checkpoint::of(&h.job(id).job.checkpoint_json).unwrap()
}

fn record(h: &ReviewHarness, id: i64) -> ConfirmationRecord {
    ConfirmationRecord::of(&h.job(id).job.pending_tool_request_json).unwrap()
}

#[tokio::test]
async fn approve_runs_the_stored_request_once_and_the_job_resumes_with_its_result() {
    let h = ReviewHarness::new();
    let params = send_params("on my way");
    let (id, cid) = h.parked("messages_send", params.clone()).await;
    h.clock.advance(60_000);
    let tapped_at = h.now();

    let answer = h.sched.resolve_review(&cid, true).await.unwrap();
    resolved(&answer, Resolution::Approved, "ok");
    assert_eq!(answer.job_id, Some(id));

    // Exactly the stored request ran, once.
    let sent = h.actions(SEND);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["to"], "+15551234567");
    assert_eq!(sent[0]["body"], "on my way");
    assert_eq!(h.executor.calls(), 1);

    // The job resumes at once with the bound result in its checkpoint (§9.8).
    let job = h.job(id).job;
    assert_eq!(job.status, JobStatus::Queued);
    assert_eq!(job.phase, JobPhase::Resuming);
    assert_eq!(job.next_run_at, tapped_at);
    assert_eq!(job.failure_count, 0);
    let rec = record(&h, id);
    assert_eq!(rec.review_state, "resolved");
    assert_eq!(rec.decision.as_deref(), Some("approved"));
    assert_eq!(rec.reviewed_at, Some(tapped_at));
    assert_eq!(rec.resolution.as_deref(), Some("approved"));
    let cp = checkpoint(&h, id);
    assert!(cp.resume_pending);
    assert_eq!(cp.review_resolution.as_deref(), Some("approved"));
    assert_eq!(cp.resolved_at, Some(tapped_at));
    let bound = parse(cp.tool_result.as_deref().unwrap());
    assert_eq!(bound["status"], "ok");
    assert_eq!(bound["tool"], "messages_send");
    assert_eq!(bound["result"]["sent"], true);
    check_stored(&serde_json::to_value(&job).unwrap()).unwrap();

    // The bridge's own audit record names the review as what allowed the request.
    let bridge_audit = h
        .store
        .find_audit(&format!("runtime:builtin:{cid}"))
        .unwrap();
    let proof = bridge_audit
        .iter()
        .find_map(|r| r.entry.policy_proof.clone())
        .unwrap();
    let layers = proof.as_array().unwrap();
    assert_eq!(
        layers[6]["source"],
        json!({"kind": "background_review", "confirmation_id": cid})
    );
    assert_eq!(layers[5]["kind"], "park");

    // The review's audit record (§9.14): digests and lifecycle data, never the params.
    let audit = h.review_audit(&cid);
    assert_eq!(audit.len(), 1);
    let payload = audit[0].entry.policy_proof.clone().unwrap();
    assert_eq!(payload["schema"], "openphone.background_review_audit.v1");
    assert_eq!(payload["resolution"], "approved");
    assert_eq!(payload["result_status"], "ok");
    assert_eq!(payload["checkpoint_committed"], true);
    assert_eq!(payload["params_digest"], rec.params_digest.as_str());
    assert_eq!(payload["binding_digest"], rec.binding_digest.as_str());
    assert_eq!(payload["idempotency_key"], rec.idempotency_key.as_str());
    assert_eq!(payload["phone_session_id"], format!("background-job:{id}"));
    assert_eq!(payload["resolved_at"], tapped_at);
    assert_eq!(audit[0].entry.tool.as_deref(), Some(review::AUDIT_EVENT));
    assert!(
        !serde_json::to_string(&audit[0])
            .unwrap()
            .contains("on my way")
    );
    assert!(h.store.verify_audit().unwrap().is_intact());

    // A second tap changes nothing and runs nothing.
    already_resolved(&h.sched.resolve_review(&cid, true).await.unwrap());
    already_resolved(&h.sched.resolve_review(&cid, false).await.unwrap());
    assert_eq!(h.actions(SEND).len(), 1);

    // The resumed run asks for the same call: it gets the stored outcome, nothing runs again,
    // and its completion clears the review (§9.9).
    h.runner.push(Plan::Call("messages_send", params));
    h.run_next_wake().await;
    let resumed = h.runner.seen().pop().unwrap();
    assert_eq!(resumed.job_id, id);
    assert_eq!(Checkpoint::of(&resumed.checkpoint), Some(cp.clone()));
    assert_eq!(resumed.replayed.as_deref(), cp.tool_result.as_deref());
    assert!(resumed.bridge.is_none());
    assert_eq!(h.actions(SEND).len(), 1);
    let done = h.job(id).job;
    assert_eq!(done.status, JobStatus::Completed);
    assert!(done.checkpoint_json.is_empty() && done.pending_tool_request_json.is_empty());
    assert!(done.pending_confirmation_id.is_empty() && done.resume_token.is_empty());
}

#[tokio::test]
async fn deny_runs_nothing_and_the_job_resumes_with_the_denial() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("no")).await;
    let answer = h.sched.resolve_review(&cid, false).await.unwrap();
    resolved(&answer, Resolution::Denied, "background.action_denied");
    assert!(h.actions(SEND).is_empty());
    assert_eq!(h.executor.calls(), 0);
    let job = h.job(id).job;
    assert_eq!(
        (job.status, job.phase),
        (JobStatus::Queued, JobPhase::Resuming)
    );
    let cp = checkpoint(&h, id);
    assert_eq!(
        parse(cp.tool_result.as_deref().unwrap()),
        json!({"status": "background.action_denied", "reason": "user_denied",
               "tool": "messages_send"})
    );
    assert_eq!(record(&h, id).decision.as_deref(), Some("denied"));
    let events = h.events();
    assert!(events.iter().any(|e| matches!(
        e,
        SchedulerEvent::ReviewResolved {
            resolution: Resolution::Denied,
            committed: true,
            alert: false,
            job_status: JobStatus::Queued,
            ..
        }
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_first_tap_wins_under_concurrency() {
    let h = Arc::new(ReviewHarness::new());
    let (id, cid) = h.parked("messages_send", send_params("once")).await;
    let mut taps = Vec::new();
    for i in 0..24 {
        let h = Arc::clone(&h);
        let cid = cid.clone();
        taps.push(tokio::spawn(async move {
            h.sched.resolve_review(&cid, i % 3 != 0).await.unwrap()
        }));
    }
    let mut answers = Vec::new();
    for tap in taps {
        answers.push(tap.await.unwrap());
    }
    let winners: Vec<&ReviewAnswer> = answers.iter().filter(|a| a.is_resolved()).collect();
    assert_eq!(winners.len(), 1, "{answers:?}");
    for loser in answers.iter().filter(|a| !a.is_resolved()) {
        already_resolved(loser);
    }
    let approved = winners[0].resolution == Some(Resolution::Approved);
    assert_eq!(h.actions(SEND).len(), usize::from(approved));
    assert_eq!(h.executor.calls(), usize::from(approved));
    assert_eq!(h.job(id).job.status, JobStatus::Queued);
    assert_eq!(h.review_audit(&cid).len(), 1);
}

#[tokio::test]
async fn a_tap_after_the_window_is_told_the_review_expired_and_nothing_runs() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("late")).await;
    let before = h.job(id).job;
    // No tick ran since the window passed: the tap's own claim expires it first (§9.5 step 2).
    h.clock.advance(900_000);
    let answer = h.sched.resolve_review(&cid, true).await.unwrap();
    assert_eq!(
        answer.code,
        ErrorCode::BackgroundReviewExpired,
        "{answer:?}"
    );
    assert_eq!(answer.resolution, None);
    assert!(h.actions(SEND).is_empty());
    assert_eq!(h.executor.calls(), 0);
    // The job is not failed: it resumes with the timeout result (§9.7).
    let job = h.job(id).job;
    assert_eq!(
        (job.status, job.phase),
        (JobStatus::Queued, JobPhase::Resuming)
    );
    assert_eq!(job.failure_count, before.failure_count);
    assert!(job.unread_result);
    let cp = checkpoint(&h, id);
    assert_eq!(cp.review_resolution.as_deref(), Some("approval_expired"));
    assert_eq!(
        parse(cp.tool_result.as_deref().unwrap()),
        json!({"status": "background.confirmation_timeout", "reason": "approval_expired",
               "tool": "messages_send"})
    );
    assert_eq!(
        record(&h, id).resolution.as_deref(),
        Some("approval_expired")
    );
    assert_eq!(record(&h, id).decision, None);
}

#[tokio::test]
async fn a_review_expired_by_a_tick_stays_expired_for_later_taps() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("late")).await;
    // The single wake is the review's expiry: the tick there expires it (§6.2 step 3) and,
    // the job being due again at once, runs it with the timeout result (step 6).
    let expires_at = record(&h, id).expires_at;
    assert_eq!(h.sched.next_wake(), Some(expires_at));
    h.clock.set(expires_at);
    let report = h.sched.tick().await.unwrap();
    h.sched.wait_idle().await;
    assert_eq!(report.expired_reviews, vec![id]);
    assert_eq!(report.claimed.len(), 1);
    let resumed = h.runner.seen().pop().unwrap();
    let cp = Checkpoint::of(&resumed.checkpoint).unwrap();
    assert!(cp.resume_pending);
    assert_eq!(cp.review_resolution.as_deref(), Some("approval_expired"));
    // Its completion cleared the record: the review's audit still knows it expired.
    let job = h.job(id).job;
    assert_eq!(job.status, JobStatus::Completed);
    assert_eq!(job.failure_count, 0);
    assert!(job.pending_confirmation_id.is_empty());
    for approve in [true, false] {
        let answer = h.sched.resolve_review(&cid, approve).await.unwrap();
        assert_eq!(
            answer.code,
            ErrorCode::BackgroundReviewExpired,
            "{answer:?}"
        );
    }
    assert!(h.actions(SEND).is_empty());
    let audit = h.review_audit(&cid);
    assert_eq!(audit.len(), 1);
    assert_eq!(
        audit[0].entry.policy_proof.as_ref().unwrap()["result_status"],
        "background.confirmation_timeout"
    );
    // An unknown id is not claimable, and is said to be unknown (issue 28).
    let unknown = h
        .sched
        .resolve_review("job-confirm-nope", true)
        .await
        .unwrap();
    assert_eq!(unknown.code, ErrorCode::JobNotFound, "{unknown:?}");
}

/// An edit of a stored record.
type Tamper = fn(&mut serde_json::Map<String, Value>);

#[tokio::test]
async fn a_tampered_record_fails_verification_and_nothing_runs() {
    // Params changed after the digests were computed (check 15), a secret slipped into the
    // record (check 7), a window stretched beyond 15 minutes (check 9).
    let tamperings: [(&str, Tamper); 3] = [
        ("params changed", |r| {
            r["params"]["body"] = json!("send me your codes");
        }),
        ("secret added", |r| {
            r["params"]["password"] = json!("hunter2");
        }),
        ("window stretched", |r| {
            let created = r["created_at"].as_i64().unwrap();
            r["expires_at"] = json!(created + 900_001);
        }),
    ];
    for (what, tamper) in tamperings {
        let h = ReviewHarness::new();
        let (id, cid) = h.parked("messages_send", send_params("hello")).await;
        let mut row = h.job(id);
        tamper(&mut row.job.pending_tool_request_json);
        h.store.update_job(&row).unwrap();
        assert!(
            check_stored(&serde_json::to_value(&h.job(id).job).unwrap()).is_err(),
            "{what}"
        );

        let answer = h.sched.resolve_review(&cid, true).await.unwrap();
        resolved(
            &answer,
            Resolution::BindingInvalid,
            "background.review_error",
        );
        assert!(h.actions(SEND).is_empty(), "{what}");
        assert_eq!(h.executor.calls(), 0, "{what}");
        let bound = parse(checkpoint(&h, id).tool_result.as_deref().unwrap());
        assert_eq!(
            bound["reason"], "approval_binding_invalid_or_expired",
            "{what}"
        );
        // The job resumes; the stored record is never repaired.
        assert_eq!(h.job(id).job.status, JobStatus::Queued);
        assert_eq!(
            h.job(id).job.pending_tool_request_json["params"]["body"] == json!("hello"),
            what != "params changed"
        );
    }
}

#[tokio::test]
async fn a_crash_while_an_approval_resolves_fails_the_job_and_never_replays_it() {
    let h = Arc::new(ReviewHarness::hanging());
    let (id, cid) = h.parked("messages_send", send_params("exactly once")).await;
    // The approval runs the action, then the daemon "dies" before it commits.
    let tapper = {
        let h = Arc::clone(&h);
        let cid = cid.clone();
        tokio::spawn(async move { h.sched.resolve_review(&cid, true).await })
    };
    wait_started(&h.executor).await;
    tapper.abort();
    assert_eq!(h.actions(SEND).len(), 1);
    let waiting = h.job(id).job;
    assert_eq!(
        (waiting.status, waiting.phase),
        (JobStatus::Waiting, JobPhase::ApprovalExecuting)
    );
    // The wake covers the stale resolution (§6.4).
    assert_eq!(
        h.sched.reschedule().unwrap(),
        Some(record(&h, id).reviewed_at.unwrap() + STALE_RESOLUTION_MS)
    );

    // The next daemon settles it at once: outcome unknown, the job failed, the user told.
    let next = h.restart("sched-b");
    let mut events = next.subscribe();
    let report = next.start().await.unwrap();
    assert_eq!(report.repaired_reviews, vec![id]);
    let job = h.job(id).job;
    assert_eq!(job.status, JobStatus::Failed);
    assert_eq!(job.phase, JobPhase::ReviewResolutionUnknown);
    assert_eq!(
        job.last_result,
        "background.review_interrupted_result_unknown"
    );
    assert!(job.unread_result);
    assert_eq!(record(&h, id).resolution.as_deref(), Some("result_unknown"));
    let event = events.try_recv().unwrap();
    assert!(
        matches!(
            event,
            SchedulerEvent::ReviewResolved {
                resolution: Resolution::ResultUnknown,
                alert: true,
                job_status: JobStatus::Failed,
                ..
            }
        ),
        "{event:?}"
    );

    // Never replayed: later ticks, taps and even the same request sent again run nothing.
    h.clock.advance(3_600_000);
    next.tick().await.unwrap();
    next.wait_idle().await;
    already_resolved(&next.resolve_review(&cid, true).await.unwrap());
    let again = h
        .bridge
        .invoke_reviewed(
            &openphone_policy::Caller::builtin("background-review"),
            h.executor.request(&record(&h, id)),
            openphone_core::ReviewedApproval {
                confirmation_id: cid.clone(),
                job_id: id,
            },
        )
        .await;
    assert!(again.replayed, "{again:?}");
    assert_eq!(h.actions(SEND).len(), 1);
    assert_eq!(h.executor.calls(), 1);
    assert_eq!(h.job(id).job.status, JobStatus::Failed);
}

#[tokio::test]
async fn an_approval_left_resolving_is_settled_by_the_tick_after_ten_minutes() {
    let h = Arc::new(ReviewHarness::hanging());
    let (id, cid) = h.parked("messages_send", send_params("hi")).await;
    let tapper = {
        let h = Arc::clone(&h);
        let cid = cid.clone();
        tokio::spawn(async move { h.sched.resolve_review(&cid, true).await })
    };
    wait_started(&h.executor).await;
    tapper.abort();
    h.clock.advance(STALE_RESOLUTION_MS);
    assert!(h.sched.tick().await.unwrap().repaired_reviews.is_empty());
    h.clock.advance(1);
    assert_eq!(h.sched.tick().await.unwrap().repaired_reviews, vec![id]);
    assert_eq!(h.job(id).job.phase, JobPhase::ReviewResolutionUnknown);
    assert_eq!(h.actions(SEND).len(), 1);
}

/// What the claim of a denial writes (§9.5 step 5), as a crash would leave it.
fn claimed_denial(h: &ReviewHarness, id: i64) {
    let row = h.job(id);
    let now = h.now();
    let mut next = apply(&row, &Change::ReviewClaimed { approved: false }, now).unwrap();
    let record = &mut next.job.pending_tool_request_json;
    record.insert("review_state".into(), json!("resolving"));
    record.insert("decision".into(), json!("denied"));
    record.insert("reviewed_at".into(), json!(now));
    h.store.update_job(&next).unwrap();
}

#[tokio::test]
async fn a_crash_while_a_denial_resolves_resumes_as_denied_after_restart() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("no")).await;
    claimed_denial(&h, id);
    assert_eq!(h.job(id).job.phase, JobPhase::DenialResolving);
    check_stored(&serde_json::to_value(&h.job(id).job).unwrap()).unwrap();
    let next = h.restart("sched-b");
    let report = next.start().await.unwrap();
    next.wait_idle().await;
    assert_eq!(report.repaired_reviews, vec![id]);
    // The job resumed at once (it was due) with the denial as the outcome.
    assert_eq!(report.claimed.len(), 1);
    let resumed = h.runner.seen().pop().unwrap();
    let cp = Checkpoint::of(&resumed.checkpoint).unwrap();
    assert_eq!(
        cp.review_resolution.as_deref(),
        Some("denied_after_restart")
    );
    let bound = parse(cp.tool_result.as_deref().unwrap());
    assert_eq!(bound["status"], "background.action_denied");
    assert_eq!(h.job(id).job.status, JobStatus::Completed);
    assert!(h.actions(SEND).is_empty());
    let audit = h.review_audit(&cid);
    assert_eq!(
        audit.last().unwrap().entry.policy_proof.as_ref().unwrap()["resolution"],
        "denied_after_restart"
    );
}

#[tokio::test]
async fn stopping_a_job_awaiting_review_ends_its_review() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("never")).await;
    let outcome = h.sched.stop(id).unwrap();
    assert!(outcome.stopped);
    let job = h.job(id).job;
    assert_eq!(job.status, JobStatus::Stopped);
    assert!(job.pending_confirmation_id.is_empty() && job.resume_token.is_empty());
    assert!(job.pending_tool_request_json.is_empty() && job.checkpoint_json.is_empty());
    let audit = h.review_audit(&cid);
    assert_eq!(audit.len(), 1);
    assert_eq!(
        audit[0].entry.policy_proof.as_ref().unwrap()["resolution"],
        "job_stopped"
    );
    assert!(h.events().iter().any(|e| matches!(
        e,
        SchedulerEvent::ReviewResolved {
            resolution: Resolution::JobStopped,
            ..
        }
    )));
    already_resolved(&h.sched.resolve_review(&cid, true).await.unwrap());
    assert!(h.actions(SEND).is_empty());
    assert_eq!(h.sched.next_wake(), None);
}

#[tokio::test]
async fn a_stop_while_an_approved_action_runs_keeps_the_job_stopped() {
    let h = Arc::new(ReviewHarness::holding());
    let (id, cid) = h
        .parked("messages_send", send_params("already going"))
        .await;
    let tapper = {
        let h = Arc::clone(&h);
        let cid = cid.clone();
        tokio::spawn(async move { h.sched.resolve_review(&cid, true).await.unwrap() })
    };
    wait_started(&h.executor).await;
    assert!(h.sched.stop(id).unwrap().stopped);
    h.executor.release();
    let answer = tapper.await.unwrap();
    // The action cannot be recalled: it ran once, its outcome is audited, the job stays
    // stopped (no resurrection, §8).
    assert_eq!(
        answer.code,
        ErrorCode::BackgroundReviewCommitFailed,
        "{answer:?}"
    );
    assert_eq!(answer.resolution, Some(Resolution::Approved));
    assert_eq!(h.actions(SEND).len(), 1);
    let job = h.job(id).job;
    assert_eq!(job.status, JobStatus::Stopped);
    assert!(job.pending_tool_request_json.is_empty());
    let audit = h.review_audit(&cid);
    let payloads: Vec<&Value> = audit
        .iter()
        .map(|r| r.entry.policy_proof.as_ref().unwrap())
        .collect();
    assert_eq!(payloads.len(), 2);
    assert_eq!(payloads[0]["resolution"], "job_stopped");
    assert_eq!(payloads[1]["resolution"], "approved");
    assert_eq!(payloads[1]["result_status"], "ok");
    assert_eq!(payloads[1]["checkpoint_committed"], false);
}

#[tokio::test]
async fn a_command_forbidden_after_parking_stays_forbidden_when_approved() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("x")).await;
    let policy: openphone_policy::ToolPolicy =
        serde_json::from_value(json!({"global": {"deny": ["openphone.messages.send"]}})).unwrap();
    h.bridge.set_config(openphone_core::BridgeConfig {
        tool_policy: policy,
        ..Default::default()
    });
    let answer = h.sched.resolve_review(&cid, true).await.unwrap();
    resolved(&answer, Resolution::NotEligible, "background.review_error");
    assert!(h.actions(SEND).is_empty());
    let bound = parse(checkpoint(&h, id).tool_result.as_deref().unwrap());
    assert_eq!(bound["reason"], "tool_not_eligible_for_background_approval");
}

#[tokio::test]
async fn an_unknown_review_id_is_not_found_not_already_resolved() {
    // Issue 28: a review id that never existed was answered "already resolved".
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("hold on")).await;
    for unknown in [
        "job-confirm-00000000-0000-4000-8000-000000000000",
        "not-a-review",
        "",
    ] {
        for approve in [true, false] {
            let answer = h.sched.resolve_review(unknown, approve).await.unwrap();
            assert_eq!(
                answer.code,
                ErrorCode::JobNotFound,
                "{unknown:?} {answer:?}"
            );
            assert_eq!(answer.reason.as_deref(), Some(review::NO_SUCH_REVIEW));
            assert_eq!(answer.job_id, None);
        }
    }
    // Nothing changed: the real review still waits, and its taps keep their answers.
    assert_eq!(h.job(id).job.status, JobStatus::AwaitingReview);
    let answer = h.sched.resolve_review(&cid, false).await.unwrap();
    resolved(&answer, Resolution::Denied, "background.action_denied");
    already_resolved(&h.sched.resolve_review(&cid, true).await.unwrap());
    assert!(h.actions(SEND).is_empty());
}
