//! The MCP server handler (`mcp.md` §2, §4, §5, §7, §8): one [`PhoneMcp`] per stdio/socket
//! connection or HTTP session, all sharing one [`McpBackend`] in front of the `ToolBridge`.
//!
//! The handler owns no policy and no durable state: every call is a tool request to the bridge
//! under the connection's [`McpPrincipal`], and every confirmation is the bridge's durable
//! record. What this module adds is the MCP side of a confirmation:
//!
//! - **local path** (the default): the call waits up to `local_confirmation_wait` for an
//!   operator (phone, CLI, dashboard) to decide, telling the client where to approve — a
//!   URL-mode elicitation when the handshake-era client declared URL mode and the daemon has an
//!   approval page, `notifications/progress` every `progress_interval` when the request carried
//!   a progress token, and the text of the pending result. Undecided at the end of the wait →
//!   the pending result (`needs_confirmation`, the confirmation id); the same call again with
//!   the same `dev.openphone/idempotencyKey` returns the final result once decided.
//! - **confirming host** (opt-in per runtime, `trust_client_confirmation`): below the risk
//!   floor, the client's own prompt may decide — `elicitation/create` mid-call in the handshake
//!   era, `input_required` with a sealed `requestState` in the 2026-07-28 era.
//!
//! Cancellation: an explicit `notifications/cancelled` withdraws the pending confirmation the
//! call created, so a cancelled call that has not run never runs. A connection that merely
//! closes (a host respawning its stdio server, a dropped HTTP response stream), a daemon
//! shutdown, or the cancel of a keyed retry that joined an earlier call's confirmation leaves
//! it pending, as after a runtime disconnect.
//!
//! Modules: this one holds the handler and the shared backend; [`tool_call`] runs one
//! `tools/call` (resolve → invoke → wait for the confirmation the chosen way), [`strategy`]
//! chooses that way as a pure function, [`host`] holds the confirming-host paths, [`seal`]
//! the `requestState` seal, and [`site`] what a call reads of its request (rmcp's context, or
//! the direct path's own: `crate::direct`).

mod host;
mod seal;
mod site;
mod slots;
mod status;
mod strategy;
mod tool_call;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openphone_core::ToolBridge;
use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::{ErrorCode, ToolResult};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, DiscoverResult, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, RequestId,
    ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::model::{CancelledNotificationParam, ReadResourceRequestParams, ReadResourceResponse};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::catalogue::ToolTable;
use crate::identity::SUPPORTED_PROTOCOL_VERSIONS;
use crate::sync::lock;

pub use seal::StateSeal;
pub(crate) use site::{Site, StructuredText};
pub use slots::MAX_IN_FLIGHT_PER_CLIENT;
use slots::{ConnectionSlots, KeyedSlots, Slot};
use tool_call::{Call, audited_caller, fresh_request_id};
pub use tool_call::{GENERIC_CLIENT_NAMES, client_name};

/// `_meta` key of a `tools/call` carrying the caller's idempotency key.
pub const META_IDEMPOTENCY_KEY: &str = "dev.openphone/idempotencyKey";
/// `_meta` key of a `tools/call` asking for a stricter autonomy mode.
pub const META_AUTONOMY: &str = "dev.openphone/autonomy";
/// `_meta` key of a `tools/call` naming the phone it acts on (`[[devices]] id`), on a daemon
/// with several; without it the call goes to the only phone the runtime is granted.
pub const META_DEVICE_ID: &str = "openphone/device_id";
/// The key of the confirmation input request in an `input_required` result.
pub const CONFIRM_INPUT: &str = "confirm";
/// `resolved_by` source of a confirmation decided through a legacy elicitation.
pub const SOURCE_ELICITATION: &str = "mcp_elicitation";
/// `resolved_by` source of a confirmation decided through `inputResponses`.
pub const SOURCE_INPUT_RESPONSE: &str = "mcp_input_response";
/// `ttlMs` of list and discovery results (`mcp.md` §4.6).
pub const LIST_TTL_MS: u64 = 60_000;
/// The longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// Who is calling: the policy caller and whether the user made its host a confirming host.
#[derive(Debug, Clone)]
pub struct McpPrincipal {
    pub caller: Caller,
    /// `trust_client_confirmation` of the runtime's config (`mcp.md` §7.1).
    pub confirming_host: bool,
}

/// Timing of the MCP side of confirmations.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// How long a call waits inline for an operator's decision (`[mcp]
    /// local_confirmation_wait_ms`, default 20 s).
    pub local_confirmation_wait: Duration,
    /// Progress notification period while waiting (5 s).
    pub progress_interval: Duration,
    /// How long a confirming host's prompt may take (45 s: under the 60 s request timeout
    /// common clients use).
    pub elicitation_timeout: Duration,
    /// Lifetime of the confirmations MCP calls create (`[mcp] confirmation_timeout_ms`,
    /// default 120 000, the request's `timeout_ms`).
    pub confirmation_timeout_ms: i64,
    /// Base of the approval page URL (`<base><confirmation_id>`) offered through URL-mode
    /// elicitation; `None` offers none.
    pub approval_url_base: Option<String>,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            local_confirmation_wait: Duration::from_secs(20),
            progress_interval: Duration::from_secs(5),
            elicitation_timeout: Duration::from_secs(45),
            confirmation_timeout_ms: 120_000,
            approval_url_base: None,
        }
    }
}

/// Everything the handlers of one daemon share.
pub struct McpBackend {
    bridge: Arc<ToolBridge>,
    table: ToolTable<'static>,
    tool_policy: ToolPolicy,
    settings: McpSettings,
    seal: Option<StateSeal>,
    shutting_down: std::sync::atomic::AtomicBool,
    /// Calls in flight of the 2026-07-28 clients, which have no connection of their own here
    /// (`slots.rs`).
    clients: KeyedSlots,
}

impl std::fmt::Debug for McpBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpBackend")
            .field("tools", &self.table.len())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl McpBackend {
    /// A backend in front of `bridge`: `tools/list` shows what the bridge can run
    /// ([`ToolBridge::supports`]: the device's commands and the runtime-owned services
    /// installed on it, asked at every listing); `seal` keys `requestState` (without it, no
    /// modern-era host confirmation is offered).
    pub fn new(
        bridge: Arc<ToolBridge>,
        table: ToolTable<'static>,
        tool_policy: ToolPolicy,
        settings: McpSettings,
        seal: Option<StateSeal>,
    ) -> McpBackend {
        McpBackend {
            bridge,
            table,
            tool_policy,
            settings,
            seal,
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            clients: KeyedSlots::default(),
        }
    }

    /// The exposed tools whose input schema asks for no `Mcp-Param-*` header (no
    /// `x-mcp-header` anywhere in it): those the direct path may answer (`direct.rs`).
    pub(crate) fn plain_tools(&self) -> HashSet<String> {
        self.table
            .tool_names()
            .filter(|name| {
                self.table.tool(name).is_some_and(|tool| {
                    !tool
                        .input_schema
                        .iter()
                        .any(|(key, value)| key == "x-mcp-header" || names_header(value))
                })
            })
            .map(str::to_owned)
            .collect()
    }

    /// Marks the daemon as stopping: requests interrupted from now on keep their pending
    /// confirmations instead of withdrawing them.
    pub fn begin_shutdown(&self) {
        self.shutting_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The time in Unix milliseconds on the bridge's clock: the one every confirmation
    /// timestamp this module compares against was read from.
    fn now_ms(&self) -> i64 {
        self.bridge.now_ms()
    }

    /// The tools `caller` may see (`mcp.md` §4.1): `mcp: true`, runtime authorisation and
    /// tool policy allow them, and the device supports them. Sorted by exposed name.
    pub fn tools_for(&self, caller: &Caller) -> Vec<Tool> {
        let registry = self.table.registry();
        let phone_tools = self
            .table
            .tool_names()
            .filter_map(|exposed| {
                let canonical = self.table.canonical_from_tool_name(exposed)?;
                let command = registry.resolve(canonical)?;
                let visible = self.bridge.offers(command)
                    && openphone_policy::visible(command, caller, &self.tool_policy);
                if visible {
                    self.table.tool(exposed).cloned()
                } else {
                    None
                }
            })
            .collect();
        // Every caller may ask after its own confirmations.
        crate::catalogue::with_status_tool(phone_tools)
    }
}

/// What answers calls: the daemon's bridge, or nothing (the stdio front end's fallback when
/// the daemon is unreachable: the catalogue is listed, every call answers
/// `daemon_unavailable`).
#[derive(Clone)]
enum Backend {
    Daemon(Arc<McpBackend>),
    Unavailable {
        table: Arc<ToolTable<'static>>,
        reason: String,
    },
}

/// The MCP server handler of one connection or HTTP session.
#[derive(Clone)]
pub struct PhoneMcp {
    backend: Backend,
    /// Fixed for a socket connection; `None` for HTTP, where the principal travels with each
    /// request (an `Arc<McpPrincipal>` in the request's `http::request::Parts` extensions).
    principal: Option<Arc<McpPrincipal>>,
    /// Calls in flight on this connection, and those of them the client cancelled explicitly
    /// (`notifications/cancelled`).
    calls: Arc<Mutex<Calls>>,
    /// The runtime whose token opened this HTTP session.
    session_owner: Arc<std::sync::OnceLock<String>>,
    /// Calls in flight on this connection or HTTP session (`slots.rs`).
    slots: ConnectionSlots,
}

#[derive(Default)]
struct Calls {
    inflight: HashSet<RequestId>,
    cancelled: HashSet<RequestId>,
    /// The tokens of this session's calls on the direct path, which rmcp does not know:
    /// an explicit cancel trips them here (`on_cancelled`).
    direct: HashMap<RequestId, CancellationToken>,
}

/// Removes a call from the connection's bookkeeping when it ends.
struct InFlight {
    calls: Arc<Mutex<Calls>>,
    id: RequestId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut calls = lock(&self.calls);
        calls.inflight.remove(&self.id);
        calls.cancelled.remove(&self.id);
        calls.direct.remove(&self.id);
    }
}

impl std::fmt::Debug for PhoneMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhoneMcp").finish_non_exhaustive()
    }
}

impl PhoneMcp {
    /// A handler for the daemon. `principal` is fixed for socket connections and `None` for
    /// HTTP.
    pub fn new(backend: Arc<McpBackend>, principal: Option<Arc<McpPrincipal>>) -> PhoneMcp {
        PhoneMcp {
            backend: Backend::Daemon(backend),
            principal,
            calls: Arc::default(),
            session_owner: Arc::default(),
            slots: ConnectionSlots::default(),
        }
    }

    /// The front end's fallback: lists the manifest's tools and answers every call with
    /// `daemon_unavailable` and `reason` (`mcp.md` §1).
    pub fn unavailable(table: ToolTable<'static>, reason: impl Into<String>) -> PhoneMcp {
        PhoneMcp {
            backend: Backend::Unavailable {
                table: Arc::new(table),
                reason: reason.into(),
            },
            principal: None,
            calls: Arc::default(),
            session_owner: Arc::default(),
            slots: ConnectionSlots::default(),
        }
    }

    fn table(&self) -> &ToolTable<'static> {
        match &self.backend {
            Backend::Daemon(b) => &b.table,
            Backend::Unavailable { table, .. } => table,
        }
    }

    /// The caller: fixed on a socket; over HTTP the request's, and a handshake-era session
    /// (one handler per session) stays with the runtime that opened it.
    fn principal(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<McpPrincipal>, McpError> {
        if let Some(p) = &self.principal {
            return Ok(Arc::clone(p));
        }
        let p = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<McpPrincipal>>())
            .cloned()
            .ok_or_else(no_principal)?;
        let owner = self.session_owner.get_or_init(|| p.caller.runtime.clone());
        if *owner != p.caller.runtime {
            return Err(McpError::invalid_request(
                "this MCP session belongs to another runtime's token",
                None,
            ));
        }
        Ok(p)
    }

    fn lock_calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        lock(&self.calls)
    }

    fn was_cancelled(&self, id: &RequestId) -> bool {
        self.lock_calls().cancelled.contains(id)
    }

    /// A place for one more call of this client (`slots.rs`): the connection's or the HTTP
    /// session's own; for a 2026-07-28 request over HTTP (a handler of its own), the one of
    /// its runtime and declared client.
    fn slot(&self, backend: &McpBackend, principal: &McpPrincipal, site: &Site) -> Option<Slot> {
        let per_request = self.principal.is_none() && site.era() == strategy::Era::Stateless;
        if !per_request {
            return self.slots.take();
        }
        backend
            .clients
            .take(&client_key(&principal.caller.runtime, site.client.as_ref()))
    }

    /// Answers one `tools/call` of `principal` at `site` (rmcp's request, or the direct
    /// path's).
    async fn answer(
        &self,
        backend: &McpBackend,
        principal: &McpPrincipal,
        site: &Site,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, McpError> {
        let _tracked = self.track(&site.id);
        let call = Call {
            handler: self,
            backend,
            caller: audited_caller(&principal.caller, site.client.as_ref()),
            confirming_host: principal.confirming_host,
            site,
            started_ms: backend.now_ms(),
        };
        let Some(_slot) = self.slot(backend, principal, site) else {
            return Ok(call.refuse(
                ErrorCode::RateLimited,
                &format!(
                    "at most {MAX_IN_FLIGHT_PER_CLIENT} MCP calls may be in flight per client; \
                     wait for one to finish"
                ),
            ));
        };
        // Boxed: rmcp spawns each request's handler as a task, and a call's future (~12 KB:
        // every stage down to the store) embedded in it is copied whole at the spawn and at
        // each hand-off (issue 34).
        Box::pin(call.run(request)).await
    }

    /// Whether a call with JSON-RPC id `id` is in flight on this connection or session.
    pub(crate) fn in_flight(&self, id: &RequestId) -> bool {
        self.lock_calls().inflight.contains(id)
    }

    /// Whether this HTTP session's handler serves `runtime` (the runtime whose token opened
    /// it; `false` before its `initialize`).
    pub(crate) fn serves(&self, runtime: &str) -> bool {
        self.session_owner
            .get()
            .is_some_and(|owner| owner == runtime)
    }

    fn track(&self, id: &RequestId) -> InFlight {
        self.lock_calls().inflight.insert(id.clone());
        InFlight {
            calls: Arc::clone(&self.calls),
            id: id.clone(),
        }
    }
}

/// The key a 2026-07-28 client's calls are counted under: `runtime\nname\nversion` (`runtime\n`
/// without `clientInfo`), at most 256 characters.
fn client_key(runtime: &str, client: Option<&Implementation>) -> String {
    let mut key = String::with_capacity(
        runtime.len() + 2 + client.map_or(0, |c| c.name.len() + c.version.len()),
    );
    key.push_str(runtime);
    key.push('\n');
    if let Some(client) = client {
        key.push_str(&client.name);
        key.push('\n');
        key.push_str(&client.version);
    }
    if let Some((cut, _)) = key.char_indices().nth(256) {
        key.truncate(cut);
    }
    key
}

/// Whether `schema` holds an `x-mcp-header` key at any depth.
fn names_header(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| key == "x-mcp-header" || names_header(value)),
        Value::Array(items) => items.iter().any(names_header),
        _ => false,
    }
}

/// Answers a `tools/call` the direct path took (`direct.rs`): the same handler code as under
/// rmcp, in a handler of its own as rmcp gives each 2026-07-28 request.
pub(crate) async fn answer_direct(
    backend: Arc<McpBackend>,
    principal: Arc<McpPrincipal>,
    site: Site,
    request: CallToolRequestParams,
) -> Result<CallToolResponse, McpError> {
    let handler = PhoneMcp::new(Arc::clone(&backend), None);
    handler.answer(&backend, &principal, &site, request).await
}

/// Answers a `tools/call` the direct path took on a handshake-era session (`direct.rs`) with
/// `handler`, a clone of the session's own: its calls in flight, its place count and its
/// explicit cancels are the session's. An explicit cancel (`notifications/cancelled`, which
/// rmcp hands the session's handler) trips the call's token as rmcp would trip its own.
pub(crate) async fn answer_in_session(
    handler: PhoneMcp,
    backend: Arc<McpBackend>,
    principal: Arc<McpPrincipal>,
    site: Site,
    request: CallToolRequestParams,
) -> Result<CallToolResponse, McpError> {
    // Recorded before the call is, so a cancel that finds the call finds its token too.
    handler
        .lock_calls()
        .direct
        .insert(site.id.clone(), site.ct.clone());
    handler.answer(&backend, &principal, &site, request).await
}

fn no_principal() -> McpError {
    McpError::internal_error("the request carries no authenticated principal", None)
}

impl ServerHandler for PhoneMcp {
    fn get_info(&self) -> ServerConfig {
        self.table().server_config().clone()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&SUPPORTED_PROTOCOL_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        // The client's word: escaped and cut, so it cannot forge log lines.
        tracing::info!(
            client = %openphone_protocol::log_value(&request.client_info.name),
            version = %openphone_protocol::log_value(&request.client_info.version),
            protocol = %openphone_protocol::log_value(&request.protocol_version.to_string()),
            "mcp client initialized"
        );
        if self.principal.is_none() && matches!(self.backend, Backend::Daemon(_)) {
            // Over HTTP this handler serves one session: it belongs to this token's runtime.
            self.principal(&context)?;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        Ok(
            DiscoverResult::from_server_info(SUPPORTED_PROTOCOL_VERSIONS.to_vec(), self.get_info())
                .with_ttl_ms(LIST_TTL_MS)
                .with_cache_scope(CacheScope::Public),
        )
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Accepted and ignored: some hosts send it before `initialized` whatever the
        // capabilities say, and an error there ends their connection (`mcp.md` §11).
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Err(McpError::method_not_found::<
            rmcp::model::ListPromptsRequestMethod,
        >())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Err(McpError::method_not_found::<
            rmcp::model::ListResourcesRequestMethod,
        >())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Err(McpError::method_not_found::<
            rmcp::model::ListResourceTemplatesRequestMethod,
        >())
    }

    async fn read_resource(
        &self,
        _request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Err(McpError::method_not_found::<
            rmcp::model::ReadResourceRequestMethod,
        >())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = match &self.backend {
            Backend::Daemon(backend) => {
                let principal = self.principal(&context)?;
                backend.tools_for(&principal.caller)
            }
            Backend::Unavailable { table, .. } => crate::catalogue::with_status_tool(table.tools()),
        };
        Ok(ListToolsResult::with_all_items(tools)
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Private))
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Only tool-list changes exist here; the list changes only with the configuration.
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.table().tool(name).cloned()
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(id) = notification.request_id {
            let mut calls = self.lock_calls();
            // Only calls still running matter; anything else is forgotten at once.
            if calls.inflight.contains(&id) {
                if let Some(token) = calls.direct.get(&id) {
                    token.cancel();
                }
                calls.cancelled.insert(id);
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        match &self.backend {
            Backend::Unavailable { table, reason } => {
                let result = ToolResult::failure(
                    "mcp",
                    &fresh_request_id(),
                    ErrorCode::DaemonUnavailable,
                    format!("the OpenPhone daemon is not reachable ({reason})"),
                );
                Ok(CallToolResponse::Complete(table.call_result(&result)))
            }
            Backend::Daemon(backend) => {
                let principal = self.principal(&context)?;
                self.answer(backend, &principal, &Site::of_context(context), request)
                    .await
            }
        }
    }
}
