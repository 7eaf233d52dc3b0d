//! The web dashboard (`docs/dashboard.md`): the operator's side of the system — approving,
//! watching, auditing — as a local web page served by `openphone serve` on its own port's
//! loopback address.
//!
//! Routes: `/` (→ `/ui/`), `/ui/` (the page), `/ui/assets/{file}` (embedded static files),
//! `GET`/`POST /ui/login` (the login page; the one-time code exchange), `POST /ui/logout`,
//! `GET /ui/api/session`, `GET /ui/api/methods`, `POST /ui/api/audit/verify` and
//! `GET /ui/ws`, the page's WebSocket: the operator endpoint itself (`hello`, every method,
//! events), served by the same connection code as `/v1/runtime`, so the dashboard has no second
//! implementation of anything the endpoint does.
//!
//! Every route checks, in this order: exactly one `Host`, naming a loopback name with the port
//! the connection came in on (else 400 / 403: DNS rebinding, a forwarded name), and a present
//! `Origin` exactly the dashboard's own (`http://` + that host; else 403 — a page on another
//! loopback port is the same *site*, so `SameSite=Strict` sends it the cookie, but it is not
//! this origin); a `Sec-Fetch-Site` of `same-site`/`cross-site` on anything but a top-level
//! navigation is refused too. Then:
//! - the session cookie (`openphone_dashboard`, HttpOnly, SameSite=Strict, Path=/ui), got only by
//!   exchanging a one-time code from `dashboard.login` (`openphone dashboard`) — else 401;
//! - on every route but the page and its static files, the session's token as well: in
//!   `X-OpenPhone-CSRF` on the API routes, as the subprotocol `openphone-csrf.<token>` on the
//!   WebSocket upgrade (else 403: no method can run, nothing is read);
//! - state changes (`POST`s and the WebSocket upgrade) must carry an `Origin` (a browser always
//!   sends one there).
//!
//! **Cookies are not separated by port**: the browser sends the cookie to every
//! `http://127.0.0.1:<port>/ui/…`, so another local web server receives it when its own page
//! fetches `/ui/x`. The cookie alone is therefore worth nothing: the token is handed out once,
//! in the answer to `POST /ui/login`, and the login page keeps it in the origin's
//! `localStorage` (scheme, host *and* port); no route ever answers it in exchange for the
//! cookie, and the page's HTML embeds none.
//!
//! **Architecture Invariant:** the dashboard acts only through the operator endpoint's
//! methods (the socket) and the store's read-only chain check; it never touches the device.

mod assets;
pub mod logins;

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use openphone_protocol::endpoint::{
    DashboardAuditVerifyReply, DashboardLoginBody, DashboardLoginReply, DashboardMethodsReply,
    DashboardOk, DashboardSessionReply, MethodName,
};

use crate::auth::token_eq;
use crate::front::{Ticket, Unauthenticated};
use crate::principal::Principal;
use crate::state::AppState;
pub use logins::{CODE_TTL_MS, Dashboard, Logins, SESSION_TTL_MS, SessionView};

/// The session cookie's name.
pub const COOKIE: &str = "openphone_dashboard";
/// The header a state-changing `POST` echoes the session's CSRF token in.
pub const CSRF_HEADER: &str = "x-openphone-csrf";
/// Largest accepted body of a dashboard `POST`.
const MAX_BODY_BYTES: usize = 4096;

/// The dashboard's routes, behind its Host/Origin guard and with its response headers.
pub fn routes(state: Arc<AppState>) -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(page))
        .route("/ui/assets/{file}", get(asset))
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/api/session", get(session_info))
        .route("/ui/api/methods", get(methods))
        .route("/ui/api/audit/verify", post(verify_audit))
        .route("/ui/ws", get(socket))
        .layer(axum::middleware::from_fn_with_state(state, guard))
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_owned(),
    )
        .into_response()
}

/// The dashboard's own origin, as the request's `Host` names it: one of the three loopback
/// names and the port the connection came in on. Built from those parts only, never from the
/// header's text, so nothing a client sends is echoed into a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnOrigin {
    name: &'static str,
    port: u16,
    /// `Host` named no port (the daemon listens on 80): the origin has none either.
    default_port: bool,
}

impl OwnOrigin {
    /// The own origin `host` names when the connection came in on `port`: `None` when `host`
    /// is not exactly `localhost`, `127.0.0.1` or `[::1]` (any case) with that port (or no
    /// port, when it is 80).
    pub(crate) fn parse(host: &str, port: u16) -> Option<OwnOrigin> {
        let host = host.trim().to_ascii_lowercase();
        let (name, rest) = if let Some(rest) = host.strip_prefix("[::1]") {
            ("[::1]", rest)
        } else if let Some(rest) = host.strip_prefix("127.0.0.1") {
            ("127.0.0.1", rest)
        } else if let Some(rest) = host.strip_prefix("localhost") {
            ("localhost", rest)
        } else {
            return None;
        };
        let (named, default_port) = match rest {
            "" => (80, true),
            _ => {
                let digits = rest.strip_prefix(':')?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (digits.parse::<u16>().ok()?, false)
            }
        };
        (named == port).then_some(OwnOrigin {
            name,
            port,
            default_port,
        })
    }

    fn authority(&self) -> String {
        if self.default_port {
            self.name.to_owned()
        } else {
            format!("{}:{}", self.name, self.port)
        }
    }

    /// `http://<name>[:<port>]`, as a browser serialises the page's origin.
    pub(crate) fn origin(&self) -> String {
        format!("http://{}", self.authority())
    }

    /// Whether a request's `Origin` is exactly this one (scheme, host and port).
    pub(crate) fn matches(&self, origin: &HeaderValue) -> bool {
        origin
            .to_str()
            .is_ok_and(|o| o.trim().eq_ignore_ascii_case(&self.origin()))
    }
}

/// A request a browser made for a page of another origin on this site (another loopback port
/// is the same *site*, and `SameSite=Strict` cookies go along) that is not a top-level
/// navigation: `Sec-Fetch-Site` says so even where no `Origin` is sent (`<img>`, `<script>`).
fn from_another_origin(method: &axum::http::Method, headers: &HeaderMap) -> bool {
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    let foreign = matches!(site.as_deref(), Some("same-site" | "cross-site"));
    let navigation = method == axum::http::Method::GET
        && headers
            .get("sec-fetch-mode")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|m| m.eq_ignore_ascii_case("navigate"));
    foreign && !navigation
}

/// Host → Origin → shutdown, then the security headers on whatever the route answers.
///
/// The dashboard answers only its own origin: `Host` must name a loopback name with the port
/// the connection came in on, and a present `Origin` must be exactly `http://` + that host
/// (a page on another loopback port is the same site for cookies, but not this origin).
/// `[endpoint] extra_allowed_origins` does not apply here: the dashboard's page is always
/// served by the daemon itself.
async fn guard(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let port = req
        .extensions()
        .get::<Arc<Ticket>>()
        .and_then(|t| t.local_port());
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts
        .next()
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if hosts.next().is_some() {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Bad Request: more than one Host header",
        );
    }
    let Some(own) = port.and_then(|p| OwnOrigin::parse(host, p)) else {
        tracing::warn!("dashboard request with a foreign Host refused (403)");
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Host is not this daemon's loopback address",
        );
    };
    if let Some(origin) = headers.get(header::ORIGIN)
        && !own.matches(origin)
    {
        state
            .front
            .note(state.bridge.now_ms(), Unauthenticated::ForeignOrigin);
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Origin is not the dashboard's own origin",
        );
    }
    if from_another_origin(req.method(), headers) {
        state
            .front
            .note(state.bridge.now_ms(), Unauthenticated::ForeignOrigin);
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: a request from another origin's page",
        );
    }
    if *state.shutdown.borrow() {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    let csp = format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self' ws://{}; form-action 'self'; base-uri 'none'; \
         frame-ancestors 'none'",
        own.authority()
    );
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The value of the session cookie, if the request carries one.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The live session the request's cookie names. The cookie alone proves nothing (another
/// local web server receives it too): it only serves the page; everything else also needs the
/// session's token ([`authorized`], [`socket_token_presented`]).
fn cookie_session(state: &AppState, headers: &HeaderMap) -> Option<(String, SessionView)> {
    let dashboard = state.dashboard.as_ref()?;
    let id = cookie(headers)?;
    let view = dashboard.logins.session(&id, state.bridge.now_ms())?;
    Some((id, view))
}

/// The connection proved the operator's credential (cookie and token): it counts in the
/// operator's class. Without room there it stays unauthenticated (its deadline and eviction
/// apply); the request is still answered.
fn mark_operator(ticket: Option<&Arc<Ticket>>) {
    if let Some(t) = ticket {
        t.authenticated(crate::front::Class::Operator);
    }
}

/// The session of an API request: the cookie (else 401) and the session's token in
/// `X-OpenPhone-CSRF` (else 403). Only then is the connection counted as the operator's.
fn authorized(
    state: &AppState,
    headers: &HeaderMap,
    ticket: Option<&Arc<Ticket>>,
) -> Result<(String, SessionView), Refusal> {
    let Some((id, view)) = cookie_session(state, headers) else {
        return Err(unauthorized());
    };
    let sent = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !token_eq(sent, &view.csrf) {
        state
            .front
            .note(state.bridge.now_ms(), Unauthenticated::WrongToken);
        return Err(Refusal(
            StatusCode::FORBIDDEN,
            "Forbidden: missing or wrong X-OpenPhone-CSRF token (the token comes only with \
             the login answer; log in again with `openphone dashboard`)"
                .into(),
        ));
    }
    mark_operator(ticket);
    Ok((id, view))
}

/// A refused request: its status and the line that says why.
struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refuse(self.0, &self.1)
    }
}

fn unauthorized() -> Refusal {
    Refusal(
        StatusCode::UNAUTHORIZED,
        "Unauthorized: log in with `openphone dashboard` (a one-time login link)".into(),
    )
}

/// A state change must come from a page: an `Origin` (the guard already checked its value).
fn origin_required(headers: &HeaderMap) -> Result<(), Refusal> {
    if headers.contains_key(header::ORIGIN) {
        Ok(())
    } else {
        Err(Refusal(
            StatusCode::FORBIDDEN,
            "Forbidden: a state-changing request must carry an Origin".into(),
        ))
    }
}

/// A state-changing `POST`: the session (cookie and token, [`authorized`]) and an `Origin`.
fn post_authorized(
    state: &AppState,
    headers: &HeaderMap,
    ticket: Option<&Arc<Ticket>>,
) -> Result<(String, SessionView), Refusal> {
    let session = authorized(state, headers, ticket)?;
    origin_required(headers)?;
    Ok(session)
}

type MaybeTicket = Option<Extension<Arc<Ticket>>>;

fn ticket_of(t: &MaybeTicket) -> Option<&Arc<Ticket>> {
    t.as_ref().map(|Extension(t)| t)
}

/// `GET /ui/`: the page, or the login page's hint without a session. The cookie is enough here:
/// the page is static and embeds no token (its script reads the token from the origin's
/// `localStorage` and goes to the login page when there is none). Not counted as the
/// operator's connection.
async fn page(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    match cookie_session(&state, &headers) {
        Some(_) => assets::html(assets::INDEX_HTML),
        None => Redirect::to("/ui/login").into_response(),
    }
}

/// `GET /ui/login`: the page that exchanges the code in its URL fragment.
async fn login_page() -> Response {
    assets::html(assets::LOGIN_HTML)
}

/// `GET /ui/assets/{file}`.
async fn asset(Path(file): Path<String>) -> Response {
    match assets::file(&file) {
        Some((body, content_type)) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            body,
        )
            .into_response(),
        None => refuse(StatusCode::NOT_FOUND, "no such file"),
    }
}

/// The JSON body of a dashboard `POST` (at most [`MAX_BODY_BYTES`]).
fn json_body(headers: &HeaderMap, body: &Bytes) -> Result<serde_json::Value, Refusal> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !is_json {
        return Err(Refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as application/json".into(),
        ));
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(Refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body over 4 KiB".into(),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| Refusal(StatusCode::BAD_REQUEST, format!("body is not JSON: {e}")))
}

/// The `Set-Cookie` of a session (or, with `None`, the one that deletes it).
fn set_cookie(session: Option<(&str, i64)>) -> HeaderValue {
    let text = match session {
        Some((id, max_age_ms)) => format!(
            "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
            max_age_ms / 1000
        ),
        None => format!("{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `POST /ui/login` `{"code": "…"}`: the one-time code for a session cookie and, in the body,
/// the session's token (`token`) — the only time it is ever sent. The login page keeps it in
/// the origin's `localStorage`; no other route answers it.
async fn login(
    State(state): State<Arc<AppState>>,
    ticket: MaybeTicket,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = origin_required(&headers) {
        return r.into_response();
    }
    let Some(dashboard) = &state.dashboard else {
        return refuse(StatusCode::NOT_FOUND, "the dashboard is not served here");
    };
    let body = match json_body(&headers, &body) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let body = serde_json::from_value::<DashboardLoginBody>(body).unwrap_or_default();
    let Some(code) = body.code.as_deref() else {
        return refuse(StatusCode::BAD_REQUEST, "missing `code`");
    };
    let now = state.bridge.now_ms();
    match dashboard.logins.exchange(code, now) {
        Ok(Some((id, view))) => {
            mark_operator(ticket_of(&ticket));
            tracing::info!("dashboard login");
            (
                [(header::SET_COOKIE, set_cookie(Some((&id, SESSION_TTL_MS))))],
                axum::Json(DashboardLoginReply {
                    expires_at_ms: view.expires_at_ms,
                    ok: true,
                    token: view.csrf,
                }),
            )
                .into_response()
        }
        Ok(None) => {
            state.front.note(now, Unauthenticated::WrongToken);
            refuse(
                StatusCode::UNAUTHORIZED,
                "this login code is unknown, used or expired: run `openphone dashboard` again",
            )
        }
        Err(e) => {
            tracing::error!(error = %e, "dashboard login");
            refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())
        }
    }
}

/// `POST /ui/logout`: ends the session (its sockets close) and deletes the cookie.
async fn logout(
    State(state): State<Arc<AppState>>,
    ticket: MaybeTicket,
    headers: HeaderMap,
) -> Response {
    let id = match post_authorized(&state, &headers, ticket_of(&ticket)) {
        Ok((id, _)) => id,
        Err(r) => return r.into_response(),
    };
    if let Some(d) = &state.dashboard {
        d.logins.end(&id);
    }
    tracing::info!("dashboard logout");
    (
        [(header::SET_COOKIE, set_cookie(None))],
        axum::Json(DashboardOk { ok: true }),
    )
        .into_response()
}

/// `GET /ui/api/session`: whether the session (cookie and token in `X-OpenPhone-CSRF`) is
/// alive, and its expiry. It never answers the token: the cookie alone must not buy it.
async fn session_info(
    State(state): State<Arc<AppState>>,
    ticket: MaybeTicket,
    headers: HeaderMap,
) -> Response {
    match authorized(&state, &headers, ticket_of(&ticket)) {
        Ok((_, view)) => axum::Json(DashboardSessionReply {
            expires_at_ms: view.expires_at_ms,
            ok: true,
        })
        .into_response(),
        Err(r) => r.into_response(),
    }
}

/// `GET /ui/api/methods`: the endpoint methods this daemon answers (the page lights up the
/// pages whose methods exist, e.g. goals).
async fn methods(
    State(state): State<Arc<AppState>>,
    ticket: MaybeTicket,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorized(&state, &headers, ticket_of(&ticket)) {
        return r.into_response();
    }
    let methods = MethodName::ALL
        .iter()
        .map(|m| m.as_str().to_owned())
        .collect();
    axum::Json(DashboardMethodsReply { methods }).into_response()
}

/// `POST /ui/api/audit/verify`: walks the audit hash chain (as `openphone audit verify`).
async fn verify_audit(
    State(state): State<Arc<AppState>>,
    ticket: MaybeTicket,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = post_authorized(&state, &headers, ticket_of(&ticket)) {
        return r.into_response();
    }
    let bridge = Arc::clone(&state.bridge);
    let walked = tokio::task::spawn_blocking(move || bridge.verify_audit_chain()).await;
    match walked {
        Ok(Ok(report)) => axum::Json(DashboardAuditVerifyReply {
            checked: report.checked,
            intact: report.is_intact(),
            last_hash: report.last_hash,
            last_seq: report.last_seq,
            problem: report.first_broken.as_ref().map(ToString::to_string),
            first_broken: report.first_broken,
        })
        .into_response(),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "dashboard audit verify");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the audit log could not be read: {e}"),
            )
        }
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// The subprotocol the daemon answers the page's socket with (never the token itself).
pub const SOCKET_PROTOCOL: &str = "openphone-dashboard";
/// The prefix of the subprotocol that carries the session's CSRF token on the upgrade.
pub const SOCKET_TOKEN_PREFIX: &str = "openphone-csrf.";

/// Whether the upgrade offers `openphone-csrf.<the session's CSRF token>` among its
/// `Sec-WebSocket-Protocol`s. The token lives only in the dashboard origin's `localStorage`
/// (handed over once, in the login answer), so neither a page elsewhere nor a server that
/// received the cookie can offer it.
fn socket_token_presented(headers: &HeaderMap, view: &SessionView) -> bool {
    let mut found = false;
    for offered in headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        if let Some(token) = offered.trim().strip_prefix(SOCKET_TOKEN_PREFIX)
            && token_eq(token, &view.csrf)
        {
            found = true;
        }
    }
    found
}

/// `GET /ui/ws`: the operator endpoint over the session cookie and the session's token (offered
/// as a subprotocol, [`socket_token_presented`]; without it the upgrade is refused with 403 and
/// no method can run). The page says `hello` (no token) and then calls methods as the CLI
/// does; logout closes the socket.
async fn socket(
    State(state): State<Arc<AppState>>,
    ticket: MaybeTicket,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if let Err(r) = origin_required(&headers) {
        return r.into_response();
    }
    let ticket = ticket.map(|Extension(t)| t);
    let Some((_, view)) = cookie_session(&state, &headers) else {
        return unauthorized().into_response();
    };
    if !socket_token_presented(&headers, &view) {
        state
            .front
            .note(state.bridge.now_ms(), Unauthenticated::WrongToken);
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the socket must offer the session's token as the subprotocol \
             `openphone-csrf.<token>` (the token comes only with the login answer)",
        );
    }
    mark_operator(ticket.as_ref());
    let max = state.limits.max_frame_bytes;
    ws.protocols([SOCKET_PROTOCOL])
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| {
            crate::conn::serve_socket_until(
                state,
                socket,
                Some(Principal::Operator),
                ticket,
                Some(view.revoked),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; openphone_dashboard=abc"),
        );
        assert_eq!(cookie(&h).as_deref(), Some("abc"));
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("xopenphone_dashboard=abc"),
        );
        assert_eq!(cookie(&h), None);
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("openphone_dashboard="),
        );
        assert_eq!(cookie(&h), None);
    }
}
