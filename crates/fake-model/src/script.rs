//! What the fake answers: [`Script`], and the JSON script-file format of the binary.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// How a [`Script::Reply`] is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamMode {
    /// As the request asked (`"stream": true` → server-sent events, else one JSON body).
    #[default]
    Auto,
    /// Always as server-sent events.
    Stream,
    /// Always as one JSON body.
    Json,
}

/// One scripted answer to one `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq)]
pub enum Script {
    /// A successful answer in the Chat Completions format.
    Reply {
        /// The text, if any (`null` on the wire when `None`).
        content: Option<String>,
        /// Tool calls as (name, arguments JSON text); ids are generated as `call_<n>`.
        tool_calls: Vec<(String, String)>,
        /// Streamed or JSON.
        stream_mode: StreamMode,
        /// Characters per streamed delta of the text and of each call's arguments
        /// (0 = all in one delta).
        chunk: usize,
    },
    /// An HTTP error status.
    Status {
        /// The status code.
        code: u16,
        /// The `Retry-After` header's value, if any.
        retry_after: Option<String>,
        /// The body (sent as JSON when it parses as JSON, else as text).
        body: String,
    },
    /// Accept the request and never answer (until the fake shuts down).
    Hang,
    /// Start a streamed answer, send its first event, then stall (until the fake shuts down).
    HangAfterFirstChunk,
    /// A 200 answer with exactly this content type and body, for malformed answers.
    Raw {
        /// The `Content-Type` header.
        content_type: String,
        /// The body.
        body: String,
    },
    /// Wait, then answer with the inner script.
    Delay(Duration, Box<Script>),
}

impl Script {
    /// A text answer, sent as the request asked, three characters per streamed delta.
    pub fn text(content: impl Into<String>) -> Script {
        Script::Reply {
            content: Some(content.into()),
            tool_calls: Vec::new(),
            stream_mode: StreamMode::Auto,
            chunk: 3,
        }
    }

    /// An answer calling one tool with these arguments.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Script {
        Script::tool_calls(vec![(name.into(), arguments)])
    }

    /// An answer calling several tools in one turn.
    pub fn tool_calls(calls: Vec<(impl Into<String>, Value)>) -> Script {
        Script::Reply {
            content: None,
            tool_calls: calls
                .into_iter()
                .map(|(name, arguments)| (name.into(), arguments.to_string()))
                .collect(),
            stream_mode: StreamMode::Auto,
            chunk: 3,
        }
    }

    /// An HTTP error with an OpenAI-style error body.
    pub fn status(code: u16) -> Script {
        Script::Status {
            code,
            retry_after: None,
            body: error_body(&format!("fake model: scripted status {code}"), "fake_error"),
        }
    }

    /// An HTTP error with a `Retry-After` header.
    pub fn status_with_retry_after(code: u16, retry_after: impl Into<String>) -> Script {
        match Script::status(code) {
            Script::Status { code, body, .. } => Script::Status {
                code,
                retry_after: Some(retry_after.into()),
                body,
            },
            other => other,
        }
    }

    /// A 200 answer with this content type and body.
    pub fn raw(content_type: impl Into<String>, body: impl Into<String>) -> Script {
        Script::Raw {
            content_type: content_type.into(),
            body: body.into(),
        }
    }

    /// Wait `delay`, then answer with `then`.
    pub fn delay(delay: Duration, then: Script) -> Script {
        Script::Delay(delay, Box::new(then))
    }

    /// The same reply with text added (a reply may carry text and tool calls).
    pub fn with_content(self, text: impl Into<String>) -> Script {
        match self {
            Script::Reply {
                tool_calls,
                stream_mode,
                chunk,
                ..
            } => Script::Reply {
                content: Some(text.into()),
                tool_calls,
                stream_mode,
                chunk,
            },
            other => other,
        }
    }

    /// The same reply with another delta size (0 = one delta).
    pub fn with_chunk(self, size: usize) -> Script {
        match self {
            Script::Reply {
                content,
                tool_calls,
                stream_mode,
                ..
            } => Script::Reply {
                content,
                tool_calls,
                stream_mode,
                chunk: size,
            },
            other => other,
        }
    }

    /// The same reply sent in another mode.
    pub fn with_stream_mode(self, mode: StreamMode) -> Script {
        match self {
            Script::Reply {
                content,
                tool_calls,
                chunk,
                ..
            } => Script::Reply {
                content,
                tool_calls,
                stream_mode: mode,
                chunk,
            },
            other => other,
        }
    }
}

/// An OpenAI-style error body: `{"error":{"message","type","param":null,"code":null}}`.
pub fn error_body(message: &str, kind: &str) -> String {
    serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": null}
    })
    .to_string()
}

/// Why a script file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScriptFileError {
    /// The file is not a script list (the message says where and why).
    #[error("invalid script file: {0}")]
    Invalid(String),
}

/// A script file: the replies to queue in order, and the optional fallback.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptFile {
    /// Queued in order, one per request.
    pub replies: Vec<Script>,
    /// Used once the queue is empty (the default 500 when `None`).
    pub fallback: Option<Script>,
}

impl ScriptFile {
    /// Parses a script file: a JSON array of scripts, or
    /// `{"replies": [...], "fallback": script}`. See the crate's README for each entry.
    pub fn parse(text: &str) -> Result<ScriptFile, ScriptFileError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| ScriptFileError::Invalid(e.to_string()))?;
        let (replies, fallback) = match value {
            Value::Array(entries) => (entries, None),
            Value::Object(mut fields) => {
                if let Some(unknown) = fields
                    .keys()
                    .find(|key| *key != "replies" && *key != "fallback")
                {
                    return Err(ScriptFileError::Invalid(format!(
                        "unknown field {unknown:?} (expected \"replies\" and \"fallback\")"
                    )));
                }
                let replies = match fields.remove("replies") {
                    None => Vec::new(),
                    Some(Value::Array(entries)) => entries,
                    Some(_) => {
                        return Err(ScriptFileError::Invalid(
                            "\"replies\" must be an array".to_owned(),
                        ));
                    }
                };
                (replies, fields.remove("fallback"))
            }
            _ => {
                return Err(ScriptFileError::Invalid(
                    "expected an array of scripts or {\"replies\", \"fallback\"}".to_owned(),
                ));
            }
        };
        let replies = replies
            .into_iter()
            .enumerate()
            .map(|(index, entry)| {
                parse_entry(entry)
                    .map_err(|e| ScriptFileError::Invalid(format!("reply {}: {e}", index + 1)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let fallback = fallback
            .map(|entry| {
                parse_entry(entry).map_err(|e| ScriptFileError::Invalid(format!("fallback: {e}")))
            })
            .transpose()?;
        Ok(ScriptFile { replies, fallback })
    }
}

fn parse_entry(entry: Value) -> Result<Script, serde_json::Error> {
    serde_json::from_value::<ScriptSpec>(entry).map(Script::from)
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum ScriptSpec {
    Text(String),
    ToolCall(CallSpec),
    Reply {
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        tool_calls: Vec<CallSpec>,
        #[serde(default)]
        stream_mode: StreamMode,
        #[serde(default = "default_chunk")]
        chunk: usize,
    },
    Status {
        code: u16,
        #[serde(default)]
        retry_after: Option<String>,
        #[serde(default)]
        body: Option<String>,
    },
    Hang,
    HangAfterFirstChunk,
    Raw {
        content_type: String,
        body: String,
    },
    Delay {
        ms: u64,
        then: Box<ScriptSpec>,
    },
}

fn default_chunk() -> usize {
    3
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallSpec {
    name: String,
    /// An object (sent as its JSON text) or a string (sent verbatim, malformed or not).
    #[serde(default)]
    arguments: Option<Value>,
}

impl CallSpec {
    fn into_pair(self) -> (String, String) {
        let arguments = match self.arguments {
            None => "{}".to_owned(),
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
        };
        (self.name, arguments)
    }
}

impl From<ScriptSpec> for Script {
    fn from(spec: ScriptSpec) -> Script {
        match spec {
            ScriptSpec::Text(text) => Script::text(text),
            ScriptSpec::ToolCall(call) => Script::Reply {
                content: None,
                tool_calls: vec![call.into_pair()],
                stream_mode: StreamMode::Auto,
                chunk: default_chunk(),
            },
            ScriptSpec::Reply {
                content,
                tool_calls,
                stream_mode,
                chunk,
            } => Script::Reply {
                content,
                tool_calls: tool_calls.into_iter().map(CallSpec::into_pair).collect(),
                stream_mode,
                chunk,
            },
            ScriptSpec::Status {
                code,
                retry_after,
                body,
            } => Script::Status {
                code,
                retry_after,
                body: body.unwrap_or_else(|| {
                    error_body(&format!("fake model: scripted status {code}"), "fake_error")
                }),
            },
            ScriptSpec::Hang => Script::Hang,
            ScriptSpec::HangAfterFirstChunk => Script::HangAfterFirstChunk,
            ScriptSpec::Raw { content_type, body } => Script::Raw { content_type, body },
            ScriptSpec::Delay { ms, then } => {
                Script::Delay(Duration::from_millis(ms), Box::new(Script::from(*then)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn script_files_in_both_forms() {
        let file = ScriptFile::parse(
            r#"[{"text": "hi"}, {"tool_call": {"name": "f", "arguments": {"a": 1}}},
                {"status": {"code": 429, "retry_after": "1"}}, "hang",
                {"delay": {"ms": 20, "then": "hang_after_first_chunk"}},
                {"raw": {"content_type": "application/json", "body": "{"}},
                {"reply": {"content": "x", "tool_calls": [{"name": "g", "arguments": "{bad"}],
                           "stream_mode": "json", "chunk": 1}}]"#,
        )
        .unwrap();
        assert_eq!(file.fallback, None);
        assert_eq!(file.replies[0], Script::text("hi"));
        assert_eq!(file.replies[1], Script::tool_call("f", json!({"a": 1})));
        assert_eq!(file.replies[2], Script::status_with_retry_after(429, "1"));
        assert_eq!(file.replies[3], Script::Hang);
        assert_eq!(
            file.replies[4],
            Script::delay(Duration::from_millis(20), Script::HangAfterFirstChunk)
        );
        assert_eq!(file.replies[5], Script::raw("application/json", "{"));
        assert_eq!(
            file.replies[6],
            Script::Reply {
                content: Some("x".into()),
                tool_calls: vec![("g".into(), "{bad".into())],
                stream_mode: StreamMode::Json,
                chunk: 1
            }
        );

        let file = ScriptFile::parse(r#"{"replies": [{"text": "a"}], "fallback": {"text": "b"}}"#)
            .unwrap();
        assert_eq!(file.fallback, Some(Script::text("b")));
        let error = ScriptFile::parse(r#"[{"text": "a"}, {"txt": "a"}]"#).unwrap_err();
        assert!(error.to_string().contains("reply 2"), "{error}");
        assert!(ScriptFile::parse(r#"{"replys": []}"#).is_err());
        assert!(ScriptFile::parse("nope").is_err());
    }

    #[test]
    fn builders_adjust_replies_only() {
        let reply = Script::text("a")
            .with_chunk(1)
            .with_stream_mode(StreamMode::Stream);
        assert_eq!(
            reply,
            Script::Reply {
                content: Some("a".into()),
                tool_calls: vec![],
                stream_mode: StreamMode::Stream,
                chunk: 1
            }
        );
        assert_eq!(Script::Hang.with_chunk(1), Script::Hang);
    }
}
