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
use openphone_mcp::{CancellationToken, LOOPBACK_ORIGINS, MAX_HTTP_BODY_BYTES, McpBackend};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::auth::Principal;
use crate::state::AppState;

/// `<data-dir>/mcp.sock`.
pub const SOCKET_FILE: &str = "mcp.sock";
/// `<data-dir>/mcp.token`: the default MCP runtime's token.
pub const MCP_TOKEN_FILE: &str = "mcp.token";
/// `<data-dir>/mcp-state.key`: the key sealing modern-era `requestState`s.
pub const STATE_KEY_FILE: &str = "mcp-state.key";
/// The key of the socket hello line.
pub const HELLO_KEY: &str = "openphone_mcp_hello";
/// Longest accepted hello line.
const MAX_HELLO_BYTES: u64 = 4096;

/// The MCP part of the shared state.
#[derive(Debug)]
pub struct McpState {
    pub backend: Arc<McpBackend>,
    /// Extra `Origin`s accepted on `/mcp`.
    pub extra_origins: Vec<String>,
    /// Cancelled at shutdown: every MCP session and socket connection ends.
    pub shutdown: CancellationToken,
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, message.to_owned()).into_response()
}

/// `host` without its port: `localhost:7788` → `localhost`, `[::1]:80` → `::1`.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

/// Whether a `Host` header names this machine's loopback.
pub fn host_allowed(host: &str) -> bool {
    matches!(
        host_name(host.trim()).to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "::1"
    )
}

/// Whether an `Origin` value is accepted: a loopback origin on any port, or a configured one
/// (exact, or with `:*` for any port).
pub fn origin_allowed(origin: &str, extra: &[String]) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    let patterns = LOOPBACK_ORIGINS
        .iter()
        .map(|s| (*s).to_owned())
        .chain(extra.iter().map(|s| s.to_ascii_lowercase()));
    for pattern in patterns {
        if pattern == origin {
            return true;
        }
        if let Some(prefix) = pattern.strip_suffix(":*") {
            if origin == prefix {
                return true;
            }
            if let Some(port) = origin
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix(':'))
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
            {
                return true;
            }
        }
    }
    false
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The `/mcp` guard: Host → Origin → token → size → rate, then the principal is attached to
/// the request for the MCP handler.
pub async fn guard(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let Some(mcp) = &state.mcp else {
        return refuse(
            StatusCode::NOT_FOUND,
            "MCP is disabled in this daemon's config",
        );
    };
    if *state.shutdown.borrow() {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(host) {
        tracing::warn!("mcp request with a foreign Host refused (403)");
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Host is not a loopback name",
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| origin_allowed(o, &mcp.extra_origins));
        if !ok {
            tracing::warn!("mcp request with a foreign Origin refused (403)");
            return refuse(StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed");
        }
    }
    let principal = bearer(headers)
        .and_then(|t| state.credentials.authenticate_any(t))
        .and_then(|p| {
            let key = p.bucket_key();
            p.mcp_principal().map(|m| (m, key))
        });
    let Some((principal, bucket)) = principal else {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: send `Authorization: Bearer <token>` with an MCP runtime token \
             (`openphone mcp token` prints the default one)",
        )
            .into_response();
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_HTTP_BODY_BYTES) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "request body over 1 MiB");
    }
    if let Err(retry_ms) = state.rate.take(&format!("mcp:{bucket}")) {
        let secs = retry_ms.div_ceil(1000).max(1);
        let mut response = refuse(StatusCode::TOO_MANY_REQUESTS, "rate limited: slow down");
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return response;
    }
    req.extensions_mut().insert(Arc::new(principal));
    next.run(req).await
}

/// `GET /confirmations/{id}`: a read-only page for the user about one pending confirmation —
/// what is asked, by whom, its state, and where to approve or deny it. It grants nothing.
pub async fn approval_page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(host) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Host is not a loopback name",
        );
    }
    let record = match state.bridge.store().get_confirmation(&id) {
        Ok(Some(r)) => r,
        Ok(None) => return refuse(StatusCode::NOT_FOUND, "no such confirmation"),
        Err(e) => {
            tracing::error!(error = %e, "reading a confirmation for its page");
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, "the store failed");
        }
    };
    let state_name = format!("{:?}", record.state).to_lowercase();
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>OpenPhone confirmation</title>\
         <meta http-equiv=\"refresh\" content=\"5\"></head><body>\
         <h1>OpenPhone confirmation</h1>\
         <p><b>{runtime}</b> asks to run <code>{tool}</code>.</p><p>{summary}</p>\
         <p>State: <b>{state_name}</b></p>\
         <p>Approve or deny it on the phone, or in a terminal:</p>\
         <pre>openphone confirmations approve {id}\nopenphone confirmations deny {id}</pre>\
         </body></html>",
        runtime = escape(&record.identity.runtime),
        tool = escape(&record.identity.tool),
        summary = escape(&record.summary),
        id = escape(&record.confirmation_id),
    );
    let mut response = Html(body).into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'"),
    );
    response
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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
        Ok(Ok(n)) if n > 0 => serde_json::from_str::<Value>(line.trim())
            .ok()
            .and_then(|v| v.get(HELLO_KEY)?.get("token")?.as_str().map(str::to_owned)),
        _ => None,
    };
    let principal = token
        .as_deref()
        .and_then(|t| state.credentials.authenticate_any(t))
        .and_then(|p| match &p {
            Principal::Runtime(_) => p.mcp_principal(),
            Principal::Operator => None,
        });
    let Some(principal) = principal else {
        let answer = json!({HELLO_KEY: "refused", "message": "the hello carries no MCP runtime token \
            (the default one is the data directory's mcp.token)"});
        let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
        return;
    };
    let answer = json!({HELLO_KEY: "ok", "runtime": principal.caller.runtime});
    if write
        .write_all(format!("{answer}\n").as_bytes())
        .await
        .is_err()
    {
        return;
    }
    tracing::info!(runtime = %principal.caller.runtime, "mcp socket connection");
    openphone_mcp::serve_stream(
        mcp.backend.clone(),
        Arc::new(principal),
        reader,
        write,
        mcp.shutdown.child_token(),
    )
    .await;
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
