//! Payload limits of the protocol (`runtime-protocol.md` §14). Exceeding one is
//! `payload_too_large` on the tool plane.

/// Default maximum size of one endpoint frame (bytes).
pub const ENDPOINT_FRAME_BYTES: usize = 1024 * 1024;
/// Maximum characters of a `request_id` or `idempotency_key`.
pub const REQUEST_ID_CHARS: usize = 200;
/// Maximum characters of a `runtime_session_id`.
pub const RUNTIME_SESSION_ID_CHARS: usize = 256;
/// Maximum characters of a `phone_session_id` or assistant-output / surface `session_id`.
pub const SESSION_ID_CHARS: usize = 160;
/// Maximum size of a tool request's params as canonical JSON (bytes).
pub const PARAMS_CANONICAL_BYTES: usize = 65536;
/// Maximum nesting depth of a tool request's params (the params object itself is depth 1).
pub const PARAMS_DEPTH: usize = 32;
/// Maximum characters of a `reason`.
pub const REASON_CHARS: usize = 1000;
/// Maximum characters of a confirmation summary.
pub const CONFIRMATION_SUMMARY_CHARS: usize = 220;
/// Maximum characters of an error text sent to a runtime.
pub const ERROR_TEXT_CHARS: usize = 320;
/// Maximum bytes of a `hello`'s `client.name` and of its `client.version` (this project's
/// limit); a longer one is `invalid_params`.
pub const CLIENT_INFO_BYTES: usize = 256;
/// Maximum characters of one value in a log line, after escaping ([`crate::log_value`]).
pub const LOG_VALUE_CHARS: usize = 160;
/// Largest integer magnitude peers can hash identically (2^53 − 1).
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;
