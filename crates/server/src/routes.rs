//! The endpoint's HTTP routes over the shared state: `GET /v1/runtime` (the WebSocket upgrade:
//! Origin, bearer token, class admission), `GET /healthz`, `/mcp` behind its guard, the
//! approval page, and the web dashboard's routes; and the two routers that serve them (the
//! TCP listener's and `endpoint.sock`'s).

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::front::serve::App;
use crate::front::{Door, Ticket, Unauthenticated};
use crate::principal::Principal;
use crate::state::AppState;

/// The WebSocket read buffer of `/v1/runtime` (bytes): requests are small.
const WS_READ_BUFFER: usize = 8 * 1024;

/// The routes of `endpoint.sock`: `GET /v1/runtime` and `GET /healthz`.
pub fn local_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/runtime", get(upgrade))
        .route("/healthz", get(healthz))
        .with_state(state)
}

/// What the TCP port serves: [`router`], with `POST /mcp` sent straight to the MCP service
/// (`front::serve::App`) when MCP is on.
pub fn app(state: Arc<AppState>) -> App {
    let (router, mcp) = router_and_mcp(state);
    match mcp {
        Some(mcp) => App::with_mcp(router, mcp),
        None => App::new(router),
    }
}

/// 503 for an authenticated connection whose class has no room left.
pub(crate) fn too_many() -> Response {
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
    router_and_mcp(state).0
}

/// [`router`], and its `/mcp` service when MCP is on.
fn router_and_mcp(state: Arc<AppState>) -> (Router, Option<openphone_mcp::McpHttpService>) {
    let mut mcp_service = None;
    let mut router = Router::new()
        .route("/v1/runtime", get(upgrade))
        .route("/healthz", get(healthz));
    if let Some(mcp) = &state.mcp {
        let service = openphone_mcp::http_service(
            mcp.backend.clone(),
            openphone_mcp::HttpOptions {
                extra_allowed_origins: mcp.extra_origins.clone(),
                shutdown: mcp.shutdown.clone(),
                direct_calls: true,
                session_idle: openphone_mcp::HTTP_SESSION_IDLE,
            },
        );
        mcp_service = Some(service.clone());
        // The guard admits a request and marks its connection authenticated (one layer: each
        // `from_fn` layer clones its inner service per request).
        let guarded = Router::new().route_service("/mcp", service).layer(
            axum::middleware::from_fn_with_state(state.clone(), crate::mcp::guard),
        );
        router = router.merge(guarded).route(
            "/confirmations/{id}",
            get(crate::mcp::approval_page).post(crate::mcp::approval_form),
        );
    }
    if state.dashboard.is_some() {
        router = router.merge(crate::dashboard::routes(state.clone()));
    }
    let router = router
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::front::serve::hygiene,
        ))
        .with_state(state);
    (router, mcp_service)
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
    // The read buffer is zeroed up to its size on every read (tungstenite): the default
    // 128 KiB made that the largest cost of a small call (issue 34). Larger frames still
    // arrive whole; the buffer grows for them.
    ws.max_message_size(max)
        .max_frame_size(max)
        .read_buffer_size(WS_READ_BUFFER)
        .on_upgrade(move |socket| crate::conn::serve_socket(state, socket, pre_auth, ticket))
}
