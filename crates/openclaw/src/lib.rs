//! The OpenClaw node adapter (`docs/spec/openclaw-node.md`, `docs/openclaw.md`): the phone as a
//! node of an OpenClaw gateway. The only crate that knows OpenClaw's wire shapes.
//!
//! - [`OpenclawAdapter`] keeps one node connection alive (challenge, signed connect, hello-ok,
//!   tools, presence; tick watchdog; reconnect with backoff) and reports an honest [`Status`].
//! - The gateway's `node.invoke.request`s run through the ToolBridge as runtime `openclaw`;
//!   a confirmation that outlives the gateway's deadline is answered with a pending receipt
//!   and its outcome is posted into the OpenClaw session later.
//! - As a `LocalRuntime`, it turns attention requests routed to `openclaw` into
//!   `agent.request`s and the session's `chat` stream into runtime messages.
//! - [`DeviceIdentity`] is the Ed25519 device key (data directory, 0600) and the v3 signature.

pub mod adapter;
pub mod config;
mod conn;
pub mod identity;
mod inner;
pub mod invoke;
mod node;
pub mod outbox;
pub mod status;
pub mod stream;
pub mod surface;
pub mod tokens;
mod turns;
pub mod view;
pub mod wire;

pub use adapter::{
    AdapterError, AdapterSetup, GATEWAY_VIEW_FILE, MAX_MESSAGE_CHARS, OpenclawAdapter,
};
pub use config::{OPENCLAW, OpenclawConfig, OpenclawConfigError, SetupCode};
pub use conn::RequestError;
pub use identity::{DeviceIdentity, IdentityError, SignedConnect};
pub use status::Status;
pub use surface::{CommandSurface, PhoneTool, REQUEST_STATUS};
pub use tokens::{StoredToken, TokenStore};
pub use view::GatewayView;
