//! The transports (`mcp.md` §3): newline-delimited JSON-RPC over a byte stream (the daemon's
//! local socket behind `openphone mcp serve`, or stdio itself for the front end's fallback),
//! and Streamable HTTP as a tower service the daemon mounts at `/mcp`.
//!
//! HTTP security (Host, Origin, bearer token, body size, rate) is the daemon's layer in front
//! of this service; the service repeats the Host, Origin and body-size checks as a second line.
//!
//! Both transports read each message's raw text before rmcp parses it, to flag a `tools/call`
//! holding a key twice (`strict.rs`): a stream through a line pump, an HTTP request by
//! buffering its body (at most [`MAX_HTTP_BODY_BYTES`]) in [`McpHttpService`]. A plain
//! `tools/call` over HTTP is then answered on the direct path (`direct.rs`); everything else
//! goes to rmcp.
//!
//! A POST answered as SSE (the handshake era) has its opening held back: rmcp starts such a
//! stream with a priming event before the handler has run, so unheld, the headers and priming
//! event leave in one write and the answer in another. The opening waits (at most `SSE_HOLD`,
//! 1 s) for what follows it; an answer that ends the stream leaves with it as one buffer with a
//! `Content-Length`, and a call that streams on (progress while it waits for the user) sends
//! its first event with the opening and the rest as they come.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::ServiceExt;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncWrite};
pub use tokio_util::sync::CancellationToken;

use crate::direct::Direct;
use crate::server::{McpBackend, McpPrincipal, PhoneMcp};
use crate::sessions::{MAX_HTTP_SESSIONS, MAX_HTTP_SESSIONS_PER_PRINCIPAL, McpSessions};
use crate::strict::{flagged, pump};

/// Largest accepted HTTP request body (`mcp.md` §10: 1 MiB).
pub const MAX_HTTP_BODY_BYTES: usize = 1024 * 1024;

/// How long the opening of an SSE answer to a POST (headers and priming event) may wait for
/// what follows it. Only the opening waits: whatever follows leaves as soon as it arrives.
const SSE_HOLD: Duration = Duration::from_secs(1);

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
    /// Answer a plain `tools/call` on the direct path (`direct.rs`) instead of through rmcp's
    /// service. On in the daemon; off only to compare the two.
    pub direct_calls: bool,
    /// A handshake-era session is closed after this long without a message
    /// ([`HTTP_SESSION_IDLE`](crate::HTTP_SESSION_IDLE) in the daemon).
    pub session_idle: Duration,
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
        .with_cancellation_token(options.shutdown.clone());
    let sessions = Arc::new(
        McpSessions::new(
            MAX_HTTP_SESSIONS,
            MAX_HTTP_SESSIONS_PER_PRINCIPAL,
            options.session_idle,
        )
        .with_shutdown(options.shutdown.clone()),
    );
    let direct = options.direct_calls.then(|| {
        Arc::new(Direct::new(
            Arc::clone(&backend),
            Arc::clone(&sessions),
            options.shutdown.clone(),
        ))
    });
    McpHttpService {
        direct,
        inner: Arc::new(StreamableHttpService::new(
            move || {
                let handler = PhoneMcp::new(Arc::clone(&backend), None);
                // The session this request may open serves its direct calls through it.
                crate::sessions::offer_handler(&handler);
                Ok(handler)
            },
            sessions,
            config,
        )),
    }
}

/// The response of [`McpHttpService`].
pub type HttpResponse = http::Response<BoxBody<Bytes, Infallible>>;

/// rmcp's Streamable HTTP service behind a reader of the whole body, so a `tools/call` holding
/// a key twice can be flagged before rmcp parses it (`strict.rs`).
#[derive(Clone)]
pub struct McpHttpService {
    /// Shared, not cloned per request: rmcp's service clones its whole configuration (the
    /// allowed hosts' and origins' strings) with itself: ~26 k instructions a request.
    inner: Arc<StreamableHttpService<PhoneMcp, McpSessions>>,
    /// The direct path for a plain 2026-07-28 `tools/call` (`direct.rs`); `None` when off.
    direct: Option<Arc<Direct>>,
}

impl McpHttpService {
    /// How many `tools/call`s this service answered on the direct path (`direct.rs`) rather
    /// than through rmcp: for tests and diagnostics.
    pub fn direct_answers(&self) -> u64 {
        self.direct.as_ref().map_or(0, |d| d.answered())
    }

    /// Of [`McpHttpService::direct_answers`], those whose result went into the answer as the
    /// phone's JSON text (`TextAnswer`), never built as a tree.
    pub fn direct_text_answers(&self) -> u64 {
        self.direct.as_ref().map_or(0, |d| d.answered_as_text())
    }
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
        let inner = Arc::clone(&self.inner);
        let direct = self.direct.clone();
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            let body = match read_body(body, MAX_HTTP_BODY_BYTES).await {
                Ok(body) => body,
                Err(refusal) => return Ok(refusal),
            };
            let post = parts.method == http::Method::POST;
            let body = match std::str::from_utf8(&body).ok().and_then(flagged) {
                None if post => {
                    if let Some(direct) = &direct
                        && let Some(answer) = direct
                            .answer(
                                &parts.headers,
                                parts.extensions.get::<Arc<McpPrincipal>>(),
                                &body,
                            )
                            .await
                    {
                        return Ok(answer);
                    }
                    body
                }
                Some(text) => {
                    parts.headers.insert(
                        http::header::CONTENT_LENGTH,
                        http::HeaderValue::from(text.len()),
                    );
                    Bytes::from(text)
                }
                None => body,
            };
            // Boxed apart: rmcp's future is large, and the plain calls' future need not carry
            // (and move) it.
            Ok(Box::pin(through_rmcp(inner, parts, body, post)).await)
        })
    }
}

/// The answer rmcp's service gives the request `parts` with `body` (an SSE answer to a POST
/// held back as [`hold`] says).
async fn through_rmcp(
    inner: Arc<StreamableHttpService<PhoneMcp, McpSessions>>,
    parts: http::request::Parts,
    body: Bytes,
    post: bool,
) -> HttpResponse {
    // A session this request opens belongs to its principal (`sessions.rs`).
    let owner = parts
        .extensions
        .get::<Arc<McpPrincipal>>()
        .map(|p| p.caller.principal.clone())
        .unwrap_or_default();
    let response = crate::sessions::creating_as(
        owner,
        inner.handle(http::Request::from_parts(parts, Full::new(body))),
    )
    .await;
    if post && is_event_stream(&response) {
        hold(response, SSE_HOLD).await
    } else {
        response
    }
}

/// Whether `response` is an SSE stream (`Content-Type: text/event-stream`).
fn is_event_stream(response: &HttpResponse) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// Holds `response`'s body back so that what rmcp opens the stream with (the priming event, no
/// message of its own) leaves together with the first JSON-RPC message. Frames are collected
/// until the body ends, or until it would wait after a message has come that is not the
/// request's answer (after the answer only the end is missing, so that is awaited), or until
/// `limit` passes. A body that ended becomes one buffer (hyper writes headers and body in one
/// go, with a `Content-Length` instead of chunks); otherwise the collected bytes are the first
/// frame and the rest streams as before, so the progress and elicitation requests of a call
/// waiting for the user leave as soon as they arrive. Dropping the future drops the body,
/// exactly as hyper dropping the response would.
async fn hold(response: HttpResponse, limit: Duration) -> HttpResponse {
    let (parts, mut body) = response.into_parts();
    let mut held = BytesMut::new();
    let mut other: Option<Frame<Bytes>> = None;
    // A JSON-RPC message has come; the request's answer has come.
    let mut message = false;
    let mut answered = false;
    let expiry = tokio::time::sleep(limit);
    let mut expiry = std::pin::pin!(expiry);
    let ended = std::future::poll_fn(|cx| {
        loop {
            match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(None) => return Poll::Ready(true),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        let carries = Carries::scan(&data);
                        message |= carries.message;
                        answered |= carries.answer;
                        held.extend_from_slice(&data);
                    }
                    Err(frame) => {
                        // Trailers: not something one buffer can carry.
                        other = Some(frame);
                        return Poll::Ready(false);
                    }
                },
                Poll::Ready(Some(Err(never))) => match never {},
                Poll::Pending => {
                    if (message && !answered) || expiry.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(false);
                    }
                    return Poll::Pending;
                }
            }
        }
    })
    .await;
    if ended {
        return http::Response::from_parts(parts, Full::new(held.freeze()).boxed());
    }
    let mut queued = std::collections::VecDeque::new();
    if !held.is_empty() {
        queued.push_back(Frame::data(held.freeze()));
    }
    queued.extend(other);
    http::Response::from_parts(parts, Held { queued, rest: body }.boxed())
}

/// What one SSE frame carries.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Carries {
    /// A JSON-RPC message (not a priming event or a keep-alive comment).
    message: bool,
    /// A JSON-RPC response (`result` or `error`): on a POST's stream, the answer to its
    /// request, after which rmcp ends the stream.
    answer: bool,
}

impl Carries {
    /// Scans the frame's `data:` lines. Only the start of each message is read: the top-level
    /// keys up to the first that tells (`result`/`error`: an answer; `method`: a request or a
    /// notification), the values before it skipped, nothing built. rmcp writes `jsonrpc` and
    /// `id` first, so an answer is told within its first few dozen bytes however large it is.
    fn scan(frame: &[u8]) -> Carries {
        let mut carries = Carries::default();
        let Ok(text) = std::str::from_utf8(frame) else {
            return carries;
        };
        for data in text.lines().filter_map(|line| line.strip_prefix("data:")) {
            if let Some(answer) = message_kind(data.trim().as_bytes()) {
                carries.message = true;
                carries.answer |= answer;
            }
        }
        carries
    }
}

/// For the text of one JSON-RPC message: `Some(true)` for a response (`result` or `error`, no
/// `method` before it), `Some(false)` for another object, `None` for anything that is not a
/// whole object (an empty priming `data:`, a cut-off line).
fn message_kind(text: &[u8]) -> Option<bool> {
    if text.first() != Some(&b'{') || text.last() != Some(&b'}') {
        return None;
    }
    let mut at = 1;
    loop {
        at = skip_space(text, at);
        match text.get(at)? {
            b'}' if at + 1 == text.len() => return Some(false),
            b'"' => {}
            _ => return None,
        }
        let end = string_end(text, at)?;
        let key = &text[at + 1..end - 1];
        at = skip_space(text, end);
        if text.get(at) != Some(&b':') {
            return None;
        }
        if key == b"method" {
            return Some(false);
        }
        if key == b"result" || key == b"error" {
            return Some(true);
        }
        at = value_end(text, skip_space(text, at + 1))?;
        at = skip_space(text, at);
        match text.get(at)? {
            b',' => at += 1,
            b'}' if at + 1 == text.len() => return Some(false),
            _ => return None,
        }
    }
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The index just past the string opening at `at` (its `"`), escapes skipped.
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        match text.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The index just past the value starting at `at`: a string, an array or object (nesting
/// counted, strings inside skipped), or a scalar.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                let byte = *text.get(i)?;
                if byte == b'"' {
                    i = string_end(text, i)?;
                    continue;
                }
                if byte == b'{' || byte == b'[' {
                    depth += 1;
                } else if byte == b'}' || byte == b']' {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                i += 1;
            }
        }
        _ => {
            let mut i = at;
            while text
                .get(i)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                i += 1;
            }
            (i > at).then_some(i)
        }
    }
}

/// A body that yields the frames collected by [`hold`], then the rest of the original body.
struct Held {
    queued: std::collections::VecDeque<Frame<Bytes>>,
    rest: BoxBody<Bytes, Infallible>,
}

impl Body for Held {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(frame) = self.queued.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.queued.is_empty() && self.rest.is_end_stream()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use futures_util::StreamExt;
    use http_body_util::StreamBody;
    use tokio::sync::mpsc;

    /// An SSE response whose frames the test sends through the returned channel.
    fn streamed() -> (mpsc::UnboundedSender<&'static str>, HttpResponse) {
        let (tx, rx) = mpsc::unbounded_channel::<&'static str>();
        let frames = tokio_stream(rx)
            .map(|text| Ok::<_, Infallible>(Frame::data(Bytes::from_static(text.as_bytes()))));
        let mut response = http::Response::new(BodyExt::boxed(StreamBody::new(frames)));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        (tx, response)
    }

    fn tokio_stream<T: Send + 'static>(
        mut rx: mpsc::UnboundedReceiver<T>,
    ) -> impl futures_util::Stream<Item = T> + Send + 'static {
        futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    async fn frames(body: BoxBody<Bytes, Infallible>) -> Vec<Bytes> {
        let mut body = std::pin::pin!(body);
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            out.push(frame.unwrap().into_data().unwrap());
        }
        out
    }

    #[tokio::test]
    async fn a_stream_ending_within_the_hold_becomes_one_buffer() {
        let (tx, response) = streamed();
        tx.send("data: \nid: 0\n\n").unwrap();
        let later = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            later.send("data: {\"id\":1}\n\n").unwrap();
        });
        drop(tx);
        // A hold far longer than the stream: it ends first.
        let held = hold(response, Duration::from_secs(60)).await;
        assert!(is_event_stream(&held));
        let body = held.into_body();
        assert_eq!(body.size_hint().exact(), Some(30));
        assert_eq!(
            frames(body).await,
            vec![Bytes::from_static(b"data: \nid: 0\n\ndata: {\"id\":1}\n\n")]
        );
    }

    #[tokio::test]
    async fn an_opening_with_nothing_after_it_leaves_at_the_limit() {
        let (tx, response) = streamed();
        tx.send("data: \n\n").unwrap();
        // The answer comes only after the hold has given up.
        let held = hold(response, Duration::from_millis(20)).await;
        let body = held.into_body();
        assert_eq!(body.size_hint().exact(), None);
        tx.send("data: answer\n\n").unwrap();
        drop(tx);
        assert_eq!(
            frames(body).await,
            vec![
                Bytes::from_static(b"data: \n\n"),
                Bytes::from_static(b"data: answer\n\n"),
            ]
        );
    }

    const PROGRESS_1: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n";
    const PROGRESS_2: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":2}}\n\n";

    #[tokio::test]
    async fn the_first_event_after_the_opening_is_not_held_back() {
        let (tx, response) = streamed();
        tx.send("data: \n\n").unwrap();
        let later = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            later.send(PROGRESS_1).unwrap();
            later.send(PROGRESS_2).unwrap();
        });
        // An hour's limit: only the progress ends the hold (the guard fails a hold that waits).
        let held = tokio::time::timeout(
            Duration::from_secs(30),
            hold(response, Duration::from_secs(3600)),
        )
        .await
        .expect("the hold waited past the first event");
        let body = held.into_body();
        assert_eq!(body.size_hint().exact(), None);
        tx.send("data: answer\n\n").unwrap();
        drop(tx);
        assert_eq!(
            frames(body).await,
            vec![
                Bytes::from(format!("data: \n\n{PROGRESS_1}{PROGRESS_2}")),
                Bytes::from_static(b"data: answer\n\n"),
            ]
        );
    }

    #[tokio::test]
    async fn an_empty_stream_becomes_an_empty_body() {
        let (tx, response) = streamed();
        drop(tx);
        let body = hold(response, Duration::from_secs(60)).await.into_body();
        assert_eq!(body.size_hint().exact(), Some(0));
        assert!(frames(body).await.is_empty());
    }

    #[tokio::test]
    async fn after_the_answer_only_the_end_is_awaited() {
        let (tx, response) = streamed();
        tx.send("data: \nid: 0/1\nretry: 3000\n\n").unwrap();
        let later = tx.clone();
        drop(tx);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            later
                .send("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n")
                .unwrap();
            // The stream ends a little after its answer (rmcp closes it in another step).
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(later);
        });
        let body = hold(response, Duration::from_secs(60)).await.into_body();
        assert_eq!(
            frames(body).await,
            vec![Bytes::from_static(
                b"data: \nid: 0/1\nretry: 3000\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
            )]
        );
    }

    #[test]
    fn answers_are_told_from_requests_and_notifications() {
        let answer = (true, true);
        let other = (true, false);
        let nothing = (false, false);
        for (frame, (message, is_answer)) in [
            (
                r#"data: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
                answer,
            ),
            (
                r#"data: {"jsonrpc":"2.0","id":"a","error":{"code":-1}}"#,
                answer,
            ),
            (
                "id: 0/3\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}",
                answer,
            ),
            (
                r#"data: {"jsonrpc":"2.0","id":0,"method":"elicitation/create"}"#,
                other,
            ),
            (
                r#"data: {"jsonrpc":"2.0","method":"notifications/progress"}"#,
                other,
            ),
            (r#"data: {}"#, other),
            (r#"data: { "id" : "a\"}" , "result" : 1 }"#, answer),
            (
                r#"data: {"x":{"a":[1,{"b":"}]"}],"c":null},"n":-1.5e3,"error":{}}"#,
                answer,
            ),
            (r#"data: {"jsonrpc":"2.0","id":1,"result":{}} x"#, nothing),
            (r#"data: {"jsonrpc":"2.0","id":1 "result":{}}"#, nothing),
            (r#"data: ["result"]"#, nothing),
            ("data: \nid: 0/0\nretry: 3000", nothing),
            (": keep-alive", nothing),
            ("data: {\"result\": ", nothing),
        ] {
            let frame = format!("{frame}\n\n");
            let expected = Carries {
                message,
                answer: is_answer,
            };
            assert_eq!(Carries::scan(frame.as_bytes()), expected, "{frame}");
        }
    }

    #[test]
    fn only_event_streams_are_held() {
        let mut response = plain(http::StatusCode::OK, "x".into());
        assert!(!is_event_stream(&response));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("Text/Event-Stream; charset=utf-8"),
        );
        assert!(is_event_stream(&response));
    }
}
