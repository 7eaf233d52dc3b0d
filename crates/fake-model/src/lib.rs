//! A scriptable fake of an OpenAI-compatible chat-completion server, on loopback, for tests of
//! the model client, the agent loop, the daemon and the CLI.
//!
//! [`FakeModel::start`] binds `127.0.0.1:0` and serves:
//!
//! - `POST /v1/chat/completions`: each request takes the next queued [`Script`] (or the
//!   fallback once the queue is empty) and is answered in the Chat Completions wire format,
//!   streamed (server-sent events) or as one JSON body;
//! - `GET /v1/models`: the one model, [`MODEL_NAME`].
//!
//! Every request body is recorded ([`FakeModel::requests`], [`FakeModel::recorded`] with
//! the headers) for assertions. A body that is not JSON is recorded as a JSON string, answered
//! with a 400 and does not consume a script.

#![deny(missing_docs)]

mod script;
mod server;

pub use script::{Script, ScriptFile, ScriptFileError, StreamMode, error_body};
pub use server::{FakeModel, MODEL_NAME, RecordedRequest};
