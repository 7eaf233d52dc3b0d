//! The daemon's MCP front doors (`docs/mcp.md`): Streamable HTTP at `/mcp` and the local socket
//! `mcp.sock` that `openphone mcp serve` pipes stdio into. The MCP logic itself is
//! `openphone-mcp`; this module authenticates, limits and routes.
//!
//! HTTP checks run in this order, before any MCP processing (`docs/spec/mcp.md` §10): `Host`
//! must be a loopback name (else 403), a present `Origin` must be loopback or configured (else
//! 403), the bearer token must be a runtime credential (else 401 with `WWW-Authenticate:
//! Bearer`), a declared body over 1 MiB is refused (413; rmcp also caps the streamed body), and
//! the credential's token bucket must have room (429 with `Retry-After`).
//!
//! Socket connections (file mode 0600, same OS user) start with one hello line,
//! `{"openphone_mcp_hello": {"token": "<runtime token>"}}`, answered by
//! `{"openphone_mcp_hello": "ok", "runtime": "<id>"}` or `{"openphone_mcp_hello": "refused",
//! "message": "…"}`; after "ok" the stream is newline-delimited MCP, exactly as stdio.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use openphone_mcp::MAX_HTTP_BODY_BYTES;
use openphone_protocol::{McpHello, McpHelloReply};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::front::origin_allowed;
use crate::principal::Principal;
use crate::state::AppState;
pub use crate::state::McpState;

/// `<data-dir>/mcp.sock`.
pub const SOCKET_FILE: &str = "mcp.sock";
/// `<data-dir>/mcp.token`: the default MCP runtime's token.
pub const MCP_TOKEN_FILE: &str = "mcp.token";
/// `<data-dir>/mcp-state.key`: the key sealing modern-era `requestState`s.
pub const STATE_KEY_FILE: &str = "mcp-state.key";
/// The key of the socket hello line ([`openphone_protocol::MCP_HELLO_KEY`]).
pub const HELLO_KEY: &str = openphone_protocol::MCP_HELLO_KEY;
/// Longest accepted hello line.
const MAX_HELLO_BYTES: u64 = 4096;

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, message.to_owned()).into_response()
}

/// `host` without its port: `localhost:7788` → `localhost`, `[::1]:80` → `::1`; `None` when
/// what follows the name is anything but `:` and digits (a `Host` is never echoed, but one
/// that is not a plain authority is refused, not trimmed).
fn host_name(host: &str) -> Option<&str> {
    let (name, rest) = if let Some(bracketed) = host.strip_prefix('[') {
        bracketed.split_once(']')?
    } else {
        match host.split_once(':') {
            Some((name, _)) => (name, &host[name.len()..]),
            None => (host, ""),
        }
    };
    let port_ok = rest.is_empty()
        || rest
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok.then_some(name)
}

/// Whether a `Host` header names this machine's loopback.
pub fn host_allowed(host: &str) -> bool {
    host_name(host.trim()).is_some_and(|name| {
        ["localhost", "127.0.0.1", "::1"]
            .iter()
            .any(|loopback| name.eq_ignore_ascii_case(loopback))
    })
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, RFC 7235).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The `/mcp` guard: Host → Origin → token → size → rate, then the connection is counted as
/// authenticated in the MCP class (503 when the class is full) and the principal is attached
/// to the request for the MCP handler.
pub async fn guard(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    match admit(&state, req) {
        Ok(req) => next.run(req).await,
        Err(refused) => *refused,
    }
}

/// `POST /mcp` as the front door serves it without the router (`front::serve::connection`):
/// the front door's hygiene, then [`guard`]'s checks, then the MCP service — what the
/// router's `/mcp` route runs.
pub(crate) async fn post(
    state: Arc<AppState>,
    mut service: openphone_mcp::McpHttpService,
    req: Request,
) -> Response {
    let (req, hygiene) = match crate::front::serve::Hygiene::admit(&state, req) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let response = match admit(&state, req) {
        Ok(req) => match tower_service::Service::call(&mut service, req).await {
            Ok(answer) => answer.map(axum::body::Body::new),
            Err(never) => match never {},
        },
        Err(refused) => *refused,
    };
    hygiene.finish(response)
}

/// [`guard`]'s checks: the request with its principal attached, or the refusal (boxed: it
/// is rare, and large).
fn admit(state: &AppState, mut req: Request) -> Result<Request, Box<Response>> {
    let Some(mcp) = &state.mcp else {
        return Err(Box::new(refuse(
            StatusCode::NOT_FOUND,
            "MCP is disabled in this daemon's config",
        )));
    };
    if *state.shutdown.borrow() {
        return Err(Box::new(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down",
        )));
    }
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(host) {
        tracing::warn!("mcp request with a foreign Host refused (403)");
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Host is not a loopback name",
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| origin_allowed(o, &mcp.extra_origins));
        if !ok {
            tracing::warn!("mcp request with a foreign Origin refused (403)");
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                "Forbidden: Origin is not allowed",
            )));
        }
    }
    let Some(admission) = bearer(headers).and_then(|t| state.credentials.authenticate_mcp(t))
    else {
        return Err(Box::new(
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "Unauthorized: send `Authorization: Bearer <token>` with an MCP runtime token \
                 (`openphone mcp token` prints the default one)",
            )
                .into_response(),
        ));
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_HTTP_BODY_BYTES) {
        return Err(Box::new(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body over 1 MiB",
        )));
    }
    if let Err(retry_ms) = state.rate.take(&admission.rate_key) {
        let secs = retry_ms.div_ceil(1000).max(1);
        let mut response = refuse(StatusCode::TOO_MANY_REQUESTS, "rate limited: slow down");
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return Err(Box::new(response));
    }
    // Admitted: the connection is authenticated (the front door stops counting it as
    // unauthenticated and lifts its deadline), unless its class has no room left.
    // Counted under the principal's bucket key, `runtime:<id>`, as the WebSocket counts it.
    if let Some(ticket) = req.extensions().get::<Arc<crate::front::Ticket>>()
        && !ticket.authenticated_as(crate::front::Class::Mcp, &admission.bucket)
    {
        return Err(Box::new(crate::routes::too_many()));
    }
    req.extensions_mut()
        .insert(Arc::clone(&admission.principal));
    Ok(req)
}

/// Largest accepted body of the approval page's form.
const MAX_FORM_BYTES: usize = 4096;

/// What the approval page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// No credential: who asks to run which command, its state, and how to decide.
    Outline,
    /// A credential that is not the operator's: the outline, answered with 401.
    Refused,
    /// The operator token: the request's summary with its parameters too.
    Full,
}

/// Refuses a request whose `Host` is not a loopback name (DNS rebinding).
fn foreign_host(headers: &HeaderMap) -> Option<Response> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    (!host_allowed(host)).then(|| {
        refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Host is not a loopback name",
        )
    })
}

fn is_operator(state: &AppState, token: &str) -> bool {
    matches!(
        state.credentials.authenticate_any(token.trim()),
        Some(Principal::Operator)
    )
}

/// `GET /confirmations/{id}`: a read-only page about one confirmation, where the MCP
/// URL elicitation points. Without a credential it shows who asks to run which command, the
/// state and how to approve or deny — not the parameters; with the operator token
/// (`Authorization: Bearer`, or the page's form, [`approval_form`]) it shows the request's
/// summary with its parameters too. Another credential is answered with 401. It grants
/// nothing.
pub async fn approval_page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    if let Some(refused) = foreign_host(&headers) {
        return refused;
    }
    let access = match headers.get(header::AUTHORIZATION) {
        None => Access::Outline,
        Some(_) => match bearer(&headers) {
            Some(token) if is_operator(&state, token) => Access::Full,
            _ => Access::Refused,
        },
    };
    page(&state, &id, access)
}

/// `POST /confirmations/{id}`, the page's form (`token=<operator token>`, URL-encoded): the
/// token travels in the body, never in the address (history, logs). A present `Origin` must
/// be loopback or configured, so another site cannot post it.
pub async fn approval_form(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Body,
) -> Response {
    if let Some(refused) = foreign_host(&headers) {
        return refused;
    }
    let extra: &[String] = state.mcp.as_ref().map_or(&[], |m| &m.extra_origins);
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin.to_str().is_ok_and(|o| origin_allowed(o, extra))
    {
        return refuse(StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed");
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_FORM_BYTES).await else {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the form is over 4 KiB");
    };
    let access = match form_field(&body, "token") {
        Some(token) if is_operator(&state, &token) => Access::Full,
        _ => Access::Refused,
    };
    page(&state, &id, access)
}

fn page(state: &AppState, id: &str, access: Access) -> Response {
    let record = match state.bridge.confirmation(id) {
        Ok(Some(r)) => r,
        Ok(None) => return refuse(StatusCode::NOT_FOUND, "no such confirmation"),
        Err(e) => {
            tracing::error!(error = %e, "reading a confirmation for its page");
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, "the store failed");
        }
    };
    let state_name = format!("{:?}", record.state).to_lowercase();
    let id = escape(&record.confirmation_id);
    let detail = match access {
        Access::Full => format!("<p>{}</p>", escape(&record.summary)),
        Access::Outline | Access::Refused => format!(
            "{refused}<p>The request's parameters are shown to the phone's owner only: enter \
             the operator token (the file <code>operator.token</code> in the daemon's data \
             directory), or run <code>openphone confirmations list</code> in a terminal.</p>\
             <form method=\"post\" action=\"/confirmations/{id}\"><input type=\"password\" \
             name=\"token\" autocomplete=\"off\" required> <button type=\"submit\">Show the \
             request</button></form>",
            refused = if access == Access::Refused {
                "<p><b>That is not the operator token.</b></p>"
            } else {
                ""
            },
        ),
    };
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>OpenPhone confirmation</title>\
         </head><body><h1>OpenPhone confirmation</h1>\
         <p><b>{runtime}</b> asks to run <code>{tool}</code>.</p>{detail}\
         <p>State: <b>{state_name}</b> (reload the page to see it change)</p>\
         <p>Approve or deny it on the phone, or in a terminal:</p>\
         <pre>openphone confirmations approve {id}\nopenphone confirmations deny {id}</pre>\
         </body></html>",
        runtime = escape(&record.identity.runtime),
        tool = escape(&record.identity.tool),
    );
    let status = match access {
        Access::Refused => StatusCode::UNAUTHORIZED,
        Access::Outline | Access::Full => StatusCode::OK,
    };
    let mut response = (status, Html(body)).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if access == Access::Refused {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// The value of `key` in an `application/x-www-form-urlencoded` body (`+` is a space,
/// `%XX` a byte), if present.
fn form_field(body: &[u8], key: &str) -> Option<String> {
    body.split(|b| *b == b'&').find_map(|pair| {
        let (k, v) = match pair.iter().position(|b| *b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &[][..]),
        };
        (url_decode(k) == key).then(|| url_decode(v))
    })
}

fn url_decode(raw: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                raw.get(i + 1).and_then(|b| hex(*b)),
                raw.get(i + 2).and_then(|b| hex(*b)),
            ) {
                (Some(h), Some(l)) => {
                    // Two hex digits: at most 255.
                    out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Serves `mcp.sock` until shutdown.
pub async fn serve_socket(state: Arc<AppState>, listener: tokio::net::UnixListener) {
    let Some(mcp) = state.mcp.as_ref() else {
        return;
    };
    let shutdown = mcp.shutdown.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = shutdown.cancelled() => break,
        };
        match accepted {
            Ok((stream, _)) => {
                let state = state.clone();
                tokio::spawn(async move { socket_connection(state, stream).await });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accepting an mcp.sock connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn socket_connection(state: Arc<AppState>, stream: tokio::net::UnixStream) {
    let Some(mcp) = state.mcp.as_ref() else {
        return;
    };
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = String::new();
    let read_hello = async {
        let mut limited = (&mut reader).take(MAX_HELLO_BYTES);
        limited.read_line(&mut line).await
    };
    let hello = tokio::time::timeout(Duration::from_secs(10), read_hello).await;
    let token = match hello {
        Ok(Ok(n)) if n > 0 => serde_json::from_str::<McpHello>(line.trim())
            .ok()
            .map(|hello| hello.hello.token),
        _ => None,
    };
    let principal = token
        .as_deref()
        .and_then(|t| state.credentials.authenticate_mcp(t))
        .map(|admission| Arc::clone(&admission.principal));
    let Some(principal) = principal else {
        let answer = McpHelloReply::refused(
            "the hello carries no MCP runtime token \
            (the default one is the data directory's mcp.token)",
        );
        let _ = write.write_all(reply_line(&answer).as_bytes()).await;
        return;
    };
    let answer = McpHelloReply::ok(principal.caller.runtime.clone());
    if write
        .write_all(reply_line(&answer).as_bytes())
        .await
        .is_err()
    {
        return;
    }
    tracing::info!(runtime = %principal.caller.runtime, "mcp socket connection");
    openphone_mcp::serve_stream(
        mcp.backend.clone(),
        principal,
        reader,
        write,
        mcp.shutdown.child_token(),
    )
    .await;
}

/// The hello answer as one line.
fn reply_line(reply: &McpHelloReply) -> String {
    // A struct of strings always serialises.
    let json = serde_json::to_string(reply).unwrap_or_default();
    format!("{json}\n")
}

/// Binds `mcp.sock` in `data_dir` with mode 0600, replacing a stale one.
pub fn bind_socket(data_dir: &Path) -> std::io::Result<tokio::net::UnixListener> {
    let path = data_dir.join(SOCKET_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = tokio::net::UnixListener::bind(&path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_the_token_required() {
        let mut h = HeaderMap::new();
        for (value, expected) in [
            ("Bearer abc", Some("abc")),
            ("bearer  abc ", Some("abc")),
            ("BEARER abc", Some("abc")),
            ("Basic abc", None),
            ("Bearer", None),
            ("Bearer ", None),
        ] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            assert_eq!(bearer(&h), expected, "{value:?}");
        }
    }

    #[test]
    fn form_fields_are_url_decoded() {
        for (body, expected) in [
            ("token=abc", Some("abc")),
            ("a=1&token=ab%2Bc+d%0A&token=second", Some("ab+c d\n")),
            ("token=", Some("")),
            ("token", Some("")),
            ("token=%zz%4", Some("%zz%4")),
            ("tok%65n=x", Some("x")),
            ("other=x", None),
            ("", None),
        ] {
            assert_eq!(
                form_field(body.as_bytes(), "token").as_deref(),
                expected,
                "{body}"
            );
        }
    }

    #[test]
    fn hosts_must_be_loopback_names() {
        for ok in [
            "localhost",
            "localhost:7788",
            "127.0.0.1:1",
            "[::1]:80",
            "LOCALHOST",
        ] {
            assert!(host_allowed(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example.com",
            "127.0.0.2",
            "localhost.evil.com:80",
            "[::2]:1",
            "[::1]:7788 'unsafe-inline'",
            "[::1]x",
            "localhost:",
            "localhost:80:80",
            "127.0.0.1:80;script-src *",
        ] {
            assert!(!host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn origins_are_loopback_or_configured() {
        let extra = vec![
            "https://app.example:*".to_owned(),
            "http://x.test:8080".to_owned(),
        ];
        for ok in [
            "http://localhost",
            "http://localhost:3000",
            "http://127.0.0.1:9",
            "http://[::1]:5",
            "https://app.example:443",
            "http://x.test:8080",
        ] {
            assert!(origin_allowed(ok, &extra), "{ok}");
        }
        for bad in [
            "http://evil.example.com",
            "https://localhost.evil.com",
            "http://localhost:80x",
            "http://x.test:8081",
            "null",
            "http://127.0.0.1.evil:80",
            "file://",
        ] {
            assert!(!origin_allowed(bad, &extra), "{bad}");
        }
    }
}
