//! Background job runs on the built-in loop: [`AgentTurnRunner`], the `agent_turn` runner of
//! the job scheduler (`agent-jobs.md` §7.2, §9.1, §9.9).
//!
//! One run is a bounded model/tool loop for one claimed job:
//!
//! - **Model.** `[builtin.background_model]` when it is set, else the `[builtin]` model; with
//!   neither the run fails with `model_unconfigured`. A model error left after the client's own
//!   retries (§7.4) ends the run as `job_error:<reason>` (`job_error:model_http_401`,
//!   `job_error:model_unreachable`, …).
//! - **Input.** The background system prompt, the context `session_target` names (`main`: the
//!   user's latest chat session with the built-in runtime; `session:<id>`: that session;
//!   `isolated`: none), read only and never written, then one message with the job's prompt,
//!   its `payload_json` as labelled untrusted data, and on a resumed run the review's outcome as
//!   trusted phone state.
//! - **Tools.** The built-in loop's catalogue; every call is one `ToolBridge::invoke` as
//!   `builtin` in the phone session `background-job:<id>` (runtime session the same), autonomy
//!   `ask_before_action`, context `Context::job(id)`. A runtime's job (`created_by` a runtime)
//!   runs with its creator's authority (`ToolBridge::creator_authority`): the catalogue
//!   narrowed to what both may use, `builtin`'s grants and ceiling intersected with the
//!   creator's, and a context naming the creator (the user's standing approvals do not apply);
//!   it never reads the user's `main` conversation nor another runtime's session. Policy layer 6 parks every state-changing
//!   command: an eligible one (§9.2) ends the run with [`RunResult::Parked`] and the exact
//!   proposal; one that is not gets the §9.1 answer (`review: "unavailable"`, `review_refused`)
//!   and the loop goes on.
//! - **Resume.** On a run whose checkpoint has `resume_pending`, a call with the checkpoint's
//!   tool and `params_digest` is answered with the stored `tool_result` and executes nothing,
//!   however often it comes (`background.review_result_missing` when the result was not
//!   stored).
//! - **Bounds.** The run's deadline (the scheduler's 8-minute budget) and
//!   `background_max_turns` model calls (16) end it as `job_error:run_budget_exceeded`;
//!   `max_tool_calls` as `job_error:max_tool_calls_exceeded`. The stop signal is checked before
//!   every model call and after every tool call, and a model call in flight (retry waits
//!   included) is dropped the moment it fires.
//! - **Record.** The run's conversation is appended to the transcript of `background-job:<id>`
//!   (the phone session is created on the first run), so `openphone sessions get` shows what
//!   every run did; the session is `running` during a run, then `completed` or `failed`.
//!
//! When the configured background runtime is not `builtin`, the job is dispatched instead
//! ([`DispatchRunner`](crate::DispatchRunner), §7.3); [`AgentTurnRunner::from_setup`] picks
//! the one to install.
//!
//! The files: this one builds the runner; `job_run` is one run (the loop of
//! `turns.rs` under the background policy); `context` the job's session and the context
//! it reads; `health` the heartbeat's model check; `review` the §9 review side (resume, eligibility, the answers of a parked,
//! refused or replayed call); `report` the run's `last_result` and summary.

mod context;
mod health;
mod job_run;
mod report;
mod review;

use std::sync::Arc;

use async_trait::async_trait;
use openphone_jobs::{JobRunner, RunContext, RunResult};
use openphone_model::{ModelClient, ModelConfig};

use crate::config::{BuiltinConfig, BuiltinConfigError};
use crate::setup::BuiltinSetup;
use crate::turns::Limits;
use job_run::Jobs;

pub use health::ModelHealth;
pub use report::{RUN_STOPPED, summary_of};

/// Why the runner for background jobs could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackgroundSetupError {
    /// The `[builtin]` table (or its background model) cannot be used.
    #[error(transparent)]
    Builtin(#[from] BuiltinConfigError),
    /// The configured background runtime is not a valid runtime id.
    #[error("[jobs] background_runtime {runtime:?}: {reason}")]
    Runtime {
        /// The configured value.
        runtime: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The `agent_turn` runner on the built-in loop. Cheap to clone.
///
/// It holds the bridge weakly (the bridge may hold the job service that holds the scheduler
/// that holds this runner): a run that finds it gone fails with `framework_unavailable`.
#[derive(Debug, Clone)]
pub struct AgentTurnRunner {
    inner: Arc<Jobs>,
}

impl AgentTurnRunner {
    /// The built-in loop for a `[builtin]` table (its background model, else its model), or an
    /// unconfigured one without it (every run fails with `model_unconfigured`).
    pub fn from_config(
        setup: &BuiltinSetup,
        config: Option<&BuiltinConfig>,
    ) -> Result<AgentTurnRunner, BuiltinConfigError> {
        let Some(config) = config else {
            return Ok(AgentTurnRunner::build(
                setup,
                &BuiltinConfig::new("", ""),
                None,
            ));
        };
        let model = config.background_model_config()?;
        AgentTurnRunner::with_model(setup, config, model)
    }

    /// The built-in loop with a model client built by the caller (tests set its retry
    /// policy); `config` gives the bounds (`background_max_turns`, `max_tool_calls`,
    /// `max_history_chars`). `max_tokens` and `vision` are the client's.
    pub fn with_client(
        setup: &BuiltinSetup,
        config: &BuiltinConfig,
        client: ModelClient,
    ) -> AgentTurnRunner {
        AgentTurnRunner::build(setup, config, Some(client))
    }

    /// [`AgentTurnRunner::with_client`] from a model configuration.
    pub fn with_model(
        setup: &BuiltinSetup,
        config: &BuiltinConfig,
        model: ModelConfig,
    ) -> Result<AgentTurnRunner, BuiltinConfigError> {
        let client = ModelClient::with_clock(model, setup.bridge.clock())
            .map_err(|e| BuiltinConfigError(e.detail()))?;
        Ok(AgentTurnRunner::with_client(setup, config, client))
    }

    fn build(
        setup: &BuiltinSetup,
        config: &BuiltinConfig,
        client: Option<ModelClient>,
    ) -> AgentTurnRunner {
        let (caller, tools) = setup.caller_and_tools();
        let (max_tokens, vision) = match &client {
            Some(client) => (
                client.config().max_tokens.unwrap_or(config.max_tokens),
                client.config().vision,
            ),
            None => (config.max_tokens, false),
        };
        AgentTurnRunner {
            inner: Arc::new(Jobs {
                bridge: Arc::downgrade(&setup.bridge),
                store: Arc::clone(&setup.store),
                clock: setup.bridge.clock(),
                client,
                limits: Limits {
                    max_turns: config.background_max_turns,
                    max_tool_calls: config.max_tool_calls,
                    max_tokens,
                    max_history_chars: config.max_history_chars,
                    vision,
                },
                caller,
                tools,
                unconfigured: setup.unconfigured(
                    "no model is configured for background runs: add a [builtin] table (or \
                     [builtin.background_model]) with base_url and model",
                ),
            }),
        }
    }

    /// Whether a model is configured.
    pub fn is_configured(&self) -> bool {
        self.inner.client.is_some()
    }

    /// The model-tool names offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.tools.names().map(str::to_owned).collect()
    }
}

#[async_trait]
impl JobRunner for AgentTurnRunner {
    async fn run(&self, ctx: RunContext) -> RunResult {
        self.inner.run(ctx).await
    }
}
