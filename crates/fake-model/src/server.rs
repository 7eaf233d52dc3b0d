//! The HTTP server behind [`FakeModel`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::script::{Script, StreamMode, error_body};

/// The model name the fake lists and answers as (when a request names none).
pub const MODEL_NAME: &str = "fake-model";

/// The largest request body accepted (screenshots travel inline as base64).
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// How long [`FakeModel::shutdown`] waits for open connections before dropping them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The body as JSON (a JSON string holding the raw text when it was not JSON).
    pub body: Value,
    /// The headers, names in lower case, values as text (lossy).
    pub headers: Vec<(String, String)>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

struct Shared {
    queue: Mutex<VecDeque<Script>>,
    fallback: Mutex<Script>,
    recorded: Mutex<Vec<RecordedRequest>>,
    next_call: AtomicU64,
    /// Number tool calls per response (`call_0` in every response), as many models do.
    calls_per_response: std::sync::atomic::AtomicBool,
    next_completion: AtomicU64,
    stop: watch::Receiver<bool>,
}

/// Locks a mutex, taking the data of a poisoned one (a panicking test thread must not hide
/// what the fake recorded).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// Resolves when the fake shuts down.
    async fn stopped(&self) {
        let mut stop = self.stop.clone();
        // An error means the sender is gone: the fake is shutting down too.
        let _ = stop.wait_for(|stopped| *stopped).await;
    }
}

/// The default fallback: a 500 that says no reply was scripted.
fn no_scripted_reply() -> Script {
    Script::Status {
        code: 500,
        retry_after: None,
        body: error_body("fake model: no scripted reply", "fake_error"),
    }
}

/// A running fake provider. Dropping it stops the server (without waiting).
#[derive(Debug)]
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("queued", &lock(&self.queue).len())
            .field("recorded", &lock(&self.recorded).len())
            .finish_non_exhaustive()
    }
}

impl FakeModel {
    /// Starts a fake on `127.0.0.1` at a free port.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound: a test cannot go on without its fake. Use
    /// [`FakeModel::start_on`] to handle that error.
    #[allow(clippy::expect_used)] // reason: test-support constructor, see "Panics"
    pub async fn start() -> FakeModel {
        FakeModel::start_on(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("the fake model binds a loopback port")
    }

    /// Starts a fake on `addr` (port 0 picks a free one).
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<FakeModel> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(no_scripted_reply()),
            recorded: Mutex::new(Vec::new()),
            next_call: AtomicU64::new(1),
            calls_per_response: std::sync::atomic::AtomicBool::new(false),
            next_completion: AtomicU64::new(1),
            stop: stop_rx,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(Arc::clone(&shared));
        let graceful = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            let server = axum::serve(listener, app)
                .with_graceful_shutdown(async move { graceful.stopped().await });
            // A failing accept loop ends the fake; its tests then see connection errors.
            let _ = server.await;
        });
        Ok(FakeModel {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    /// The API root to configure a client with: `http://127.0.0.1:<port>/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The address the fake listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues the answer to a later request (answers are used in the order pushed).
    pub fn push(&self, script: Script) {
        lock(&self.shared.queue).push_back(script);
    }

    /// From now on, numbers tool-call ids per response (`call_0`, `call_1`, … restarting in
    /// every response), as many real models do, instead of across the whole run.
    pub fn number_calls_per_response(&self) {
        self.shared
            .calls_per_response
            .store(true, Ordering::Relaxed);
    }

    /// Sets the answer used whenever the queue is empty.
    pub fn set_fallback(&self, script: Script) {
        *lock(&self.shared.fallback) = script;
    }

    /// How many queued answers have not been used yet.
    pub fn pending(&self) -> usize {
        lock(&self.shared.queue).len()
    }

    /// Every chat-completion request body received so far, oldest first.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared.recorded)
            .iter()
            .map(|request| request.body.clone())
            .collect()
    }

    /// Every chat-completion request received so far, with its headers.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.recorded).clone()
    }

    /// Stops the server: stalled answers end, open connections get a short grace period.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn models() -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "openphone"}]
    }))
    .into_response()
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let parsed = serde_json::from_slice::<Value>(&body);
    let recorded_body = match &parsed {
        Ok(value) => value.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
    };
    lock(&shared.recorded).push(RecordedRequest {
        body: recorded_body,
        headers,
    });
    let request = match parsed {
        Ok(value) if value.is_object() => value,
        Ok(_) | Err(_) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                error_body(
                    "fake model: the request body is not a JSON object",
                    "invalid_request_error",
                ),
            );
        }
    };
    let script = lock(&shared.queue)
        .pop_front()
        .unwrap_or_else(|| lock(&shared.fallback).clone());
    answer(shared, script, request).await
}

fn answer(
    shared: Arc<Shared>,
    script: Script,
    request: Value,
) -> Pin<Box<dyn Future<Output = Response> + Send>> {
    Box::pin(async move {
        match script {
            Script::Reply {
                content,
                tool_calls,
                stream_mode,
                chunk,
            } => {
                let reply = Reply::new(&shared, &request, content, tool_calls, chunk);
                let stream = match stream_mode {
                    StreamMode::Auto => request.get("stream") == Some(&Value::Bool(true)),
                    StreamMode::Stream => true,
                    StreamMode::Json => false,
                };
                if stream {
                    let include_usage = request
                        .pointer("/stream_options/include_usage")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    sse_response(reply.events(include_usage))
                } else {
                    json_response(StatusCode::OK, reply.json().to_string())
                }
            }
            Script::Status {
                code,
                retry_after,
                body,
            } => status_response(code, retry_after.as_deref(), body),
            Script::Hang => {
                shared.stopped().await;
                status_response(
                    503,
                    None,
                    error_body("fake model: shutting down", "fake_error"),
                )
            }
            Script::HangAfterFirstChunk => {
                let reply = Reply::new(&shared, &request, Some("partial".into()), vec![], 0);
                let first = reply.events(false).into_iter().take(1);
                let stall = futures_util::stream::once(async move {
                    shared.stopped().await;
                    // The stream ends without `[DONE]` when the fake shuts down.
                    Bytes::new()
                });
                let stream = futures_util::stream::iter(first)
                    .chain(stall)
                    .map(Ok::<Bytes, Infallible>);
                event_stream_response(Body::from_stream(stream))
            }
            Script::Raw { content_type, body } => {
                let mut response = (StatusCode::OK, body).into_response();
                match HeaderValue::from_str(&content_type) {
                    Ok(value) => {
                        response.headers_mut().insert(header::CONTENT_TYPE, value);
                    }
                    Err(_) => {
                        return status_response(
                            500,
                            None,
                            error_body(
                                "fake model: the scripted content type is not a header value",
                                "fake_error",
                            ),
                        );
                    }
                }
                response
            }
            Script::Delay(delay, then) => {
                tokio::select! {
                    () = tokio::time::sleep(delay) => answer(shared, *then, request).await,
                    () = shared.stopped() => status_response(
                        503, None, error_body("fake model: shutting down", "fake_error")),
                }
            }
        }
    })
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn status_response(code: u16, retry_after: Option<&str>, body: String) -> Response {
    let Ok(status) = StatusCode::from_u16(code) else {
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            error_body(
                &format!("fake model: {code} is not an HTTP status"),
                "fake_error",
            ),
        );
    };
    let is_json = serde_json::from_str::<Value>(&body).is_ok();
    let mut response = (status, body).into_response();
    let content_type = if is_json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(value) = retry_after.and_then(|value| HeaderValue::from_str(value).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn event_stream_response(body: Body) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Each event as its own piece of the body, so the client sees them arrive separately.
fn sse_response(events: Vec<Bytes>) -> Response {
    let stream = futures_util::stream::iter(events.into_iter().map(Ok::<Bytes, Infallible>));
    event_stream_response(Body::from_stream(stream))
}

/// One scripted answer, ready to be sent either way.
struct Reply {
    id: String,
    model: String,
    content: Option<String>,
    /// (id, name, arguments) of each call.
    calls: Vec<(String, String, String)>,
    chunk: usize,
    prompt_tokens: u64,
}

impl Reply {
    fn new(
        shared: &Shared,
        request: &Value,
        content: Option<String>,
        tool_calls: Vec<(String, String)>,
        chunk: usize,
    ) -> Reply {
        let per_response = shared.calls_per_response.load(Ordering::Relaxed);
        let calls = tool_calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| {
                let n = if per_response {
                    i as u64
                } else {
                    shared.next_call.fetch_add(1, Ordering::Relaxed)
                };
                (format!("call_{n}"), name, arguments)
            })
            .collect();
        let n = shared.next_completion.fetch_add(1, Ordering::Relaxed);
        let prompt_chars = request
            .get("messages")
            .map_or(0, |messages| messages.to_string().chars().count());
        Reply {
            id: format!("chatcmpl-fake-{n}"),
            model: request
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(MODEL_NAME)
                .to_owned(),
            content,
            calls,
            chunk,
            prompt_tokens: tokens(prompt_chars),
        }
    }

    fn finish_reason(&self) -> &'static str {
        if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }

    fn usage(&self) -> Value {
        let output_chars = self
            .content
            .as_deref()
            .map_or(0, |text| text.chars().count())
            + self
                .calls
                .iter()
                .map(|(_, name, arguments)| name.chars().count() + arguments.chars().count())
                .sum::<usize>();
        let completion = tokens(output_chars);
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        })
    }

    /// The non-streamed answer.
    fn json(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if !self.calls.is_empty() {
            message["tool_calls"] = self
                .calls
                .iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function",
                           "function": {"name": name, "arguments": arguments}})
                })
                .collect();
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason()}],
            "usage": self.usage(),
        })
    }

    fn chunk_event(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        let chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        Bytes::from(format!("data: {chunk}\n\n"))
    }

    /// The streamed answer: a role delta, the text in pieces, each call (id and name first,
    /// then its arguments in pieces), the finish reason, the usage if asked, `[DONE]`.
    fn events(&self, include_usage: bool) -> Vec<Bytes> {
        let mut events = Vec::new();
        let first_text = self.content.as_deref().map(|text| pieces(text, self.chunk));
        let mut text_pieces = first_text.unwrap_or_default().into_iter();
        let opening = text_pieces.next().unwrap_or_default();
        events.push(self.chunk_event(json!({"role": "assistant", "content": opening}), None));
        for piece in text_pieces {
            events.push(self.chunk_event(json!({"content": piece}), None));
        }
        for (index, (id, name, arguments)) in self.calls.iter().enumerate() {
            events.push(self.chunk_event(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            for piece in pieces(arguments, self.chunk) {
                events.push(self.chunk_event(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        events.push(self.chunk_event(json!({}), Some(self.finish_reason())));
        if include_usage {
            let usage = json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [],
                "usage": self.usage(),
            });
            events.push(Bytes::from(format!("data: {usage}\n\n")));
        }
        events.push(Bytes::from_static(b"data: [DONE]\n\n"));
        events
    }
}

/// A rough token count: one per four characters, at least one for non-empty text.
fn tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

/// `text` cut into pieces of `size` characters (one piece when `size` is 0).
fn pieces(text: &str, size: usize) -> Vec<String> {
    if size == 0 || text.is_empty() {
        return if text.is_empty() {
            Vec::new()
        } else {
            vec![text.to_owned()]
        };
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size)
        .map(|piece| piece.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cut_on_characters() {
        assert_eq!(pieces("héllo", 2), vec!["hé", "ll", "o"]);
        assert_eq!(pieces("abc", 0), vec!["abc"]);
        assert!(pieces("", 3).is_empty());
    }
}
