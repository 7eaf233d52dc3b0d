//! The handshake-era HTTP sessions of `/mcp`, bounded (issue 11: 5,000 `initialize` calls kept
//! 280 MB alive) and kept apart per principal (issue 28: one token holder's `initialize` calls
//! closed other hosts' sessions).
//!
//! rmcp's [`LocalSessionManager`] keeps every session (its worker task, channels and handler)
//! until the client deletes it or it has been idle for its keep-alive, with no cap on how many.
//! [`McpSessions`] wraps it. Every session belongs to the principal whose request created it
//! (the runtime credential, passed in with [`creating_as`]). A principal holds at most
//! [`MAX_HTTP_SESSIONS_PER_PRINCIPAL`]; when its new session would pass that, **its own** least
//! recently used session is closed. Sessions are never closed to make room for another
//! principal: when all principals together hold [`MAX_HTTP_SESSIONS`], a principal holding
//! none is refused ([`SessionsError::Full`]; one holding some closes its own oldest) and may
//! retry after some close or idle out. Each session is closed after [`HTTP_SESSION_IDLE`]
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

/// The most handshake-era HTTP sessions kept at once, all principals together.
pub const MAX_HTTP_SESSIONS: usize = 256;
/// The most handshake-era HTTP sessions one principal keeps at once.
pub const MAX_HTTP_SESSIONS_PER_PRINCIPAL: usize = 64;

tokio::task_local! {
    /// The principal whose request is being handled (its key), for `create_session`.
    static CREATOR: String;
}

/// Runs `f` (the handling of one `/mcp` request) as the principal `key`: a session it creates
/// belongs to that principal. A session created outside any scope belongs to `""`.
pub async fn creating_as<F: std::future::Future>(key: String, f: F) -> F::Output {
    CREATOR.scope(key, f).await
}

/// Why a session could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// rmcp's own session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// Every place is held and none by the asking principal: nothing is closed for it.
    #[error(
        "too many MCP sessions are open ({0}); sessions of other hosts are never closed to make \
         room: retry later, or reuse an open session"
    )]
    Full(usize),
}
/// A session without a message for this long is closed.
pub const HTTP_SESSION_IDLE: Duration = Duration::from_secs(300);

/// rmcp's in-memory sessions: at most `capacity` in all and `per_principal` per principal, a
/// principal's own least recently used closed first.
#[derive(Debug)]
pub struct McpSessions {
    inner: LocalSessionManager,
    capacity: usize,
    per_principal: usize,
    recency: Mutex<Recency>,
}

/// The open sessions, their owners and the order in which they were last used.
#[derive(Debug, Default)]
struct Recency {
    /// Session → (owner, stamp of its last use).
    by_id: HashMap<SessionId, (String, u64)>,
    /// Owner → its sessions by stamp, least recently used first.
    by_owner: HashMap<String, BTreeMap<u64, SessionId>>,
    /// Counts uses; stamps only order them (no clock is read).
    next: u64,
}

impl Recency {
    /// Marks a known `id` used now.
    fn touch(&mut self, id: &SessionId) {
        let Some((owner, old)) = self.by_id.get(id).cloned() else {
            return;
        };
        self.next += 1;
        let stamp = self.next;
        if let Some(mine) = self.by_owner.get_mut(&owner) {
            mine.remove(&old);
            mine.insert(stamp, id.clone());
        }
        self.by_id.insert(id.clone(), (owner, stamp));
    }

    /// Records `id` as `owner`'s, used now.
    fn add(&mut self, id: &SessionId, owner: &str) {
        self.forget(id);
        self.next += 1;
        self.by_id.insert(id.clone(), (owner.to_owned(), self.next));
        self.by_owner
            .entry(owner.to_owned())
            .or_default()
            .insert(self.next, id.clone());
    }

    fn forget(&mut self, id: &SessionId) {
        if let Some((owner, stamp)) = self.by_id.remove(id)
            && let Some(mine) = self.by_owner.get_mut(&owner)
        {
            mine.remove(&stamp);
            if mine.is_empty() {
                self.by_owner.remove(&owner);
            }
        }
    }

    fn held_by(&self, owner: &str) -> usize {
        self.by_owner.get(owner).map_or(0, BTreeMap::len)
    }

    /// Removes and returns `owner`'s least recently used sessions beyond `keep`.
    fn beyond(&mut self, owner: &str, keep: usize) -> Vec<SessionId> {
        let mut out = Vec::new();
        while self.held_by(owner) > keep {
            let Some((_, id)) = self.by_owner.get_mut(owner).and_then(BTreeMap::pop_first) else {
                break;
            };
            self.by_id.remove(&id);
            out.push(id);
        }
        if self.held_by(owner) == 0 {
            self.by_owner.remove(owner);
        }
        out
    }
}

impl Default for McpSessions {
    fn default() -> Self {
        McpSessions::new(
            MAX_HTTP_SESSIONS,
            MAX_HTTP_SESSIONS_PER_PRINCIPAL,
            HTTP_SESSION_IDLE,
        )
    }
}

impl McpSessions {
    /// At most `capacity` sessions in all and `per_principal` per principal (each at least
    /// one), each closed after `idle` without a message.
    pub fn new(capacity: usize, per_principal: usize, idle: Duration) -> McpSessions {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(idle);
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        let capacity = capacity.max(1);
        McpSessions {
            inner,
            capacity,
            per_principal: per_principal.clamp(1, capacity),
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
        lock(&self.recency).touch(id);
    }

    /// Makes room for one more session of `owner`: its own least recently used beyond
    /// `per_principal - 1` are closed, and when all places are held its own oldest too; `Err`
    /// when all places are held and none of them is `owner`'s (nothing of another principal
    /// is ever closed).
    async fn make_room(&self, owner: &str) -> Result<(), SessionsError> {
        let victims = {
            let mut recency = lock(&self.recency);
            let mut victims = recency.beyond(owner, self.per_principal - 1);
            if recency.by_id.len() >= self.capacity {
                let mine = recency.held_by(owner);
                if mine == 0 {
                    return Err(SessionsError::Full(self.capacity));
                }
                victims.extend(recency.beyond(owner, mine - 1));
            }
            victims
        };
        for id in victims {
            tracing::info!(
                per_principal = self.per_principal,
                "closing a principal's own least recently used MCP session to make room"
            );
            if let Err(e) = self.inner.close_session(&id).await {
                tracing::debug!(error = %e, "closing an evicted MCP session");
            }
        }
        Ok(())
    }
}

/// The principal of the request being handled (`""` outside [`creating_as`]).
fn creator() -> String {
    CREATOR.try_with(Clone::clone).unwrap_or_default()
}

impl SessionManager for McpSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = creator();
        self.make_room(&owner).await?;
        let (id, transport) = self.inner.create_session().await?;
        lock(&self.recency).add(&id, &owner);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.recency).forget(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let outcome = self.inner.restore_session(id.clone()).await?;
        if let RestoreOutcome::Restored(_) = &outcome {
            let owner = creator();
            lock(&self.recency).add(&id, &owner);
            let victims = lock(&self.recency).beyond(&owner, self.per_principal);
            for victim in victims {
                if let Err(e) = self.inner.close_session(&victim).await {
                    tracing::debug!(error = %e, "closing an evicted MCP session");
                }
            }
        }
        Ok(outcome)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
