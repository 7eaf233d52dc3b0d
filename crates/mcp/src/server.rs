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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openphone_core::{ConfirmDecision, ConfirmingHost, ToolBridge, waiting_on};
use openphone_policy::{Caller, Context, ToolPolicy};
use openphone_protocol::{Command, Confirmation, ErrorCode, ToolRequest, ToolResult, ToolStatus};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, DiscoverResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InitializeRequestParams, InitializeResult, InputRequest, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId,
    ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::model::{CancelledNotificationParam, ReadResourceRequestParams, ReadResourceResponse};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalogue::ToolTable;
use crate::identity::{SUPPORTED_PROTOCOL_VERSIONS, server_config};

/// `_meta` key of a `tools/call` carrying the caller's idempotency key.
pub const META_IDEMPOTENCY_KEY: &str = "dev.openphone/idempotencyKey";
/// `_meta` key of a `tools/call` asking for a stricter autonomy mode.
pub const META_AUTONOMY: &str = "dev.openphone/autonomy";
/// The key of the confirmation input request in an `input_required` result.
pub const CONFIRM_INPUT: &str = "confirm";
/// `resolved_by` source of a confirmation decided through a legacy elicitation.
pub const SOURCE_ELICITATION: &str = "mcp_elicitation";
/// `resolved_by` source of a confirmation decided through `inputResponses`.
pub const SOURCE_INPUT_RESPONSE: &str = "mcp_input_response";
/// `ttlMs` of list and discovery results (`mcp.md` §4.6).
pub const LIST_TTL_MS: u64 = 60_000;
/// MCP calls one runtime may have in flight at once (`mcp.md` §10).
pub const MAX_IN_FLIGHT_PER_RUNTIME: usize = 8;
/// The longest any wait for an already-decided confirmation's final result may take.
const DECIDED_WAIT: Duration = Duration::from_secs(30);
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

/// What a sealed `requestState` refers to (`mcp.md` §7.4): never the action itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct SealedConfirmation {
    confirmation_id: String,
    tool: String,
    args_digest: String,
    principal: String,
    expires_at_ms: i64,
}

/// Seals and opens `requestState` values (HMAC, rmcp's `RequestStateCodec`).
pub struct StateSeal(rmcp::model::RequestStateCodec);

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSeal(<key>)")
    }
}

impl StateSeal {
    /// A seal keyed by `key` (at least 32 bytes).
    pub fn new(key: &[u8]) -> Result<StateSeal, String> {
        rmcp::model::RequestStateCodec::try_new(key.to_vec())
            .map(StateSeal)
            .map_err(|e| e.to_string())
    }

    fn seal(&self, value: &SealedConfirmation) -> Option<String> {
        self.0.seal_json(value).ok()
    }

    fn open(&self, sealed: &str) -> Option<SealedConfirmation> {
        self.0.open_json(sealed).ok()
    }
}

/// Everything the handlers of one daemon share.
pub struct McpBackend {
    bridge: Arc<ToolBridge>,
    table: ToolTable<'static>,
    tool_policy: ToolPolicy,
    supported: HashSet<String>,
    settings: McpSettings,
    seal: Option<StateSeal>,
    shutting_down: std::sync::atomic::AtomicBool,
    /// Per-runtime limits of calls in flight.
    slots: Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
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
    /// A backend in front of `bridge`. `supported` lists the device's supported commands
    /// (unsupported ones are left out of `tools/list`); `seal` keys `requestState` (without it,
    /// no modern-era host confirmation is offered).
    pub fn new(
        bridge: Arc<ToolBridge>,
        table: ToolTable<'static>,
        tool_policy: ToolPolicy,
        supported: impl IntoIterator<Item = String>,
        settings: McpSettings,
        seal: Option<StateSeal>,
    ) -> McpBackend {
        McpBackend {
            bridge,
            table,
            tool_policy,
            supported: supported.into_iter().collect(),
            settings,
            seal,
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            slots: Mutex::default(),
        }
    }

    /// A place for one more call of `runtime`, or `None` when it has
    /// [`MAX_IN_FLIGHT_PER_RUNTIME`] in flight.
    fn slot(&self, runtime: &str) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let semaphore = {
            let mut slots = self
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(slots.entry(runtime.to_owned()).or_insert_with(|| {
                Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT_PER_RUNTIME))
            }))
        };
        semaphore.try_acquire_owned().ok()
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

    /// The tools `caller` may see (`mcp.md` §4.1): `mcp: true`, runtime authorisation and
    /// tool policy allow them, and the device supports them. Sorted by exposed name.
    pub fn tools_for(&self, caller: &Caller) -> Vec<Tool> {
        let registry = self.table.registry();
        self.table
            .tool_names()
            .filter_map(|exposed| {
                let canonical = self.table.canonical_from_tool_name(exposed)?;
                let command = registry.resolve(canonical)?;
                let visible = self.supported.contains(canonical)
                    && openphone_policy::visible(command, caller, &self.tool_policy);
                if visible {
                    self.table.tool(exposed).cloned()
                } else {
                    None
                }
            })
            .collect()
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
}

#[derive(Default)]
struct Calls {
    inflight: HashSet<RequestId>,
    cancelled: HashSet<RequestId>,
}

/// Removes a call from the connection's bookkeeping when it ends.
struct InFlight {
    calls: Arc<Mutex<Calls>>,
    id: RequestId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut calls = self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.inflight.remove(&self.id);
        calls.cancelled.remove(&self.id);
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
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn was_cancelled(&self, id: &RequestId) -> bool {
        self.lock_calls().cancelled.contains(id)
    }

    fn track(&self, id: &RequestId) -> InFlight {
        self.lock_calls().inflight.insert(id.clone());
        InFlight {
            calls: Arc::clone(&self.calls),
            id: id.clone(),
        }
    }
}

fn is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

fn no_principal() -> McpError {
    McpError::internal_error("the request carries no authenticated principal", None)
}

impl ServerHandler for PhoneMcp {
    fn get_info(&self) -> ServerConfig {
        server_config(self.table())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&SUPPORTED_PROTOCOL_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        tracing::info!(
            client = %request.client_info.name,
            version = %request.client_info.version,
            protocol = %request.protocol_version,
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
            Backend::Unavailable { table, .. } => table.tools(),
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
                let _tracked = self.track(&context.id);
                let call = Call {
                    handler: self,
                    backend,
                    caller: audited_caller(&principal.caller, context.client_info()),
                    confirming_host: principal.confirming_host,
                    context: &context,
                    started_ms: now_ms(),
                };
                let Some(_slot) = backend.slot(&principal.caller.runtime) else {
                    return Ok(call.refuse(
                        ErrorCode::RateLimited,
                        &format!(
                            "at most {MAX_IN_FLIGHT_PER_RUNTIME} MCP calls may be in flight per runtime"
                        ),
                    ));
                };
                call.run(request).await
            }
        }
    }
}

fn fresh_request_id() -> String {
    format!("mcp-{}", uuid::Uuid::new_v4())
}

/// One `tools/call` in flight.
struct Call<'a> {
    handler: &'a PhoneMcp,
    backend: &'a McpBackend,
    /// The principal's caller, its audit label naming the client (`clientInfo`, never used
    /// for authorisation).
    caller: Caller,
    /// `trust_client_confirmation` of the runtime.
    confirming_host: bool,
    context: &'a RequestContext<RoleServer>,
    /// Wall-clock start of the call (ms): a confirmation created since is this call's own.
    started_ms: i64,
}

/// `caller` with the client's self-declared name in its audit label: `token:mcp client:Claude`.
/// The name is the client's word, so it is trimmed to 64 printable characters.
fn audited_caller(caller: &Caller, client: Option<rmcp::model::Implementation>) -> Caller {
    let mut caller = caller.clone();
    if let Some(info) = client {
        let name: String = info
            .name
            .chars()
            .filter(|c| !c.is_control())
            .take(64)
            .collect();
        if !name.trim().is_empty() {
            caller.principal = format!("{} client:{}", caller.principal, name.trim());
        }
    }
    caller
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How waiting for a pending confirmation ended.
enum Waited {
    Final(ToolResult),
    StillPending,
    Cancelled,
}

impl Call<'_> {
    fn caller(&self) -> &Caller {
        &self.caller
    }

    fn shape(&self, result: &ToolResult) -> CallToolResponse {
        CallToolResponse::Complete(self.backend.table.call_result(result))
    }

    fn refuse(&self, code: ErrorCode, message: &str) -> CallToolResponse {
        let result =
            ToolResult::failure(&self.caller().runtime, &fresh_request_id(), code, message);
        self.shape(&result)
    }

    async fn run(self, request: CallToolRequestParams) -> Result<CallToolResponse, McpError> {
        let name = request.name.trim();
        let command = match self.backend.table.resolve_call(name) {
            Ok(c) => c,
            Err(e) => {
                if let Some(err) = e.protocol_error() {
                    return Err(err);
                }
                let result = e
                    .tool_result(&self.caller().runtime, &fresh_request_id())
                    .unwrap_or_else(|| {
                        ToolResult::failure(
                            &self.caller().runtime,
                            &fresh_request_id(),
                            e.code(),
                            e.to_string(),
                        )
                    });
                return Ok(self.shape(&result));
            }
        };
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        // rmcp moves the request's `_meta` into the context before the handler runs.
        let meta = &self.context.meta;
        let meta_str = |key: &str| -> Result<Option<String>, String> {
            match meta
                .0
                .get(key)
                .or_else(|| request.meta.as_ref().and_then(|m| m.0.get(key)))
            {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("`_meta[\"{key}\"]` must be a string")),
            }
        };
        let key = match meta_str(META_IDEMPOTENCY_KEY) {
            Ok(k) => k,
            Err(m) => return Ok(self.refuse(ErrorCode::InvalidParams, &m)),
        };
        if let Some(k) = &key
            && (k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY_LEN)
        {
            return Ok(self.refuse(
                ErrorCode::InvalidParams,
                &format!(
                    "`_meta[\"{META_IDEMPOTENCY_KEY}\"]` must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters"
                ),
            ));
        }
        let autonomy = match meta_str(META_AUTONOMY) {
            Ok(a) => a,
            Err(m) => return Ok(self.refuse(ErrorCode::InvalidParams, &m)),
        };

        // A retry of the modern confirmation round: resolve the sealed record, never re-invoke.
        if let Some(state) = request.request_state.as_deref() {
            return Ok(self
                .answer_input(command, &arguments, state, request.input_responses.as_ref())
                .await);
        }

        let request_id = key
            .as_ref()
            .map_or_else(fresh_request_id, |k| format!("mcp:{k}"));
        let reason = arguments
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let tool_request = ToolRequest {
            request_id,
            runtime: Some(self.caller().runtime.clone()),
            runtime_session_id: String::new(),
            phone_session_id: None,
            tool: command.name.clone(),
            params: arguments.clone(),
            reason,
            autonomy,
            idempotency_key: key,
            timeout_ms: Some(self.backend.settings.confirmation_timeout_ms),
        };
        let progress = self.context.meta.get_progress_token();
        let bridge = &self.backend.bridge;
        if self.context.ct.is_cancelled() {
            return Ok(self.shape(&cancelled_result(&self.caller().runtime)));
        }
        // Never dropped half-way: a device action that started is allowed to finish.
        let first = bridge
            .invoke(self.caller(), tool_request, Context::Interactive)
            .await;
        let Some(confirmation_id) = waiting_on(&first) else {
            return Ok(self.shape(&first));
        };
        if self.context.ct.is_cancelled() && self.explicitly_cancelled().await {
            return Ok(self
                .after_wait(&first, &confirmation_id, Waited::Cancelled)
                .await);
        }
        self.notify(
            &progress,
            1.0,
            "waiting for the user's confirmation on the phone",
        )
        .await;

        let below_floor = command.confirmation != Confirmation::Always;
        let host_may_decide = self.confirming_host && below_floor;
        if host_may_decide && is_modern(self.context) {
            // Form mode: declared, or no mode named at all (the older shape).
            let form = self
                .context
                .client_capabilities()
                .and_then(|c| c.elicitation)
                .is_some_and(|e| e.form.is_some() || e.url.is_none());
            if let (true, Some(seal)) = (form, &self.backend.seal) {
                return Ok(self.input_required(
                    seal,
                    command,
                    &arguments,
                    &first,
                    &confirmation_id,
                ));
            }
        }
        if host_may_decide && !is_modern(self.context) {
            let modes = self.context.peer.supported_elicitation_modes();
            if modes.contains(&rmcp::service::ElicitationMode::Form) {
                return Ok(self
                    .elicit_inline(&first, &confirmation_id, &progress)
                    .await);
            }
        }
        Ok(self.local(&first, &confirmation_id, &progress).await)
    }

    /// The local path: wait for an operator up to the configured time.
    async fn local(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        progress: &Option<ProgressToken>,
    ) -> CallToolResponse {
        let url_elicitation = self.offer_approval_url(first, confirmation_id);
        let waited = self
            .wait(
                confirmation_id,
                progress,
                self.backend.settings.local_confirmation_wait,
            )
            .await;
        if let Some(task) = url_elicitation {
            task.abort();
        }
        self.after_wait(first, confirmation_id, waited).await
    }

    async fn after_wait(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        waited: Waited,
    ) -> CallToolResponse {
        match waited {
            Waited::Final(result) => self.shape(&readdress(result, first)),
            Waited::StillPending => self.shape(first),
            Waited::Cancelled => {
                if !self.created_here(confirmation_id) {
                    // A keyed retry joined a confirmation an earlier call made: cancelling the
                    // retry does not take the request away from the user.
                    return self.shape(first);
                }
                let result = match self
                    .backend
                    .bridge
                    .withdraw(self.caller(), confirmation_id)
                    .await
                {
                    Ok(r) => r,
                    // Already decided: the decision stands (an approval may have run).
                    Err(_) => self.decided(confirmation_id, first).await,
                };
                tracing::info!(confirmation_id, "mcp call cancelled while waiting");
                self.shape(&readdress(result, first))
            }
        }
    }

    /// Whether the confirmation was created during this call (not joined by a keyed retry).
    fn created_here(&self, confirmation_id: &str) -> bool {
        self.backend
            .bridge
            .store()
            .get_confirmation(confirmation_id)
            .ok()
            .flatten()
            .is_some_and(|r| r.created_at_ms >= self.started_ms)
    }

    /// The final result of a confirmation that is decided (or about to be), within
    /// [`DECIDED_WAIT`]; `first` if none comes.
    async fn decided(&self, confirmation_id: &str, first: &ToolResult) -> ToolResult {
        let wait = self.backend.bridge.wait_final(confirmation_id);
        match tokio::time::timeout(DECIDED_WAIT, wait).await {
            Ok(Some(r)) => readdress(r, first),
            _ => first.clone(),
        }
    }

    /// Waits for the final result, sending progress; distinguishes an explicit cancel from a
    /// connection that merely closed.
    async fn wait(
        &self,
        confirmation_id: &str,
        progress: &Option<ProgressToken>,
        limit: Duration,
    ) -> Waited {
        let bridge = &self.backend.bridge;
        let final_result = bridge.wait_final(confirmation_id);
        tokio::pin!(final_result);
        let deadline = tokio::time::sleep(limit);
        tokio::pin!(deadline);
        let period = self.backend.settings.progress_interval;
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let mut step = 1.0;
        loop {
            tokio::select! {
                r = &mut final_result => {
                    return match r {
                        Some(r) => Waited::Final(r),
                        None => Waited::StillPending,
                    };
                }
                () = &mut deadline => return Waited::StillPending,
                _ = ticker.tick(), if progress.is_some() => {
                    step += 1.0;
                    self.notify(progress, step, "still waiting for the user's confirmation on the phone").await;
                }
                () = self.context.ct.cancelled() => {
                    return if self.explicitly_cancelled().await {
                        Waited::Cancelled
                    } else {
                        Waited::StillPending
                    };
                }
            }
        }
    }

    /// Whether the request's cancellation token fired for a cancel (withdraw the request)
    /// rather than for a connection that closed (keep it pending for a respawned client).
    async fn explicitly_cancelled(&self) -> bool {
        if self.backend.is_shutting_down() {
            // A daemon stopping is no cancel: the confirmation stays for after the restart.
            return false;
        }
        // `notifications/cancelled` trips the token just before the handler records it; a
        // closing connection trips it too, and then the transport closes.
        for _ in 0..50 {
            if self.handler.was_cancelled(&self.context.id) {
                return true;
            }
            if self.context.peer.is_transport_closed() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.handler.was_cancelled(&self.context.id) {
            return true;
        }
        // On a socket connection that is still open only a cancel trips the token. Over HTTP a
        // dropped response stream (how a 2026-07-28 client gives up) may just be a lost
        // connection: the confirmation stays for the user and the keyed retry.
        self.handler.principal.is_some() && !self.context.peer.is_transport_closed()
    }

    async fn notify(&self, progress: &Option<ProgressToken>, step: f64, message: &str) {
        let Some(token) = progress else { return };
        let param = ProgressNotificationParam::new(token.clone(), step).with_message(message);
        if let Err(e) = self.context.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not delivered");
        }
    }

    /// Sends a URL-mode elicitation pointing at the approval page when the handshake-era client
    /// declared URL mode; the answer only says whether the user opened it, so it is not
    /// awaited.
    fn offer_approval_url(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let base = self.backend.settings.approval_url_base.as_ref()?;
        if is_modern(self.context)
            || !self
                .context
                .peer
                .supported_elicitation_modes()
                .contains(&rmcp::service::ElicitationMode::Url)
        {
            return None;
        }
        let summary = first
            .result
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "OpenPhone needs your confirmation on the phone: {summary}. \
                 Open the page to see the request and where to approve or deny it."
            ),
            url: format!("{base}{confirmation_id}"),
            elicitation_id: confirmation_id.to_owned(),
        };
        let peer = self.context.peer.clone();
        let timeout = self.backend.settings.local_confirmation_wait;
        Some(tokio::spawn(async move {
            if let Err(e) = peer
                .create_elicitation_with_timeout(params, Some(timeout))
                .await
            {
                tracing::debug!(error = %e, "url elicitation not answered");
            }
        }))
    }

    fn prompt(&self, first: &ToolResult) -> String {
        let summary = first
            .result
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let client = self
            .context
            .client_info()
            .map_or_else(|| self.caller().runtime.clone(), |i| i.name);
        format!("OpenPhone: allow {client} to do this on your phone? {summary}")
    }

    /// Handshake era, confirming host: ask through `elicitation/create` while an operator may
    /// still decide on the phone; the first decision wins.
    async fn elicit_inline(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        progress: &Option<ProgressToken>,
    ) -> CallToolResponse {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: self.prompt(first),
            requested_schema: ElicitationSchema::new(BTreeMap::new()),
        };
        let timeout = self.backend.settings.elicitation_timeout;
        let ask = self
            .context
            .peer
            .create_elicitation_with_timeout(params, Some(timeout));
        tokio::pin!(ask);
        let bridge = &self.backend.bridge;
        let operator = bridge.wait_final(confirmation_id);
        tokio::pin!(operator);
        let answer = tokio::select! {
            r = &mut operator => {
                return match r {
                    Some(r) => self.shape(&readdress(r, first)),
                    None => self.shape(first),
                };
            }
            a = &mut ask => a,
            () = self.context.ct.cancelled() => {
                let waited = if self.explicitly_cancelled().await { Waited::Cancelled } else { Waited::StillPending };
                return self.after_wait(first, confirmation_id, waited).await;
            }
        };
        let decision = match answer {
            Ok(result) => decision_of(&result),
            Err(e) => {
                // No answer (timeout, transport): not a denial; the operator surfaces decide
                // within what is left of the local wait, so the call stays under the request
                // timeouts hosts use.
                tracing::info!(error = %e, "confirming host gave no answer; waiting locally");
                let spent =
                    Duration::from_millis(u64::try_from(now_ms() - self.started_ms).unwrap_or(0));
                let left = self
                    .backend
                    .settings
                    .local_confirmation_wait
                    .saturating_sub(spent);
                let waited = self.wait(confirmation_id, progress, left).await;
                return self.after_wait(first, confirmation_id, waited).await;
            }
        };
        self.host_resolve(first, confirmation_id, decision, SOURCE_ELICITATION)
            .await
    }

    async fn host_resolve(
        &self,
        first: &ToolResult,
        confirmation_id: &str,
        decision: (ConfirmDecision, ErrorCode),
        source: &str,
    ) -> CallToolResponse {
        let host = ConfirmingHost::new(&self.caller().runtime, source);
        let bridge = &self.backend.bridge;
        match bridge
            .resolve_as_host(&host, confirmation_id, decision.0, decision.1)
            .await
        {
            Ok(result) => self.shape(&readdress(result, first)),
            // Someone else decided first (or it expired): that outcome stands.
            Err(_) => {
                let result = self.decided(confirmation_id, first).await;
                self.shape(&result)
            }
        }
    }

    /// 2026-07-28, confirming host: ask the client to collect the user's answer and call again.
    fn input_required(
        &self,
        seal: &StateSeal,
        command: &Command,
        arguments: &Value,
        first: &ToolResult,
        confirmation_id: &str,
    ) -> CallToolResponse {
        let expires_at_ms = first
            .result
            .get("expires_at_ms")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MAX);
        let sealed = SealedConfirmation {
            confirmation_id: confirmation_id.to_owned(),
            tool: command.name.clone(),
            args_digest: args_digest(arguments),
            principal: self.caller().runtime.clone(),
            expires_at_ms,
        };
        let Some(state) = seal.seal(&sealed) else {
            return self.shape(first);
        };
        self.ask_again(first, state)
    }

    fn ask_again(&self, first: &ToolResult, state: String) -> CallToolResponse {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: self.prompt(first),
            requested_schema: ElicitationSchema::new(BTreeMap::new()),
        };
        let mut requests = BTreeMap::new();
        requests.insert(
            CONFIRM_INPUT.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
        CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// The retry of an `input_required` round (`mcp.md` §7.4).
    async fn answer_input(
        &self,
        command: &Command,
        arguments: &Value,
        state: &str,
        responses: Option<&BTreeMap<String, Value>>,
    ) -> CallToolResponse {
        let invalid = |why: &str| {
            self.refuse(
                ErrorCode::ConfirmationInvalid,
                &format!("the requestState is not valid for this call: {why}"),
            )
        };
        let Some(seal) = &self.backend.seal else {
            return invalid("this server issues no request state");
        };
        let Some(sealed) = seal.open(state) else {
            return invalid("it does not open under this server's key");
        };
        if sealed.principal != self.caller().runtime
            || sealed.tool != command.name
            || sealed.args_digest != args_digest(arguments)
        {
            return invalid("it was issued for another caller, tool or arguments");
        }
        // Re-checked now, not only when the state was issued: the user may have withdrawn the
        // host's trust since, and the risk floor is never the host's to decide.
        if !self.confirming_host || command.confirmation == Confirmation::Always {
            return invalid("this caller may not answer confirmations");
        }
        let bridge = &self.backend.bridge;
        let record = bridge
            .store()
            .get_confirmation(&sealed.confirmation_id)
            .ok()
            .flatten();
        let Some(record) = record else {
            return invalid("the confirmation it refers to does not exist");
        };
        let runtime = &self.caller().runtime;
        let mut first = ToolResult::failure(
            runtime,
            &record.request_id,
            ErrorCode::MutatingToolRequiresConfirmation,
            "waiting for the user's confirmation",
        );
        first.status = ToolStatus::NeedsConfirmation;
        first.requires_confirmation = true;
        first.result = Map::from_iter([
            (
                "confirmation_id".to_owned(),
                Value::String(record.confirmation_id.clone()),
            ),
            ("summary".to_owned(), Value::String(record.summary.clone())),
        ]);
        if record.state != openphone_store::ConfirmationState::Pending {
            // Decided already: the recorded outcome, never a second prompt or run.
            let result = self.decided(&record.confirmation_id, &first).await;
            return self.shape(&result);
        }
        if now_ms() >= sealed.expires_at_ms.min(record.expires_at_ms) {
            bridge.expire_due().await;
            let result = self.decided(&record.confirmation_id, &first).await;
            return self.shape(&result);
        }
        let answer = responses.and_then(|r| r.get(CONFIRM_INPUT));
        let Some(answer) = answer else {
            // Still no answer: ask again for the same record (never an error).
            return self.ask_again(&first, state.to_owned());
        };
        let decision = match serde_json::from_value::<ElicitResult>(answer.clone()) {
            Ok(result) => decision_of(&result),
            // Fail closed on an answer we cannot read.
            Err(_) => (ConfirmDecision::Deny, ErrorCode::UserDeniedConfirmation),
        };
        self.host_resolve(
            &first,
            &sealed.confirmation_id,
            decision,
            SOURCE_INPUT_RESPONSE,
        )
        .await
    }
}

/// accept → approve; decline → deny; cancel → deny as `confirmation_cancelled`.
fn decision_of(result: &ElicitResult) -> (ConfirmDecision, ErrorCode) {
    match result.action {
        ElicitationAction::Accept => (ConfirmDecision::Approve, ErrorCode::UserDeniedConfirmation),
        ElicitationAction::Decline => (ConfirmDecision::Deny, ErrorCode::UserDeniedConfirmation),
        ElicitationAction::Cancel => (ConfirmDecision::Deny, ErrorCode::ConfirmationCancelled),
        // An action this version does not know: fail closed.
        _ => (ConfirmDecision::Deny, ErrorCode::UserDeniedConfirmation),
    }
}

fn args_digest(arguments: &Value) -> String {
    openphone_protocol::params_hash(arguments).unwrap_or_else(|_| format!("{arguments}"))
}

fn cancelled_result(runtime: &str) -> ToolResult {
    ToolResult::failure(
        runtime,
        &fresh_request_id(),
        ErrorCode::Cancelled,
        "the call was cancelled before it ran",
    )
}

/// The final result under the first answer's request id (a retry sees its own id).
fn readdress(result: ToolResult, first: &ToolResult) -> ToolResult {
    ToolResult {
        request_id: first.request_id.clone(),
        audit_id: first.audit_id.clone(),
        ..result
    }
}
