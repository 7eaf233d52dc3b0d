//! The adapter's shared state ([`Inner`]): what the connection loop (`node.rs`), the invokes
//! (`invoke.rs`), the outbox (`outbox.rs`), the reply stream (`stream.rs`) and the adapter
//! itself (`adapter.rs`) read and move. Its behaviour is theirs; here is only the state.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};

use openphone_core::{RuntimeManager, ToolBridge};
use openphone_policy::Caller;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{Credentials, OpenclawConfig};
use crate::conn::Conn;
use crate::identity::DeviceIdentity;
use crate::status::Status;
use crate::surface::CommandSurface;
use crate::tokens::TokenStore;
use crate::turns::Turns;
use crate::wire::Hello;

/// The adapter's shared state.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) url: String,
    pub(crate) data_dir: PathBuf,
    pub(crate) config: OpenclawConfig,
    pub(crate) credentials: Credentials,
    pub(crate) identity: DeviceIdentity,
    pub(crate) tokens: TokenStore,
    pub(crate) token_key: String,
    pub(crate) bridge: Arc<ToolBridge>,
    pub(crate) manager: Weak<RuntimeManager>,
    pub(crate) caller: Caller,
    pub(crate) surface: CommandSurface,
    pub(crate) version: String,
    pub(crate) status: watch::Sender<Status>,
    pub(crate) conn: Mutex<Option<Arc<Conn>>>,
    pub(crate) last_hello: Mutex<Option<Hello>>,
    pub(crate) turns: Mutex<Turns>,
    /// The tasks waiting for deferred outcomes (stopped at shutdown; the store keeps the rows).
    pub(crate) outcome_tasks: Mutex<Vec<JoinHandle<()>>>,
    /// One outbox pass at a time.
    pub(crate) flush_lock: tokio::sync::Mutex<()>,
    /// Outbox passes completed.
    pub(crate) outbox_passes: AtomicU64,
    /// What the last `node.pending.drain` found (counts by item type).
    pub(crate) drained: Mutex<Option<Value>>,
    /// Connection attempts so far.
    pub(crate) attempts: AtomicU64,
    /// The tool names the gateway accepted in its last `node.pluginTools.update` reply.
    pub(crate) accepted: Mutex<Option<Vec<String>>>,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) task: Mutex<Option<JoinHandle<()>>>,
}
