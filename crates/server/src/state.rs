//! Shared state of the endpoint and its HTTP routes.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use openphone_core::{RuntimeManager, ToolBridge};
use openphone_device::DeviceProfile;
use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::Registry;
use openphone_store::{AuditEntry, AuditKind};
use tokio::sync::{Notify, watch};

use crate::auth::Credentials;
use crate::config::Limits;
use crate::rate::RateLimiter;

/// Everything a connection needs.
#[derive(Debug)]
pub struct AppState {
    pub bridge: Arc<ToolBridge>,
    /// Runtimes, presence, routing and the attention flow.
    pub runtimes: Arc<RuntimeManager>,
    pub registry: &'static Registry,
    pub profile: DeviceProfile,
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
}

impl AppState {
    /// Records a frame refused for its size in the audit log (no content, only the fact).
    pub fn audit_oversize(&self, caller: Option<&Caller>) {
        let now = self.bridge.now_ms();
        let (runtime, transport, principal) = match caller {
            Some(c) => (
                c.runtime.clone(),
                c.transport.as_str().to_owned(),
                c.principal.clone(),
            ),
            None => (
                "unknown".into(),
                "websocket".into(),
                "unauthenticated".into(),
            ),
        };
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
}

/// The endpoint's routes: `GET /v1/runtime` (WebSocket), `GET /healthz`, and unless MCP is
/// disabled `/mcp` (Streamable HTTP behind the guard of `mcp.rs`) and
/// `GET /confirmations/{id}` (the read-only approval page).
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
        let guarded = Router::new().route_service("/mcp", service).layer(
            axum::middleware::from_fn_with_state(state.clone(), crate::mcp::guard),
        );
        router = router
            .merge(guarded)
            .route("/confirmations/{id}", get(crate::mcp::approval_page));
    }
    router.with_state(state)
}

/// The body of `GET /healthz`.
#[derive(serde::Serialize)]
struct Health {
    ok: bool,
}

async fn healthz() -> impl IntoResponse {
    axum::Json(Health { ok: true })
}

async fn upgrade(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if *state.shutdown.borrow() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    let pre_auth = match headers.get(header::AUTHORIZATION) {
        None => None,
        Some(value) => {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            match token.and_then(|t| state.credentials.authenticate(t)) {
                Some(p) => Some(p),
                None => {
                    tracing::warn!("upgrade with a wrong bearer token refused (401)");
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
    let max = state.limits.max_frame_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| crate::conn::serve_socket(state, socket, pre_auth))
}
