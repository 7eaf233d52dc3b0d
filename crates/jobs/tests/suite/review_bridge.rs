//! `ToolBridge::invoke_reviewed` (§9.7): a reviewed request runs only if it is exactly what
//! the job's claimed, approved review holds; a request with the same identity replays its
//! recorded result.

use std::sync::Arc;

use openphone_core::ReviewedApproval;
use openphone_jobs::{Change, ConfirmationRecord, JobStatus, apply};
use openphone_policy::Caller;
use openphone_protocol::ErrorCode;
use serde_json::json;

use super::review_support::{ReviewHarness, send_params, wait_started};

const SEND: &str = "openphone.messages.send";

fn caller() -> Caller {
    Caller::builtin("background-review")
}

#[tokio::test]
async fn a_reviewed_request_that_is_not_the_claimed_approval_runs_nothing() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("hello")).await;
    let record = ConfirmationRecord::of(&h.job(id).job.pending_tool_request_json).unwrap();
    let review = ReviewedApproval {
        confirmation_id: cid.clone(),
        job_id: id,
    };
    // The review is still pending: nobody approved it.
    let pending = h
        .bridge
        .invoke_reviewed(&caller(), h.executor.request(&record), review.clone())
        .await;
    assert_eq!(
        pending.error.as_ref().map(|e| e.code),
        Some(ErrorCode::BackgroundReviewError),
        "{pending:?}"
    );
    assert!(h.actions(SEND).is_empty());
    assert_eq!(h.job(id).job.status, JobStatus::AwaitingReview);

    // Claimed and approved, but another request id, or another runtime.
    claim_approval(&h, id);
    let mut other_id = h.executor.request(&record);
    other_id.request_id = "job-confirm-other".to_owned();
    for (what, request, caller) in [
        ("other request id", other_id, caller()),
        (
            "another runtime",
            h.executor.request(&record),
            Caller::remote("hermes", openphone_policy::Transport::Websocket, "t"),
        ),
    ] {
        let result = h
            .bridge
            .invoke_reviewed(&caller, request, review.clone())
            .await;
        assert!(result.error.is_some(), "{what}: {result:?}");
        assert!(h.actions(SEND).is_empty(), "{what}");
    }
    // The exact request runs.
    let ran = h
        .bridge
        .invoke_reviewed(&caller(), h.executor.request(&record), review)
        .await;
    assert!(ran.error.is_none(), "{ran:?}");
    assert_eq!(h.actions(SEND).len(), 1);
}

/// Writes what the claim of an approval writes (§9.5 step 5).
fn claim_approval(h: &ReviewHarness, id: i64) {
    let mut row = h.job(id);
    let now = h.now();
    let mut next = apply(&row, &Change::ReviewClaimed { approved: true }, now).unwrap();
    let map = &mut next.job.pending_tool_request_json;
    map.insert("review_state".into(), json!("resolving"));
    map.insert("decision".into(), json!("approved"));
    map.insert("reviewed_at".into(), json!(now));
    row = h.store.update_job(&next).unwrap();
    assert_eq!(row.job.status, JobStatus::Waiting);
}

#[tokio::test]
async fn other_params_under_the_reviews_id_run_nothing() {
    let h = ReviewHarness::new();
    let (id, cid) = h.parked("messages_send", send_params("hello")).await;
    let record = ConfirmationRecord::of(&h.job(id).job.pending_tool_request_json).unwrap();
    claim_approval(&h, id);
    let mut request = h.executor.request(&record);
    request.params = send_params("something else");
    let result = h
        .bridge
        .invoke_reviewed(
            &caller(),
            request,
            ReviewedApproval {
                confirmation_id: cid,
                job_id: id,
            },
        )
        .await;
    assert_eq!(
        result.error.as_ref().map(|e| e.code),
        Some(ErrorCode::BackgroundReviewError),
        "{result:?}"
    );
    assert!(h.actions(SEND).is_empty());
}

#[tokio::test]
async fn the_same_reviewed_request_replays_and_never_runs_twice() {
    let h = Arc::new(ReviewHarness::hanging());
    let (id, cid) = h.parked("messages_send", send_params("one")).await;
    let tapper = {
        let h = Arc::clone(&h);
        let cid = cid.clone();
        tokio::spawn(async move { h.sched.resolve_review(&cid, true).await })
    };
    wait_started(&h.executor).await;
    // The review is resolving and its request ran: sending it again replays.
    let record = ConfirmationRecord::of(&h.job(id).job.pending_tool_request_json).unwrap();
    let review = ReviewedApproval {
        confirmation_id: cid.clone(),
        job_id: id,
    };
    for _ in 0..3 {
        let again = h
            .bridge
            .invoke_reviewed(&caller(), h.executor.request(&record), review.clone())
            .await;
        assert!(again.replayed, "{again:?}");
        assert_eq!(again.result["sent"], true);
    }
    assert_eq!(h.actions(SEND).len(), 1);
    tapper.abort();
}

/// Issue 30 / review finding 4: the share chooser an approved review's `share.text` raises is an
/// OS dialog; the user approved the request, not the dialog, and nobody is present at review
/// time — so the bridge never presses it: the dialog gets its own confirmation for the user to
/// decide later, and the review's answer says so.
#[tokio::test]
async fn an_approved_reviews_os_dialog_is_left_for_the_user_not_pressed() {
    const SHARE: &str = "openphone.share.text";
    let h = ReviewHarness::new();
    let params = json!({ "text": "the plan for tonight", "reason": "share the plan" });
    let (id, cid) = h.parked("share_text", params).await;
    assert!(h.actions(SHARE).is_empty(), "parked before it ran");
    let record = ConfirmationRecord::of(&h.job(id).job.pending_tool_request_json).unwrap();
    claim_approval(&h, id);
    let ran = h
        .bridge
        .invoke_reviewed(
            &caller(),
            h.executor.request(&record),
            ReviewedApproval {
                confirmation_id: cid,
                job_id: id,
            },
        )
        .await;
    assert_eq!(
        ran.error.as_ref().map(|e| e.code.as_str()),
        Some("framework_confirmation_required"),
        "{ran:?}"
    );
    let dialog = ran
        .pending_confirmation()
        .expect("the dialog's confirmation");
    assert_eq!(h.actions(SHARE).len(), 1);
    assert!(h.phone.pending_dialog().is_some(), "left up, not pressed");
    assert!(
        h.bridge
            .confirmation(&dialog.confirmation_id)
            .unwrap()
            .is_some_and(|c| c.summary.starts_with("Android asks: ")),
        "the user's to decide later"
    );
}
