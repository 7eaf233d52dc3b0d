//! Shared state of the endpoint and its HTTP routes.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use openphone_core::{RuntimeManager, ToolBridge};
use openphone_device::PhoneProfile;
use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::Registry;
use openphone_store::{AuditEntry, AuditKind};
use tokio::sync::{Notify, watch};

use crate::auth::{Credentials, Principal};
use crate::config::Limits;
use crate::front::{Door, Front, Ticket, Unauthenticated};
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
    pub mcp: Option<crate::mcp::McpState>,
    /// The connection caps, timeouts, allowed origins and the log of unauthenticated peers.
    pub front: Front,
    /// The background job scheduler (`jobs.*`).
    pub jobs: openphone_jobs::Scheduler,
    /// The goal engine and its driver (`goals.*`).
    pub goals: Arc<crate::goals::GoalDriver>,
    /// The web dashboard's logins, unless the daemon listens on a non-loopback address.
    pub dashboard: Option<crate::dashboard::Dashboard>,
}

impl AppState {
    /// Records a frame an authenticated caller sent over the size limit in the audit log (no
    /// content, only the fact). Unauthenticated peers get a rate-limited log line instead
    /// ([`Front::note`]): they must not be able to grow the audit log.
    pub fn audit_oversize(&self, caller: &Caller) {
        let now = self.bridge.now_ms();
        let (runtime, transport, principal) = (
            caller.runtime.clone(),
            caller.transport.as_str().to_owned(),
            caller.principal.clone(),
        );
        let request_id = format!("frame-{now}");
        let entry = AuditEntry {
            audit_id: format!("endpoint:{runtime}:{request_id}"),
            kind: AuditKind::ToolRequest,
            at_ms: now,
            runtime: runtime.clone(),
            caller: openphone_store::Caller {
                runtime,
                transport,
                principal,
            },
            request_id,
            status: Some(openphone_protocol::ToolStatus::Error),
            error_code: Some("payload_too_large".into()),
            ..Default::default()
        };
        if let Err(e) = self.bridge.store().append_audit(&entry) {
            tracing::error!(error = %e, "recording an oversize frame");
        }
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
        let now = self.bridge.now_ms();
        let entry = AuditEntry {
            audit_id: format!("endpoint:{}:{request_id}", caller.runtime),
            kind: AuditKind::OperatorAction,
            at_ms: now,
            runtime: caller.runtime.clone(),
            caller: openphone_store::Caller {
                runtime: caller.runtime.clone(),
                transport: caller.transport.as_str().to_owned(),
                principal: caller.principal.clone(),
            },
            request_id,
            tool: Some(what.to_owned()),
            params_hash: openphone_protocol::digest::params_hash(args).ok(),
            ..Default::default()
        };
        self.bridge.store().append_audit(&entry).map(|_| ())
    }
}

/// The routes of `endpoint.sock`: `GET /v1/runtime` and `GET /healthz`.
pub fn local_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/runtime", get(upgrade))
        .route("/healthz", get(healthz))
        .with_state(state)
}

/// A request that passed the `/mcp` guard authenticated its connection (the front door stops
/// counting it as unauthenticated and lifts its deadline).
async fn mark_authenticated(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let principal = req
        .extensions()
        .get::<Arc<openphone_mcp::McpPrincipal>>()
        .map(|p| format!("runtime:{}", p.caller.runtime));
    if let (Some(ticket), Some(principal)) =
        (req.extensions().get::<Arc<Ticket>>(), principal.as_deref())
        && !ticket.authenticated_as(crate::front::Class::Mcp, principal)
    {
        return too_many();
    }
    next.run(req).await
}

/// 503 for an authenticated connection whose class has no room left.
fn too_many() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CONNECTION, "close")],
        "too many connections for this kind of credential; try again later",
    )
        .into_response()
}

/// The endpoint's routes: `GET /v1/runtime` (WebSocket), `GET /healthz`, and unless MCP is
/// disabled `/mcp` (Streamable HTTP behind the guard of `mcp.rs`) and
/// `GET`/`POST /confirmations/{id}` (the read-only approval page; the parameters only with
/// the operator token), and on a loopback address the web dashboard (`/`, `/ui/…`).
pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new()
        .route("/v1/runtime", get(upgrade))
        .route("/healthz", get(healthz));
    if let Some(mcp) = &state.mcp {
        let service = openphone_mcp::http_service(
            mcp.backend.clone(),
            openphone_mcp::HttpOptions {
                extra_allowed_origins: mcp.extra_origins.clone(),
                shutdown: mcp.shutdown.clone(),
            },
        );
        // The guard is the outer layer: only requests it lets through are marked.
        let guarded = Router::new()
            .route_service("/mcp", service)
            .layer(axum::middleware::from_fn(mark_authenticated))
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                crate::mcp::guard,
            ));
        router = router.merge(guarded).route(
            "/confirmations/{id}",
            get(crate::mcp::approval_page).post(crate::mcp::approval_form),
        );
    }
    if state.dashboard.is_some() {
        router = router.merge(crate::dashboard::routes(state.clone()));
    }
    router
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::front::hygiene,
        ))
        .with_state(state)
}

/// The body of `GET /healthz`.
#[derive(serde::Serialize)]
struct Health {
    ok: bool,
}

async fn healthz() -> impl IntoResponse {
    axum::Json(Health { ok: true })
}

/// `GET /v1/runtime`: Origin → bearer token → upgrade. A web page (an `Origin` that is neither
/// loopback nor configured) is refused with 403 before anything else; clients that are not
/// browsers send no `Origin`.
async fn upgrade(
    State(state): State<Arc<AppState>>,
    ticket: Option<Extension<Arc<Ticket>>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if *state.shutdown.borrow() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    let ticket = ticket.map(|Extension(t)| t);
    if let Some(origin) = headers.get(header::ORIGIN)
        && !state.front.origin_allowed(origin)
    {
        state
            .front
            .note(state.bridge.now_ms(), Unauthenticated::ForeignOrigin);
        return (StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed").into_response();
    }
    let owner = ticket
        .as_ref()
        .is_some_and(|t| t.door() == Door::Local { owner: true });
    let pre_auth = match headers.get(header::AUTHORIZATION) {
        // On endpoint.sock the peer's account is the credential.
        None if owner => Some(Principal::Operator),
        None => None,
        Some(_) => {
            // The scheme in any case (RFC 7235), as on `/mcp`.
            let token = crate::mcp::bearer(&headers);
            match token.and_then(|t| state.credentials.authenticate(t)) {
                Some(p) => Some(p),
                None => {
                    state
                        .front
                        .note(state.bridge.now_ms(), Unauthenticated::WrongToken);
                    return (
                        StatusCode::UNAUTHORIZED,
                        [(header::WWW_AUTHENTICATE, "Bearer")],
                        "unauthorized",
                    )
                        .into_response();
                }
            }
        }
    };
    // A valid bearer token counts the connection in its class as soon as the headers are
    // read, before any `hello`.
    if let (Some(p), Some(t)) = (&pre_auth, &ticket)
        && !t.authenticated_as(crate::conn::class_of(p), &p.bucket_key())
    {
        return too_many();
    }
    let max = state.limits.max_frame_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| crate::conn::serve_socket(state, socket, pre_auth, ticket))
}
