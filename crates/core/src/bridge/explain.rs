//! "Why was this denied?": the dry run [`ToolBridge::explain`], and the explanation the bridge
//! attaches to every policy denial, confirmation and park it answers
//! (`error.details.explanation`).
//!
//! The dry run takes the path of a real request up to the decision and stops there: the same
//! normalisation and validation (an invalid request answers its validation error), the
//! session's autonomy, and the same `decide` as [`ToolBridge::invoke`], under the runtime's
//! **current** authorisation (`authority.rs`) — so it answers what a request sent now would
//! get. It writes nothing: no audit record, no stored request or confirmation, no event, no
//! session change, and nothing executes.
//!
//! The explanation itself is built by the policy crate (`openphone_policy::explain`) from the
//! decision and the inputs it was made from; an allowed request never builds one.

use openphone_policy::{Caller, Context, Decision, Requirement};
use openphone_protocol::endpoint::Explanation;
use openphone_protocol::{Command, ErrorCode, ToolRequest, ToolResult, ToolStatus};
use serde_json::{Map, Value};

use super::ToolBridge;
use super::audit::Attempt;
use super::authority::Standing;
use crate::request::{NormalizedRequest, normalize, validate};

/// The member of a denied or waiting result's `error.details` that holds the explanation.
pub const EXPLANATION_KEY: &str = "explanation";

impl ToolBridge {
    /// Decides `request` as `caller` would have it decided now, and explains the decision —
    /// a dry run: nothing is recorded, published or executed.
    ///
    /// `caller` is taken under its runtime's current configuration (the operator as it is); a
    /// runtime that is no longer configured answers `runtime_not_configured`. A request that
    /// fails validation answers that failure's code and message.
    pub fn explain(
        &self,
        caller: &Caller,
        request: ToolRequest,
        context: Context,
    ) -> Result<Explanation, (ErrorCode, String)> {
        let caller = match self.standing(caller) {
            Standing::Configured(current) => current,
            Standing::Removed(_) => {
                return Err((
                    ErrorCode::RuntimeNotConfigured,
                    format!("runtime `{}` is not configured", caller.runtime),
                ));
            }
        };
        let req = normalize(request);
        let validated =
            validate(self.registry, &caller, &req, true).map_err(|r| (r.code, r.message))?;
        let command = validated.command;
        let session_autonomy = self.session_autonomy(&caller, req.phone_session_id.as_deref());
        let decision = self.decide(&caller, command, &req, session_autonomy, &context);
        Ok(self.explanation(
            &caller,
            command,
            &req,
            session_autonomy,
            &context,
            &decision,
        ))
    }

    /// The explanation of `decision`, made for this request from the same policy inputs
    /// `decide` read (`ToolBridge::with_policy_input`).
    pub(super) fn explanation(
        &self,
        caller: &Caller,
        command: &Command,
        req: &NormalizedRequest,
        session_autonomy: Option<openphone_policy::Autonomy>,
        context: &Context,
        decision: &Decision,
    ) -> Explanation {
        let inputs = super::PolicyRequest {
            caller,
            command,
            req,
            session_autonomy,
            context,
        };
        self.with_policy_input(&inputs, true, |input| {
            openphone_policy::explain(input, decision)
        })
    }
}

impl ToolBridge {
    /// `result`, the `needs_confirmation` answer of a confirmation (`confirm.rs`), with the
    /// explanation of `decision`: added before the answer is recorded and announced, so the
    /// response and the `runtime.confirmation.required` event carry the same result. A request
    /// that joins a confirmation still pending although it would now be allowed gets none.
    pub(super) fn explained_confirmation(
        &self,
        attempt: &Attempt<'_>,
        command: &Command,
        decision: &Decision,
        context: &Context,
        result: ToolResult,
    ) -> ToolResult {
        if matches!(decision.requirement, Requirement::Allow) {
            return result;
        }
        let (caller, req) = (attempt.caller, attempt.req);
        let session_autonomy = self.session_autonomy(caller, req.phone_session_id.as_deref());
        let explanation =
            self.explanation(caller, command, req, session_autonomy, context, decision);
        with_explanation(result, Some(&explanation))
    }
}

/// `result` with `explanation` added to its `error.details` (beside the members already
/// there) when it is a policy outcome: `denied` or `needs_confirmation`. Any other result
/// (an ok one, `rate_limited`, `audit_unavailable`, …) and a missing explanation leave it as
/// it is.
pub(super) fn with_explanation(
    mut result: ToolResult,
    explanation: Option<&Explanation>,
) -> ToolResult {
    let Some(explanation) = explanation else {
        return result;
    };
    let policy_outcome = match result.status {
        ToolStatus::Denied | ToolStatus::NeedsConfirmation => true,
        ToolStatus::Ok | ToolStatus::Error | ToolStatus::Timeout | ToolStatus::Cancelled => false,
    };
    let Some(error) = result.error.as_mut().filter(|_| policy_outcome) else {
        return result;
    };
    let value = match serde_json::to_value(explanation) {
        Ok(value) => value,
        Err(e) => {
            tracing::error!(error = %e, "an explanation could not be written");
            return result;
        }
    };
    error
        .details
        .get_or_insert_with(Map::new)
        .insert(EXPLANATION_KEY.to_owned(), value);
    result
}

/// The explanation in `result`'s `error.details`, when it carries one.
pub fn explanation_of(result: &ToolResult) -> Option<Explanation> {
    let value: &Value = result
        .error
        .as_ref()?
        .details
        .as_ref()?
        .get(EXPLANATION_KEY)?;
    serde_json::from_value(value.clone()).ok()
}
