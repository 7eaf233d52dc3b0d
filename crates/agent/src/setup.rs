//! [`BuiltinSetup`]: what every built-in loop (foreground runs, background jobs, goal turns)
//! is built from, handed over by the daemon's construction: the bridge, the manager, the store
//! the runs record their transcripts in, the manifests and `builtin`'s configured authority.

use std::sync::Arc;

use openphone_core::{RuntimeManager, ToolBridge};
use openphone_policy::{Caller, RuntimeAuthorisation, ToolPolicy};
use openphone_protocol::Registry;
use openphone_store::Store;

use crate::tools::ToolCatalogue;

/// What the built-in runtime is built from.
#[derive(Debug, Clone)]
pub struct BuiltinSetup {
    /// The one bridge every tool call goes through.
    pub bridge: Arc<ToolBridge>,
    /// The manager the replies go through (held weakly: it holds the runtime).
    pub manager: Arc<RuntimeManager>,
    /// The store the runs' transcripts and sessions are kept in (the daemon's own).
    pub store: Arc<Store>,
    /// The manifests.
    pub registry: &'static Registry,
    /// The `builtin` runtime's configured authorisation (enabled, grants, ceiling).
    pub authorisation: RuntimeAuthorisation,
    /// The configured tool policy (profiles, allow and deny lists).
    pub tool_policy: ToolPolicy,
    /// Where the daemon's configuration came from, in words ("config file /x.toml (named by
    /// --config)", "no config file (…)"): the "no model is configured" errors name it, so the
    /// user knows which file lacks `[builtin]` (issue 31). `None`: not said.
    pub config_origin: Option<String>,
}

impl BuiltinSetup {
    /// `message` (a "no model is configured" fix) with the configuration it is about.
    pub(crate) fn unconfigured(&self, message: &str) -> String {
        match &self.config_origin {
            Some(origin) => format!("{message}; the daemon read: {origin}"),
            None => message.to_owned(),
        }
    }

    /// `builtin` under its configured authorisation, and the tools it offers the model: one
    /// catalogue for foreground and background runs.
    pub(crate) fn caller_and_tools(&self) -> (Caller, ToolCatalogue) {
        let caller = Caller::builtin("daemon").with_authorisation(self.authorisation);
        let bridge = &self.bridge;
        let tools = ToolCatalogue::new(self.registry, &caller, &self.tool_policy, |c| {
            bridge.offers(c)
        });
        (caller, tools)
    }
}
