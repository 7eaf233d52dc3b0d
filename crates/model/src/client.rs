//! [`ModelClient`]: one chat-completion call, with its attempts, retries and answer parsing.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use openphone_clock::{Clock, SystemClock};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use serde::Serialize;
use serde_json::Value;

use crate::answer::{Accumulator, Step, describe_error_object};
use crate::config::ModelConfig;
use crate::error::{ModelError, excerpt};
use crate::retry::{
    apply_jitter, backoff, is_retryable_status, parse_retry_after, parse_retry_after_ms,
    random_unit,
};
use crate::sse::SseParser;
use crate::types::{ChatRequest, Completion, Message, StreamEvent, ToolChoice, ToolSpec};

/// The largest answer body read, in bytes (a stream counts all its events).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// How much of an error answer's body is read to quote from it.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// A client for one OpenAI-compatible chat-completion endpoint.
///
/// Cheap to clone (the connection pool is shared). A call is cancelled by dropping its future:
/// the connection is closed and nothing keeps running.
#[derive(Debug, Clone)]
pub struct ModelClient {
    config: ModelConfig,
    endpoint: Url,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
}

/// How one attempt failed.
enum Failure {
    /// Before any response arrived, or a retried status: another attempt may follow.
    Retry {
        error: ModelError,
        retry_after: Option<Duration>,
    },
    /// The connect itself failed (nothing listens there): retried as `Retry`, at most
    /// `connect_attempts` times.
    Refused(ModelError),
    /// Never retried.
    Fatal(ModelError),
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: &'a [Message],
    #[serde(skip_serializing_if = "<[ToolSpec]>::is_empty")]
    tools: &'a [ToolSpec],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a ToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl ModelClient {
    /// Checks the configuration and builds the client. `base_url` must be an `http` or
    /// `https` URL with a host and without credentials, query or fragment; `model` must be set.
    pub fn new(config: ModelConfig) -> Result<ModelClient, ModelError> {
        ModelClient::with_clock(config, Arc::new(SystemClock))
    }

    /// As [`ModelClient::new`], reading the wall clock (for `Retry-After` dates) from `clock`.
    pub fn with_clock(
        config: ModelConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<ModelClient, ModelError> {
        let endpoint = endpoint_url(&config)?;
        if config.model.trim().is_empty() {
            return Err(ModelError::unconfigured("no model is configured"));
        }
        if config.request_timeout.is_zero() {
            return Err(ModelError::unconfigured(
                "request_timeout must be above zero",
            ));
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.request_timeout)
            .user_agent(concat!("openphone-model/", env!("CARGO_PKG_VERSION")));
        if is_loopback(&endpoint) {
            // A proxy from the environment must not capture calls to a local model server.
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(|e| {
            ModelError::unconfigured(format!(
                "cannot build the HTTP client: {}",
                describe_transport(e, None)
            ))
        })?;
        Ok(ModelClient {
            config,
            endpoint,
            http,
            clock,
        })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The URL every call is sent to: `{base_url}/chat/completions`.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The JSON body a call with `req` sends, exactly as it goes on the wire.
    pub fn request_body(&self, req: &ChatRequest) -> Result<Value, ModelError> {
        serde_json::to_value(self.wire_request(req)?).map_err(|e| {
            ModelError::unconfigured(format!("the request cannot be encoded as JSON: {e}"))
        })
    }

    fn wire_request<'a>(&'a self, req: &'a ChatRequest) -> Result<WireRequest<'a>, ModelError> {
        if !self.config.vision && req.messages.iter().any(Message::has_images) {
            return Err(ModelError::unconfigured(format!(
                "the request has image parts but model {:?} is not configured with vision",
                excerpt(&self.config.model, None)
            )));
        }
        let stream = self.config.stream;
        Ok(WireRequest {
            model: &self.config.model,
            messages: &req.messages,
            tools: &req.tools,
            // A tool choice without tools is refused by OpenAI: send it only with tools.
            tool_choice: req.tool_choice.as_ref().filter(|_| !req.tools.is_empty()),
            max_tokens: req.max_tokens.or(self.config.max_tokens),
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
        })
    }

    /// Runs one chat completion, retrying as the [`crate::RetryPolicy`] says, and reports
    /// text and tool-call pieces (and each retry) to `on_event` as they arrive.
    ///
    /// A JSON (non-streamed) answer is reported as one text event and one event per tool
    /// call. Pieces already reported are never replayed: a stream that breaks after its first
    /// byte fails the call instead of being retried.
    pub async fn complete(
        &self,
        req: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, ModelError> {
        self.run(req, None, on_event).await
    }

    /// As [`ModelClient::complete`], but stops retrying when the next wait would end after
    /// `deadline`, returning the last attempt's error. The deadline does not cut an attempt
    /// short: to bound the whole call, drop its future (for example with
    /// `tokio::time::timeout_at`).
    pub async fn complete_until(
        &self,
        req: &ChatRequest,
        deadline: tokio::time::Instant,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, ModelError> {
        self.run(req, Some(deadline), on_event).await
    }

    async fn run(
        &self,
        req: &ChatRequest,
        deadline: Option<tokio::time::Instant>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, ModelError> {
        let body = serde_json::to_vec(&self.wire_request(req)?).map_err(|e| {
            ModelError::unconfigured(format!("the request cannot be encoded as JSON: {e}"))
        })?;
        let policy = &self.config.retry;
        let max_attempts = policy.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let (error, retry_after) = match self.attempt(body.clone(), on_event).await {
                Ok(mut completion) => {
                    completion.attempts = attempt;
                    return Ok(completion);
                }
                Err(Failure::Fatal(error)) => return Err(error.with_attempts(attempt)),
                Err(Failure::Retry { error, retry_after }) => {
                    (error.with_attempts(attempt), retry_after)
                }
                Err(Failure::Refused(error)) => {
                    let error = error.with_attempts(attempt);
                    if self
                        .config
                        .connect_attempts
                        .is_some_and(|cap| attempt >= cap.max(1))
                    {
                        return Err(error);
                    }
                    (error, None)
                }
            };
            if attempt >= max_attempts {
                return Err(error);
            }
            let mut delay = backoff(policy, attempt);
            if policy.jitter {
                delay = apply_jitter(delay, random_unit());
            }
            if let Some(asked) = retry_after {
                if asked > policy.max_retry_after {
                    return Err(error);
                }
                delay = delay.max(asked);
            }
            let wait = tokio::time::sleep(delay);
            if deadline.is_some_and(|deadline| wait.deadline() > deadline) {
                return Err(error);
            }
            on_event(StreamEvent::Retrying {
                attempt: attempt + 1,
                delay,
                reason: error.reason(),
                detail: error.detail(),
            });
            wait.await;
            attempt += 1;
        }
    }

    fn secret(&self) -> Option<&str> {
        self.config
            .api_key
            .as_ref()
            .map(|key| key.secret())
            .filter(|key| !key.is_empty())
    }

    async fn attempt(
        &self,
        body: Vec<u8>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, Failure> {
        let timeout = self.config.request_timeout;
        let mut request = self
            .http
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(
                ACCEPT,
                if self.config.stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .body(body);
        if let Some(key) = self.secret() {
            request = request.bearer_auth(key);
        }
        let response = match tokio::time::timeout(timeout, request.send()).await {
            Err(_elapsed) => {
                return Err(Failure::Retry {
                    error: ModelError::Timeout {
                        timeout,
                        attempts: 0,
                    },
                    retry_after: None,
                });
            }
            Ok(Err(error)) => {
                if error.is_timeout() {
                    return Err(Failure::Retry {
                        error: ModelError::Timeout {
                            timeout,
                            attempts: 0,
                        },
                        retry_after: None,
                    });
                }
                let refused = error.is_connect();
                let fix = if refused {
                    ": nothing accepts connections there; start the model server (Ollama: \
                     `ollama serve`; llama.cpp: `llama-server --port N`) or fix base_url"
                } else {
                    ""
                };
                let error = ModelError::Unreachable {
                    detail: format!(
                        "cannot reach {} at {}: {}{fix}",
                        host_port(&self.endpoint),
                        shown_url(&self.endpoint),
                        describe_transport(error, self.secret())
                    ),
                    attempts: 0,
                };
                return Err(if refused {
                    Failure::Refused(error)
                } else {
                    Failure::Retry {
                        error,
                        retry_after: None,
                    }
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            return Err(self.http_failure(status, response).await);
        }
        let is_event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| {
                value
                    .trim()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            });
        let result = if is_event_stream {
            self.read_stream(response, on_event).await
        } else {
            self.read_json(response, on_event).await
        };
        result.map_err(Failure::Fatal)
    }

    async fn http_failure(&self, status: StatusCode, response: reqwest::Response) -> Failure {
        let retry_after = retry_after(response.headers(), self.clock.now_ms());
        let body = self.read_error_body(response).await;
        let excerpt = error_excerpt(status, &body, self.secret());
        let error = ModelError::Http {
            status: status.as_u16(),
            excerpt,
            attempts: 0,
        };
        if is_retryable_status(status.as_u16()) {
            Failure::Retry { error, retry_after }
        } else {
            Failure::Fatal(error)
        }
    }

    /// The start of an error answer's body, read under the request timeout (what arrived
    /// before a stall or a broken connection is kept).
    async fn read_error_body(&self, response: reqwest::Response) -> Vec<u8> {
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while body.len() < MAX_ERROR_BODY_BYTES {
            match tokio::time::timeout(self.config.request_timeout, stream.next()).await {
                Ok(Some(Ok(piece))) => body.extend_from_slice(&piece),
                Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
            }
        }
        body.truncate(MAX_ERROR_BODY_BYTES);
        body
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, ModelError> {
        let timeout = self.config.request_timeout;
        let secret = self.secret();
        let mut stream = response.bytes_stream();
        let mut parser = SseParser::new();
        let mut answer = Accumulator::new();
        let mut events = Vec::new();
        let mut received = 0usize;
        loop {
            let piece = match tokio::time::timeout(timeout, stream.next()).await {
                Err(_elapsed) => {
                    return Err(ModelError::Unreachable {
                        detail: format!(
                            "stream interrupted: nothing arrived for {}ms after {received} bytes",
                            timeout.as_millis()
                        ),
                        attempts: 0,
                    });
                }
                Ok(Some(Err(error))) => {
                    return Err(ModelError::Unreachable {
                        detail: format!(
                            "stream interrupted after {received} bytes: {}",
                            describe_transport(error, secret)
                        ),
                        attempts: 0,
                    });
                }
                Ok(None) => None,
                Ok(Some(Ok(piece))) => Some(piece),
            };
            match &piece {
                Some(piece) => {
                    received = received.saturating_add(piece.len());
                    if received > MAX_RESPONSE_BYTES {
                        return Err(ModelError::bad_response(format!(
                            "the event stream is longer than {MAX_RESPONSE_BYTES} bytes"
                        )));
                    }
                    parser.feed(piece, &mut events)
                }
                None => parser.finish(&mut events),
            }
            .map_err(|e| ModelError::bad_response(e.to_string()))?;
            for data in events.drain(..) {
                if answer.on_stream_event(&data, secret, on_event)? == Step::Done {
                    return answer.finish();
                }
            }
            if piece.is_none() {
                break;
            }
        }
        if answer.is_done() || answer.has_finish_reason() {
            // Some servers end the stream after the last choice without `[DONE]`.
            return answer.finish();
        }
        Err(ModelError::bad_response(format!(
            "stream interrupted: the event stream ended before [DONE] after {received} bytes"
        )))
    }

    async fn read_json(
        &self,
        response: reqwest::Response,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, ModelError> {
        let timeout = self.config.request_timeout;
        let secret = self.secret();
        let mut stream = response.bytes_stream();
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout(timeout, stream.next()).await {
                Err(_elapsed) => {
                    return Err(ModelError::Timeout {
                        timeout,
                        attempts: 0,
                    });
                }
                Ok(Some(Err(error))) => {
                    return Err(ModelError::Unreachable {
                        detail: format!(
                            "answer interrupted after {} bytes: {}",
                            body.len(),
                            describe_transport(error, secret)
                        ),
                        attempts: 0,
                    });
                }
                Ok(Some(Ok(piece))) => {
                    if body.len() + piece.len() > MAX_RESPONSE_BYTES {
                        return Err(ModelError::bad_response(format!(
                            "the answer is longer than {MAX_RESPONSE_BYTES} bytes"
                        )));
                    }
                    body.extend_from_slice(&piece);
                }
                Ok(None) => break,
            }
        }
        let text = String::from_utf8(body)
            .map_err(|_| ModelError::bad_response("the answer is not valid UTF-8"))?;
        let mut answer = Accumulator::new();
        if text.trim_start().starts_with("data:") {
            // An event stream sent under another content type.
            let mut parser = SseParser::new();
            let mut events = Vec::new();
            parser
                .feed(text.as_bytes(), &mut events)
                .and_then(|()| parser.finish(&mut events))
                .map_err(|e| ModelError::bad_response(e.to_string()))?;
            for data in events {
                if answer.on_stream_event(&data, secret, on_event)? == Step::Done {
                    break;
                }
            }
            if !answer.is_done() && !answer.has_finish_reason() {
                return Err(ModelError::bad_response(
                    "stream interrupted: the event stream ended before [DONE]",
                ));
            }
        } else {
            answer.on_json_body(&text, secret, on_event)?;
        }
        answer.finish()
    }
}

/// `{base_url}/chat/completions`, after checking `base_url`.
fn endpoint_url(config: &ModelConfig) -> Result<Url, ModelError> {
    let base = config.base_url.trim();
    if base.is_empty() {
        return Err(ModelError::unconfigured("no base_url is configured"));
    }
    let shown = excerpt(base, None);
    let url = Url::parse(base)
        .map_err(|e| ModelError::unconfigured(format!("base_url {shown:?} is not a URL: {e}")))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(ModelError::unconfigured(format!(
                "base_url {shown:?} uses the scheme {other:?}; only http and https are supported"
            )));
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ModelError::unconfigured(format!(
            "base_url {shown:?} has no host"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ModelError::unconfigured(
            "base_url must not carry credentials: set api_key instead",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ModelError::unconfigured(format!(
            "base_url {shown:?} must not have a query or fragment"
        )));
    }
    // The outbound rule of `runtime-protocol.md` §16.1: what the model is sent (phone content,
    // the API key) crosses the network encrypted, unless the server is on this machine or a
    // private network written as a literal address.
    if let Err(e) = openphone_protocol::check_outbound_url(base) {
        return Err(ModelError::unconfigured(format!(
            "base_url {shown:?}: {}",
            match e {
                openphone_protocol::TransportError::InsecureHost(host) => format!(
                    "plain http is only allowed to loopback or private addresses written as                      numbers (this is {host:?}); use https://"
                ),
                other => other.to_string(),
            }
        )));
    }
    let joined = format!("{}/chat/completions", base.trim_end_matches('/'));
    Url::parse(&joined).map_err(|e| {
        ModelError::unconfigured(format!("base_url {shown:?} gives no valid endpoint: {e}"))
    })
}

fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

/// The URL as it can be shown: scheme, host, port and path (no user, password or query).
fn shown_url(url: &Url) -> String {
    format!("{}://{}{}", url.scheme(), host_port(url), url.path())
}

fn host_port(url: &Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => "the model endpoint".to_owned(),
    }
}

/// A transport error as one line: reqwest's message without the URL, then its causes.
fn describe_transport(error: reqwest::Error, secret: Option<&str>) -> String {
    let error = error.without_url();
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        source = cause.source();
    }
    excerpt(&parts.join(": "), secret)
}

/// The wait the provider asks for: `retry-after-ms` (OpenAI), else `Retry-After`.
fn retry_after(headers: &HeaderMap, now_ms: i64) -> Option<Duration> {
    let text = |name| headers.get(name).and_then(|value| value.to_str().ok());
    text("retry-after-ms")
        .and_then(parse_retry_after_ms)
        .or_else(|| text(RETRY_AFTER.as_str()).and_then(|value| parse_retry_after(value, now_ms)))
}

/// What an error answer says: its `error` object's message, else the start of its body,
/// else the status's reason phrase.
fn error_excerpt(status: StatusCode, body: &[u8], secret: Option<&str>) -> String {
    let text = String::from_utf8_lossy(body);
    if let Ok(value) = serde_json::from_str::<Value>(&text)
        && let Some(error) = value.get("error").filter(|error| !error.is_null())
    {
        return describe_error_object(error, secret);
    }
    let shown = excerpt(&text, secret);
    if shown.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no reason given")
            .to_owned()
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ApiKey;

    fn config(base_url: &str) -> ModelConfig {
        ModelConfig::new(base_url, "m")
    }

    #[test]
    fn base_urls_are_checked() {
        let client = ModelClient::new(config("http://127.0.0.1:11434/v1/")).unwrap();
        assert_eq!(
            client.endpoint(),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        let client = ModelClient::new(config("https://api.example.com/v1")).unwrap();
        assert_eq!(
            client.endpoint(),
            "https://api.example.com/v1/chat/completions"
        );

        for (url, needle) in [
            ("", "no base_url"),
            ("ftp://host/v1", "only http and https"),
            ("file:///etc/passwd", "only http and https"),
            ("not a url", "not a URL"),
            ("http://user:pw@host/v1", "credentials"),
            ("http://host/v1?x=1", "query"),
            ("http://api.example.com/v1", "plain http is only allowed"),
            ("http://ollama.lan:11434/v1", "use https://"),
            ("http://8.8.8.8/v1", "plain http"),
        ] {
            let error = ModelClient::new(config(url)).unwrap_err();
            assert_eq!(error.reason(), "model_unconfigured", "{url}");
            assert!(error.to_string().contains(needle), "{url}: {error}");
            assert!(!error.to_string().contains("pw"), "{error}");
        }
        for private in [
            "http://127.0.0.1:11434/v1",
            "http://localhost:8080/v1",
            "http://192.168.1.20:11434/v1",
            "http://10.0.0.7/v1",
        ] {
            assert!(ModelClient::new(config(private)).is_ok(), "{private}");
        }
        let error = ModelClient::new(ModelConfig::new("http://127.0.0.1/v1", " ")).unwrap_err();
        assert!(error.to_string().contains("no model"));
    }

    #[test]
    fn error_excerpts_prefer_the_error_message() {
        let secret = Some("sk-1");
        assert_eq!(
            error_excerpt(
                StatusCode::UNAUTHORIZED,
                br#"{"error":{"message":"Incorrect API key sk-1","type":"invalid_request_error"}}"#,
                secret
            ),
            "Incorrect API key *** (type invalid_request_error)"
        );
        assert_eq!(
            error_excerpt(StatusCode::BAD_GATEWAY, b"upstream\nfailed", secret),
            "upstream\\nfailed"
        );
        assert_eq!(
            error_excerpt(StatusCode::SERVICE_UNAVAILABLE, b"", secret),
            "Service Unavailable"
        );
    }

    #[test]
    fn retry_after_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers, 0), None);
        headers.insert(RETRY_AFTER, "3".parse().unwrap());
        assert_eq!(retry_after(&headers, 0), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&headers, 0), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn the_key_is_never_in_the_body() {
        let client = ModelClient::new(ModelConfig {
            api_key: Some(ApiKey::new("sk-secret")),
            ..config("http://127.0.0.1:1/v1")
        })
        .unwrap();
        let body = client.request_body(&ChatRequest::default()).unwrap();
        assert!(!body.to_string().contains("sk-secret"));
    }
}
