//! The transports (`mcp.md` §3): newline-delimited JSON-RPC over a byte stream (the daemon's
//! local socket behind `openphone mcp serve`, or stdio itself for the front end's fallback),
//! and Streamable HTTP as a tower service the daemon mounts at `/mcp`.
//!
//! HTTP security (Host, Origin, bearer token, body size, rate) is the daemon's layer in front
//! of this service; the service repeats the Host, Origin and body-size checks as a second line.
//!
//! Both transports read each message's raw text before rmcp parses it, to flag a `tools/call`
//! holding a key twice (`strict.rs`): a stream through a line pump, an HTTP request by
//! buffering its body (at most [`MAX_HTTP_BODY_BYTES`]) in [`McpHttpService`].

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::Body;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::ServiceExt;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncWrite};
pub use tokio_util::sync::CancellationToken;

use crate::server::{McpBackend, McpPrincipal, PhoneMcp};
use crate::sessions::McpSessions;
use crate::strict::{flagged, pump};

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
    // rmcp reads the pumped lines: each one checked for a key given twice first.
    let (pumped, read_side) = tokio::io::duplex(64 * 1024);
    let pumping = tokio::spawn(pump(reader, pumped));
    serve_handler(handler, read_side, writer, ct).await;
    pumping.abort();
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
/// handshake-era clients only (bounded: [`McpSessions`]), loopback `Host` and `Origin` checks,
/// a 1 MiB body cap, SSE keep-alive every 15 s, a `tools/call` holding a key twice flagged.
/// The principal of each request is an `Arc<McpPrincipal>` the daemon's auth layer put into
/// the request's extensions.
pub fn http_service(backend: Arc<McpBackend>, options: HttpOptions) -> McpHttpService {
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
    McpHttpService {
        inner: StreamableHttpService::new(
            move || Ok(PhoneMcp::new(Arc::clone(&backend), None)),
            Arc::new(McpSessions::default()),
            config,
        ),
    }
}

/// The response of [`McpHttpService`].
pub type HttpResponse = http::Response<BoxBody<Bytes, Infallible>>;

/// rmcp's Streamable HTTP service behind a reader of the whole body, so a `tools/call` holding
/// a key twice can be flagged before rmcp parses it (`strict.rs`).
#[derive(Clone)]
pub struct McpHttpService {
    inner: StreamableHttpService<PhoneMcp, McpSessions>,
}

impl std::fmt::Debug for McpHttpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttpService").finish_non_exhaustive()
    }
}

impl<B> tower_service::Service<http::Request<B>> for McpHttpService
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Display,
{
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            let body = match read_body(body, MAX_HTTP_BODY_BYTES).await {
                Ok(body) => body,
                Err(refusal) => return Ok(refusal),
            };
            let body = match std::str::from_utf8(&body).ok().and_then(flagged) {
                Some(text) => {
                    parts.headers.insert(
                        http::header::CONTENT_LENGTH,
                        http::HeaderValue::from(text.len()),
                    );
                    Bytes::from(text)
                }
                None => body,
            };
            Ok(inner
                .handle(http::Request::from_parts(parts, Full::new(body)))
                .await)
        })
    }
}

/// The whole body, or the response refusing it: 413 beyond `limit` bytes, 400 when it cannot
/// be read.
async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, HttpResponse>
where
    B: Body,
    B::Error: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut collected = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            plain(
                http::StatusCode::BAD_REQUEST,
                format!("Bad Request: the body could not be read: {e}"),
            )
        })?;
        if let Ok(mut data) = frame.into_data() {
            use bytes::Buf;
            if data.remaining() > limit.saturating_sub(collected.len()) {
                return Err(plain(
                    http::StatusCode::PAYLOAD_TOO_LARGE,
                    format!("Payload Too Large: request body exceeds {limit} bytes"),
                ));
            }
            while data.has_remaining() {
                let chunk = data.chunk();
                collected.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
    }
    Ok(collected.freeze())
}

fn plain(status: http::StatusCode, text: String) -> HttpResponse {
    let mut response = http::Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
