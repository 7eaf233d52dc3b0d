//! The review side of a background run (`agent-jobs.md` §9): what a resumed run knows of the
//! action the user reviewed and the replay of its stored outcome (§9.9), whether a parked
//! state-changing call can be held for review (§9.2), and the answers the model gets for a
//! parked, refused or replayed call.

use openphone_jobs::AgentJob;
use openphone_jobs::review::{self, Checkpoint, MAX_RECORD_CHARS, ReviewRefused};
use openphone_model::{Message, ToolCall};
use openphone_protocol::{Command, ErrorCode};
use serde_json::{Value, json};

use crate::prompt;

/// Room the rest of a background confirmation record (§9.12) takes besides `params`: ids,
/// digests, times and a summary of up to 1000 characters. A proposal whose params are longer
/// than [`MAX_RECORD_CHARS`] minus this is refused as `too_large` before it is parked.
const RECORD_OVERHEAD_CHARS: usize = 2_000;

/// What a resumed run knows of the reviewed action (§9.9).
#[derive(Debug, Clone)]
pub(super) struct Resume {
    /// The model-tool name.
    pub(super) tool: String,
    pub(super) params_digest: String,
    pub(super) resolution: Option<String>,
    /// The bound result; `None` when the checkpoint has none
    /// (`background.review_result_missing`).
    pub(super) result: Option<Value>,
}

impl Resume {
    /// The resume of `job`'s checkpoint, when it has one with `resume_pending`. A
    /// `checkpoint_json` that is not a checkpoint of this job is an error: nothing is run
    /// when what was reviewed cannot be known.
    pub(super) fn of(job: &AgentJob) -> Result<Option<Resume>, String> {
        if job.checkpoint_json.is_empty() {
            return Ok(None);
        }
        let Some(checkpoint) = Checkpoint::of(&job.checkpoint_json) else {
            return Err("checkpoint_json does not hold a review checkpoint".to_owned());
        };
        if checkpoint.job_id != job.id {
            return Err(format!(
                "the checkpoint belongs to job {}, not {}",
                checkpoint.job_id, job.id
            ));
        }
        if !checkpoint.resume_pending {
            return Ok(None);
        }
        let result = checkpoint.tool_result.as_deref().map(|text| {
            serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        });
        Ok(Some(Resume {
            tool: checkpoint.tool,
            params_digest: checkpoint.params_digest,
            resolution: checkpoint.review_resolution,
            result,
        }))
    }

    /// The bound result as the model reads it.
    pub(super) fn outcome(&self) -> Value {
        match &self.result {
            Some(result) => result.clone(),
            None => json!({
                "status": "error",
                "error": {
                    "code": ErrorCode::BackgroundReviewResultMissing.as_str(),
                    "message": "the outcome of the reviewed action was not recorded; it is not run again",
                },
            }),
        }
    }

    /// The trusted block of the run's opening message.
    pub(super) fn block(&self) -> Value {
        json!({
            "tool": self.tool,
            "params_digest": self.params_digest,
            "review_resolution": self.resolution,
            "tool_result": self.outcome(),
            "final": true,
        })
    }
}

/// §9.2 as far as the run can tell: a known mutating command with a model-tool name a record
/// accepts, params an object without blocked material, small enough for the record. (The
/// scheduler checks the record itself again when it parks the job.)
pub(super) fn eligible(command: &Command, params: &Value) -> Result<(), ReviewRefused> {
    let tool = command.android_tool.as_str();
    let tool_ok = tool.len() <= 80
        && tool.starts_with(|c: char| c.is_ascii_lowercase())
        && tool
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !openphone_policy::is_mutating(command) || !tool_ok {
        return Err(ReviewRefused::NotEligible);
    }
    review::sanitise(params)?;
    let size = serde_json::to_string(params).map_or(usize::MAX, |s| s.chars().count());
    if size > MAX_RECORD_CHARS.saturating_sub(RECORD_OVERHEAD_CHARS) {
        return Err(ReviewRefused::TooLarge);
    }
    Ok(())
}

/// The §9.1 result of a blocked state-changing call.
pub(super) fn blocked(command: &Command, review: &str, refused: Option<ReviewRefused>) -> Value {
    let mut value = json!({
        "status": ErrorCode::BackgroundConfirmationRequired.as_str(),
        "reason": "state_changing_tool_blocked",
        "tool": command.android_tool,
        "review": review,
    });
    if let Some(refused) = refused {
        value["review_refused"] = Value::String(refused.as_str().to_owned());
    }
    value
}

/// The answer to a state-changing call that cannot be held for review: not done, and why.
pub(super) fn refused_answer(
    call: &ToolCall,
    command: &Command,
    request_id: &str,
    refused: ReviewRefused,
) -> (Message, Value) {
    let why = match refused {
        ReviewRefused::NotEligible => "this call cannot be reviewed in the background",
        ReviewRefused::BlockedMaterial => {
            "its arguments hold something that may be secret (a key, token, password, cookie, \
             image data or a long encoded blob), which is never stored for a review"
        }
        ReviewRefused::TooLarge => "its arguments are too large to store for a review",
    };
    let text = format!(
        "{} was NOT done: a background job does not run state-changing tools, and {why}. Do not \
         try it again or another way; say in your answer what was not done and why.\n{}",
        command.android_tool,
        blocked(command, "unavailable", Some(refused))
    );
    let meta = json!({
        "tool": command.name,
        "request_id": request_id,
        "status": "review_refused",
        "error_code": ErrorCode::BackgroundConfirmationRequired.as_str(),
        "review_refused": refused.as_str(),
    });
    (Message::tool(call.id.clone(), text), meta)
}

/// The answer to the reviewed call made again on a resumed run: its stored outcome, or
/// `background.review_result_missing`. Nothing executes.
pub(super) fn replayed(call: &ToolCall, command: &Command, resume: &Resume) -> (Message, Value) {
    let tool = command.android_tool.as_str();
    match &resume.result {
        Some(result) => {
            let text = format!(
                "{tool} was reviewed by the user earlier (resolution: {}); this is its final \
                 outcome, recorded by the phone. It was NOT run again; do not call it again.\n{}",
                resume.resolution.as_deref().unwrap_or("unknown"),
                prompt::trusted_block(&format!("review_result:{}", command.name), result)
            );
            let meta = json!({
                "tool": command.name,
                "status": "replayed",
                "params_digest": resume.params_digest,
                "review_resolution": resume.resolution,
            });
            (Message::tool(call.id.clone(), text), meta)
        }
        None => {
            let code = ErrorCode::BackgroundReviewResultMissing.as_str();
            let text = format!(
                "Error {code}: the outcome of the reviewed {tool} call was not recorded. Nothing \
                 was run, and it is not run again; say in your answer that its outcome is \
                 unknown."
            );
            let meta = json!({
                "tool": command.name,
                "status": "error",
                "error_code": code,
                "params_digest": resume.params_digest,
                "review_resolution": resume.resolution,
            });
            (Message::tool(call.id.clone(), text), meta)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openphone_protocol::Registry;

    fn command(name: &str) -> &'static Command {
        Registry::embedded().unwrap().resolve(name).unwrap()
    }

    #[test]
    fn only_mutating_commands_with_clean_params_are_eligible() {
        let send = command("openphone.messages.send");
        let search = command("openphone.contacts.search");
        let ok = json!({"to": "+49 151 2345 6789", "body": "hi"});
        assert_eq!(eligible(send, &ok), Ok(()));
        assert_eq!(eligible(search, &ok), Err(ReviewRefused::NotEligible));
        assert_eq!(
            eligible(send, &json!({"to": "x", "body": "hi", "api_token": "t"})),
            Err(ReviewRefused::BlockedMaterial)
        );
        let big = json!({"to": "x", "body": "Hello, world! ".repeat(800)});
        assert_eq!(eligible(send, &big), Err(ReviewRefused::TooLarge));
    }
}
