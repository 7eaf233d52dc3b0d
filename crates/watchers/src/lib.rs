//! Live watchers (`openphone.watchers.*`): durable triggers that fire later, with an optional
//! reaction — "tell me when Bob replies", "tell me if no reply by 18:00", "whenever anyone
//! calls", "when this page changes", "every morning at 8".
//!
//! - [`spec`]: `watchers.create` read into a [`WatcherSpec`] with every rule checked at
//!   creation (sources `message`, `call`, `notification`, `screen`, `time`, `web`; the legacy
//!   `type` values mapped; evaluators `text_contains`, `hash_change`, `semantic_match` — the
//!   last only with a [`Judge`]; deadlines and `notify_on`; `recurring`; the reaction);
//! - [`Watchers`] (`engine/`): the engine — device events, time, deadlines and polls make
//!   watchers fire; each firing is one store transaction with its job and its audit record,
//!   then `watcher.fired` is published;
//! - reactions: `delivery.prompt` → an `agent_turn` job (`agent-jobs.md` §11);
//!   `delivery.tool` + `delivery.arguments` → a `system_event` job carrying the stored call,
//!   its [`template`]s filled as data, run by [`ToolCallRunner`]; none → an attention request
//!   on the `watcher` surface, the event as untrusted data;
//! - [`WatchersService`]: the commands, installed on the bridge; a watcher belongs to the
//!   runtime that created it (a runtime lists, stops and counts only its own);
//! - [`authority`]: a watcher works with its creator's authority (checked at creation and
//!   when it works; its polls, its stored tool call and its jobs run with it).
//!
//! The daemon calls [`install`] once (and spawns [`Watchers::run`]); the job scheduler's
//! runners come from [`runners`]. README: `crates/watchers/README.md`.

pub mod authority;
mod engine;
mod error;
mod judge;
mod runner;
mod service;
pub mod spec;
pub mod template;

use std::sync::Arc;

use openphone_core::ToolBridge;
use openphone_jobs::{JobType, Runners};
use openphone_protocol::Registry;

pub use engine::{AGENT_JOB_DELAY_MS, Fired, Watchers, WatchersSetup};
pub use error::WatchersError;
pub use judge::Judge;
pub use runner::ToolCallRunner;
pub use service::WatchersService;
pub use spec::{Evaluator, NotifyOn, Reaction, Source, WatcherSpec};

/// Builds the engine and installs the watcher commands on the bridge; the daemon then spawns
/// [`Watchers::run`] with its shutdown signal.
pub fn install(setup: WatchersSetup) -> Arc<Watchers> {
    let watchers = Watchers::new(setup);
    watchers.install();
    watchers
}

/// The job runners of a daemon with watchers: those of [`Runners::builtin`], with the
/// `system_event` runner that runs a watcher's stored tool call ([`ToolCallRunner`]).
pub fn runners(bridge: Arc<ToolBridge>, registry: &'static Registry) -> Runners {
    Runners::builtin().with(
        JobType::SystemEvent,
        Arc::new(ToolCallRunner::new(bridge, registry)),
    )
}
