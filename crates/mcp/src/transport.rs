//! The transports (`mcp.md` §3): newline-delimited JSON-RPC over a byte stream (the daemon's
//! local socket behind `openphone mcp serve`, or stdio itself for the front end's fallback),
//! and Streamable HTTP as a tower service the daemon mounts at `/mcp`.
//!
//! HTTP security (Host, Origin, bearer token, body size, rate) is the daemon's layer in front
//! of this service; the service repeats the Host, Origin and body-size checks as a second line.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncWrite};
pub use tokio_util::sync::CancellationToken;

use crate::server::{McpBackend, McpPrincipal, PhoneMcp};

/// Largest accepted HTTP request body (`mcp.md` §10: 1 MiB).
pub const MAX_HTTP_BODY_BYTES: usize = 1024 * 1024;

/// Serves one stream connection (stdio framing) for `principal` until the peer closes it or
/// `ct` is cancelled.
pub async fn serve_stream<R, W>(
    backend: Arc<McpBackend>,
    principal: Arc<McpPrincipal>,
    reader: R,
    writer: W,
    ct: CancellationToken,
) where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let handler = PhoneMcp::new(backend, Some(principal));
    serve_handler(handler, reader, writer, ct).await;
}

/// Serves the front end's fallback on a stream: the manifest's tools are listed and every call
/// answers `daemon_unavailable` with `reason` (`mcp.md` §1). Returns when the client closes.
pub async fn serve_unavailable<R, W>(reason: String, reader: R, writer: W)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let table = match openphone_protocol::Registry::embedded() {
        Ok(registry) => crate::ToolTable::new(registry).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match table {
        Ok(table) => {
            let handler = PhoneMcp::unavailable(table, reason);
            serve_handler(handler, reader, writer, CancellationToken::new()).await;
        }
        Err(e) => tracing::error!(error = %e, "the bundled manifest has no MCP tool table"),
    }
}

async fn serve_handler<R, W>(handler: PhoneMcp, reader: R, writer: W, ct: CancellationToken)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    match handler.serve_with_ct((reader, writer), ct).await {
        Ok(running) => {
            if let Err(e) = running.waiting().await {
                tracing::warn!(error = %e, "mcp connection task failed");
            }
        }
        Err(e) => tracing::debug!(error = %e, "mcp connection ended before it started"),
    }
}

/// How the daemon's `/mcp` service is set up.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Extra `Origin`s accepted besides the loopback ones (`[mcp.http] extra_allowed_origins`).
    pub extra_allowed_origins: Vec<String>,
    /// Cancelled when the daemon stops: every session ends.
    pub shutdown: CancellationToken,
}

/// The loopback origins every `/mcp` accepts (any port).
pub const LOOPBACK_ORIGINS: [&str; 3] =
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// The Streamable HTTP service for `/mcp`: JSON responses when nothing streams, sessions for
/// handshake-era clients only, loopback `Host` and `Origin` checks, a 1 MiB body cap, SSE
/// keep-alive every 15 s. The principal of each request is an `Arc<McpPrincipal>` the daemon's
/// auth layer put into the request's extensions.
pub fn http_service(
    backend: Arc<McpBackend>,
    options: HttpOptions,
) -> StreamableHttpService<PhoneMcp, LocalSessionManager> {
    let origins: Vec<String> = LOOPBACK_ORIGINS
        .iter()
        .map(|o| (*o).to_owned())
        .chain(options.extra_allowed_origins)
        .collect();
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_legacy_session_mode(true)
        .with_allowed_hosts(["localhost", "127.0.0.1", "::1"])
        .with_allowed_origins(origins)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_max_request_body_bytes(MAX_HTTP_BODY_BYTES)
        .with_cancellation_token(options.shutdown);
    StreamableHttpService::new(
        move || Ok(PhoneMcp::new(Arc::clone(&backend), None)),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
