//! The Hermes Agent runtime adapter (`docs/hermes.md`): a `[[runtimes]]` entry with
//! `kind = "hermes"` is served by Hermes Agent (Nous Research) running beside the daemon. The
//! only crate that knows Hermes' wire shapes.
//!
//! - Turns go through Hermes' API server (`POST /v1/runs`, its SSE events, its approval and
//!   stop routes; `runs.rs`), one Hermes session per phone session (`sessions.rs`).
//! - Hermes gets the phone's tools from a Hermes plugin the adapter writes into
//!   `$HERMES_HOME/plugins/openphone/` (`plugin.rs`); each call comes back to a loopback
//!   endpoint (`tools.rs`) and runs through the one ToolBridge in the phone session, keyed by
//!   the model's tool-call id.
//! - The adapter starts `hermes gateway run` itself unless `api_url` names one the user runs
//!   (`process.rs`); `config.rs` finds Hermes (`command` / `PATH`, `home` / `<data-dir>/hermes-home`).

pub mod adapter;
pub mod config;
pub mod plugin;
pub mod process;
pub mod runs;
mod sessions;
pub mod tools;

pub use adapter::{AdapterSetup, GATEWAY_LOG, HermesAdapter, Status};
pub use config::{HermesConfig, HermesConfigError};
pub use plugin::{HermesTool, PLUGIN_NAME, ToolSurface};
pub use sessions::hermes_session_id;
