//! A client for OpenAI-compatible chat-completion endpoints (Ollama, llama.cpp's server,
//! vLLM, LM Studio, OpenRouter, hosted OpenAI), for the built-in agent loop.
//!
//! - [`ModelConfig`] names the endpoint, the model, the key ([`ApiKey`], never printed) and
//!   the [`RetryPolicy`];
//! - [`ModelClient::complete`] sends a [`ChatRequest`] to `{base_url}/chat/completions`,
//!   reports [`StreamEvent`]s as the answer streams in, and returns the [`Completion`];
//! - the message, tool and tool-call types serialise to the Chat Completions wire format;
//! - failures are [`ModelError`]s with a stable reason code (`model_http_429`,
//!   `model_timeout`, …) and a one-line message that never holds the key or a whole body.
//!
//! Retries follow `agent-jobs.md` §7.4: 429, 5xx, and connection failures and timeouts
//! before a response are retried with capped exponential backoff (honouring `Retry-After`);
//! a stream that breaks after its first byte is never replayed.
//!
//! Streams are parsed by a small server-sent-events line parser of its own (`sse.rs`): the
//! Chat Completions stream only uses `data:` lines ending in `[DONE]`, and owning the parser
//! keeps its limits (line length, UTF-8 handling, split points) under this crate's tests.

#![deny(missing_docs)]

mod answer;
mod client;
mod config;
mod error;
mod retry;
mod sse;
mod types;

pub use client::{MAX_RESPONSE_BYTES, ModelClient};
pub use config::{ApiKey, ModelConfig, RetryPolicy};
pub use error::{EXCERPT_CHARS, ModelError, ModelErrorKind};
pub use types::{
    ChatRequest, Completion, Content, ContentPart, ImageUrl, Message, StreamEvent, ToolCall,
    ToolChoice, ToolSpec, Usage,
};
