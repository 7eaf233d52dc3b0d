//! What the client needs to know about one model endpoint.

use std::fmt;
use std::time::Duration;

/// The secret sent to the provider as `Authorization: Bearer <key>`.
///
/// It never reaches a log line or an error message: [`fmt::Debug`] and [`fmt::Display`] both
/// print `ApiKey(***)`, and error excerpts quoted from a provider have the key masked.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// Whether the key is the empty string (an empty key is not sent).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The secret itself, for the `Authorization` header only.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// How a call is retried (`agent-jobs.md` §7.4).
///
/// HTTP 429 and 500–599, and connection failures and timeouts before any response byte, are
/// retried; every other status fails at once. The wait before attempt *k + 1* is
/// `min(max_delay, base_delay × 2^(k−1))`, scaled by a random factor in `[0.5, 1.5)` when
/// `jitter` is on, and lengthened to the provider's `Retry-After` when that asks for more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per call, the first one included (at least 1 is always made). Default 5.
    pub max_attempts: u32,
    /// The wait before the second attempt, doubled for each later one. Default 1 s.
    pub base_delay: Duration,
    /// The cap on the computed wait (before jitter). Default 60 s.
    pub max_delay: Duration,
    /// Spread each computed wait over ±50 %. Default on; tests turn it off.
    pub jitter: bool,
    /// The longest `Retry-After` the client is willing to wait: a provider asking for more
    /// ends the retries and the call fails with that answer's error. Default 300 s.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            jitter: true,
            max_retry_after: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// A policy that makes exactly one attempt.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }
}

/// One OpenAI-compatible chat-completion endpoint and how to call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// The API root, for example `http://127.0.0.1:11434/v1` (Ollama) or
    /// `https://api.openai.com/v1`; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model name sent in every request.
    pub model: String,
    /// The bearer key, if the provider needs one.
    pub api_key: Option<ApiKey>,
    /// Whether the model accepts image parts; a request with images is refused otherwise.
    pub vision: bool,
    /// Ask for a streamed answer (server-sent events). Default true.
    pub stream: bool,
    /// The longest the client waits with nothing arriving: for the response head, and then
    /// between two pieces of the body. Default 120 s.
    pub request_timeout: Duration,
    /// The default `max_tokens` of a request that sets none.
    pub max_tokens: Option<u32>,
    /// How failed attempts are retried.
    pub retry: RetryPolicy,
    /// At most this many attempts while nothing accepts connections at the URL (the connect
    /// itself fails: the server is not running); `None`: as `retry` says. The interactive loop
    /// sets a small cap so `ask` says "start the model server" within a second or two instead
    /// of after the whole backoff (issue 31).
    pub connect_attempts: Option<u32>,
}

impl ModelConfig {
    /// A configuration with the defaults: streaming, no key, no vision, 120 s timeout.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> ModelConfig {
        ModelConfig {
            base_url: base_url.into(),
            model: model.into(),
            ..ModelConfig::default()
        }
    }
}

impl Default for ModelConfig {
    /// Empty `base_url` and `model`: [`crate::ModelClient::new`] refuses it as
    /// `model_unconfigured` until both are set.
    fn default() -> Self {
        ModelConfig {
            base_url: String::new(),
            model: String::new(),
            api_key: None,
            vision: false,
            stream: true,
            request_timeout: Duration::from_secs(120),
            max_tokens: None,
            retry: RetryPolicy::default(),
            connect_attempts: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_never_prints_itself() {
        let key = ApiKey::new("sk-very-secret");
        assert_eq!(format!("{key}"), "ApiKey(***)");
        assert_eq!(format!("{key:?}"), "ApiKey(***)");
        let config = ModelConfig {
            api_key: Some(key),
            ..ModelConfig::new("http://127.0.0.1:1/v1", "m")
        };
        assert!(!format!("{config:?}").contains("very-secret"));
    }

    #[test]
    fn defaults_follow_the_project_rules() {
        let config = ModelConfig::default();
        assert!(config.stream);
        assert_eq!(config.request_timeout, Duration::from_secs(120));
        let retry = RetryPolicy::default();
        assert_eq!(retry.max_attempts, 5);
        assert_eq!(retry.base_delay, Duration::from_secs(1));
        assert_eq!(retry.max_delay, Duration::from_secs(60));
        assert!(retry.jitter);
    }
}
