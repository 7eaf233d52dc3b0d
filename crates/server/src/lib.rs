//! The daemon's runtime endpoint: WebSocket JSON-RPC 2.0 at `GET /v1/runtime`
//! (`docs/spec/runtime-endpoint.md`, documented method by method in `docs/endpoint.md`).
//!
//! - [`config`]: the TOML configuration (runtimes and their tokens, tool policy, limits).
//! - [`auth`]: operator and runtime credentials, compared in constant time.
//! - `conn`: one connection — `hello`, dispatch, events, frame/in-flight/rate limits. Every
//!   params, result, event and error travels as its type from `openphone_protocol::endpoint`.
//! - [`daemon`]: `openphone serve` — store, recovery, expiry timer, listener, files, shutdown.
//! - [`front`]: the front door — connection caps, the header read timeout, the deadline of
//!   unauthenticated connections, the descriptor limit, and the operator's `endpoint.sock`.
//! - [`runtime_policy`]: the runtimes' current authorisation for the bridge (approval decides
//!   under it), applied at start, withdrawing pending confirmations of disabled or removed
//!   runtimes.
//! - [`secure_dir`]: the data directory checked (owned by this user) and tightened (`0700`,
//!   its files `0600`) at start.
//! - [`mcp`]: the MCP front doors — `/mcp` behind its Host/Origin/token/size/rate guard, the
//!   approval page, and the `mcp.sock` socket behind `openphone mcp serve`.
//! - [`goals`]: the goal engine and its driver — ticks on wakes, resolved confirmations and
//!   timers, the `goal.*` events, delivery of delta reports.
//! - [`dashboard`]: the web dashboard at `/ui/` — one-time login codes, the session cookie,
//!   the embedded page, and its WebSocket onto the operator endpoint.
//!
//! **Architecture Invariant:** every tool request goes through the core's `ToolBridge`; a
//! confirmation is resolved only with an `Operator`, which only the operator token yields.
//! Tokens never appear in logs.

pub mod auth;
pub mod background;
pub mod config;
mod conn;
pub mod daemon;
pub mod dashboard;
pub mod front;
pub mod goal_backends;
pub mod goals;
mod lock;
pub mod mcp;
pub mod rate;
pub mod runtime_policy;
pub mod secure_dir;
pub mod state;
pub mod world;

pub use config::{Config, ConfigError, EndpointConfig, Limits, McpConfig};
pub use daemon::{
    Daemon, DaemonError, DaemonOptions, DeviceChoice, ENDPOINT_FILE, EndpointInfo, TOKEN_FILE,
};
pub use front::ENDPOINT_SOCKET_FILE;
pub use mcp::{HELLO_KEY, MCP_TOKEN_FILE, SOCKET_FILE, STATE_KEY_FILE};
pub use state::{AppState, local_router, router};
