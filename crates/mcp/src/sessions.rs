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
//!
//! For the direct path (`direct.rs`) each session is also linked to its handler (offered by the
//! service's factory within the same request, [`offer_handler`]) with what its `initialize`
//! declared; a session in use only by direct calls is kept from idling out, and its direct
//! calls stop waiting when it closes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use openphone_clock::Stopwatch;
use tokio_util::sync::CancellationToken;

use futures_util::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, Implementation, ProtocolVersion,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

use crate::server::PhoneMcp;
use crate::sync::lock;

/// The most handshake-era HTTP sessions kept at once, all principals together.
pub const MAX_HTTP_SESSIONS: usize = 256;
/// The most handshake-era HTTP sessions one principal keeps at once.
pub const MAX_HTTP_SESSIONS_PER_PRINCIPAL: usize = 64;

tokio::task_local! {
    /// The request being handled, for `create_session`.
    static CREATOR: Creating;
}

/// What `create_session` learns of the request that opens a session: the principal's key, and
/// the handler rmcp made for it (offered by the service's factory just before).
struct Creating {
    owner: String,
    handler: Mutex<Option<PhoneMcp>>,
}

/// Runs `f` (the handling of one `/mcp` request) as the principal `key`: a session it creates
/// belongs to that principal. A session created outside any scope belongs to `""`.
pub async fn creating_as<F: std::future::Future>(key: String, f: F) -> F::Output {
    let creating = Creating {
        owner: key,
        handler: Mutex::new(None),
    };
    CREATOR.scope(creating, f).await
}

/// Offers `handler`, just made by the service's factory, to the session the request being
/// handled may open (`initialize`): the direct path answers that session's calls through a
/// clone of it, sharing its calls in flight, its explicit cancels and its owner.
pub(crate) fn offer_handler(handler: &PhoneMcp) {
    let _ = CREATOR.try_with(|c| *lock(&c.handler) = Some(handler.clone()));
}

/// A handshake-era session as the direct path sees it (`direct.rs`).
#[derive(Debug)]
struct Link {
    /// The session's handler (a clone sharing its state).
    handler: PhoneMcp,
    /// What its `initialize` declared and negotiated, once answered.
    declared: OnceLock<Declared>,
    /// `notifications/initialized` has come.
    initialized: AtomicBool,
    /// When rmcp's session worker last saw a message of this session.
    seen: Mutex<Stopwatch>,
    /// Cancelled when the session closes (or the daemon stops): its direct calls stop waiting,
    /// as rmcp's service stops its own.
    closed: CancellationToken,
}

/// What a session's `initialize` said.
#[derive(Debug, Clone)]
struct Declared {
    version: ProtocolVersion,
    client: Implementation,
    /// The client declared elicitation (any mode): its calls may be asked mid-call.
    elicits: bool,
}

/// A session whose plain calls the direct path may answer.
pub(crate) struct PlainSession {
    /// The session's handler (a clone sharing its state).
    pub(crate) handler: PhoneMcp,
    /// The negotiated protocol version.
    pub(crate) version: ProtocolVersion,
    /// The client's `clientInfo`.
    pub(crate) client: Implementation,
    /// Cancelled when the session closes or the daemon stops.
    pub(crate) closed: CancellationToken,
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
    /// rmcp's worker closes a session after this long without a message.
    idle: Duration,
    /// The sessions the direct path may serve, by id (`direct.rs`).
    links: Mutex<HashMap<SessionId, Arc<Link>>>,
    /// Cancelled when the daemon stops.
    shutdown: CancellationToken,
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
            idle,
            links: Mutex::default(),
            shutdown: CancellationToken::new(),
        }
    }

    /// The same sessions, their direct calls stopped when `shutdown` is cancelled too.
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> McpSessions {
        self.shutdown = shutdown;
        self
    }

    /// Forgets session `id`'s link, stopping its direct calls' waits.
    fn unlink(&self, id: &SessionId) {
        if let Some(link) = lock(&self.links).remove(id) {
            link.closed.cancel();
        }
    }

    /// The session `id` when the direct path may answer its plain calls: open, its
    /// `initialize` answered and `notifications/initialized` come, its client declaring no
    /// elicitation (such a call may be asked mid-call: rmcp's). The session counts as used
    /// (its recency), and rmcp's worker — which sees none of the direct calls — is told of
    /// it at least every tenth of the idle time, so a session in use is never closed as idle.
    pub(crate) async fn plain_session(&self, id: &str) -> Option<PlainSession> {
        let id: SessionId = id.to_owned().into();
        let link = lock(&self.links).get(&id).cloned()?;
        let declared = link.declared.get()?;
        if declared.elicits || !link.initialized.load(Ordering::Acquire) {
            return None;
        }
        // Open, and how to reach its worker (the read lock released at once).
        let handle = self.inner.sessions.read().await.get(&id).cloned()?;
        let due = {
            let mut seen = lock(&link.seen);
            let due = seen.elapsed() >= self.idle / 10;
            if due {
                *seen = Stopwatch::start();
            }
            due
        };
        if due {
            // An event for a stream that does not exist: the worker drops nothing and starts
            // its idle time again (rmcp's worker restarts it on every event). Sent from a task
            // of its own, so no call waits on a worker that is busy, and no lock is held.
            tokio::spawn(async move {
                let _ = handle.close_request_wise_channel(u64::MAX).await;
            });
        }
        self.touch(&id);
        Some(PlainSession {
            handler: link.handler.clone(),
            version: declared.version.clone(),
            client: declared.client.clone(),
            closed: link.closed.clone(),
        })
    }

    /// Records that rmcp's worker is seeing a message of session `id`.
    fn seen(&self, id: &SessionId) -> Option<Arc<Link>> {
        let link = lock(&self.links).get(id).cloned()?;
        *lock(&link.seen) = Stopwatch::start();
        Some(link)
    }

    /// Forgets the links of sessions rmcp no longer holds (closed, or idle past their time).
    async fn prune_links(&self) {
        let open = self.inner.sessions.read().await;
        lock(&self.links).retain(|id, link| {
            let keep = open.contains_key(id);
            if !keep {
                link.closed.cancel();
            }
            keep
        });
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
            self.unlink(&id);
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
    CREATOR.try_with(|c| c.owner.clone()).unwrap_or_default()
}

impl SessionManager for McpSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = creator();
        let handler = CREATOR.try_with(|c| lock(&c.handler).take()).ok().flatten();
        self.make_room(&owner).await?;
        self.prune_links().await;
        let (id, transport) = self.inner.create_session().await?;
        lock(&self.recency).add(&id, &owner);
        if let Some(handler) = handler {
            let link = Link {
                handler,
                declared: OnceLock::new(),
                initialized: AtomicBool::new(false),
                seen: Mutex::new(Stopwatch::start()),
                closed: self.shutdown.child_token(),
            };
            lock(&self.links).insert(id.clone(), Arc::new(link));
        }
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        let asked = match &message {
            ClientJsonRpcMessage::Request(request) => match &request.request {
                ClientRequest::InitializeRequest(init) => Some((
                    init.params.client_info.clone(),
                    init.params.capabilities.elicitation.is_some(),
                )),
                _ => None,
            },
            _ => None,
        };
        let answer = self.inner.initialize_session(id, message).await?;
        if let (Some((client, elicits)), ServerJsonRpcMessage::Response(response)) =
            (asked, &answer)
            && let ServerResult::InitializeResult(result) = &response.result
            && let Some(link) = self.seen(id)
        {
            let _ = link.declared.set(Declared {
                version: result.protocol_version.clone(),
                client,
                elicits,
            });
        }
        Ok(answer)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.recency).forget(id);
        self.unlink(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.seen(id);
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        let initialized = matches!(
            &message,
            ClientJsonRpcMessage::Notification(n)
                if matches!(n.notification, ClientNotification::InitializedNotification(_))
        );
        let link = self.seen(id);
        self.inner.accept_message(id, message).await?;
        if initialized && let Some(link) = link {
            link.initialized.store(true, Ordering::Release);
        }
        Ok(())
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.seen(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.seen(id);
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
