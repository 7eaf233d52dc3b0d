//! The built-in runtime: a bounded agent loop on any OpenAI-compatible model (Ollama,
//! llama.cpp's server, vLLM, a hosted API), running inside the daemon under exactly the same
//! `ToolBridge` as every remote runtime.
//!
//! - [`BuiltinConfig`] is the `[builtin]` table: the endpoint, the model, the key source and
//!   the bounds of a run.
//! - [`BuiltinRuntime`] is attached to the `RuntimeManager` as its
//!   [`LocalRuntime`](openphone_core::LocalRuntime): an attention request routed to `builtin`
//!   starts one run on its own task; `sessions.cancel` stops it.
//! - A run ([`run`](mod@run)) calls the model, streams its text as `runtime.message` deltas,
//!   executes the tool calls it makes through `ToolBridge::invoke` as `builtin` in the phone
//!   session (a confirmation pauses it until the user decides), and ends with a final message
//!   or a failure with a stable reason: `model_unconfigured`, `model_unreachable`,
//!   `model_timeout`, `model_http_<status>`, `model_bad_response`, `model_provider_error`,
//!   `run_budget_exceeded`, `max_turns_exceeded`, `max_tool_calls_exceeded`, `cancelled`
//!   (and `daemon_stopped`, `store_unavailable`, `transcript_unreadable` for the daemon's own
//!   troubles). A follow-up queued behind a run whose session then ended gets a final
//!   message with error `session_ended`.
//! - The tools ([`tools`]) are the manifest commands the `builtin` runtime may see, under
//!   their model-tool names, with the manifest's descriptions and schemas.
//! - Phone content reaches the model only as labelled data ([`prompt`]); the system prompt
//!   says it is never instructions. What stops an injected instruction from doing harm is the
//!   bridge: a state-changing command still needs the user's confirmation.
//! - The conversation of each phone session is stored ([`transcript`]), so a follow-up in the
//!   same session continues it, also after a restart.
//! - Background jobs ([`background`](mod@background)): [`AgentTurnRunner`] is the
//!   `agent_turn` runner of the job scheduler, the same loop and tools without a user present
//!   (a state-changing call parks the job for the user's review); [`DispatchRunner`] sends
//!   jobs to an external runtime instead when one is configured for background work.
//! - Goal turns ([`goal_turn`]): [`GoalTurnRunner`], a goal's `agent_turn` action on the same
//!   loop, nothing recorded, a call that needs approval handed back to the goal's plan.
//! - The loop is written once (`turns.rs`: `Loop<P: TurnPolicy>`, the model call, the tool
//!   calls' parsing, limits and "not run" answers, the recording hook); foreground
//!   (`run.rs`), background (`background/job_run.rs`) and goal turns (`goal_turn.rs`) are
//!   policies deciding only what ends a run, where its transcript goes and what a
//!   confirmation means (wait, park, hand back). `answers.rs` holds the answers the model gets
//!   that do not depend on the policy; `setup.rs` what every loop is built from.

#![deny(missing_docs)]

mod answers;
pub mod background;
mod config;
mod dispatch;
pub mod goal_turn;
mod judge;
pub mod prompt;
pub mod run;
mod runtime;
mod setup;
pub mod tools;
pub mod transcript;
mod turns;

pub use background::{AgentTurnRunner, BackgroundSetupError};
pub use config::{BuiltinConfig, BuiltinConfigError, ModelEndpoint};
pub use dispatch::DispatchRunner;
pub use goal_turn::GoalTurnRunner;
pub use judge::ModelJudge;
pub use runtime::{BuiltinRuntime, DAEMON_STOPPED};
pub use setup::BuiltinSetup;
