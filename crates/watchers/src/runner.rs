//! The `system_event` runner that runs a watcher's stored tool call.
//!
//! A `system_event` job whose payload holds `tool_call: {tool, arguments}` (a watcher's
//! `delivery.tool` reaction, its templates already filled as data) runs that one call through
//! the bridge as runtime `builtin` narrowed to the authority of the job's creator
//! (`created_by`, the watcher's creator: `crate::authority`; a command the creator may not use
//! now fails the job `tool_not_granted` and calls nothing), in the job's background context
//! (runtime and phone session `background-job:<id>`, a job context naming a runtime creator,
//! so the user's standing approvals do not cover it): a read runs and its result completes the job; a
//! state-changing call comes back `background.confirmation_required` and the run ends
//! [`RunResult::Parked`] with exactly that call, so it is reviewed like any job's (§9). When
//! the review is resolved the job runs again with `resume_pending` in its checkpoint: the run
//! completes with the checkpoint's bound result and executes nothing. A job without a
//! `tool_call` completes with `system_event_recorded`, as before.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_core::{Invocation, ToolBridge};
use openphone_jobs::review::{Checkpoint, ReviewProposal};
use openphone_jobs::transition::SYSTEM_EVENT_RESULT;
use openphone_jobs::{FailureReason, JobRunner, RunContext, RunResult};
use openphone_protocol::{ErrorCode, Registry, ToolRequest, ToolStatus};
use serde_json::{Map, Value, json};

/// Longest `last_result` a run reports (characters).
const RESULT_CHARS: usize = openphone_jobs::limits::LAST_RESULT_MAX_CHARS;
/// The longest a stored tool call may take (ms).
const CALL_TIMEOUT_MS: i64 = 30_000;

/// Runs `system_event` jobs (see the module documentation).
#[derive(Debug, Clone)]
pub struct ToolCallRunner {
    bridge: Arc<ToolBridge>,
    registry: &'static Registry,
}

impl ToolCallRunner {
    /// A runner over `bridge`.
    pub fn new(bridge: Arc<ToolBridge>, registry: &'static Registry) -> ToolCallRunner {
        ToolCallRunner { bridge, registry }
    }
}

fn failed(kind: &str, detail: impl Into<String>) -> RunResult {
    RunResult::Failed {
        reason: FailureReason::job_error(kind),
        detail: detail.into(),
    }
}

/// A JSON object as a string of at most [`RESULT_CHARS`] characters: `result` replaced by a
/// preview when it does not fit.
fn bounded(mut value: Map<String, Value>) -> String {
    let text = Value::Object(value.clone()).to_string();
    if text.chars().count() <= RESULT_CHARS {
        return text;
    }
    let preview: String = value
        .get("result")
        .map(Value::to_string)
        .unwrap_or_default()
        .chars()
        .take(RESULT_CHARS / 2)
        .collect();
    value.insert(
        "result".into(),
        json!({"truncated": true, "preview": preview}),
    );
    openphone_jobs::model::truncate_chars(&Value::Object(value).to_string(), RESULT_CHARS)
}

#[async_trait]
impl JobRunner for ToolCallRunner {
    async fn run(&self, ctx: RunContext) -> RunResult {
        let job = &ctx.job;
        let Some(call) = job.payload_json.get("tool_call") else {
            return RunResult::completed(SYSTEM_EVENT_RESULT);
        };
        // A reviewed call: its outcome is already bound; nothing runs again (§9.9).
        if let Some(checkpoint) = Checkpoint::of(&job.checkpoint_json)
            && checkpoint.resume_pending
        {
            let result = checkpoint.tool_result.unwrap_or_else(|| {
                json!({"status": ErrorCode::BackgroundReviewResultMissing.as_str(),
                       "tool": checkpoint.tool})
                .to_string()
            });
            return RunResult::completed(result);
        }
        let Some(tool) = call.get("tool").and_then(Value::as_str) else {
            return failed("tool_call_invalid", "the stored tool call names no tool");
        };
        let Some(command) = self.registry.resolve(tool) else {
            return failed(
                "tool_call_invalid",
                format!("{tool} is not a manifest command"),
            );
        };
        let arguments = match call.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => {
                return failed(
                    "tool_call_invalid",
                    "the stored arguments are not an object",
                );
            }
        };
        let mut params = arguments;
        params
            .entry("reason")
            .or_insert_with(|| json!(format!("{} (background job {})", job.title, job.id)));
        let session = openphone_protocol::background_job_session(job.id);
        let request = ToolRequest {
            request_id: format!("job-{}-attempt-{}", job.id, ctx.attempt),
            runtime: Some(openphone_protocol::BUILTIN_RUNTIME_ID.to_owned()),
            runtime_session_id: session.clone(),
            phone_session_id: Some(session),
            tool: command.name.clone(),
            params: Value::Object(params.clone()),
            reason: None,
            autonomy: None,
            idempotency_key: Some(format!("job:{}:{}", job.id, ctx.attempt)),
            timeout_ms: Some(CALL_TIMEOUT_MS.min(ctx.remaining_ms().max(1))),
        };
        // With the authority of the job's creator (the watcher's): `builtin` narrowed to it,
        // and a context naming it, so the user's standing approvals do not cover it.
        let created_by = match self.bridge.job_creator(job.id) {
            Ok(Some(creator)) => creator,
            Ok(None) => return failed("invalid_job", format!("job {} is gone", job.id)),
            Err(e) => return failed("store_unavailable", e.to_string()),
        };
        let authority = crate::authority::of(&self.bridge, &created_by, &format!("job-{}", job.id));
        if let Some(why) = crate::authority::refusal(&authority, command) {
            return failed(ErrorCode::ToolNotGranted.as_str(), why);
        }
        let call = Invocation::for_creator(&authority, u64::try_from(job.id).unwrap_or(0), request);
        let mut stop = ctx.stop.clone();
        let result = tokio::select! {
            result = self.bridge.call(call) => result,
            () = stop.stopped() => {
                return failed(openphone_jobs::reason::RUNNER_CANCELLED, "stopped before the call answered");
            }
        };
        let code = result.error.as_ref().map(|e| e.code);
        match result.status {
            ToolStatus::Ok => {
                let mut out = Map::new();
                out.insert("status".into(), json!("ok"));
                out.insert("tool".into(), json!(command.android_tool));
                out.insert("result".into(), Value::Object(result.result));
                RunResult::completed(bounded(out))
            }
            ToolStatus::NeedsConfirmation
                if code == Some(ErrorCode::BackgroundConfirmationRequired) =>
            {
                RunResult::Parked {
                    proposal: ReviewProposal {
                        tool: command.android_tool.clone(),
                        command: command.name.clone(),
                        params: Value::Object(params),
                    },
                }
            }
            status => {
                let (kind, message) = result.error.map_or_else(
                    || (status.as_str().to_owned(), String::new()),
                    |e| (e.code.as_str().to_owned(), e.message),
                );
                failed(&kind, message)
            }
        }
    }
}
