//! The OpenPhone runtime protocol, version 1: the single source of truth for what crosses a
//! process boundary.
//!
//! This crate holds no I/O, no clock and no async code. It provides:
//!
//! - the four **manifests** (commands, events, capabilities, runtime schema), embedded at build
//!   time from `runtime/protocol/`, parsed into a typed [`Registry`] and checked against every
//!   load-time rule of the specification (each a [`Rule`]). A broken manifest is rejected as a
//!   whole, with one [`ManifestError`] per broken rule naming the rule and the command;
//! - compiled **input validators** that report field-level errors ([`FieldError`]);
//! - **canonical JSON** and the digests built on it ([`canonical`], [`digest`]): the bridge's
//!   `params_hash` and the background-review `params_digest` / `binding_digest`;
//! - the closed **error-code** catalogue ([`ErrorCode`]), the **tool result** wire type
//!   ([`ToolResult`]) and the version advertisement ([`VersionAdvertisement`]);
//! - [`log_value`]: a peer-supplied string escaped and cut for one value of a log line;
//! - [`display_text`]: the one escape for text a person reads (summaries, reviews,
//!   notifications): bidi, zero-width and control characters shown as `\u{XXXX}`;
//! - the daemon's **endpoint** API ([`endpoint`]): one params and one result type per
//!   JSON-RPC method, the event payloads, the envelope and the closed `error.data.code` set;
//! - the **wire enums** other crates share ([`Autonomy`], [`Role`], [`Risk`], …), each defined
//!   once with [`wire_enum!`].
//!
//! Design choice: manifests are parsed from `serde_json::Value` by hand rather than derived
//! with serde, so that each broken rule produces its own error naming the command, instead of
//! one opaque deserialisation error for the first bad field.

mod autonomy;
pub mod canonical;
pub mod digest;
mod display;
pub mod endpoint;
mod error_code;
mod injection;
pub mod job;
pub mod limits;
mod log_value;
mod manifest;
mod mcp_hello;
mod object_text;
mod registry;
pub mod review;
mod runtime_id;
mod schema;
mod sealed;
mod session_key;
mod tool_request;
mod tool_result;
pub mod transport;
mod validate;
mod version;
mod wire_enum;

pub use autonomy::Autonomy;
pub use canonical::{
    CanonicalError, canonical_json, canonical_json_object, parse_json_strict, write_canonical,
    write_canonical_object,
};
pub use digest::{
    Binding, binding_digest, canonical_sha256_hex, object_hash, params_digest, params_hash,
    params_hash_hex, value_hash,
};
pub use display::{display_text, is_escaped_for_display, is_invisible, push_display_char};
pub use endpoint::Role;
pub use error_code::{ErrorCode, UnknownErrorCode};
pub use injection::Injection;
pub use job::{AgentJob, DeliveryState, JobPhase, JobRun, JobStatus, JobType, RunOutcome};
pub use log_value::{LogValue, log_value};
pub use manifest::{
    Capability, CapabilityRisk, Command, Confirmation, Direction, EventSpec, Executor, Exposure,
    Risk, Service, TransportMapping, WireMapping,
};
pub use mcp_hello::{MCP_HELLO_KEY, McpHello, McpHelloAnswer, McpHelloReply, McpHelloToken};
pub use object_text::{ObjectTemplate, ObjectText};
pub use registry::{FieldError, ManifestSources, Registry};
pub use runtime_id::{BUILTIN_RUNTIME_ID, RuntimeIdError, normalize_runtime_id};
#[doc(hidden)]
pub use schema::__private as __schema;
pub use schema::{endpoint_schema, string_enum};
pub use sealed::Sealed;
pub use session_key::{
    background_job_of, background_job_session, goal_action_session, goal_action_sessions_prefix,
    goal_judge_session, goal_of, goal_session, watcher_of, watcher_session,
};
pub use tool_request::{DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, ToolRequest, effective_timeout_ms};
pub use tool_result::{
    DenialDetails, PendingConfirmation, ToolError, ToolResult, ToolStatus, audit_id,
};
pub use transport::{TransportError, check_outbound_url};
pub use validate::{
    ManifestDeprecation, ManifestError, ManifestErrors, ManifestFile, Rule, SchemaCompile,
};
pub use version::{MAX_VERSION, MIN_VERSION, PROTOCOL_NAME, VersionAdvertisement};
