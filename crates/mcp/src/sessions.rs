//! The handshake-era HTTP sessions of `/mcp`, bounded (issue 11: 5,000 `initialize` calls kept
//! 280 MB alive).
//!
//! rmcp's [`LocalSessionManager`] keeps every session (its worker task, channels and handler)
//! until the client deletes it or it has been idle for its keep-alive, with no cap on how many.
//! [`McpSessions`] wraps it: at most [`MAX_HTTP_SESSIONS`] sessions, the one used least recently
//! closed when a new one would pass the cap, and each closed after [`HTTP_SESSION_IDLE`]
//! without a message. A client whose session was closed gets 404 and, as MCP requires,
//! initializes a new one; a call it had in flight loses its answer, not its request (a pending
//! confirmation stays for the user and the keyed retry).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

use crate::sync::lock;

/// The most handshake-era HTTP sessions kept at once.
pub const MAX_HTTP_SESSIONS: usize = 256;
/// A session without a message for this long is closed.
pub const HTTP_SESSION_IDLE: Duration = Duration::from_secs(300);

/// rmcp's in-memory sessions, at most `capacity` of them, the least recently used closed first.
#[derive(Debug)]
pub struct McpSessions {
    inner: LocalSessionManager,
    capacity: usize,
    recency: Mutex<Recency>,
}

/// The order in which the open sessions were last used.
#[derive(Debug, Default)]
struct Recency {
    by_id: HashMap<SessionId, u64>,
    by_use: BTreeMap<u64, SessionId>,
    /// Counts uses; stamps only order them (no clock is read).
    next: u64,
}

impl Recency {
    /// Marks `id` used now; `add` makes it known if it is not.
    fn touch(&mut self, id: &SessionId, add: bool) {
        let known = self.by_id.get(id).copied();
        if known.is_none() && !add {
            return;
        }
        self.next += 1;
        if let Some(old) = known {
            self.by_use.remove(&old);
        }
        self.by_id.insert(id.clone(), self.next);
        self.by_use.insert(self.next, id.clone());
    }

    fn forget(&mut self, id: &SessionId) {
        if let Some(stamp) = self.by_id.remove(id) {
            self.by_use.remove(&stamp);
        }
    }

    /// Removes and returns the least recently used sessions beyond `capacity`.
    fn beyond(&mut self, capacity: usize) -> Vec<SessionId> {
        let mut out = Vec::new();
        while self.by_id.len() > capacity {
            let Some((_, id)) = self.by_use.pop_first() else {
                break;
            };
            self.by_id.remove(&id);
            out.push(id);
        }
        out
    }
}

impl Default for McpSessions {
    fn default() -> Self {
        McpSessions::new(MAX_HTTP_SESSIONS, HTTP_SESSION_IDLE)
    }
}

impl McpSessions {
    /// At most `capacity` sessions (at least one), each closed after `idle` without a message.
    pub fn new(capacity: usize, idle: Duration) -> McpSessions {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(idle);
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        McpSessions {
            inner,
            capacity: capacity.max(1),
            recency: Mutex::default(),
        }
    }

    /// How many sessions are open (never more than the capacity once a creation returns).
    pub async fn len(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// Whether no session is open.
    pub async fn is_empty(&self) -> bool {
        self.len().await == 0
    }

    fn touch(&self, id: &SessionId) {
        lock(&self.recency).touch(id, false);
    }

    /// Closes the least recently used sessions beyond the capacity.
    async fn evict(&self) {
        let victims = lock(&self.recency).beyond(self.capacity);
        for id in victims {
            tracing::info!(
                capacity = self.capacity,
                "closing the least recently used MCP session to make room"
            );
            if let Err(e) = self.inner.close_session(&id).await {
                tracing::debug!(error = %e, "closing an evicted MCP session");
            }
        }
    }
}

impl SessionManager for McpSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        lock(&self.recency).touch(&id, true);
        self.evict().await;
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.recency).forget(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let outcome = self.inner.restore_session(id.clone()).await?;
        if let RestoreOutcome::Restored(_) = &outcome {
            lock(&self.recency).touch(&id, true);
            self.evict().await;
        }
        Ok(outcome)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
