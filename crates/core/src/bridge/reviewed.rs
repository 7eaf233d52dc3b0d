//! A request the user approved on a background review (`agent-jobs.md` §9.7).
//!
//! A background job never executes a state-changing command by itself: policy layer 6 parks
//! it, the job is parked on a review, and only the user's Approve on that review lets the
//! **stored** request run. [`ToolBridge::invoke_reviewed`] is how it runs: through the normal
//! pipeline — validation, the policy stack under the job's background context, replay by
//! identity, execution with its executing record, the audit record — with one difference:
//! the Confirm (or Park) verdict of this one request is satisfied by the review. The proof in
//! the audit record names it (layer 7's source `{"kind":"background_review",
//! "confirmation_id":…}`, `openphone_policy::satisfied_by_review`). A Deny stays a Deny.
//!
//! The bridge does not take the caller's word for the review: before anything executes it
//! reads the job from the store and requires that this very request is what the job's claimed,
//! approved review holds (`check_review`): the job waits on this confirmation id, its record is
//! `resolving` with decision `approved` and not expired, and the record's model-tool name,
//! params digest (§9.11), idempotency key and session match the request. A request replayed
//! with the same identity is answered from its recorded result before that check, so it never
//! runs twice — not even after the review was committed.

use openphone_policy::{Caller, Context, Decision};
use openphone_protocol::review::{ReviewDecision, ReviewState, ReviewView};
use openphone_protocol::{
    BUILTIN_RUNTIME_ID, Command, ErrorCode, ToolRequest, ToolResult, params_digest,
};
use openphone_store::JobStatus;

use super::ToolBridge;
use crate::request::{NormalizedRequest, normalize};

/// The review that approved a request: the background confirmation's id and its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewedApproval {
    /// `job-confirm-<uuid>`: also the request's `request_id`.
    pub confirmation_id: String,
    /// The job parked on the review.
    pub job_id: i64,
}

impl ReviewedApproval {
    /// `background-job:<job_id>`: the runtime session and phone session of the request.
    pub fn session(&self) -> String {
        openphone_protocol::background_job_session(self.job_id)
    }
}

impl ToolBridge {
    /// Runs `request`, which the user approved on the background review `review`, through the
    /// normal pipeline under `Context::job(review.job_id)`: the verified review satisfies the
    /// request's Confirm or Park verdict for this one request only (recorded as the proof's
    /// source); a Deny is still a Deny; a request with the same identity replays its recorded
    /// result and never runs twice. Before executing, the request must be exactly what the
    /// job's claimed, approved review holds (see the module documentation); otherwise it is
    /// refused with `background.review_error` and nothing runs.
    pub async fn invoke_reviewed(
        &self,
        caller: &Caller,
        request: ToolRequest,
        review: ReviewedApproval,
    ) -> ToolResult {
        let started = self.now_ms();
        let keyed = super::retry::explicitly_keyed(&request);
        let req = normalize(request);
        let context = Context::job(u64::try_from(review.job_id).unwrap_or(0));
        Box::pin(self.process(caller, req, keyed, context, started, Some(&review))).await
    }

    /// Why `req` is not the request the job's approved review holds, if it is not.
    pub(super) fn check_review(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        command: &Command,
        review: &ReviewedApproval,
    ) -> Result<(), String> {
        let session = review.session();
        if caller.runtime != BUILTIN_RUNTIME_ID {
            return Err(format!(
                "background reviews are made for the `{BUILTIN_RUNTIME_ID}` runtime, not `{}`",
                caller.runtime
            ));
        }
        if !command.mutating {
            return Err(format!(
                "{} is not state-changing: it has no review",
                command.name
            ));
        }
        if req.request_id != review.confirmation_id {
            return Err("the request id must be the review's confirmation id".to_owned());
        }
        if req.runtime_session_id != session || req.phone_session_id.as_deref() != Some(&session) {
            return Err(format!(
                "the request must run in the job's session `{session}`"
            ));
        }
        let job = match self.store.get_job(review.job_id) {
            Ok(Some(row)) => row.job,
            Ok(None) => return Err(format!("job {} does not exist", review.job_id)),
            Err(e) => return Err(format!("the job could not be read: {e}")),
        };
        if job.pending_confirmation_id != review.confirmation_id {
            return Err(format!(
                "job {} does not wait on review {}",
                review.job_id, review.confirmation_id
            ));
        }
        if job.status != JobStatus::Waiting {
            return Err(format!(
                "job {} is {}, not applying a review",
                review.job_id, job.status
            ));
        }
        // Read as stored (a typed view, nothing re-serialised): a tampered record fails here.
        let applying = ReviewView::of(&job.pending_tool_request_json).filter(|record| {
            record.state() == Some(ReviewState::Resolving)
                && record.decision() == Some(ReviewDecision::Approved)
        });
        let Some(record) = applying else {
            return Err(format!(
                "review {} is not an approval being applied",
                review.confirmation_id
            ));
        };
        if self.now_ms() >= record.expires_at() {
            return Err(format!("review {} has expired", review.confirmation_id));
        }
        if record.tool() != command.android_tool {
            return Err(format!(
                "review {} is for {}, not {}",
                review.confirmation_id,
                record.tool(),
                command.android_tool
            ));
        }
        if record.idempotency_key() != req.idempotency_key {
            return Err("the idempotency key is not the review's".to_owned());
        }
        let digest = params_digest(&command.android_tool, &req.params)
            .map_err(|e| format!("the params have no digest: {e}"))?;
        if record.text("params_digest") != digest {
            return Err("the params are not the reviewed params".to_owned());
        }
        Ok(())
    }
}

/// The decision of a reviewed request: its Confirm or Park satisfied by the review.
pub(super) fn satisfied(decision: Decision, review: Option<&ReviewedApproval>) -> Decision {
    match review {
        Some(review) => openphone_policy::satisfied_by_review(decision, &review.confirmation_id),
        None => decision,
    }
}

/// The refusal of a request that is not what its review holds: nothing ran.
pub(super) fn refused(runtime: &str, request_id: &str, why: &str) -> ToolResult {
    ToolResult::failure(
        runtime,
        request_id,
        ErrorCode::BackgroundReviewError,
        format!("not executed: {why}"),
    )
}
