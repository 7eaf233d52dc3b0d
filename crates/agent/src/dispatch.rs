//! [`DispatchRunner`]: the `agent_turn` runner when the configured background runtime is not
//! `builtin` (`agent-jobs.md` §7.3). A run hands the job to that runtime as an attention
//! request and ends at once; the runtime's own tool requests then come through the bridge in
//! the phone session the request created, with the normal (foreground) confirmation rules.
//!
//! [`AgentTurnRunner::from_setup`] (here, beside the runner it may pick) chooses between the
//! built-in loop and this runner for the daemon.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use openphone_core::{Invocation, RuntimeManager, ToolBridge};
use openphone_jobs::{FailureReason, JobRunner, RunContext, RunResult};
use openphone_policy::{Autonomy, Caller};
use openphone_protocol::endpoint::{AttentionRequestParams, RuntimeState, Source};
use openphone_protocol::{
    BUILTIN_RUNTIME_ID, ErrorCode, ToolRequest, ToolStatus, background_job_session,
};
use serde_json::{Map, Value, json};

use crate::background::{AgentTurnRunner, BackgroundSetupError, RUN_STOPPED};
use crate::config::BuiltinConfig;
use crate::prompt;
use crate::setup::BuiltinSetup;

impl AgentTurnRunner {
    /// The runner the daemon installs for `agent_turn`: the built-in loop when
    /// `background_runtime` is unset or `builtin`, else a [`DispatchRunner`] to that runtime
    /// (§7.3). The model key is read now (only for the built-in loop).
    pub fn from_setup(
        setup: &BuiltinSetup,
        config: Option<&BuiltinConfig>,
        background_runtime: Option<String>,
    ) -> Result<Arc<dyn JobRunner>, BackgroundSetupError> {
        let named = background_runtime
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty());
        let runtime = match named {
            None => BUILTIN_RUNTIME_ID.to_owned(),
            Some(raw) => openphone_protocol::normalize_runtime_id(raw).map_err(|e| {
                BackgroundSetupError::Runtime {
                    runtime: raw.to_owned(),
                    reason: e.to_string(),
                }
            })?,
        };
        if runtime == BUILTIN_RUNTIME_ID {
            Ok(Arc::new(AgentTurnRunner::from_config(setup, config)?))
        } else {
            // Other runtimes' jobs run in the built-in loop (narrowed to their creator), never
            // with the background runtime's authority; without a usable model they fail
            // saying so.
            let builtin = AgentTurnRunner::from_config(setup, config).or_else(|e| {
                tracing::warn!(error = %e, "[builtin] unusable for other runtimes' jobs");
                AgentTurnRunner::from_config(setup, None)
            })?;
            Ok(Arc::new(
                DispatchRunner::new(setup, &runtime).with_builtin(builtin),
            ))
        }
    }
}

/// Sends background jobs to an external runtime. Cheap to clone.
///
/// A run: the runtime must be configured and connected (else
/// `runtime_background_dispatch_unavailable:<runtime>`); the screen is read through the bridge
/// as `builtin` in the job's context and attached (a failed read is noted, not fatal); then one
/// attention request with source `background_job`, autonomy `ask_before_action`, the job's
/// prompt followed by its payload labelled as data as the text, and the job's id, title and
/// attempt as context. Accepted → [`RunResult::Dispatched`] (the job waits for the runtime);
/// refused → `runtime_background_dispatch_failed:<runtime>:<code>` (or unavailable when the
/// runtime went away meanwhile).
///
/// Only the user's jobs (and the background runtime's own) are sent there: a job another
/// runtime created must run with *its creator's* authority, never with the background
/// runtime's, so it runs in the built-in loop narrowed to its creator's authority (as with no
/// background runtime; without a model it fails saying so).
#[derive(Debug, Clone)]
pub struct DispatchRunner {
    runtime: String,
    manager: Weak<RuntimeManager>,
    bridge: Weak<ToolBridge>,
    caller: Caller,
    /// Runs the jobs of runtimes other than `runtime`.
    builtin: Option<AgentTurnRunner>,
}

impl DispatchRunner {
    /// A runner sending every job to `runtime` (a normalised runtime id; see
    /// [`AgentTurnRunner::from_setup`]). The manager and the bridge are held weakly.
    pub fn new(setup: &BuiltinSetup, runtime: &str) -> DispatchRunner {
        let (caller, _) = setup.caller_and_tools();
        DispatchRunner {
            runtime: runtime.to_owned(),
            manager: Arc::downgrade(&setup.manager),
            bridge: Arc::downgrade(&setup.bridge),
            caller,
            builtin: None,
        }
    }

    /// Runs other runtimes' jobs in `builtin` (the built-in loop) instead of sending them to
    /// this runner's runtime.
    pub fn with_builtin(mut self, builtin: AgentTurnRunner) -> DispatchRunner {
        self.builtin = Some(builtin);
        self
    }

    /// The runtime jobs are sent to.
    pub fn runtime(&self) -> &str {
        &self.runtime
    }

    fn unavailable(&self, detail: impl Into<String>) -> RunResult {
        RunResult::Failed {
            reason: FailureReason::dispatch_unavailable(&self.runtime),
            detail: detail.into(),
        }
    }

    /// The screen for the attention request, read through the bridge in the job's context,
    /// or why it is not attached.
    async fn screen(
        &self,
        ctx: &RunContext,
        job_id: u64,
        created_by: &str,
    ) -> Result<Value, String> {
        let Some(bridge) = self.bridge.upgrade() else {
            return Err("the tool bridge is gone".to_owned());
        };
        let mut params = Map::new();
        params.insert(
            "reason".into(),
            Value::from("screen attached to a background job sent to a runtime"),
        );
        params.insert("include_screenshot".into(), Value::Bool(false));
        let request = ToolRequest {
            request_id: format!("job-{}-{}-screen", ctx.job.id, ctx.attempt),
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            runtime_session_id: background_job_session(ctx.job.id),
            tool: "openphone.screen.get".into(),
            params: Value::Object(params),
            ..ToolRequest::default()
        };
        // Read with the authority of the job's creator (a runtime's job: the runtime's grants
        // and tool policy intersected with `builtin`'s).
        let authority = bridge.creator_authority(&self.caller, created_by);
        let allowed = bridge
            .registry()
            .resolve("openphone.screen.get")
            .is_some_and(|command| authority.permits(command));
        if !allowed {
            return Err(format!(
                "tool_not_granted: runtime `{created_by}`, whose job this is, may not read the screen"
            ));
        }
        let result = bridge
            .call(Invocation::for_creator(&authority, job_id, request))
            .await;
        match (result.status, result.error) {
            (ToolStatus::Ok, _) => Ok(Value::Object(result.result)),
            (_, Some(error)) => Err(error.code.as_str().to_owned()),
            (status, None) => Err(status.as_str().to_owned()),
        }
    }
}

#[async_trait]
impl JobRunner for DispatchRunner {
    async fn run(&self, ctx: RunContext) -> RunResult {
        if ctx.stop.is_stopped() {
            return RunResult::failed(FailureReason::job_error(RUN_STOPPED));
        }
        let Ok(job_id) = u64::try_from(ctx.job.id) else {
            return RunResult::failed(FailureReason::job_error("invalid_job"));
        };
        let Some(bridge) = self.bridge.upgrade() else {
            return self.unavailable("the tool bridge is gone (the daemon is stopping)");
        };
        let created_by = match bridge.job_creator(ctx.job.id) {
            Ok(Some(creator)) => creator,
            Ok(None) => return RunResult::failed(FailureReason::job_error("job_not_found")),
            Err(_) => return RunResult::failed(FailureReason::job_error("store_unavailable")),
        };
        drop(bridge);
        if !openphone_store::is_user_creator(&created_by) && created_by != self.runtime {
            return match &self.builtin {
                Some(builtin) => builtin.run(ctx).await,
                None => RunResult::Failed {
                    reason: FailureReason::job_error("creator_not_dispatchable"),
                    detail: format!(
                        "runtime `{created_by}` created this job: it is not sent to runtime {} \
                         (it would run with that runtime's authority) and no built-in loop is \
                         set up to run it",
                        self.runtime
                    ),
                },
            };
        }
        let Some(manager) = self.manager.upgrade() else {
            return self.unavailable("the runtime manager is gone (the daemon is stopping)");
        };
        // Not configured or not connected: refused before anything is read for it.
        let state = manager
            .list()
            .into_iter()
            .find(|r| r.id == self.runtime)
            .map(|r| r.status);
        match state {
            None => {
                return self.unavailable(format!("runtime {} is not configured", self.runtime));
            }
            Some(RuntimeState::Connected) => {}
            Some(other) => {
                return self.unavailable(format!(
                    "runtime {} is not connected ({})",
                    self.runtime,
                    other.as_str()
                ));
            }
        }
        let screen = self.screen(&ctx, job_id, &created_by).await;
        if ctx.stop.is_stopped() {
            return RunResult::failed(FailureReason::job_error(RUN_STOPPED));
        }
        let screen_note = match &screen {
            Ok(_) => String::new(),
            Err(why) => format!("; screen not attached ({why})"),
        };
        let job = &ctx.job;
        let request = AttentionRequestParams {
            surface: Source::BackgroundJob.as_str().to_owned(),
            text: prompt::dispatch_text(
                &job.prompt,
                &job.payload_json,
                openphone_core::runtimes::ATTENTION_TEXT_CHARS,
            ),
            runtime: Some(self.runtime.clone()),
            autonomy: Some(Autonomy::AskBeforeAction.as_str().to_owned()),
            include_screen: true,
            context: Some(json!({
                "job": {"id": job.id, "title": job.title, "attempt": ctx.attempt},
            })),
            session_target: None,
        };
        let sent =
            tokio::task::spawn_blocking(move || manager.request_attention(request, screen.ok()))
                .await;
        match sent {
            Ok(Ok(accepted)) => RunResult::Dispatched {
                note: format!(
                    "sent to runtime {}: phone session {}, attention {}{screen_note}",
                    accepted.runtime, accepted.phone_session_id, accepted.attention_id
                ),
                // The runtime's final reply in this session completes the job.
                output_ref: openphone_jobs::dispatch_ref(&accepted.phone_session_id),
            },
            Ok(Err(e)) => match e.code {
                ErrorCode::RuntimeNotConfigured
                | ErrorCode::RuntimeNotConnected
                | ErrorCode::MissingRuntime => self.unavailable(e.message),
                code => RunResult::Failed {
                    reason: FailureReason::dispatch_failed(&self.runtime, code.as_str()),
                    detail: e.message,
                },
            },
            Err(e) => RunResult::Failed {
                reason: FailureReason::dispatch_failed(&self.runtime, "task_failed"),
                detail: e.to_string(),
            },
        }
    }
}
