//! The daemon's runtime endpoint: WebSocket JSON-RPC 2.0 at `GET /v1/runtime`
//! (`docs/spec/runtime-endpoint.md`, documented method by method in `docs/endpoint.md`).
//!
//! - [`config`]: the TOML configuration (runtimes and their tokens, tool policy, limits).
//! - [`auth`]: the token rules, generation and constant-time comparison; [`principal`]: who a
//!   token makes its holder (the operator or a runtime) and every credential accepted.
//! - `conn`: one connection — `hello`, dispatch, events, frame/in-flight/rate limits. Every
//!   params, result, event and error travels as its type from `openphone_protocol::endpoint`.
//! - [`daemon`]: `openphone serve` — store, recovery, expiry timer, listener, files, shutdown.
//! - [`front`]: the front door — connection caps, the header read timeout, the deadline of
//!   unauthenticated connections, the descriptor limit, and the operator's `endpoint.sock`
//!   (`front::serve`: the accept loops and each HTTP connection).
//! - [`state`]: the shared state every connection, route and page reads ([`AppState`]);
//!   [`routes`]: the HTTP routes over it; [`shutdown`]: the signal every task stops on.
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
//! Tokens never appear in logs. Only the daemon's construction (`daemon.rs`) holds the store
//! and the device: it hands the store to the services that own tables (the job scheduler, the
//! watchers, the goal engine) and drives the simulated phone's timeline; everything else asks
//! the bridge (`ToolBridge`'s reads and records, its notifications).

pub mod auth;
pub mod background;
pub mod config;
mod conn;
pub mod daemon;
pub mod dashboard;
mod expiry_timer;
mod fleet_host;
pub mod front;
pub mod goal_backends;
pub mod goals;
mod hermes;
mod lock;
pub mod mcp;
pub mod phones;
pub mod principal;
pub mod rate;
pub mod routes;
pub mod runtime_policy;
pub mod secure_dir;
pub mod shutdown;
pub mod sim_state;
pub mod state;
mod store_open;
pub mod world;

pub use config::{
    CONFIG_ENV, Config, ConfigError, ConfigLocation, ConfigSource, EndpointConfig, Limits,
    McpConfig,
};
pub use daemon::{
    Daemon, DaemonError, DaemonOptions, DeviceChoice, ENDPOINT_FILE, EndpointInfo, TOKEN_FILE,
};
pub use fleet_host::EndpointStore;
pub use front::ENDPOINT_SOCKET_FILE;
pub use mcp::{HELLO_KEY, MCP_TOKEN_FILE, SOCKET_FILE, STATE_KEY_FILE};
pub use routes::{local_router, router};
pub use state::AppState;
