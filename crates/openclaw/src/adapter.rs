//! [`OpenclawAdapter`]: the `openclaw` runtime inside the daemon. It owns the node connection
//! (`node.rs`), answers the gateway's invokes through the ToolBridge (`invoke.rs`), and is a
//! [`LocalRuntime`] for the [`RuntimeManager`]: an attention request routed to `openclaw`
//! becomes an `agent.request` and the session's `chat` stream comes back as runtime messages
//! (`stream.rs`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openphone_core::{LocalRuntime, RuntimeManager, ToolBridge};
use openphone_policy::{Caller, ToolPolicy, Transport};
use openphone_protocol::Registry;
use openphone_protocol::endpoint::{AttentionRequested, RuntimeMessageParams};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::config::{OPENCLAW, OpenclawConfig, OpenclawConfigError};
use crate::conn::{Conn, lock};
use crate::identity::{DeviceIdentity, IdentityError};
use crate::inner::Inner;
use crate::node;
use crate::status::Status;
use crate::surface::CommandSurface;
use crate::tokens::{TokenStore, token_key};
use crate::turns::Turns;
use crate::view::GatewayView;
use crate::wire;

/// The file in the data directory holding what the gateway accepted last (`doctor`).
pub const GATEWAY_VIEW_FILE: &str = "openclaw-state.json";

/// Longest `agent.request` message (characters).
pub const MAX_MESSAGE_CHARS: usize = 20_000;

/// What the adapter is built from.
#[derive(Debug, Clone)]
pub struct AdapterSetup {
    /// The `[openclaw]` table.
    pub config: OpenclawConfig,
    /// The data directory (device key, device tokens).
    pub data_dir: PathBuf,
    /// The one bridge every tool request goes through.
    pub bridge: Arc<ToolBridge>,
    /// The manager replies go through (held weakly: it holds the adapter).
    pub manager: Arc<RuntimeManager>,
    pub registry: &'static Registry,
    /// The configured tool policy (profiles, allow and deny lists).
    pub tool_policy: ToolPolicy,
    /// The runtime version sent as `client.version`.
    pub version: String,
}

/// Why the adapter could not start.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error(transparent)]
    Config(#[from] OpenclawConfigError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

/// The adapter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OpenclawAdapter {
    inner: Arc<Inner>,
}

impl OpenclawAdapter {
    /// Checks the configuration (transport rule first: nothing connects to a refused URL),
    /// loads or creates the device identity, and builds the adapter. Call
    /// [`OpenclawAdapter::start`] to connect.
    pub fn new(setup: AdapterSetup) -> Result<OpenclawAdapter, AdapterError> {
        let url = setup.config.check()?;
        let credentials = setup.config.credentials()?;
        let authorisation = setup.config.authorisation()?;
        let identity = DeviceIdentity::load_or_create(&setup.data_dir)?;
        let caller = Caller::remote(OPENCLAW, Transport::Openclaw, "openclaw-gateway")
            .with_authorisation(authorisation);
        let bridge = setup.bridge;
        let surface = CommandSurface::new(setup.registry, &caller, &setup.tool_policy, |c| {
            bridge.offers(c)
        });
        let token_key = token_key(&url, &identity.device_id(), wire::ROLE);
        let status = if setup.config.enabled {
            Status::Connecting
        } else {
            Status::Disabled
        };
        Ok(OpenclawAdapter {
            inner: Arc::new(Inner {
                url,
                data_dir: setup.data_dir.clone(),
                credentials,
                tokens: TokenStore::new(&setup.data_dir),
                token_key,
                identity,
                manager: Arc::downgrade(&setup.manager),
                caller,
                surface,
                version: setup.version,
                config: setup.config,
                bridge,
                status: watch::Sender::new(status),
                conn: Mutex::new(None),
                last_hello: Mutex::new(None),
                turns: Mutex::new(Turns::default()),
                outcome_tasks: Mutex::new(Vec::new()),
                flush_lock: tokio::sync::Mutex::new(()),
                outbox_passes: AtomicU64::new(0),
                drained: Mutex::new(None),
                attempts: AtomicU64::new(0),
                accepted: Mutex::new(None),
                shutdown: watch::Sender::new(false),
                task: Mutex::new(None),
            }),
        })
    }

    /// Attaches to the manager and starts the connection loop (unless disabled). Must run
    /// inside a Tokio runtime.
    pub fn start(&self) {
        if let Some(manager) = self.inner.manager.upgrade() {
            manager.set_adapter(OPENCLAW, Arc::new(self.clone()));
        }
        if !self.inner.config.enabled {
            return;
        }
        // The outbox first: outcomes owed since before a restart are watched again.
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move { inner.resume_outbox().await });
        let rx = self.inner.shutdown.subscribe();
        let handle = tokio::spawn(node::run(Arc::clone(&self.inner), rx));
        *lock(&self.inner.task) = Some(handle);
    }

    /// Planned disconnect (R3.2): clears the published tools, closes the socket, stops the
    /// loop and detaches from the manager.
    pub async fn shutdown(&self) {
        let conn = lock(&self.inner.conn).clone();
        if let Some(conn) = conn {
            let clear = conn.request("node.pluginTools.update", json!({"tools": []}));
            let _ = tokio::time::timeout(Duration::from_secs(2), clear).await;
        }
        self.inner.shutdown.send_replace(true);
        // The rows stay in the store; the next start watches them again.
        for task in lock(&self.inner.outcome_tasks).drain(..) {
            task.abort();
        }
        let task = lock(&self.inner.task).take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        self.inner.connection_lost("the daemon is stopping");
        if let Some(manager) = self.inner.manager.upgrade() {
            manager.clear_adapter(OPENCLAW);
        }
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.inner.status.borrow().clone()
    }

    /// A receiver of status changes.
    pub fn watch_status(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    /// Connection attempts so far (each `connecting`).
    pub fn attempts(&self) -> u64 {
        self.inner.attempts.load(Ordering::SeqCst)
    }

    /// This phone's `device.id`.
    pub fn device_id(&self) -> String {
        self.inner.identity.device_id()
    }

    /// The declared surface.
    pub fn surface(&self) -> &CommandSurface {
        &self.inner.surface
    }

    /// The tool names the gateway accepted last (`None` before the first reply).
    pub fn accepted_tools(&self) -> Option<Vec<String>> {
        lock(&self.inner.accepted).clone()
    }

    /// The `auth.method` of the last `hello-ok` (`token`, `device-token`, …).
    pub fn last_auth_method(&self) -> Option<String> {
        lock(&self.inner.last_hello)
            .as_ref()
            .map(|h| h.auth_method.clone())
    }

    /// The tick interval of the last `hello-ok`.
    pub fn tick_interval_ms(&self) -> Option<u64> {
        lock(&self.inner.last_hello)
            .as_ref()
            .map(|h| h.tick_interval_ms)
    }

    /// Requests deferred past the gateway's deadline whose outcome is not known yet.
    pub fn deferred_pending(&self) -> usize {
        self.inner.waiting_outcomes().len()
    }

    /// What the last drain of the gateway's queue for this node found (`node.pending.drain`
    /// after a connect): counts of `status_requests`, `location_requests`, `other`.
    pub fn last_pending_drain(&self) -> Option<Value> {
        lock(&self.inner.drained).clone()
    }

    /// Outbox passes completed (each posts every outcome that was ready; `outbox.rs`).
    pub fn outbox_passes(&self) -> u64 {
        self.inner.outbox_passes.load(Ordering::SeqCst)
    }

    /// Waits until the status satisfies `pred` (or `limit` passes); returns the last status.
    pub async fn wait_for(&self, limit: Duration, pred: impl Fn(&Status) -> bool) -> Status {
        let mut rx = self.watch_status();
        let _ = tokio::time::timeout(limit, rx.wait_for(|s| pred(s))).await;
        self.status()
    }
}

impl Inner {
    pub(crate) fn set_status(&self, status: Status) {
        let was_ready = self.status.borrow().is_ready();
        let now_ready = status.is_ready();
        let changed = self.status.send_if_modified(|current| {
            if *current == status {
                false
            } else {
                *current = status.clone();
                true
            }
        });
        if changed {
            tracing::info!(status = %status.line(), "OpenClaw status");
        }
        if was_ready != now_ready
            && let Some(manager) = self.manager.upgrade()
        {
            manager.adapter_presence(OPENCLAW, now_ready);
        }
    }

    /// Completes once the adapter is shutting down.
    pub(crate) async fn stopping(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub(crate) fn status_ready(&self) -> bool {
        self.status.borrow().is_ready()
    }

    pub(crate) fn current_conn(&self) -> Option<Arc<Conn>> {
        lock(&self.conn).clone()
    }

    pub(crate) fn is_current(&self, conn: &Arc<Conn>) -> bool {
        lock(&self.conn)
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, conn))
    }

    /// The reply to `node.pluginTools.update`: remembers what was accepted and warns about
    /// declared tools the gateway left out (R4.4).
    pub(crate) fn tools_accepted(&self, reply: &Value) {
        let accepted: Vec<String> = reply
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.get("name").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let dropped: Vec<&str> = self
            .surface
            .tools()
            .iter()
            .filter(|t| !accepted.contains(&t.name))
            .map(|t| t.command.as_str())
            .collect();
        if !dropped.is_empty() && !accepted.is_empty() {
            tracing::warn!(
                dropped = %dropped.join(","),
                fix = %self.surface.allow_command(),
                "the gateway left out phone tools (not allowlisted or not approved)"
            );
        }
        self.write_gateway_view(&accepted, &dropped);
        *lock(&self.accepted) = Some(accepted);
    }

    /// Records what the gateway accepted in `openclaw-state.json` of the data directory, for
    /// `openphone openclaw doctor` (which reads it with or without a running daemon).
    fn write_gateway_view(&self, accepted: &[String], dropped: &[&str]) {
        let view = GatewayView {
            device_id: self.identity.device_id(),
            url: self.url.clone(),
            accepted_tools: accepted.to_vec(),
            dropped_commands: dropped.iter().map(|&d| d.to_owned()).collect(),
            updated_at_ms: self.bridge.now_ms(),
        };
        let path = self.data_dir.join(GATEWAY_VIEW_FILE);
        let tmp = path.with_extension("json.tmp");
        let written = view
            .to_file_text()
            .map_err(std::io::Error::other)
            .and_then(|text| std::fs::write(&tmp, text))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %path.display(), "writing the OpenClaw gateway view");
        }
    }

    /// The connection dropped: the sessions waiting on a reply end (the reply cannot come).
    pub(crate) fn connection_lost(&self, reason: &str) {
        let orphaned = lock(&self.turns).drain_all();
        let Some(manager) = self.manager.upgrade() else {
            return;
        };
        for turn in orphaned {
            let message = RuntimeMessageParams {
                phone_session_id: turn.phone_session_id.clone(),
                runtime_session_id: Some(turn.session_key.clone()),
                text: format!("The OpenClaw connection ended before the reply: {reason}"),
                is_final: true,
                output: None,
                error: Some("runtime_disconnected".to_owned()),
                attention_id: Some(turn.attention_id.clone()),
            };
            if let Err(e) = manager.runtime_message(OPENCLAW, message) {
                tracing::debug!(error = %e, "ending an OpenClaw session after a disconnect");
            }
        }
    }

    /// The OpenClaw session key of a phone session.
    pub(crate) fn session_key_for(&self, phone_session_id: &str) -> String {
        match &self.config.session_key {
            Some(key) => key.trim().to_owned(),
            None => format!("openphone-{phone_session_id}"),
        }
    }

    /// The phone session an OpenClaw session key belongs to: `…openphone-<id>` naming one
    /// of this runtime's sessions.
    /// Returns the phone session id and the autonomy it was opened with (which the request
    /// then carries: a finished session's autonomy still binds its conversation).
    pub(crate) fn phone_session_for_key(&self, key: &str) -> Option<(String, String)> {
        let tail = key.rsplit(':').next()?;
        let id = tail.strip_prefix("openphone-")?;
        let session = self.bridge.phone_session(id).ok()??;
        (session.runtime_kind == OPENCLAW).then(|| {
            (
                session.phone_session_id,
                session.autonomy.as_str().to_owned(),
            )
        })
    }

    fn refuse(&self, requested: &AttentionRequested, reason: &str, detail: String) {
        let Some(manager) = self.manager.upgrade() else {
            return;
        };
        let message = RuntimeMessageParams {
            phone_session_id: requested.phone_session_id.clone(),
            runtime_session_id: None,
            text: detail,
            is_final: true,
            output: None,
            error: Some(reason.to_owned()),
            attention_id: Some(requested.attention_id.clone()),
        };
        if let Err(e) = manager.runtime_message(OPENCLAW, message) {
            tracing::warn!(error = %e, "failing an OpenClaw session that could not start");
        }
    }

    /// Sends an attention request as `agent.request` (after subscribing to its session).
    async fn send_attention(self: Arc<Self>, requested: AttentionRequested) {
        let Some(conn) = self.current_conn() else {
            self.refuse(
                &requested,
                "runtime_not_connected",
                format!(
                    "OpenClaw is not connected ({})",
                    self.status.borrow().line()
                ),
            );
            return;
        };
        let message = requested.text.trim().to_owned();
        let chars = message.chars().count();
        if message.is_empty() || chars > MAX_MESSAGE_CHARS {
            self.refuse(
                &requested,
                "invalid_params",
                format!(
                    "an OpenClaw message must be 1 to {MAX_MESSAGE_CHARS} characters (this one \
                     has {chars}); the gateway would drop it silently"
                ),
            );
            return;
        }
        let key = self.session_key_for(&requested.phone_session_id);
        lock(&self.turns).track(&key, &requested.phone_session_id, &requested.attention_id);
        if let Err(e) = conn
            .node_event("chat.subscribe", &json!({"sessionKey": key}))
            .await
        {
            lock(&self.turns).untrack(&key);
            self.refuse(
                &requested,
                "send_failed",
                format!("OpenClaw refused chat.subscribe: {e}"),
            );
            return;
        }
        let payload = json!({"message": message, "sessionKey": key, "deliver": false});
        if let Err(e) = conn.node_event("agent.request", &payload).await {
            // Not idempotent: never resent automatically (§10.2).
            lock(&self.turns).untrack(&key);
            self.refuse(
                &requested,
                "send_failed",
                format!("OpenClaw did not accept the request (delivery unknown): {e}"),
            );
        }
    }
}

impl LocalRuntime for OpenclawAdapter {
    fn attend(&self, requested: AttentionRequested) {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(Arc::clone(&self.inner).send_attention(requested));
            }
            Err(_) => self.inner.refuse(
                &requested,
                "runtime_unavailable",
                "the OpenClaw adapter was called outside the daemon's async runtime".into(),
            ),
        }
    }

    fn cancel(&self, phone_session_id: &str) -> bool {
        lock(&self.inner.turns).untrack_session(phone_session_id)
    }

    fn configured(&self) -> Result<(), String> {
        let status = self.status();
        if status.is_ready() {
            return Ok(());
        }
        Err(match status.next_step() {
            Some(step) => format!("{} ({step})", status.line()),
            None => status.line(),
        })
    }

    fn detail(&self) -> Option<String> {
        Some(self.status().line())
    }
}
