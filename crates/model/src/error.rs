//! Why a model call failed, as a stable reason code and a one-line message.

use std::fmt;
use std::time::Duration;

/// The longest excerpt of a provider's text quoted in an error message, in characters.
pub const EXCERPT_CHARS: usize = 200;

/// The family of a [`ModelError`], for code that branches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelErrorKind {
    /// No usable `base_url` or `model`, or a request the configuration cannot serve.
    Unconfigured,
    /// The endpoint could not be reached, or the connection broke.
    Unreachable,
    /// The endpoint accepted the connection but did not answer in time.
    Timeout,
    /// The endpoint answered with an HTTP error status.
    Http,
    /// The answer could not be understood.
    BadResponse,
    /// The provider reported an error object.
    ProviderError,
}

impl ModelErrorKind {
    /// The stable code of the family: `model_unconfigured`, `model_unreachable`,
    /// `model_timeout`, `model_http`, `model_bad_response` or `model_provider_error`.
    pub fn code(self) -> &'static str {
        match self {
            ModelErrorKind::Unconfigured => "model_unconfigured",
            ModelErrorKind::Unreachable => "model_unreachable",
            ModelErrorKind::Timeout => "model_timeout",
            ModelErrorKind::Http => "model_http",
            ModelErrorKind::BadResponse => "model_bad_response",
            ModelErrorKind::ProviderError => "model_provider_error",
        }
    }
}

impl fmt::Display for ModelErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A failed model call. Every message is one line, quotes at most [`EXCERPT_CHARS`]
/// characters of what the provider sent (control characters escaped) and never contains the
/// API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The configuration cannot be used (`model_unconfigured`).
    #[error("model_unconfigured: {detail}")]
    Unconfigured {
        /// What is missing or wrong.
        detail: String,
    },
    /// The endpoint could not be reached, or the connection broke mid-answer
    /// (`model_unreachable`).
    #[error("model_unreachable: {detail} (after {attempts} attempt(s))")]
    Unreachable {
        /// What failed.
        detail: String,
        /// The attempts made.
        attempts: u32,
    },
    /// Nothing arrived within the request timeout (`model_timeout`).
    #[error("model_timeout: no answer within {}ms (after {attempts} attempt(s))", .timeout.as_millis())]
    Timeout {
        /// The timeout that expired.
        timeout: Duration,
        /// The attempts made.
        attempts: u32,
    },
    /// An HTTP error status (`model_http_<status>`).
    #[error("model_http_{status}: {excerpt} (after {attempts} attempt(s))")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The provider's error message, or the start of the body.
        excerpt: String,
        /// The attempts made.
        attempts: u32,
    },
    /// The answer could not be parsed (`model_bad_response`).
    #[error("model_bad_response: {detail}")]
    BadResponse {
        /// What was wrong with it.
        detail: String,
    },
    /// The provider answered with an `error` object (`model_provider_error`).
    #[error("model_provider_error: {message}")]
    Provider {
        /// The provider's message (and its code or type, when given).
        message: String,
    },
}

impl ModelError {
    /// The family of this error.
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            ModelError::Unconfigured { .. } => ModelErrorKind::Unconfigured,
            ModelError::Unreachable { .. } => ModelErrorKind::Unreachable,
            ModelError::Timeout { .. } => ModelErrorKind::Timeout,
            ModelError::Http { .. } => ModelErrorKind::Http,
            ModelError::BadResponse { .. } => ModelErrorKind::BadResponse,
            ModelError::Provider { .. } => ModelErrorKind::ProviderError,
        }
    }

    /// The reason code: the kind's code, with the status appended for HTTP errors
    /// (`model_http_401`).
    pub fn reason(&self) -> String {
        match self {
            ModelError::Http { status, .. } => format!("model_http_{status}"),
            other => other.kind().code().to_owned(),
        }
    }

    /// The HTTP status, for [`ModelError::Http`].
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The one-line message without the reason prefix.
    pub fn detail(&self) -> String {
        let full = self.to_string();
        let prefix = format!("{}: ", self.reason());
        full.strip_prefix(&prefix)
            .map_or(full.clone(), str::to_owned)
    }

    /// Records how many attempts were made, where the error carries the count.
    pub(crate) fn with_attempts(mut self, made: u32) -> ModelError {
        match &mut self {
            ModelError::Unreachable { attempts, .. }
            | ModelError::Timeout { attempts, .. }
            | ModelError::Http { attempts, .. } => *attempts = made,
            _ => {}
        }
        self
    }

    pub(crate) fn bad_response(detail: impl Into<String>) -> ModelError {
        ModelError::BadResponse {
            detail: detail.into(),
        }
    }

    pub(crate) fn unconfigured(detail: impl Into<String>) -> ModelError {
        ModelError::Unconfigured {
            detail: detail.into(),
        }
    }
}

/// Makes provider text safe for a one-line message: masks `secret` wherever it appears,
/// escapes control and invisible formatting characters, and cuts it to [`EXCERPT_CHARS`]
/// characters (marking the cut with `…`).
pub(crate) fn excerpt(text: &str, secret: Option<&str>) -> String {
    let masked;
    let text = match secret {
        Some(secret) if !secret.is_empty() && text.contains(secret) => {
            masked = text.replace(secret, "***");
            masked.as_str()
        }
        _ => text,
    };
    let text = text.trim();
    let mut out = String::new();
    let mut length = 0;
    for c in text.chars() {
        let escaped = c.is_control() || is_invisible_format(c);
        let width = if escaped {
            c.escape_default().count()
        } else {
            1
        };
        if length + width > EXCERPT_CHARS {
            out.push('…');
            break;
        }
        length += width;
        if escaped {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Bidirectional overrides, zero-width characters and the like: shown escaped so a message
/// cannot reorder or hide part of a log line.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_stable_codes() {
        let cases = [
            (ModelError::unconfigured("x"), "model_unconfigured"),
            (
                ModelError::Unreachable {
                    detail: "x".into(),
                    attempts: 1,
                },
                "model_unreachable",
            ),
            (
                ModelError::Timeout {
                    timeout: Duration::from_millis(300),
                    attempts: 5,
                },
                "model_timeout",
            ),
            (
                ModelError::Http {
                    status: 401,
                    excerpt: "no".into(),
                    attempts: 1,
                },
                "model_http_401",
            ),
            (ModelError::bad_response("x"), "model_bad_response"),
            (
                ModelError::Provider {
                    message: "x".into(),
                },
                "model_provider_error",
            ),
        ];
        for (error, reason) in cases {
            assert_eq!(error.reason(), reason);
            assert!(error.to_string().starts_with(reason), "{error}");
            assert!(reason.starts_with(error.kind().code()));
        }
        let http = ModelError::Http {
            status: 503,
            excerpt: "busy".into(),
            attempts: 2,
        };
        assert_eq!(http.status(), Some(503));
        assert_eq!(http.detail(), "busy (after 2 attempt(s))");
        assert_eq!(
            http.with_attempts(5).to_string(),
            "model_http_503: busy (after 5 attempt(s))"
        );
    }

    #[test]
    fn excerpts_are_one_short_line_without_the_key() {
        let text = format!("bad key sk-123\n\u{202E}evil\t{}", "x".repeat(500));
        let out = excerpt(&text, Some("sk-123"));
        assert!(!out.contains("sk-123"));
        assert!(out.contains("***"));
        assert!(!out.contains('\n') && !out.contains('\t') && !out.contains('\u{202E}'));
        assert!(out.contains("\\n") && out.contains("\\u{202e}"));
        assert!(out.ends_with('…'));
        assert_eq!(out.chars().count(), EXCERPT_CHARS + 1);
        assert_eq!(excerpt("  short  ", None), "short");
    }
}
