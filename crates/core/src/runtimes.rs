//! The RuntimeManager: which runtimes exist, which are connected, which one each surface is
//! routed to, and the attention flow (phone → runtime) of `runtime-protocol.md` §2.3.
//!
//! Runtimes come from configuration. A transport that authenticates a runtime calls
//! [`RuntimeManager::connect`] and keeps the returned [`Presence`] for as long as the
//! connection lives; dropping it is the disconnect (active sessions routed to that runtime fail
//! with a reason, presence goes offline). Attention requests create a durable phone session and
//! are delivered as `runtime.attention.requested` events addressed to the routed runtime;
//! the runtime's replies (`runtime.message`) move the session and stream to operators.
//!
//! The built-in runtime is a [`LocalRuntime`] attached with [`RuntimeManager::set_local`]:
//! while it says it is configured, an attention request routed to `builtin` is accepted like
//! one for a connected WebSocket runtime (the session is created, the event published) and
//! handed to [`LocalRuntime::attend`]; its replies come back through
//! [`RuntimeManager::runtime_message`] like a remote runtime's, so the session moves the same
//! way. Without one, `builtin` answers `runtime_not_configured` with the one-line fix.
//!
//! An attention request may continue an earlier session (`session_target`, see
//! `SessionTarget`); [`RuntimeManager::cancel_session`] stops one.
//!
//! This file holds the runtimes, their presence and routing; the attention flow (request,
//! continue, resume, cancel, the runtime's messages) is in `runtimes/attention.rs`.

mod attention;
mod routing;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use openphone_clock::Clock;
use openphone_protocol::endpoint::{
    AttentionRequested, Event, ManagerStatus, PresenceOffline, PresenceOnline, PresenceTrigger,
    RuntimeInfo, RuntimeState, SessionUpdated,
};
pub use openphone_protocol::endpoint::{RuntimeKind, Source, Surface};
use openphone_protocol::{ErrorCode, normalize_runtime_id};
use openphone_store::{PhoneSession, Store};
use serde::{Deserialize, Serialize};

use crate::events::{Audience, EventBus};
use crate::locks::lock;

/// The one-line fix `runtime_not_configured` gives for the built-in runtime without a model.
pub const BUILTIN_NOT_CONFIGURED: &str = "no model is configured for the built-in runtime: add \
     a [builtin] table with base_url and model to the config (README: Use a local model)";

// The id of the daemon's own runtime: the protocol's one constant.
use openphone_protocol::BUILTIN_RUNTIME_ID as BUILTIN;

/// The reason a session stopped with [`RuntimeManager::cancel_session`] fails with.
pub const CANCELLED_REASON: &str = "cancelled";

/// A runtime that lives inside the daemon (the built-in agent loop), attached to the manager
/// with [`RuntimeManager::set_local`].
///
/// The manager creates the phone session and then calls [`LocalRuntime::attend`]; the runtime
/// answers through [`RuntimeManager::runtime_message`] as a remote runtime would.
pub trait LocalRuntime: Send + Sync + std::fmt::Debug {
    /// Starts work on an accepted attention request (its session exists and is
    /// `waiting_for_runtime`). Must not block: the work runs on its own task.
    fn attend(&self, requested: AttentionRequested);
    /// Stops the work on a session before its next model or tool call. Returns whether any
    /// was running or queued. The manager fails the session itself.
    fn cancel(&self, phone_session_id: &str) -> bool;
    /// Whether the runtime can take requests; `Err` holds the one-line fix shown to the user.
    fn configured(&self) -> Result<(), String>;
    /// An adapter's own status line for `runtime.list` (e.g. `pairing_pending <id>`).
    fn detail(&self) -> Option<String> {
        None
    }
}

/// Longest attention text delivered to a runtime (characters).
pub const ATTENTION_TEXT_CHARS: usize = 18_000;
/// Longest context JSON delivered to a runtime (characters).
pub const CONTEXT_JSON_CHARS: usize = 4_000;
/// Longest screen-preflight JSON delivered to a runtime (characters).
pub const SCREEN_JSON_CHARS: usize = 6_000;

/// One configured runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeEntry {
    pub id: String,
    pub kind: RuntimeKind,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// The runtimes and the per-surface routing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimesConfig {
    #[serde(default)]
    pub runtimes: Vec<RuntimeEntry>,
    /// Surface → runtime id. The background surface defaults to `builtin`.
    #[serde(default)]
    pub routing: BTreeMap<Surface, String>,
}

impl Default for RuntimesConfig {
    fn default() -> Self {
        Self {
            runtimes: vec![RuntimeEntry {
                id: BUILTIN.into(),
                kind: RuntimeKind::Builtin,
                enabled: true,
            }],
            routing: BTreeMap::new(),
        }
    }
}

/// A rejected configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeConfigError {
    #[error("runtime id {id:?}: {reason}")]
    BadId { id: String, reason: String },
    #[error("runtime {0:?} is configured twice")]
    Duplicate(String),
    #[error("the {surface} surface is routed to {runtime:?}, which is not configured")]
    UnknownRoute {
        surface: &'static str,
        runtime: String,
    },
}

/// Why an attention request or a runtime message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct RuntimeError {
    pub code: ErrorCode,
    pub message: String,
}

fn err(code: ErrorCode, message: impl Into<String>) -> RuntimeError {
    RuntimeError {
        code,
        message: message.into(),
    }
}

#[derive(Debug)]
struct Entry {
    config: RuntimeEntry,
    connections: usize,
}

#[derive(Debug)]
struct State {
    runtimes: BTreeMap<String, Entry>,
    routing: BTreeMap<Surface, String>,
    /// The routes the configuration names (a stored `runtime.select` is kept only while the
    /// configuration's route is the one it replaced, `runtimes/routing.rs`).
    configured: BTreeMap<Surface, String>,
}

/// Runtimes, presence, routing and the attention flow.
#[derive(Debug)]
pub struct RuntimeManager {
    store: Arc<Store>,
    events: Arc<EventBus>,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    /// The built-in runtime, once attached.
    local: Mutex<Option<Arc<dyn LocalRuntime>>>,
    /// In-process adapters of other runtimes (OpenClaw), by runtime id.
    adapters: Mutex<BTreeMap<String, Arc<dyn LocalRuntime>>>,
}

impl RuntimeManager {
    /// Validates the configuration (ids normalised, no duplicates, routes to configured
    /// runtimes) and builds the manager. `builtin` is always present.
    pub fn new(
        store: Arc<Store>,
        events: Arc<EventBus>,
        clock: Arc<dyn Clock>,
        config: RuntimesConfig,
    ) -> Result<Self, RuntimeConfigError> {
        let mut runtimes = BTreeMap::new();
        for mut entry in config.runtimes {
            let id = normalize_runtime_id(&entry.id).map_err(|e| RuntimeConfigError::BadId {
                id: entry.id.clone(),
                reason: e.to_string(),
            })?;
            if runtimes.contains_key(&id) {
                return Err(RuntimeConfigError::Duplicate(id));
            }
            entry.id = id.clone();
            runtimes.insert(
                id,
                Entry {
                    config: entry,
                    connections: 0,
                },
            );
        }
        runtimes.entry(BUILTIN.to_owned()).or_insert_with(|| Entry {
            config: RuntimeEntry {
                id: BUILTIN.into(),
                kind: RuntimeKind::Builtin,
                enabled: true,
            },
            connections: 0,
        });
        let mut routing = BTreeMap::new();
        for surface in Surface::ALL {
            let target = match config.routing.get(&surface) {
                Some(raw) => {
                    let id = normalize_runtime_id(raw).map_err(|e| RuntimeConfigError::BadId {
                        id: raw.clone(),
                        reason: e.to_string(),
                    })?;
                    if !runtimes.contains_key(&id) {
                        return Err(RuntimeConfigError::UnknownRoute {
                            surface: surface.as_str(),
                            runtime: id,
                        });
                    }
                    id
                }
                None => BUILTIN.to_owned(),
            };
            routing.insert(surface, target);
        }
        let configured = routing.clone();
        let routing = routing::restore(&store, &runtimes, routing);
        Ok(Self {
            store,
            events,
            clock,
            state: Mutex::new(State {
                runtimes,
                routing,
                configured,
            }),
            local: Mutex::new(None),
            adapters: Mutex::new(BTreeMap::new()),
        })
    }

    /// Attaches the built-in runtime: attention requests for `builtin` go to it while it says
    /// it is [configured](LocalRuntime::configured).
    pub fn set_local(&self, local: Arc<dyn LocalRuntime>) {
        *lock(&self.local) = Some(local);
    }

    /// Detaches the built-in runtime (at shutdown, so it and the manager do not keep each
    /// other alive).
    pub fn clear_local(&self) {
        lock(&self.local).take();
    }

    fn local(&self) -> Option<Arc<dyn LocalRuntime>> {
        lock(&self.local).clone()
    }

    /// Attaches an in-process adapter (kind `openclaw`) for `runtime`: attention requests for
    /// it go to the adapter while it says it is [configured](LocalRuntime::configured) (its
    /// connection is ready); `runtime.list` shows its [detail](LocalRuntime::detail).
    pub fn set_adapter(&self, runtime: &str, adapter: Arc<dyn LocalRuntime>) {
        lock(&self.adapters).insert(runtime.to_owned(), adapter);
    }

    /// Detaches an adapter (at shutdown).
    pub fn clear_adapter(&self, runtime: &str) {
        lock(&self.adapters).remove(runtime);
    }

    fn adapter(&self, runtime: &str) -> Option<Arc<dyn LocalRuntime>> {
        lock(&self.adapters).get(runtime).cloned()
    }

    /// An adapter's connection came up (`online`) or went down: publishes the presence event
    /// (the manager's aggregate status included when it goes offline). Sessions in flight are
    /// the adapter's to end.
    pub fn adapter_presence(&self, runtime: &str, online: bool) {
        let now = self.clock.now_ms();
        let event = if online {
            Event::PresenceOnline(PresenceOnline {
                trigger: PresenceTrigger::Connect,
                sent_at_ms: now,
                runtime: runtime.to_owned(),
            })
        } else {
            Event::PresenceOffline(PresenceOffline {
                trigger: PresenceTrigger::Disconnect,
                sent_at_ms: now,
                runtime: runtime.to_owned(),
                runtime_manager_status: self.aggregate_status(),
            })
        };
        self.publish(&event, runtime);
    }

    /// Whether the built-in runtime is attached and configured; `Err` holds the one-line fix.
    pub fn builtin_ready(&self) -> Result<Arc<dyn LocalRuntime>, String> {
        let local = self
            .local()
            .ok_or_else(|| BUILTIN_NOT_CONFIGURED.to_owned())?;
        local.configured()?;
        Ok(local)
    }

    /// Publishes `event` to `runtime` and to operators.
    fn publish(&self, event: &Event, runtime: &str) {
        let audience = Audience {
            runtime: Some(runtime.to_owned()),
            operators: true,
        };
        if let Err(e) = self.events.publish(event, audience) {
            tracing::error!(error = %e, "publishing a runtime event");
        }
    }

    /// Marks a WebSocket runtime connected. Keep the [`Presence`] while the connection lives.
    pub fn connect(self: &Arc<Self>, runtime: &str) -> Result<Presence, RuntimeError> {
        let id = normalize_runtime_id(runtime)
            .map_err(|e| err(ErrorCode::RuntimeNotConfigured, e.to_string()))?;
        {
            let mut state = lock(&self.state);
            let Some(entry) = state.runtimes.get_mut(&id) else {
                return Err(err(
                    ErrorCode::RuntimeNotConfigured,
                    format!("runtime {id:?} is not configured"),
                ));
            };
            if !entry.config.enabled || entry.config.kind != RuntimeKind::Websocket {
                return Err(err(
                    ErrorCode::RuntimeNotConfigured,
                    format!("runtime {id:?} is not an enabled WebSocket runtime"),
                ));
            }
            entry.connections += 1;
        }
        let online = PresenceOnline {
            trigger: PresenceTrigger::Connect,
            sent_at_ms: self.clock.now_ms(),
            runtime: id.clone(),
        };
        self.publish(&Event::PresenceOnline(online), &id);
        Ok(Presence {
            manager: Arc::clone(self),
            runtime: id,
        })
    }

    fn disconnect(&self, runtime: &str) {
        let remaining = {
            let mut state = lock(&self.state);
            match state.runtimes.get_mut(runtime) {
                Some(entry) => {
                    entry.connections = entry.connections.saturating_sub(1);
                    entry.connections
                }
                None => return,
            }
        };
        if remaining > 0 {
            return;
        }
        let now = self.clock.now_ms();
        let reason = format!("runtime {runtime} disconnected before completing the session");
        match self.store.fail_active_sessions(runtime, &reason, now) {
            Ok(failed) => {
                for session in failed {
                    self.session_updated(&session);
                }
            }
            Err(e) => tracing::error!(error = %e, "failing sessions of a disconnected runtime"),
        }
        let offline = PresenceOffline {
            trigger: PresenceTrigger::Disconnect,
            sent_at_ms: now,
            runtime: runtime.to_owned(),
            runtime_manager_status: self.aggregate_status(),
        };
        self.publish(&Event::PresenceOffline(offline), runtime);
    }

    fn session_updated(&self, session: &PhoneSession) {
        let update = SessionUpdated {
            phone_session_id: session.phone_session_id.clone(),
            runtime_session_id: session.runtime_session_id.clone(),
            status: session.status,
            updated_at_ms: session.updated_at_ms,
            reason: session.failure_reason.clone(),
        };
        self.publish(&Event::SessionUpdated(update), &session.runtime_kind);
    }

    /// The runtime routed for a surface.
    pub fn routed(&self, surface: Surface) -> String {
        lock(&self.state)
            .routing
            .get(&surface)
            .cloned()
            .unwrap_or_else(|| BUILTIN.to_owned())
    }

    /// Routes a surface to a configured runtime, and remembers the choice in the store so a
    /// restart keeps it (`runtimes/routing.rs`). Nothing changes when it cannot be stored.
    pub fn select(&self, surface: Surface, runtime: &str) -> Result<(), RuntimeError> {
        let id = normalize_runtime_id(runtime)
            .map_err(|e| err(ErrorCode::MissingRuntime, e.to_string()))?;
        let mut state = lock(&self.state);
        if !state.runtimes.contains_key(&id) {
            return Err(err(
                ErrorCode::RuntimeNotConfigured,
                format!("runtime {id:?} is not configured"),
            ));
        }
        let configured = state
            .configured
            .get(&surface)
            .cloned()
            .unwrap_or_else(|| BUILTIN.to_owned());
        routing::remember(&self.store, surface, &id, &configured, self.clock.now_ms()).map_err(
            |e| {
                err(
                    ErrorCode::SendFailed,
                    format!("the choice was not stored: {e}"),
                )
            },
        )?;
        state.routing.insert(surface, id);
        Ok(())
    }

    /// Every runtime with its status and routed surfaces. The built-in runtime is `connected`
    /// while a configured local runtime is attached, `not_configured` otherwise.
    pub fn list(&self) -> Vec<RuntimeInfo> {
        let builtin_ready = self.builtin_ready().is_ok();
        let adapters = lock(&self.adapters).clone();
        let state = lock(&self.state);
        state
            .runtimes
            .values()
            .map(|e| {
                let adapter = adapters.get(&e.config.id);
                let adapter_ready = adapter.is_some_and(|a| a.configured().is_ok());
                RuntimeInfo {
                    id: e.config.id.clone(),
                    kind: e.config.kind,
                    enabled: e.config.enabled,
                    status: entry_status(e, builtin_ready, adapter_ready),
                    connections: match e.config.kind {
                        RuntimeKind::Openclaw | RuntimeKind::Hermes => usize::from(adapter_ready),
                        _ => e.connections,
                    },
                    surfaces: state
                        .routing
                        .iter()
                        .filter(|(_, r)| **r == e.config.id)
                        .map(|(s, _)| *s)
                        .collect(),
                    detail: adapter.and_then(|a| a.detail()),
                    // Filled in by the bridge's holder (`ToolBridge::elevations`).
                    elevation: None,
                }
            })
            .collect()
    }

    /// The manager's aggregate status over the enabled WebSocket runtimes and the built-in
    /// runtime when a model is configured for it (§13.5, for the statuses this daemon has).
    pub fn aggregate_status(&self) -> ManagerStatus {
        let builtin_ready = self.builtin_ready().is_ok();
        let adapters = lock(&self.adapters).clone();
        let state = lock(&self.state);
        // One entry per runtime that counts: whether it can take a request now.
        let up: Vec<bool> = state
            .runtimes
            .values()
            .filter(|e| e.config.enabled)
            .filter_map(|e| match e.config.kind {
                RuntimeKind::Websocket => Some(e.connections > 0),
                RuntimeKind::Builtin => builtin_ready.then_some(true),
                RuntimeKind::Openclaw | RuntimeKind::Hermes => Some(
                    adapters
                        .get(&e.config.id)
                        .is_some_and(|a| a.configured().is_ok()),
                ),
            })
            .collect();
        if up.is_empty() {
            return ManagerStatus::NotConfigured;
        }
        match up.iter().filter(|u| **u).count() {
            0 => ManagerStatus::Offline,
            n if n == up.len() => ManagerStatus::Connected,
            _ => ManagerStatus::Degraded,
        }
    }
}

fn entry_status(e: &Entry, builtin_ready: bool, adapter_ready: bool) -> RuntimeState {
    match (e.config.kind, e.config.enabled, e.connections) {
        (_, false, _) => RuntimeState::Disabled,
        (RuntimeKind::Openclaw | RuntimeKind::Hermes, true, _) if adapter_ready => {
            RuntimeState::Connected
        }
        (RuntimeKind::Openclaw | RuntimeKind::Hermes, true, _) => RuntimeState::Idle,
        (RuntimeKind::Builtin, true, _) if builtin_ready => RuntimeState::Connected,
        (RuntimeKind::Builtin, true, _) => RuntimeState::NotConfigured,
        (RuntimeKind::Websocket, true, 0) => RuntimeState::Idle,
        (RuntimeKind::Websocket, true, _) => RuntimeState::Connected,
    }
}

/// A connected runtime. Dropping it disconnects the runtime.
#[derive(Debug)]
pub struct Presence {
    manager: Arc<RuntimeManager>,
    runtime: String,
}

impl Presence {
    /// The connected runtime's id.
    pub fn runtime(&self) -> &str {
        &self.runtime
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        self.manager.disconnect(&self.runtime);
    }
}
