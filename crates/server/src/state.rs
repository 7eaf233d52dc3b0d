//! Shared state of the endpoint: everything a connection, a route or a page needs
//! ([`AppState`]), and the MCP part of it ([`McpState`]). The routes are `routes.rs`.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use openphone_core::{RuntimeManager, ToolBridge};
use openphone_device::PhoneProfile;
use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::Registry;
use tokio::sync::{Notify, watch};

use crate::config::Limits;
use crate::dashboard::logins::Dashboard;
use crate::front::Front;
use crate::principal::Credentials;
use crate::rate::RateLimiter;

/// Everything a connection needs.
#[derive(Debug)]
pub struct AppState {
    pub bridge: Arc<ToolBridge>,
    /// Runtimes, presence, routing and the attention flow.
    pub runtimes: Arc<RuntimeManager>,
    pub registry: &'static Registry,
    pub profile: PhoneProfile,
    pub credentials: Credentials,
    pub tool_policy: ToolPolicy,
    pub limits: Limits,
    pub rate: RateLimiter,
    /// `true` once the daemon is shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// Open WebSocket connections.
    pub connections: AtomicUsize,
    pub connection_closed: Notify,
    /// The MCP server, unless disabled in config.
    pub mcp: Option<McpState>,
    /// The connection caps, timeouts, allowed origins and the log of unauthenticated peers.
    pub front: Front,
    /// The background job scheduler (`jobs.*`).
    pub jobs: openphone_jobs::Scheduler,
    /// The goal engine and its driver (`goals.*`).
    pub goals: Arc<crate::goals::GoalDriver>,
    /// The web dashboard's logins, unless the daemon listens on a non-loopback address.
    pub dashboard: Option<Dashboard>,
    /// The phones the daemon drives, by id, as configured (`devices.list`).
    pub phones: Vec<crate::config::DeviceSpec>,
}

/// The MCP part of the shared state.
#[derive(Debug)]
pub struct McpState {
    pub backend: Arc<openphone_mcp::McpBackend>,
    /// Extra `Origin`s accepted on `/mcp`.
    pub extra_origins: Vec<String>,
    /// Cancelled at shutdown: every MCP session and socket connection ends.
    pub shutdown: openphone_mcp::CancellationToken,
}

impl AppState {
    /// Records a frame an authenticated caller sent over the size limit in the audit log (no
    /// content, only the fact). Unauthenticated peers get a rate-limited log line instead
    /// ([`Front::note`]): they must not be able to grow the audit log.
    pub fn audit_oversize(&self, caller: &Caller) {
        self.bridge.record_oversize_frame(caller);
    }

    /// Records an operator's act that is not a tool request (creating a job from the CLI,
    /// moving the simulated phone's world) in the audit log, before it takes effect:
    /// `what` names it, `params_hash` digests its arguments (never the arguments). An act
    /// whose record cannot be written does not happen (`audit_unavailable`).
    pub fn audit_operator_action(
        &self,
        caller: &Caller,
        what: &str,
        args: &serde_json::Value,
    ) -> Result<(), openphone_store::StoreError> {
        let request_id = format!("{what}-{}", uuid::Uuid::new_v4());
        self.audit_operator_action_as(caller, what, args, request_id)
    }

    /// [`AppState::audit_operator_action`] under a given request id (a goal's acts carry
    /// `goal_<id>:op:<what>-<uuid>`, so the goal's audit slice finds them).
    pub fn audit_operator_action_as(
        &self,
        caller: &Caller,
        what: &str,
        args: &serde_json::Value,
        request_id: String,
    ) -> Result<(), openphone_store::StoreError> {
        self.bridge
            .record_operator_action(caller, what, args, request_id)
    }
}
